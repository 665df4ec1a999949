// jinja::Value: the dynamic value of the chat-template interpreter, modelled on Python objects.
//
// A Value is undefined, none, bool, int (int64), float (double), string (UTF-8), list (or
// tuple), dict (insertion-ordered; also Jinja's namespace) or callable. Strings, lists, dicts
// and callables are shared by reference like Python objects (copying a Value is cheap, and
// `list.append` or `set ns.x` is seen through every alias). Printing, truthiness, equality and
// ordering follow Python's rules; operations that Python rejects throw JinjaError.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace folio::jinja {

class Value;
class Evaluator;

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;  // prints as (a, b); otherwise behaves as a list
};

// Insertion-ordered mapping. String keys are indexed; other keys are found by a scan.
class DictData {
 public:
  bool is_namespace = false;  // Jinja namespace(): attribute assignment allowed, no methods

  const Value* find(const Value& key) const;
  void set(const Value& key, Value value);
  bool erase(const Value& key);
  void clear();
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  // The value of the i-th entry in insertion order (for in-place updates of known keys).
  Value& value_at(size_t i);

 private:
  std::vector<std::pair<Value, Value>> entries_;
  std::unordered_map<std::string, size_t> string_index_;
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

struct Callable {
  std::string name;
  std::function<Value(Evaluator&, CallArgs&)> fn;
};

struct UndefinedData {
  std::string hint;  // Jinja's message when the undefined value is used: "'x' is undefined"
};

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

class Value {
 public:
  Value() : v_(std::shared_ptr<const UndefinedData>()) {}
  Value(bool b) : v_(std::in_place_type<bool>, b) {}                             // NOLINT
  Value(int i) : v_(std::in_place_type<int64_t>, i) {}                           // NOLINT
  Value(int64_t i) : v_(std::in_place_type<int64_t>, i) {}                       // NOLINT
  Value(size_t i) : v_(std::in_place_type<int64_t>, static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d) : v_(std::in_place_type<double>, d) {}                         // NOLINT
  Value(std::string s)                                                           // NOLINT
      : v_(std::in_place_type<StrPtr>, std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT

  static Value undefined(std::string hint = {});
  static Value none() { return Value(Tag{}, std::nullptr_t{}); }
  static Value make_list(std::vector<Value> items = {});
  static Value make_tuple(std::vector<Value> items);
  static Value make_dict();
  static Value make_namespace();
  static Value callable(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return is_dict() && dict().is_namespace; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  // Numeric value of an int, float or bool (Python treats bool as int).
  double to_double() const;
  const std::string& str() const { return *std::get<StrPtr>(v_); }
  ListData& list() const { return *std::get<ListPtr>(v_); }
  DictData& dict() const { return *std::get<DictPtr>(v_); }
  const Callable& callable() const { return *std::get<CallPtr>(v_); }
  const std::string& undefined_hint() const;
  // Identity of a shared object (list/dict), used to detect cycles; null otherwise.
  const void* identity() const;

 private:
  struct Tag {};
  using StrPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<ListData>;
  using DictPtr = std::shared_ptr<DictData>;
  using CallPtr = std::shared_ptr<const Callable>;
  using Storage = std::variant<std::shared_ptr<const UndefinedData>, std::nullptr_t, bool, int64_t,
                               double, StrPtr, ListPtr, DictPtr, CallPtr>;
  template <typename T>
  Value(Tag, T v) : v_(std::in_place_type<T>, std::move(v)) {}

  Storage v_;
};

// Python's bool(x); undefined is falsy.
bool truthy(const Value& v);
// Python's str(x) as Jinja prints it: True/False/None, repr-style floats, undefined as "".
std::string to_str(const Value& v);
// Python's repr(x): quoted strings, [..], {..}, (..).
std::string to_repr(const Value& v);
// Python's type name: "str", "int", "list", "dict", "NoneType", ...
std::string type_name(const Value& v);
// Python ==, with 1 == 1.0 == True.
bool values_equal(const Value& a, const Value& b);
// Python ordering (<0, 0, >0); throws JinjaError for types Python cannot order.
int compare_values(const Value& a, const Value& b);
// Raises Jinja's UndefinedError for an undefined value; a no-op otherwise.
void check_defined(const Value& v);

// JSON <-> Value. Objects keep their key order; to_json throws for undefined and callables.
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);
nlohmann::ordered_json to_json(const Value& v);

}  // namespace folio::jinja
