// Jinja tests (`x is defined`, `x is divisibleby 3`, ...), following Jinja2's tests.py.
#include <cmath>
#include <unordered_map>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {
namespace {

using TestFn = bool (*)(const Value& v, CallArgs& a);

const Value& arg0(CallArgs& a, const char* test) {
  if (a.args.empty()) throw_error(std::string("TypeError: test '") + test + "' needs an argument");
  return a.args[0];
}

double number_of(const Value& v, const char* test) {
  check_defined(v);
  if (!v.is_number()) throw_error(std::string("TypeError: test '") + test + "' needs a number, not " + type_name(v));
  return v.to_double();
}

bool t_divisibleby(const Value& v, CallArgs& a) {
  const Value& d = arg0(a, "divisibleby");
  if (!v.is_float() && !d.is_float() && v.is_number() && d.is_number()) {
    int64_t x = v.is_int() ? v.as_int() : v.as_bool(), y = d.is_int() ? d.as_int() : d.as_bool();
    if (y == 0) throw_error("ZeroDivisionError: integer division or modulo by zero");
    return y == -1 || x % y == 0;
  }
  double y = number_of(d, "divisibleby");
  if (y == 0.0) throw_error("ZeroDivisionError: float modulo");
  return std::fmod(number_of(v, "divisibleby"), y) == 0.0;
}

bool t_compare(const Value& v, CallArgs& a, const char* name, int want_lo, int want_hi) {
  int c = compare_values(v, arg0(a, name));
  return c >= want_lo && c <= want_hi;
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number(); }},
      {"integer", [](const Value& v, CallArgs&) { return v.is_int(); }},
      {"float", [](const Value& v, CallArgs&) { return v.is_float(); }},
      {"boolean", [](const Value& v, CallArgs&) { return v.is_bool(); }},
      {"true", [](const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"mapping", [](const Value& v, CallArgs&) { return v.is_dict() && !v.is_namespace(); }},
      {"iterable", [](const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
       }},
      {"sequence", [](const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
       }},
      {"callable", [](const Value& v, CallArgs&) { return v.is_callable(); }},
      {"even", [](const Value& v, CallArgs&) {
         return v.is_float() ? std::fmod(v.as_float(), 2.0) == 0.0 : std::fmod(number_of(v, "even"), 2.0) == 0.0;
       }},
      {"odd", [](const Value& v, CallArgs&) { return std::fabs(std::fmod(number_of(v, "odd"), 2.0)) == 1.0; }},
      {"divisibleby", t_divisibleby},
      {"eq", [](const Value& v, CallArgs& a) { return values_equal(v, arg0(a, "eq")); }},
      {"equalto", [](const Value& v, CallArgs& a) { return values_equal(v, arg0(a, "equalto")); }},
      {"==", [](const Value& v, CallArgs& a) { return values_equal(v, arg0(a, "==")); }},
      {"ne", [](const Value& v, CallArgs& a) { return !values_equal(v, arg0(a, "ne")); }},
      {"!=", [](const Value& v, CallArgs& a) { return !values_equal(v, arg0(a, "!=")); }},
      {"lt", [](const Value& v, CallArgs& a) { return t_compare(v, a, "lt", -1, -1); }},
      {"lessthan", [](const Value& v, CallArgs& a) { return t_compare(v, a, "lessthan", -1, -1); }},
      {"<", [](const Value& v, CallArgs& a) { return t_compare(v, a, "<", -1, -1); }},
      {"le", [](const Value& v, CallArgs& a) { return t_compare(v, a, "le", -1, 0); }},
      {"<=", [](const Value& v, CallArgs& a) { return t_compare(v, a, "<=", -1, 0); }},
      {"gt", [](const Value& v, CallArgs& a) { return t_compare(v, a, "gt", 1, 1); }},
      {"greaterthan", [](const Value& v, CallArgs& a) { return t_compare(v, a, "greaterthan", 1, 1); }},
      {">", [](const Value& v, CallArgs& a) { return t_compare(v, a, ">", 1, 1); }},
      {"ge", [](const Value& v, CallArgs& a) { return t_compare(v, a, "ge", 0, 1); }},
      {">=", [](const Value& v, CallArgs& a) { return t_compare(v, a, ">=", 0, 1); }},
      {"in", [](const Value& v, CallArgs& a) { return contains(arg0(a, "in"), v); }},
      {"sameas", [](const Value& v, CallArgs& a) {
         const Value& o = arg0(a, "sameas");
         if (v.identity() || o.identity()) return v.identity() == o.identity();
         return v.kind() == o.kind() && values_equal(v, o);
       }},
      {"lower", [](const Value& v, CallArgs&) {
         std::string s = to_str(v);
         return py_lower(s) == s && py_upper(s) != s;
       }},
      {"upper", [](const Value& v, CallArgs&) {
         std::string s = to_str(v);
         return py_upper(s) == s && py_lower(s) != s;
       }},
      {"escaped", [](const Value&, CallArgs&) { return false; }},
  };
  return table;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) > 0; }

bool call_test(Evaluator&, const std::string& name, const Value& input, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw_error("no test named '" + name + "'");
  static const std::unordered_map<std::string, size_t> kArity = {
      {"divisibleby", 1}, {"eq", 1}, {"equalto", 1}, {"==", 1}, {"ne", 1}, {"!=", 1},
      {"lt", 1}, {"lessthan", 1}, {"<", 1}, {"le", 1}, {"<=", 1}, {"gt", 1},
      {"greaterthan", 1}, {">", 1}, {"ge", 1}, {">=", 1}, {"in", 1}, {"sameas", 1}};
  auto arity = kArity.find(name);
  size_t max_args = arity == kArity.end() ? 0 : arity->second;
  if (args.args.size() + args.kwargs.size() > max_args) {
    throw_error("TypeError: test '" + name + "' takes " + std::to_string(max_args) +
                " argument(s), got " + std::to_string(args.args.size() + args.kwargs.size()));
  }
  return it->second(input, args);
}

}  // namespace folio::jinja
