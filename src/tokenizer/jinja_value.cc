#include "tokenizer/jinja_value.h"

#include <cmath>

#include "tokenizer/jinja_budget.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {
namespace {

// Guards recursion through nested (possibly self-referencing) data.
struct DepthGuard {
  explicit DepthGuard(int& depth) : depth_(depth) {
    if (++depth_ > max_data_depth()) {
      --depth_;
      throw_error("data nested deeper than " + std::to_string(max_data_depth()) +
                      " levels (or a list that contains itself)",
                  ErrorKind::kLimit);
    }
  }
  ~DepthGuard() { --depth_; }
  int& depth_;
};
thread_local int g_depth = 0;

void repr_into(const Value& v, std::string& out);

void repr_items(const ListData& l, std::string& out) {
  out += l.is_tuple ? '(' : '[';
  for (size_t i = 0; i < l.items.size(); ++i) {
    if (i) out += ", ";
    repr_into(l.items[i], out);
  }
  if (l.is_tuple && l.items.size() == 1) out += ',';
  out += l.is_tuple ? ')' : ']';
}

void repr_dict(const DictData& d, std::string& out) {
  out += '{';
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    repr_into(k, out);
    out += ": ";
    repr_into(v, out);
  }
  out += '}';
}

void repr_into(const Value& v, std::string& out) {
  DepthGuard guard(g_depth);
  charge(1);
  switch (v.kind()) {
    case Kind::kString: out += py_string_repr(v.str()); break;
    case Kind::kUndefined: out += "Undefined"; break;
    case Kind::kList: repr_items(v.list(), out); break;
    case Kind::kDict:
      if (v.is_namespace()) out += "<Namespace ";
      repr_dict(v.dict(), out);
      if (v.is_namespace()) out += '>';
      break;
    default: out += to_str(v); break;
  }
  check_string_size(out.size());
}

template <typename Json>
Value from_json_impl(const Json& j, int depth) {
  if (depth > max_data_depth()) {
    throw_error("JSON input nested deeper than " + std::to_string(max_data_depth()) + " levels",
                ErrorKind::kLimit);
  }
  switch (j.type()) {
    case Json::value_t::null: return Value::none();
    case Json::value_t::boolean: return Value(j.template get<bool>());
    case Json::value_t::number_integer: return Value(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      auto u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case Json::value_t::number_float: return Value(j.template get<double>());
    case Json::value_t::string: return Value(j.template get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_impl(e, depth + 1));
      return Value::make_list(std::move(items));
    }
    case Json::value_t::object: {
      Value d = Value::make_dict();
      for (auto it = j.begin(); it != j.end(); ++it) d.dict().set(Value(it.key()), from_json_impl(it.value(), depth + 1));
      return d;
    }
    default: return Value::none();  // binary/discarded: not produced by JSON text
  }
}

}  // namespace

const Value* DictData::find(const Value& key) const {
  if (key.is_string()) {
    auto it = string_index_.find(key.str());
    return it == string_index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (!k.is_string() && values_equal(k, key)) return &v;
  }
  return nullptr;
}

void DictData::set(const Value& key, Value value) {
  if (const Value* found = find(key)) {
    const_cast<Value&>(*found) = std::move(value);
    return;
  }
  if (key.kind() == Kind::kList || key.kind() == Kind::kDict || key.is_undefined()) {
    if (!(key.is_list() && key.list().is_tuple)) throw_error("TypeError: unhashable type: '" + type_name(key) + "'");
  }
  if (key.is_string()) string_index_[key.str()] = entries_.size();
  entries_.emplace_back(key, std::move(value));
}

void DictData::clear() {
  entries_.clear();
  string_index_.clear();
}

Value& DictData::value_at(size_t i) { return entries_[i].second; }

bool DictData::erase(const Value& key) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (values_equal(entries_[i].first, key)) {
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
      string_index_.clear();
      for (size_t k = 0; k < entries_.size(); ++k) {
        if (entries_[k].first.is_string()) string_index_[entries_[k].first.str()] = k;
      }
      return true;
    }
  }
  return false;
}

