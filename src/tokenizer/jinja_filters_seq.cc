// Sequence filters: first, last, join, list, reverse, sort, unique, map, select/reject(attr),
// items, keys, values, sum, min, max, dictsort. Follows Jinja2's builtins (attribute paths like
// "a.b" or "0", case-insensitive string keys by default for sort/unique/min/max).
#include <algorithm>

#include "tokenizer/jinja_budget.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {
namespace {

// Jinja's make_attrgetter: "a.b.0" looks up each part with subscript semantics.
Value get_path(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return get_item(item, attribute);
  Value cur = item;
  for (const std::string& part : py_split(to_str(attribute), std::string("."), -1)) {
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    cur = get_item(cur, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
  }
  return cur;
}

// Sort/unique key: the attribute (if any), lower-cased when it is a string and case-insensitive.
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value k = attribute.is_undefined() || attribute.is_none() ? item : get_path(item, attribute);
  if (!case_sensitive && k.is_string()) return Value(py_lower(k.str()));
  return k;
}

Value f_first(Evaluator&, Value& in, CallArgs&) {
  std::vector<Value> items = iterate(in);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Evaluator&, Value& in, CallArgs&) {
  std::vector<Value> items = iterate(in);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_join(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("join", a, {"d", "attribute"});
  std::string sep = to_str(r.has(0) ? r.get(0) : Value(std::string()));
  std::string out;
  bool first = true;
  for (const Value& v : iterate(in)) {
    if (!first) out += sep;
    first = false;
    out += to_str(r.has(1) ? get_path(v, r.get(1)) : v);
    check_string_size(out.size());
  }
  charge(1, out.size());
  return Value(std::move(out));
}

Value f_list(Evaluator&, Value& in, CallArgs&) { return Value::make_list(iterate(in)); }

Value f_reverse(Evaluator&, Value& in, CallArgs&) {
  if (in.is_string()) {
    std::vector<char32_t> cps = decode_utf8(in.str());
    std::reverse(cps.begin(), cps.end());
    return Value(encode_utf8(cps));
  }
  std::vector<Value> items = iterate(in);
  std::reverse(items.begin(), items.end());
  return Value::make_list(std::move(items));
}

Value f_sort(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("sort", a, {"reverse", "case_sensitive", "attribute"});
  bool reverse = r.boolean(0, false), cs = r.boolean(1, false);
  std::vector<Value> items = iterate(in);
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& v : items) keyed.emplace_back(sort_key(v, r.get(2), cs), v);
  charge(1, keyed.size() * 16);
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? compare_values(y.first, x.first) < 0 : compare_values(x.first, y.first) < 0;
  });
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return Value::make_list(std::move(out));
}

Value f_unique(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("unique", a, {"case_sensitive", "attribute"});
  std::vector<Value> seen, out;
  for (const Value& v : iterate(in)) {
    Value k = sort_key(v, r.get(1), r.boolean(0, false));
    bool dup = false;
    for (const Value& s : seen) {
      charge(1);
      if (values_equal(s, k)) { dup = true; break; }
    }
    if (dup) continue;
    seen.push_back(k);
    out.push_back(v);
  }
  return Value::make_list(std::move(out));
}

