// Global functions: range, namespace, dict, raise_exception, strftime_now.
#include <ctime>

#include "tokenizer/jinja_budget.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_eval.h"

namespace folio::jinja {
namespace {

int64_t int_arg(const Value& v, const char* fn) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  throw_error(std::string("TypeError: ") + fn + "() arguments must be integers, not " + type_name(v));
}

Value range_fn(Evaluator&, CallArgs& a) {
  if (!a.kwargs.empty()) throw_error("TypeError: range() takes no keyword arguments");
  if (a.args.empty() || a.args.size() > 3) throw_error("TypeError: range() takes 1 to 3 arguments");
  int64_t start = 0, stop = 0, step = 1;
  if (a.args.size() == 1) {
    stop = int_arg(a.args[0], "range");
  } else {
    start = int_arg(a.args[0], "range");
    stop = int_arg(a.args[1], "range");
    if (a.args.size() == 3) step = int_arg(a.args[2], "range");
  }
  if (step == 0) throw_error("ValueError: range() arg 3 must not be zero");
  // Length first, in wide arithmetic, so huge ranges fail before allocating.
  __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  __int128 astep = step > 0 ? step : -static_cast<__int128>(step);
  __int128 n = span <= 0 ? 0 : (span + astep - 1) / astep;
  if (n > static_cast<__int128>(1) << 40) throw_error("range() too large", ErrorKind::kLimit);
  check_list_size(static_cast<size_t>(n));
  charge(1, static_cast<size_t>(n) * 4);
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(n));
  for (__int128 i = 0; i < n; ++i) items.emplace_back(static_cast<int64_t>(start + i * step));
  return Value::make_list(std::move(items));
}

// dict(**kwargs) / dict(mapping) / namespace(...): a fresh mapping from the arguments.
void fill_mapping(DictData& out, CallArgs& a, const char* fn) {
  if (a.args.size() > 1) throw_error(std::string("TypeError: ") + fn + "() takes at most 1 positional argument");
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().entries()) out.set(k, v);
    } else {
      for (const Value& pair : iterate(src)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) throw_error(std::string("ValueError: ") + fn + "() sequence elements must have length 2");
        out.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kwargs) out.set(Value(k), v);
}

Value strftime_now(Evaluator& ev, CallArgs& a) {
  ArgReader r("strftime_now", a, {"format"});
  std::string fmt = r.str(0, "");
  std::tm now = ev.now();
  for (size_t cap = 256; cap <= 65536; cap *= 4) {
    std::string buf(cap, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &now);
    if (n > 0 || fmt.empty()) {
      buf.resize(n);
      return Value(std::move(buf));
    }
  }
  return Value(std::string());
}

}  // namespace

void install_globals(DictData& g) {
  g.set("range", Value::callable("range", range_fn));
  g.set("namespace", Value::callable("namespace", [](Evaluator&, CallArgs& a) {
          Value ns = Value::make_namespace();
          fill_mapping(ns.dict(), a, "namespace");
          return ns;
        }));
  g.set("dict", Value::callable("dict", [](Evaluator&, CallArgs& a) {
          Value d = Value::make_dict();
          fill_mapping(d.dict(), a, "dict");
          return d;
        }));
  g.set("raise_exception", Value::callable("raise_exception", [](Evaluator&, CallArgs& a) -> Value {
          ArgReader r("raise_exception", a, {"message"});
          throw_error(to_str(r.get(0)), ErrorKind::kRaised);
        }));
  g.set("strftime_now", Value::callable("strftime_now", strftime_now));
}

}  // namespace folio::jinja
