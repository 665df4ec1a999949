// Methods of str, dict and list values, bound on attribute access (`s.strip()`, `d.items()`).
#include <algorithm>
#include <cctype>

#include "tokenizer/jinja_budget.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {
namespace {

Value list_of_strings(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.emplace_back(p);
  return Value::make_list(std::move(out));
}

// startswith/endswith accept a string or a tuple of strings.
bool affix_match(const Value& self, const Value& affix, bool start, const char* fn) {
  const std::string& s = self.str();
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw_error(std::string("TypeError: ") + fn + " first arg must be str or a tuple of str, not " + type_name(a));
    const std::string& x = a.str();
    if (x.size() > s.size()) return false;
    return start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const auto& a : affix.list().items) if (one(a)) return true;
    return false;
  }
  return one(affix);
}

// str.format with {} / {0} / {name} fields and {{ }} escapes; format specs are not supported.
Value str_format(const Value& self, CallArgs& a) {
  const std::string& f = self.str();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '}' ) {
      if (i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
      throw_error("ValueError: Single '}' encountered in format string");
    }
    if (c != '{') { out += c; continue; }
    if (i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
    size_t close = f.find('}', i);
    if (close == std::string::npos) throw_error("ValueError: Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) throw_error("format specs in str.format are not supported");
    const Value* v = nullptr;
    size_t index = 0;
    if (field.empty()) {
      index = auto_index++;
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      index = std::stoul(field);
    } else {
      for (const auto& [k, kv] : a.kwargs) if (k == field) v = &kv;
      if (!v) throw_error("KeyError: '" + field + "'");
    }
    if (!v) {
      if (index >= a.args.size()) throw_error("IndexError: Replacement index " + std::to_string(index) + " out of range");
      v = &a.args[index];
    }
    out += to_str(*v);
    check_string_size(out.size());
    i = close;
  }
  return Value(std::move(out));
}

Value str_method(const std::string& name, const Value& self, CallArgs& a) {
  const std::string& s = self.str();
  charge(1, s.size());
  if (name == "startswith" || name == "endswith") {
    ArgReader r(name, a, {"prefix"});
    return Value(affix_match(self, r.get(0), name == "startswith", name.c_str()));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgReader r(name, a, {"chars"});
    return Value(py_strip(s, r.opt_str(0), name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    ArgReader r(name, a, {"sep", "maxsplit"});
    return list_of_strings(py_split(s, r.opt_str(0), r.integer(1, -1)));
  }
  if (name == "splitlines") {
    std::vector<std::string> lines = py_split(py_replace(s, "\r\n", "\n", -1), std::string("\n"), -1);
    if (!lines.empty() && lines.back().empty()) lines.pop_back();
    return list_of_strings(lines);
  }
  if (name == "upper") return Value(py_upper(s));
  if (name == "lower") return Value(py_lower(s));
  if (name == "title") return Value(py_title(s));
  if (name == "capitalize") return Value(py_capitalize(s));
  if (name == "replace") {
    ArgReader r(name, a, {"old", "new", "count"});
    std::string out = py_replace(s, r.str(0, ""), r.str(1, ""), r.integer(2, -1));
    check_string_size(out.size());
    return Value(std::move(out));
  }
  if (name == "format") return str_format(self, a);
  if (name == "join") {
    ArgReader r(name, a, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& v : iterate(r.get(0))) {
      if (!v.is_string()) throw_error("TypeError: sequence item: expected str instance, " + type_name(v) + " found");
      if (!first) out += s;
      out += v.str();
      first = false;
      check_string_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "count") {
    ArgReader r(name, a, {"sub"});
    return Value(py_count(s, r.str(0, "")));
  }
  if (name == "find" || name == "rfind" || name == "index") {
    ArgReader r(name, a, {"sub"});
    std::string sub = r.str(0, "");
    size_t pos = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (pos == std::string::npos) {
      if (name == "index") throw_error("ValueError: substring not found");
      return Value(-1);
    }
    return Value(codepoint_count(std::string_view(s).substr(0, pos)));
  }
  // isdigit/isalpha/isspace/... over code points, as Python (empty string is false).
  std::vector<char32_t> cps = decode_utf8(s);
  auto all = [&](auto pred) {
    if (cps.empty()) return Value(false);
    for (char32_t c : cps) if (!pred(c)) return Value(false);
    return Value(true);
  };
  if (name == "isspace") return all(is_py_space);
  if (name == "isdigit") return all([](char32_t c) { return c >= '0' && c <= '9'; });
  if (name == "isalpha") return all([](char32_t c) { return c < 128 ? std::isalpha(static_cast<int>(c)) != 0 : true; });
  if (name == "isalnum") return all([](char32_t c) { return c < 128 ? std::isalnum(static_cast<int>(c)) != 0 : true; });
  if (name == "islower") return Value(py_lower(s) == s && py_upper(s) != s);
  if (name == "isupper") return Value(py_upper(s) == s && py_lower(s) != s);
  throw_error("internal: unknown str method " + name);
}

Value dict_method(const std::string& name, const Value& self, CallArgs& a) {
  DictData& d = self.dict();
  if (name == "get") {
    ArgReader r(name, a, {"key", "default"});
    const Value* v = d.find(r.get(0));
    return v ? *v : (r.has(1) ? r.get(1) : Value::none());
  }
  if (name == "items") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.entries()) out.push_back(Value::make_tuple({k, v}));
    charge(1, out.size() * 4);
    return Value::make_list(std::move(out));
  }
  if (name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.entries()) out.push_back(name == "keys" ? k : v);
    charge(1, out.size() * 4);
    return Value::make_list(std::move(out));
  }
  if (name == "pop") {
    ArgReader r(name, a, {"key", "default"});
    const Value* v = d.find(r.get(0));
    if (!v) {
      if (r.has(1)) return r.get(1);
      throw_error("KeyError: " + to_repr(r.get(0)));
    }
    Value out = *v;
    d.erase(r.get(0));
    return out;
  }
  if (name == "copy") {
    Value c = Value::make_dict();
    for (const auto& [k, v] : d.entries()) c.dict().set(k, v);
    return c;
  }
  throw_error("internal: unknown dict method " + name);
}

Value list_method(const std::string& name, const Value& self, CallArgs& a) {
  std::vector<Value>& items = self.list().items;
  if (self.list().is_tuple && name != "index" && name != "count") {
    throw_error("AttributeError: 'tuple' object has no attribute '" + name + "'");
  }
  if (name == "append") {
    ArgReader r(name, a, {"object"});
    check_list_size(items.size() + 1);
    items.push_back(r.get(0));
    return Value::none();
  }
  if (name == "extend") {
    ArgReader r(name, a, {"iterable"});
    std::vector<Value> more = iterate(r.get(0));
    check_list_size(items.size() + more.size());
    items.insert(items.end(), more.begin(), more.end());
    return Value::none();
  }
  if (name == "insert") {
    ArgReader r(name, a, {"index", "object"});
    auto n = static_cast<int64_t>(items.size());
    int64_t i = r.integer(0, 0);
    if (i < 0) i = std::max<int64_t>(0, i + n);
    check_list_size(items.size() + 1);
    items.insert(items.begin() + std::min(i, n), r.get(1));
    return Value::none();
  }
  if (name == "pop") {
    ArgReader r(name, a, {"index"});
    auto n = static_cast<int64_t>(items.size());
    int64_t i = r.integer(0, -1);
    if (i < 0) i += n;
    if (i < 0 || i >= n) throw_error("IndexError: pop index out of range");
    Value out = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return out;
  }
  if (name == "index" || name == "count") {
    ArgReader r(name, a, {"value"});
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      charge(1);
      if (!values_equal(items[i], r.get(0))) continue;
      if (name == "index") return Value(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") throw_error("ValueError: value is not in list");
    return Value(count);
  }
  throw_error("internal: unknown list method " + name);
}

bool is_one_of(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names) if (name == n) return true;
  return false;
}

}  // namespace

Value get_method(const Value& obj, const std::string& name) {
  Value (*impl)(const std::string&, const Value&, CallArgs&) = nullptr;
  if (obj.is_string() &&
      is_one_of(name, {"startswith", "endswith", "strip", "lstrip", "rstrip", "split",
                       "splitlines", "upper", "lower", "title", "capitalize", "replace", "format",
                       "join", "count", "find", "rfind", "index", "isspace", "isdigit", "isalpha",
                       "isalnum", "islower", "isupper"})) {
    impl = str_method;
  } else if (obj.is_dict() && !obj.is_namespace() &&
             is_one_of(name, {"get", "items", "keys", "values", "pop", "copy"})) {
    impl = dict_method;
  } else if (obj.is_list() &&
             is_one_of(name, {"append", "extend", "insert", "pop", "index", "count"})) {
    impl = list_method;
  } else {
    return Value::undefined();
  }
  bool mutates = obj.is_list() && name != "index" && name != "count";
  return Value::callable(name, [impl, obj, name, mutates](Evaluator& ev, CallArgs& a) {
    if (mutates) ev.record_mutation(obj);
    return impl(name, obj, a);
  });
}

}  // namespace folio::jinja
