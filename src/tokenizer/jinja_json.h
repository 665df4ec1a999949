// Python's json.dumps over jinja::Value, as Hugging Face's `tojson` filter calls it
// (ensure_ascii=False by default, keys in insertion order, Python float repr).
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja_value.h"

namespace folio::jinja {

struct JsonDumpOptions {
  std::optional<std::string> indent;  // nullopt: one line; else the per-level indent string
  std::string item_separator = ", ";  // json.dumps's default; "," when indent is set
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Throws JinjaError for values JSON cannot hold (undefined, callables, non-string-able keys).
std::string py_json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace folio::jinja
