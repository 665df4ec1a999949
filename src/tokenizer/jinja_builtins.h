// Jinja builtins: filters, tests, methods of str/list/dict, and global functions.
//
// Each set lives in its own file (jinja_filters*.cc, jinja_predicates.cc, jinja_methods.cc,
// jinja_globals.cc) and follows the Python/Jinja2 function it mirrors, including keyword
// arguments. All throw JinjaError on bad arguments.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace folio::jinja {

using FilterFn = Value (*)(Evaluator& ev, Value& input, CallArgs& args);
using FilterTable = std::vector<std::pair<const char*, FilterFn>>;
// The filters of jinja_filters.cc (text and values) and jinja_filters_seq.cc (sequences).
const FilterTable& text_filters();
const FilterTable& sequence_filters();

bool has_filter(const std::string& name);
Value call_filter(Evaluator& ev, const std::string& name, Value input, CallArgs& args);
bool has_test(const std::string& name);
bool call_test(Evaluator& ev, const std::string& name, const Value& input, CallArgs& args);
// A bound method of obj (str/list/dict), or an undefined value when obj has no such method.
Value get_method(const Value& obj, const std::string& name);
// Fills `globals` with range, namespace, dict, raise_exception, strftime_now.
void install_globals(DictData& globals);

// Python iteration: list items, dict keys, string characters; undefined is empty.
std::vector<Value> iterate(const Value& v);
// Python `item in container`.
bool contains(const Value& container, const Value& item);
// Python len(); throws for values without one.
int64_t length_of(const Value& v);
// Python int()/float() conversions used by filters; nullopt when not convertible.
std::optional<int64_t> to_int(const Value& v);
std::optional<double> to_float(const Value& v);

// Binds call arguments to parameter names like a Python signature: positional first, then
// keywords; unknown keywords and surplus positionals throw.
class ArgReader {
 public:
  ArgReader(const std::string& fn, CallArgs& args, std::initializer_list<const char*> params);
  bool has(size_t i) const { return !values_[i].is_undefined(); }
  const Value& get(size_t i) const { return values_[i]; }
  // Typed getters with defaults; a wrong type throws naming the function and parameter.
  std::string str(size_t i, const std::string& fallback) const;
  std::optional<std::string> opt_str(size_t i) const;  // nullopt for absent or None
  int64_t integer(size_t i, int64_t fallback) const;
  bool boolean(size_t i, bool fallback) const;

 private:
  std::string fn_;
  std::vector<std::string> names_;
  std::vector<Value> values_;
};

}  // namespace folio::jinja