// select/reject/selectattr/rejectattr: (attr,) test name, test args...
Value select_impl(Evaluator& ev, Value& in, CallArgs& a, bool with_attr, bool keep) {
  std::vector<Value> rest = a.args;
  Value attribute;
  if (with_attr) {
    if (rest.empty()) throw_error("TypeError: selectattr/rejectattr need an attribute name");
    attribute = rest.front();
    rest.erase(rest.begin());
  }
  std::string test;
  if (!rest.empty()) {
    test = to_str(rest.front());
    rest.erase(rest.begin());
  }
  std::vector<Value> out;
  for (const Value& item : iterate(in)) {
    Value v = with_attr ? get_path(item, attribute) : item;
    CallArgs targs{rest, a.kwargs};
    bool pass = test.empty() ? truthy(v) : ev.apply_test(test, v, targs);
    if (pass == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}
Value f_select(Evaluator& ev, Value& in, CallArgs& a) { return select_impl(ev, in, a, false, true); }
Value f_reject(Evaluator& ev, Value& in, CallArgs& a) { return select_impl(ev, in, a, false, false); }
Value f_selectattr(Evaluator& ev, Value& in, CallArgs& a) { return select_impl(ev, in, a, true, true); }
Value f_rejectattr(Evaluator& ev, Value& in, CallArgs& a) { return select_impl(ev, in, a, true, false); }

// map(attribute='x', default=d) or map('filter', args...).
Value f_map(Evaluator& ev, Value& in, CallArgs& a) {
  std::vector<Value> out;
  if (a.args.empty()) {
    ArgReader r("map", a, {"attribute", "default"});
    if (!r.has(0)) throw_error("TypeError: map() needs a filter name or attribute=");
    for (const Value& item : iterate(in)) {
      Value v = get_path(item, r.get(0));
      out.push_back(v.is_undefined() && r.has(1) ? r.get(1) : v);
    }
    return Value::make_list(std::move(out));
  }
  std::string filter = to_str(a.args[0]);
  for (const Value& item : iterate(in)) {
    CallArgs fargs{std::vector<Value>(a.args.begin() + 1, a.args.end()), a.kwargs};
    out.push_back(ev.apply_filter(filter, item, fargs));
  }
  return Value::make_list(std::move(out));
}

Value f_items(Evaluator&, Value& in, CallArgs&) {
  if (in.is_undefined()) return Value::make_list();
  if (!in.is_dict() || in.is_namespace()) throw_error("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, v] : in.dict().entries()) out.push_back(Value::make_tuple({k, v}));
  return Value::make_list(std::move(out));
}

Value f_keys(Evaluator&, Value& in, CallArgs&) {
  if (!in.is_dict()) { check_defined(in); throw_error("keys: expected a mapping, got " + type_name(in)); }
  std::vector<Value> out;
  for (const auto& [k, v] : in.dict().entries()) out.push_back(k);
  return Value::make_list(std::move(out));
}

Value f_values(Evaluator&, Value& in, CallArgs&) {
  if (!in.is_dict()) { check_defined(in); throw_error("values: expected a mapping, got " + type_name(in)); }
  std::vector<Value> out;
  for (const auto& [k, v] : in.dict().entries()) out.push_back(v);
  return Value::make_list(std::move(out));
}

Value f_sum(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("sum", a, {"attribute", "start"});
  Value total = r.has(1) ? r.get(1) : Value(0);
  for (const Value& v : iterate(in)) total = binary_op("+", total, r.has(0) ? get_path(v, r.get(0)) : v);
  return total;
}

Value min_max(Value& in, CallArgs& a, bool want_max) {
  ArgReader r(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  std::vector<Value> items = iterate(in);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(items[0], r.get(1), r.boolean(0, false));
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(items[i], r.get(1), r.boolean(0, false));
    int c = compare_values(k, best_key);
    if (want_max ? c > 0 : c < 0) { best = i; best_key = k; }
  }
  return items[best];
}
Value f_min(Evaluator&, Value& in, CallArgs& a) { return min_max(in, a, false); }
Value f_max(Evaluator&, Value& in, CallArgs& a) { return min_max(in, a, true); }

Value f_dictsort(Evaluator&, Value& in, CallArgs& a) {
  ArgReader r("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!in.is_dict()) { check_defined(in); throw_error("dictsort: expected a mapping, got " + type_name(in)); }
  bool by_value = r.str(1, "key") == "value";
  bool cs = r.boolean(0, false), reverse = r.boolean(2, false);
  std::vector<Value> pairs;
  for (const auto& [k, v] : in.dict().entries()) pairs.push_back(Value::make_tuple({k, v}));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    Value kx = sort_key(x.list().items[by_value ? 1 : 0], Value(), cs);
    Value ky = sort_key(y.list().items[by_value ? 1 : 0], Value(), cs);
    return reverse ? compare_values(ky, kx) < 0 : compare_values(kx, ky) < 0;
  });
  return Value::make_list(std::move(pairs));
}

}  // namespace

const FilterTable& sequence_filters() {
  static const FilterTable table = {
      {"first", f_first},   {"last", f_last},       {"join", f_join},
      {"list", f_list},     {"reverse", f_reverse}, {"sort", f_sort},
      {"unique", f_unique}, {"select", f_select},   {"reject", f_reject},
      {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"map", f_map},
      {"items", f_items},   {"keys", f_keys},       {"values", f_values},
      {"sum", f_sum},       {"min", f_min},         {"max", f_max},
      {"dictsort", f_dictsort},
  };
  return table;
}

}  // namespace folio::jinja