Value Value::undefined(std::string hint) {
  return Value(Tag{}, std::make_shared<const UndefinedData>(UndefinedData{std::move(hint)}));
}
Value Value::make_list(std::vector<Value> items) {
  check_list_size(items.size());
  return Value(Tag{}, std::make_shared<ListData>(ListData{std::move(items), false}));
}
Value Value::make_tuple(std::vector<Value> items) {
  return Value(Tag{}, std::make_shared<ListData>(ListData{std::move(items), true}));
}
Value Value::make_dict() { return Value(Tag{}, std::make_shared<DictData>()); }
Value Value::make_namespace() {
  auto d = std::make_shared<DictData>();
  d->is_namespace = true;
  return Value(Tag{}, std::move(d));
}
Value Value::callable(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn) {
  return Value(Tag{}, std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)}));
}

double Value::to_double() const {
  if (is_float()) return as_float();
  if (is_int()) return static_cast<double>(as_int());
  return as_bool() ? 1.0 : 0.0;
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  const auto& p = std::get<std::shared_ptr<const UndefinedData>>(v_);
  return p ? p->hint : kEmpty;
}

const void* Value::identity() const {
  if (is_list()) return std::get<ListPtr>(v_).get();
  if (is_dict()) return std::get<DictPtr>(v_).get();
  if (is_callable()) return std::get<CallPtr>(v_).get();
  return nullptr;
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: case Kind::kNone: return false;
    case Kind::kBool: return v.as_bool();
    case Kind::kInt: return v.as_int() != 0;
    case Kind::kFloat: return v.as_float() != 0.0;
    case Kind::kString: return !v.str().empty();
    case Kind::kList: return !v.list().items.empty();
    case Kind::kDict: return v.is_namespace() || v.dict().size() > 0;
    case Kind::kCallable: return true;
  }
  return false;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.as_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(v.as_int());
    case Kind::kFloat: return py_float_repr(v.as_float());
    case Kind::kString: return v.str();
    case Kind::kCallable: return "<function " + v.callable().name + ">";
    default: {
      std::string out;
      repr_into(v, out);
      return out;
    }
  }
}

std::string to_repr(const Value& v) {
  std::string out;
  repr_into(v, out);
  return out;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return v.list().is_tuple ? "tuple" : "list";
    case Kind::kDict: return v.is_namespace() ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "object";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    int64_t x = a.is_int() ? a.as_int() : a.as_bool();
    int64_t y = b.is_int() ? b.as_int() : b.as_bool();
    return x == y;
  }
  if (a.kind() != b.kind()) return false;
  DepthGuard guard(g_depth);
  charge(1);
  switch (a.kind()) {
    case Kind::kUndefined: case Kind::kNone: return true;
    case Kind::kString: return a.str() == b.str();
    case Kind::kList: {
      const auto& x = a.list();
      const auto& y = b.list();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!values_equal(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.is_namespace() || b.is_namespace()) return a.identity() == b.identity();
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict().entries()) {
        const Value* other = b.dict().find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

int compare_values(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.to_double(), y = b.to_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.is_int() ? a.as_int() : a.as_bool();
    int64_t y = b.is_int() ? b.as_int() : b.as_bool();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
    DepthGuard guard(g_depth);
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      charge(1);
      if (!values_equal(x[i], y[i])) return compare_values(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  check_defined(a);
  check_defined(b);
  throw_error("TypeError: '<' not supported between instances of '" + type_name(a) + "' and '" +
              type_name(b) + "'");
}

void check_defined(const Value& v) {
  if (!v.is_undefined()) return;
  const std::string& hint = v.undefined_hint();
  throw_error("UndefinedError: " + (hint.empty() ? std::string("value is undefined") : hint));
}

Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j, 0); }
Value from_json(const nlohmann::json& j) { return from_json_impl(j, 0); }

nlohmann::ordered_json to_json(const Value& v) {
  DepthGuard guard(g_depth);
  switch (v.kind()) {
    case Kind::kNone: return nullptr;
    case Kind::kBool: return v.as_bool();
    case Kind::kInt: return v.as_int();
    case Kind::kFloat: return v.as_float();
    case Kind::kString: return v.str();
    case Kind::kList: {
      auto arr = nlohmann::ordered_json::array();
      for (const auto& e : v.list().items) arr.push_back(to_json(e));
      return arr;
    }
    case Kind::kDict: {
      auto obj = nlohmann::ordered_json::object();
      for (const auto& [k, e] : v.dict().entries()) obj[to_str(k)] = to_json(e);
      return obj;
    }
    default:
      throw_error("TypeError: Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace folio::jinja
