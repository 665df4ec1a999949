// Strict, typed reads of request JSON fields. A missing field or an explicit null leaves the
// output untouched; a field of the wrong type ("max_tokens": "10", "stream": "true") is an
// ApiError naming the field. Integers accept integral floats (10.0) like pydantic; nothing
// converts from strings. Never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace folio {

// nullopt = ok. Parsers chain these with FOLIO_API_TRY.
using MaybeError = std::optional<ApiError>;

#define FOLIO_API_TRY(expr)                 \
  do {                                      \
    ::folio::MaybeError _folio_e = (expr);  \
    if (_folio_e) return _folio_e;          \
  } while (0)

bool has_field(const nlohmann::json& obj, const char* key);  // present and not null

MaybeError read_bool(const nlohmann::json& obj, const char* key, bool& out);
MaybeError read_int(const nlohmann::json& obj, const char* key, int& out);
MaybeError read_int(const nlohmann::json& obj, const char* key, std::optional<int>& out);
MaybeError read_int64(const nlohmann::json& obj, const char* key, std::optional<int64_t>& out);
MaybeError read_float(const nlohmann::json& obj, const char* key, float& out);
MaybeError read_string(const nlohmann::json& obj, const char* key, std::string& out);
MaybeError read_object(const nlohmann::json& obj, const char* key, nlohmann::json& out);

// The JSON type's name for messages: "string", "integer", "array", ...
std::string json_type_name(const nlohmann::json& v);
// Whether `v` is an integer (or an integral float) fitting int64.
bool json_to_int64(const nlohmann::json& v, int64_t& out);

}  // namespace folio
