#include "server/json_fields.h"

#include <cmath>
#include <limits>

namespace folio {
namespace {

ApiError wrong_type(const char* key, const char* expected, const nlohmann::json& got) {
  return bad_request(std::string("'") + key + "' must be " + expected + ", got " +
                         json_type_name(got),
                     key, "invalid_type");
}

}  // namespace

bool has_field(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && !it->is_null();
}

std::string json_type_name(const nlohmann::json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number_float()) return "number";
  return v.type_name();
}

bool json_to_int64(const nlohmann::json& v, int64_t& out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return true;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > 9.0e18) return false;
    out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

MaybeError read_bool(const nlohmann::json& obj, const char* key, bool& out) {
  if (!has_field(obj, key)) return std::nullopt;
  const auto& v = obj.at(key);
  if (!v.is_boolean()) return wrong_type(key, "a boolean", v);
  out = v.get<bool>();
  return std::nullopt;
}

MaybeError read_int64(const nlohmann::json& obj, const char* key, std::optional<int64_t>& out) {
  if (!has_field(obj, key)) return std::nullopt;
  const auto& v = obj.at(key);
  int64_t x = 0;
  if (!json_to_int64(v, x)) return wrong_type(key, "an integer", v);
  out = x;
  return std::nullopt;
}

MaybeError read_int(const nlohmann::json& obj, const char* key, std::optional<int>& out) {
  std::optional<int64_t> wide;
  FOLIO_API_TRY(read_int64(obj, key, wide));
  if (!wide) return std::nullopt;
  if (*wide < std::numeric_limits<int>::min() || *wide > std::numeric_limits<int>::max())
    return bad_request(std::string("'") + key + "' is out of range", key, "invalid_value");
  out = static_cast<int>(*wide);
  return std::nullopt;
}

MaybeError read_int(const nlohmann::json& obj, const char* key, int& out) {
  std::optional<int> v;
  FOLIO_API_TRY(read_int(obj, key, v));
  if (v) out = *v;
  return std::nullopt;
}

MaybeError read_float(const nlohmann::json& obj, const char* key, float& out) {
  if (!has_field(obj, key)) return std::nullopt;
  const auto& v = obj.at(key);
  if (!v.is_number()) return wrong_type(key, "a number", v);
  out = v.get<float>();
  return std::nullopt;
}

MaybeError read_string(const nlohmann::json& obj, const char* key, std::string& out) {
  if (!has_field(obj, key)) return std::nullopt;
  const auto& v = obj.at(key);
  if (!v.is_string()) return wrong_type(key, "a string", v);
  out = v.get<std::string>();
  return std::nullopt;
}

MaybeError read_object(const nlohmann::json& obj, const char* key, nlohmann::json& out) {
  if (!has_field(obj, key)) return std::nullopt;
  const auto& v = obj.at(key);
  if (!v.is_object()) return wrong_type(key, "an object", v);
  out = v;
  return std::nullopt;
}

}  // namespace folio
