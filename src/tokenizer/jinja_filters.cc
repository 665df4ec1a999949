// Text and value filters (trim, upper, tojson, default, int, round, indent, ...) and the filter
// registry. Names, parameters and results follow Jinja2's builtin filters, and `tojson` follows
// Hugging Face's override (json.dumps with ensure_ascii=False).
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "tokenizer/jinja_budget.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {
namespace {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Jinja's title: upper-case the first character after '-', whitespace, '(', '{', '[' or '<'.
std::string jinja_title(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (char32_t cp : decode_utf8(s)) {
    std::string one;
    append_utf8(one, cp);
    out += word_start ? py_upper(one) : py_lower(one);
    word_start = is_py_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
  }
  return out;
}

// Python's str.splitlines() on text that had a newline appended (as Jinja's indent does).
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  std::vector<char32_t> cps = decode_utf8(s);
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) { append_utf8(cur, c); continue; }
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    lines.push_back(std::move(cur));
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

Value f_trim(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("trim", a, {"chars"});
  return Value(py_strip(to_str(in), r.opt_str(0), true, true));
}
Value f_upper(Evaluator&, Value& in, CallArgs&) { return Value(py_upper(to_str(in))); }
Value f_lower(Evaluator&, Value& in, CallArgs&) { return Value(py_lower(to_str(in))); }
Value f_capitalize(Evaluator&, Value& in, CallArgs&) { return Value(py_capitalize(to_str(in))); }
Value f_title(Evaluator&, Value& in, CallArgs&) { return Value(jinja_title(to_str(in))); }
Value f_string(Evaluator&, Value& in, CallArgs&) { return in.is_string() ? in : Value(to_str(in)); }
Value f_escape(Evaluator&, Value& in, CallArgs&) { return Value(html_escape(to_str(in))); }
Value f_length(Evaluator&, Value& in, CallArgs&) { return Value(length_of(in)); }
Value f_attr(Evaluator&, Value& in, CallArgs& a) {
  // getattr only: a dict's keys are not attributes (its methods are).
  ArgReader r("attr", a, {"name"});
  std::string name = r.str(0, "");
  if (in.is_dict() && !in.is_namespace()) {
    Value m = get_method(in, name);
    return m.is_undefined() ? Value::undefined("'dict object' has no attribute '" + name + "'") : m;
  }
  return get_attribute(in, name);
}

Value f_replace(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("replace", a, {"old", "new", "count"});
  std::string out = py_replace(to_str(in), to_str(r.get(0)), to_str(r.get(1)), r.integer(2, -1));
  check_string_size(out.size());
  charge(1, out.size());
  return Value(std::move(out));
}

Value f_default(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("default", a, {"default_value", "boolean"});
  bool use_default = in.is_undefined() || (r.boolean(1, false) && !truthy(in));
  if (!use_default) return in;
  return r.has(0) ? r.get(0) : Value(std::string());
}

Value f_tojson(Evaluator&, Value& in, CallArgs& a) {
  // Hugging Face's signature: tojson(x, ensure_ascii=False, indent=None, separators=None,
  // sort_keys=False).
  ArgReader r("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = r.boolean(0, false);
  const Value& indent = r.get(1);
  if (indent.is_string()) {
    o.indent = indent.str();
  } else if (indent.is_int() || indent.is_bool()) {
    int64_t n = indent.is_int() ? indent.as_int() : indent.as_bool();
    o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 1024)), ' ');
  } else if (!indent.is_undefined() && !indent.is_none()) {
    throw_error("TypeError: tojson indent must be an int or a string, not " + type_name(indent));
  }
  if (o.indent) o.item_separator.assign(1, ',');
  const Value& seps = r.get(2);
  if (seps.is_list()) {
    const auto& s = seps.list().items;
    if (s.size() != 2 || !s[0].is_string() || !s[1].is_string()) {
      throw_error("TypeError: tojson separators must be a pair of strings");
    }
    o.item_separator = s[0].str();
    o.key_separator = s[1].str();
  }
  o.sort_keys = r.boolean(3, false);
  return Value(py_json_dumps(in, o));
}

Value f_int(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("int", a, {"default", "base"});
  check_defined(in);  // int(Undefined) raises in Jinja rather than using the default
  int64_t base = r.integer(1, 10);
  if (in.is_string() && base != 10) {
    std::string s = py_strip(in.str(), std::nullopt, true, true);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, static_cast<int>(std::clamp<int64_t>(base, 2, 36)));
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value(static_cast<int64_t>(v));
  } else if (auto v = to_int(in)) {
    return Value(*v);
  }
  return r.has(0) ? r.get(0) : Value(0);
}

