// Expression evaluation: names, attribute/item access, slicing, operators, calls.
#include <cmath>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {
namespace {

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

int64_t as_index(const Value& v, const char* what) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  throw_error(std::string("TypeError: ") + what + " indices must be integers, not " + type_name(v));
}

// Python slice.indices(n) followed by the selected positions.
std::vector<size_t> slice_positions(size_t n, const Value& start, const Value& stop,
                                    const Value& step_v) {
  auto omitted = [](const Value& v) { return v.is_undefined() || v.is_none(); };
  int64_t step = omitted(step_v) ? 1 : as_index(step_v, "slice");
  if (step == 0) throw_error("ValueError: slice step cannot be zero");
  auto len = static_cast<int64_t>(n);
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (omitted(v)) return fallback;
    int64_t i = as_index(v, "slice");
    if (i < 0) i += len;
    if (step > 0) return std::clamp<int64_t>(i, 0, len);
    return std::clamp<int64_t>(i, -1, len - 1);
  };
  int64_t b = clamp(start, step > 0 ? 0 : len - 1);
  int64_t e = clamp(stop, step > 0 ? len : -1);
  std::vector<size_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(static_cast<size_t>(i));
  charge(1, out.size() * 4);
  return out;
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw_error("TypeError: unsupported operand type(s) for " + op + ": '" + type_name(a) +
              "' and '" + type_name(b) + "'");
}

int64_t int_of(const Value& v) { return v.is_int() ? v.as_int() : v.as_bool(); }

Value repeat(const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  auto n = static_cast<size_t>(times);
  if (seq.is_string()) {
    size_t total = seq.str().size() * n;
    if (n != 0 && total / n != seq.str().size()) throw_error("string too large", ErrorKind::kLimit);
    check_string_size(total);
    charge(1, total);
    std::string out;
    out.reserve(total);
    for (size_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  const auto& items = seq.list().items;
  size_t total = items.size() * n;
  if (n != 0 && total / n != items.size()) throw_error("list too large", ErrorKind::kLimit);
  check_list_size(total);
  charge(1, total * 4);
  std::vector<Value> out;
  out.reserve(total);
  for (size_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.list().is_tuple ? Value::make_tuple(std::move(out)) : Value::make_list(std::move(out));
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  bool ints = !a.is_float() && !b.is_float();
  if (op == "/") {
    if (b.to_double() == 0.0) throw_error("ZeroDivisionError: division by zero");
    return Value(a.to_double() / b.to_double());
  }
  if (ints) {
    int64_t x = int_of(a), y = int_of(b), r = 0;
    bool overflow = false;
    if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
    else if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
    else if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
    else if (op == "//" || op == "%") {
      if (y == 0) throw_error("ZeroDivisionError: integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) throw_error("integer overflow");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) { --q; m += y; }
      r = op == "//" ? q : m;
    } else if (op == "**") {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      r = 1;
      for (int64_t i = 0; i < y && !overflow; ++i) {
        overflow = __builtin_mul_overflow(r, x, &r);
        if (r == 0 || r == 1) break;
        if (r == -1) { r = (y % 2 == 0) ? 1 : -1; break; }
      }
    }
    if (overflow) throw_error("integer overflow in '" + op + "'");
    return Value(r);
  }
  double x = a.to_double(), y = b.to_double();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  if (y == 0.0) throw_error("ZeroDivisionError: float division by zero");
  double q = std::floor(x / y);
  if (op == "//") return Value(q);
  double m = std::fmod(x, y);
  if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
  return Value(m);
}

}  // namespace

Value get_attribute(const Value& obj, const std::string& name) {
  check_defined(obj);
  if (obj.is_dict()) {
    if (!obj.is_namespace()) {
      Value m = get_method(obj, name);
      if (!m.is_undefined()) return m;
    }
    if (const Value* v = obj.dict().find(Value(name))) return *v;
  } else if (obj.is_string() || obj.is_list()) {
    Value m = get_method(obj, name);
    if (!m.is_undefined()) return m;
  }
  std::string hint(1, '\'');
  hint.append(object_type_repr(obj)).append("' has no attribute '").append(name).append(1, '\'');
  return Value::undefined(std::move(hint));
}

Value get_item(const Value& obj, const Value& key) {
  check_defined(obj);
  if (obj.is_dict() && !obj.is_namespace()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = int_of(key);
    if (obj.is_list()) {
      const auto& items = obj.list().items;
      if (i < 0) i += static_cast<int64_t>(items.size());
      if (i >= 0 && i < static_cast<int64_t>(items.size())) return items[static_cast<size_t>(i)];
    } else {
      std::vector<size_t> offs = codepoint_offsets(obj.str());
      int64_t n = static_cast<int64_t>(offs.size()) - 1;
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        auto k = static_cast<size_t>(i);
        return Value(obj.str().substr(offs[k], offs[k + 1] - offs[k]));
      }
    }
    return Value::undefined(object_type_repr(obj) + " has no element " + std::to_string(int_of(key)));
  }
  if (key.is_string()) return get_attribute(obj, key.str());
  return Value::undefined(object_type_repr(obj) + " has no element " + to_repr(key));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  check_defined(obj);
  if (obj.is_list()) {
    const auto& items = obj.list().items;
    std::vector<Value> out;
    for (size_t i : slice_positions(items.size(), start, stop, step)) out.push_back(items[i]);
    return obj.list().is_tuple ? Value::make_tuple(std::move(out)) : Value::make_list(std::move(out));
  }
  if (obj.is_string()) {
    std::vector<size_t> offs = codepoint_offsets(obj.str());
    std::string out;
    for (size_t i : slice_positions(offs.size() - 1, start, stop, step)) {
      out.append(obj.str(), offs[i], offs[i + 1] - offs[i]);
    }
    return Value(std::move(out));
  }
  throw_error("TypeError: '" + type_name(obj) + "' object is not subscriptable");
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    check_string_size(s.size());
    charge(1, s.size());
    return Value(std::move(s));
  }
  check_defined(a);
  check_defined(b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_string_size(a.str().size() + b.str().size());
      charge(1, a.str().size() + b.str().size());
      return Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
      check_list_size(a.list().items.size() + b.list().items.size());
      charge(1, (a.list().items.size() + b.list().items.size()) * 4);
      std::vector<Value> out = a.list().items;
      out.insert(out.end(), b.list().items.begin(), b.list().items.end());
      return a.list().is_tuple ? Value::make_tuple(std::move(out)) : Value::make_list(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, int_of(b));
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, int_of(a));
  }
  return arithmetic(op, a, b);
}

