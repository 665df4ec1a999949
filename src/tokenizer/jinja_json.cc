#include "tokenizer/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_budget.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {
namespace {

void escape_into(std::string_view s, bool ensure_ascii, std::string& out) {
  out += '"';
  auto hex4 = [&](unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "\\u%04x", v & 0xFFFFu);
    out += buf;
  };
  for (char32_t cp : decode_utf8(s)) {
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20) {
      hex4(static_cast<unsigned>(cp));
    } else if (ensure_ascii && cp >= 0x80) {
      if (cp >= 0xDC80 && cp <= 0xDCFF) {
        hex4(static_cast<unsigned>(cp));
      } else if (cp >= 0x10000) {
        char32_t v = cp - 0x10000;
        hex4(0xD800 + static_cast<unsigned>(v >> 10));
        hex4(0xDC00 + static_cast<unsigned>(v & 0x3FF));
      } else {
        hex4(static_cast<unsigned>(cp));
      }
    } else {
      append_utf8(out, cp);
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return py_float_repr(d);
}

// Python converts non-string keys: True -> "true", None -> "null", 1.5 -> "1.5".
std::string key_string(const Value& k) {
  switch (k.kind()) {
    case Kind::kString: return k.str();
    case Kind::kBool: return k.as_bool() ? "true" : "false";
    case Kind::kNone: return "null";
    case Kind::kInt: return std::to_string(k.as_int());
    case Kind::kFloat: return float_json(k.as_float());
    default:
      throw_error("TypeError: keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

class Dumper {
 public:
  Dumper(const JsonDumpOptions& o) : o_(o) {}  // NOLINT

  void dump(const Value& v, int level) {
    if (level > max_data_depth()) {
      throw_error("tojson: data nested deeper than " + std::to_string(max_data_depth()) +
                      " levels (or a list that contains itself)",
                  ErrorKind::kLimit);
    }
    charge(1);
    check_string_size(out.size());
    switch (v.kind()) {
      case Kind::kNone: out += "null"; return;
      case Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
      case Kind::kInt: out += std::to_string(v.as_int()); return;
      case Kind::kFloat: out += float_json(v.as_float()); return;
      case Kind::kString: escape_into(v.str(), o_.ensure_ascii, out); return;
      case Kind::kList: dump_list(v.list().items, level); return;
      case Kind::kDict:
        if (!v.is_namespace()) { dump_dict(v.dict(), level); return; }
        [[fallthrough]];
      default:
        throw_error("TypeError: Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

  std::string out;

 private:
  void newline(int level) {
    if (!o_.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }

  void dump_list(const std::vector<Value>& items, int level) {
    if (items.empty()) { out += "[]"; return; }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += o_.item_separator;
      newline(level + 1);
      dump(items[i], level + 1);
    }
    newline(level);
    out += ']';
  }

  void dump_dict(const DictData& d, int level) {
    if (d.size() == 0) { out += "{}"; return; }
    std::vector<std::pair<std::string, const Value*>> items;
    for (const auto& [k, v] : d.entries()) items.emplace_back(key_string(k), &v);
    if (o_.sort_keys) {
      std::stable_sort(items.begin(), items.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += o_.item_separator;
      newline(level + 1);
      escape_into(items[i].first, o_.ensure_ascii, out);
      out += o_.key_separator;
      dump(*items[i].second, level + 1);
    }
    newline(level);
    out += '}';
  }

  const JsonDumpOptions& o_;
};

}  // namespace

std::string py_json_dumps(const Value& v, const JsonDumpOptions& options) {
  Dumper d(options);
  d.dump(v, 0);
  check_string_size(d.out.size());
  charge(0, d.out.size());
  return std::move(d.out);
}

}  // namespace folio::jinja