Value f_float(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("float", a, {"default"});
  check_defined(in);
  if (auto v = to_float(in)) return Value(*v);
  return r.has(0) ? r.get(0) : Value(0.0);
}

Value f_abs(Evaluator&, Value& in, CallArgs&) {
  check_defined(in);
  if (in.is_float()) return Value(std::fabs(in.as_float()));
  if (in.is_int() || in.is_bool()) {
    int64_t v = in.is_int() ? in.as_int() : in.as_bool();
    if (v == INT64_MIN) throw_error("integer overflow in abs");
    return Value(v < 0 ? -v : v);
  }
  throw_error("TypeError: bad operand type for abs(): '" + type_name(in) + "'");
}

Value f_round(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("round", a, {"precision", "method"});
  int64_t precision = std::clamp<int64_t>(r.integer(0, 0), -30, 30);
  std::string method = r.str(1, "common");
  if (method != "common" && method != "ceil" && method != "floor") {
    throw_error("FilterArgumentError: method must be common, ceil or floor");
  }
  check_defined(in);
  if (!in.is_number()) throw_error("TypeError: type " + type_name(in) + " doesn't define __round__ method");
  if (method == "common" && !in.is_float() && precision >= 0) return in.is_bool() ? Value(static_cast<int64_t>(in.as_bool())) : in;
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = in.to_double() * scale;
  double y = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value(y / scale);
}

Value f_indent(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("indent", a, {"width", "first", "blank"});
  if (!in.is_string()) {
    check_defined(in);
    throw_error("TypeError: indent expects a string, not " + type_name(in));
  }
  std::string pad = r.get(0).is_string() ? r.get(0).str()
                                          : std::string(static_cast<size_t>(std::clamp<int64_t>(r.integer(0, 4), 0, 1024)), ' ');
  std::vector<std::string> lines = split_lines(to_str(in) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    bool indent_line = i > 0 && (r.boolean(2, false) || !lines[i].empty());
    if (indent_line) out += pad;
    out += lines[i];
    check_string_size(out.size());
  }
  if (r.boolean(1, false)) out = pad + out;
  return Value(std::move(out));
}

Value f_safe(Evaluator&, Value& in, CallArgs&) { return in.is_string() ? in : Value(to_str(in)); }

}  // namespace

const FilterTable& text_filters() {
  static const FilterTable table = {
      {"trim", f_trim},       {"upper", f_upper},     {"lower", f_lower},
      {"capitalize", f_capitalize}, {"title", f_title}, {"string", f_string},
      {"e", f_escape},        {"escape", f_escape},   {"length", f_length},
      {"count", f_length},    {"attr", f_attr},       {"replace", f_replace},
      {"default", f_default}, {"d", f_default},       {"tojson", f_tojson},
      {"int", f_int},         {"float", f_float},     {"abs", f_abs},
      {"round", f_round},     {"indent", f_indent},   {"safe", f_safe},
  };
  return table;
}

namespace {
const std::unordered_map<std::string, FilterFn>& registry() {
  static const auto* map = [] {
    auto* m = new std::unordered_map<std::string, FilterFn>();
    for (const auto& [n, f] : text_filters()) (*m)[n] = f;
    for (const auto& [n, f] : sequence_filters()) (*m)[n] = f;
    return m;
  }();
  return *map;
}
}  // namespace

bool has_filter(const std::string& name) { return registry().count(name) > 0; }

Value call_filter(Evaluator& ev, const std::string& name, Value input, CallArgs& args) {
  auto it = registry().find(name);
  if (it == registry().end()) throw_error("no filter named '" + name + "'");
  return it->second(ev, input, args);
}

}  // namespace folio::jinja
