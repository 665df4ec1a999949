// Shared helpers of the builtins: argument binding, iteration, membership, conversions.
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja_budget.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_text.h"

namespace folio::jinja {

ArgReader::ArgReader(const std::string& fn, CallArgs& args,
                     std::initializer_list<const char*> params)
    : fn_(fn), names_(params.begin(), params.end()), values_(params.size()) {
  if (args.args.size() > names_.size()) {
    throw_error("TypeError: " + fn_ + "() takes at most " + std::to_string(names_.size()) +
                " argument(s), got " + std::to_string(args.args.size()));
  }
  for (size_t i = 0; i < args.args.size(); ++i) values_[i] = args.args[i];
  for (auto& [key, v] : args.kwargs) {
    size_t i = 0;
    while (i < names_.size() && names_[i] != key) ++i;
    if (i == names_.size()) {
      throw_error("TypeError: " + fn_ + "() got an unexpected keyword argument '" + key + "'");
    }
    values_[i] = v;
  }
}

std::string ArgReader::str(size_t i, const std::string& fallback) const {
  if (!has(i)) return fallback;
  if (!values_[i].is_string()) {
    throw_error("TypeError: " + fn_ + "() argument '" + names_[i] + "' must be a string, not " +
                type_name(values_[i]));
  }
  return values_[i].str();
}

std::optional<std::string> ArgReader::opt_str(size_t i) const {
  if (!has(i) || values_[i].is_none()) return std::nullopt;
  return str(i, "");
}

int64_t ArgReader::integer(size_t i, int64_t fallback) const {
  if (!has(i) || values_[i].is_none()) return fallback;
  const Value& v = values_[i];
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  throw_error("TypeError: " + fn_ + "() argument '" + names_[i] + "' must be an integer, not " +
              type_name(v));
}

bool ArgReader::boolean(size_t i, bool fallback) const {
  return has(i) ? truthy(values_[i]) : fallback;
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return {};
    case Kind::kList: charge(1, v.list().items.size() * 4); return v.list().items;
    case Kind::kDict: {
      if (v.is_namespace()) break;
      std::vector<Value> keys;
      for (const auto& [k, e] : v.dict().entries()) keys.push_back(k);
      charge(1, keys.size() * 4);
      return keys;
    }
    case Kind::kString: {
      std::vector<size_t> offs = codepoint_offsets(v.str());
      std::vector<Value> chars;
      for (size_t k = 0; k + 1 < offs.size(); ++k) {
        chars.emplace_back(v.str().substr(offs[k], offs[k + 1] - offs[k]));
      }
      charge(1, chars.size() * 4);
      return chars;
    }
    default: break;
  }
  throw_error("TypeError: '" + type_name(v) + "' object is not iterable");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined: return false;
    case Kind::kString:
      if (!item.is_string()) {
        check_defined(item);
        throw_error("TypeError: 'in <string>' requires string as left operand, not " +
                    type_name(item));
      }
      charge(1, container.str().size());
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const auto& e : container.list().items) {
        charge(1);
        if (values_equal(e, item)) return true;
      }
      return false;
    case Kind::kDict:
      if (container.is_namespace()) break;
      return container.dict().find(item) != nullptr;
    default: break;
  }
  throw_error("TypeError: argument of type '" + type_name(container) + "' is not iterable");
}

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(codepoint_count(v.str()));
    case Kind::kList: return static_cast<int64_t>(v.list().items.size());
    case Kind::kDict:
      if (!v.is_namespace()) return static_cast<int64_t>(v.dict().size());
      break;
    default: break;
  }
  throw_error("TypeError: object of type '" + type_name(v) + "' has no len()");
}

std::optional<double> to_float(const Value& v) {
  if (v.is_number()) return v.to_double();
  if (!v.is_string()) return std::nullopt;
  std::string s = py_strip(v.str(), std::nullopt, true, true);
  std::string t;
  for (char c : s) if (c != '_') t += c;
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return d;
}

std::optional<int64_t> to_int(const Value& v) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return static_cast<int64_t>(v.as_bool());
  std::optional<double> d;
  if (v.is_string()) {
    std::string s = py_strip(v.str(), std::nullopt, true, true);
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return static_cast<int64_t>(i);
    d = to_float(v);
  } else if (v.is_float()) {
    d = v.as_float();
  }
  if (!d || !std::isfinite(*d) || std::fabs(*d) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(std::trunc(*d));
}

}  // namespace folio::jinja