Value Evaluator::eval(const Expr& e) {
  try {
    budget_.charge(1);
    return eval_expr(e);
  } catch (JinjaError& err) {
    if (err.line == 0) err.line = e.line;
    throw;
  }
}

Value Evaluator::eval_expr(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral: return e.literal;
    case ExprKind::kName: return lookup(e.name);
    case ExprKind::kList: case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const auto& c : e.children) items.push_back(eval(*c));
      return e.kind == ExprKind::kList ? Value::make_list(std::move(items)) : Value::make_tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Value d = Value::make_dict();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value k = eval(*e.children[i]);
        d.dict().set(k, eval(*e.children[i + 1]));
      }
      return d;
    }
    case ExprKind::kGetAttr: return get_attribute(eval(*e.children[0]), e.name);
    case ExprKind::kGetItem: return get_item(eval(*e.children[0]), eval(*e.children[1]));
    case ExprKind::kSlice: {
      Value obj = eval(*e.children[0]);
      Value parts[3];
      for (int i = 0; i < 3; ++i) if (e.children[1 + i]) parts[i] = eval(*e.children[1 + i]);
      return get_slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::kCall: {
      Value callee = eval(*e.children[0]);
      CallArgs args = eval_args(e, 1);
      return call(callee, args);
    }
    case ExprKind::kFilter: {
      CallArgs args = eval_args(e, 1);
      return apply_filter(e.name, eval(*e.children[0]), args);
    }
    case ExprKind::kTest: {
      Value input = eval(*e.children[0]);
      CallArgs args = eval_args(e, 1);
      return Value(apply_test(e.name, input, args) != e.negated);
    }
    case ExprKind::kUnary: {
      Value v = eval(*e.children[0]);
      if (e.name == "not") return Value(!truthy(v));
      check_defined(v);
      if (!v.is_number()) throw_error("TypeError: bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
      if (e.name == "+") return v.is_bool() ? Value(int_of(v)) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (int_of(v) == INT64_MIN) throw_error("integer overflow in unary -");
      return Value(-int_of(v));
    }
    case ExprKind::kBinary: {
      if (e.name == "and" || e.name == "or") {
        Value left = eval(*e.children[0]);
        if (truthy(left) == (e.name == "or")) return left;
        return eval(*e.children[1]);
      }
      Value a = eval(*e.children[0]);
      return binary_op(e.name, a, eval(*e.children[1]));
    }
    case ExprKind::kCompare: return eval_compare(e);
    case ExprKind::kCondition:
      if (truthy(eval(*e.children[0]))) return eval(*e.children[1]);
      return e.children[2] ? eval(*e.children[2]) : Value::undefined("the inline if had no else");
  }
  throw_error("internal: unknown expression kind");
}

Value Evaluator::eval_compare(const Expr& e) {
  Value left = eval(*e.children[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.children[i + 1]);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==") ok = values_equal(left, right);
    else if (op == "!=") ok = !values_equal(left, right);
    else if (op == "in") ok = contains(right, left);
    else if (op == "notin") ok = !contains(right, left);
    else {
      int c = compare_values(left, right);
      ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

CallArgs Evaluator::eval_args(const Expr& e, size_t first_child) {
  CallArgs args;
  for (size_t i = first_child; i < e.children.size(); ++i) args.args.push_back(eval(*e.children[i]));
  for (const auto& [k, v] : e.kwargs) args.kwargs.emplace_back(k, eval(*v));
  return args;
}

Value Evaluator::call(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) return callee.callable().fn(*this, args);
  check_defined(callee);
  throw_error("TypeError: '" + type_name(callee) + "' object is not callable");
}

Value Evaluator::apply_filter(const std::string& name, Value input, CallArgs& args) {
  return call_filter(*this, name, std::move(input), args);
}

bool Evaluator::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  return call_test(*this, name, input, args);
}

}  // namespace folio::jinja
