// Statement execution: output, control flow, loops, assignments, macros, captures.
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_eval.h"

namespace folio::jinja {

// Pushes a frame for the lifetime of the scope (a loop or a macro call).
class Evaluator::FrameScope {
 public:
  FrameScope(Evaluator& ev, Frame* parent) : ev_(ev), saved_(ev.current_) {
    frame_.parent = parent;
    ev_.current_ = &frame_;
  }
  ~FrameScope() { ev_.current_ = saved_; }
  FrameScope(const FrameScope&) = delete;
  FrameScope& operator=(const FrameScope&) = delete;

 private:
  Evaluator& ev_;
  Frame* saved_;
  Frame frame_;
};

Evaluator::Evaluator(const Limits& limits, Clock clock)
    : budget_(limits), clock_(std::move(clock)) {}

Evaluator::~Evaluator() {
  for (Value& v : mutated_) {
    if (v.is_list()) v.list().items.clear();
    if (v.is_dict()) v.dict().clear();
  }
}

void Evaluator::record_mutation(const Value& container) {
  if (mutated_ids_.insert(container.identity()).second) mutated_.push_back(container);
}

std::string Evaluator::render(const Body& body, const Value& vars) {
  ActiveBudgetScope active(&budget_);
  DictData globals;
  install_globals(globals);
  for (const auto& [k, v] : globals.entries()) root_.vars.emplace_back(k.str(), v);
  if (vars.is_dict()) {
    for (const auto& [k, v] : vars.dict().entries()) {
      if (k.is_string()) assign(k.str(), v);
    }
  }
  outputs_.emplace_back();
  exec_body(body);
  return std::move(outputs_.back());
}

Value Evaluator::lookup(const std::string& name) const {
  for (const Frame* f = current_; f; f = f->parent) {
    for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it) {
      if (it->first == name) return it->second;
    }
  }
  return Value::undefined("'" + name + "' is undefined");
}

void Evaluator::assign(const std::string& name, Value v) {
  for (auto& [k, existing] : current_->vars) {
    if (k == name) {
      existing = std::move(v);
      return;
    }
  }
  current_->vars.emplace_back(name, std::move(v));
}

void Evaluator::assign_targets(const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) return assign(targets[0], v);
  std::vector<Value> parts = iterate(v);
  if (parts.size() != targets.size()) {
    throw_error(std::string("ValueError: ") +
                (parts.size() < targets.size() ? "not enough" : "too many") +
                " values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                std::to_string(parts.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], parts[i]);
}

void Evaluator::write(std::string_view text) {
  std::string& out = outputs_.back();
  out += text;
  if (out.size() > budget_.limits().max_output_bytes) {
    throw_error("rendered text exceeds the output cap of " +
                    std::to_string(budget_.limits().max_output_bytes) + " bytes",
                ErrorKind::kLimit);
  }
  charge(0, text.size());
}

std::string Evaluator::capture(const Body& body) {
  outputs_.emplace_back();
  exec_body(body);
  std::string out = std::move(outputs_.back());
  outputs_.pop_back();
  return out;
}

Evaluator::Flow Evaluator::exec_body(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec(*s);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s) {
  try {
    budget_.charge(1);
    return exec_stmt(s);
  } catch (JinjaError& err) {
    if (err.line == 0) err.line = s.line;
    throw;
  }
}

Evaluator::Flow Evaluator::exec_stmt(const Stmt& s) {
  switch (s.kind) {
    case StmtKind::kText: write(s.text); break;
    case StmtKind::kOutput: write(to_str(eval(*s.expr))); break;
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        if (!cond || truthy(eval(*cond))) return exec_body(body);
      }
      break;
    case StmtKind::kFor: return exec_for(s);
    case StmtKind::kSet: exec_set(s); break;
    case StmtKind::kSetBlock: {
      Value v(capture(s.body));
      if (s.filter) v = apply_filter_chain(*s.filter, std::move(v));
      assign(s.targets[0], std::move(v));
      break;
    }
    case StmtKind::kMacro: {
      // A macro sees the variables visible where it is defined (a loop's `m`, `loop`), as a
      // Jinja closure does: snapshot the non-root frames (values are shared, so this is cheap).
      auto captured = std::make_shared<std::vector<std::pair<std::string, Value>>>();
      for (const Frame* f = current_; f && f != &root_; f = f->parent) {
        captured->insert(captured->begin(), f->vars.begin(), f->vars.end());
      }
      const Stmt* macro = &s;
      assign(s.targets[0], Value::callable(s.targets[0], [macro, captured](Evaluator& ev, CallArgs& a) {
               return ev.call_macro(*macro, *captured, a);
             }));
      break;
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kFilterBlock:
      write(to_str(apply_filter_chain(*s.filter, Value(capture(s.body)))));
      break;
    case StmtKind::kBlockBody: return exec_body(s.body);
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_for(const Stmt& s) {
  std::vector<Value> items = iterate(eval(*s.expr));
  bool ran = false;
  {
    FrameScope scope(*this, current_);
    if (s.filter) {
      std::vector<Value> kept;
      for (auto& item : items) {
        budget_.charge(1);
        assign_targets(s.targets, item);
        if (truthy(eval(*s.filter))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    const size_t n = items.size();
    // One `loop` object per loop, updated in place each iteration (entries in this order).
    enum { kIndex, kIndex0, kRevindex, kRevindex0, kFirst, kLast, kPrev, kNext };
    Value loop = Value::make_dict();
    DictData& d = loop.dict();
    for (const char* key : {"index", "index0", "revindex", "revindex0", "first", "last",
                            "previtem", "nextitem"}) {
      d.set(key, Value());
    }
    d.set("length", Value(n));
    d.set("depth", Value(1));
    d.set("depth0", Value(0));
    auto position = std::make_shared<size_t>(0);
    d.set("cycle", Value::callable("loop.cycle", [position](Evaluator&, CallArgs& a) {
            if (a.args.empty()) throw_error("TypeError: no items for cycling given");
            return a.args[*position % a.args.size()];
          }));
    for (size_t i = 0; i < n; ++i) {
      budget_.charge(2);
      current_->vars.clear();  // `set` in the body lasts one iteration, as in Jinja
      auto idx = static_cast<int64_t>(i), len = static_cast<int64_t>(n);
      *position = i;
      d.value_at(kIndex) = Value(idx + 1);
      d.value_at(kIndex0) = Value(idx);
      d.value_at(kRevindex) = Value(len - idx);
      d.value_at(kRevindex0) = Value(len - idx - 1);
      d.value_at(kFirst) = Value(i == 0);
      d.value_at(kLast) = Value(i + 1 == n);
      d.value_at(kPrev) = i > 0 ? items[i - 1] : Value::undefined("there is no previous item");
      d.value_at(kNext) = i + 1 < n ? items[i + 1] : Value::undefined("there is no next item");
      assign("loop", loop);
      assign_targets(s.targets, items[i]);
      ran = true;
      if (exec_body(s.body) == Flow::kBreak) break;
    }
  }
  if (!ran && !s.else_body.empty()) return exec_body(s.else_body);
  return Flow::kNormal;
}

void Evaluator::exec_set(const Stmt& s) {
  Value v = eval(*s.expr);
  if (s.attr.empty()) return assign_targets(s.targets, v);
  Value ns = lookup(s.targets[0]);
  if (!ns.is_namespace()) {
    check_defined(ns);
    throw_error("TypeError: cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
  }
  record_mutation(ns);
  ns.dict().set(Value(s.attr), std::move(v));
}

Value Evaluator::apply_filter_chain(const Expr& chain, Value input) {
  if (chain.children[0]) input = apply_filter_chain(*chain.children[0], std::move(input));
  CallArgs args = eval_args(chain, 1);
  return apply_filter(chain.name, std::move(input), args);
}

Value Evaluator::call_macro(const Stmt& macro, const std::vector<std::pair<std::string, Value>>& captured,
                            CallArgs& args) {
  const std::string& name = macro.targets[0];
  if (call_depth_ >= budget_.limits().max_call_depth) {
    throw_error("macro '" + name + "' nested deeper than " +
                    std::to_string(budget_.limits().max_call_depth) + " calls (runaway recursion?)",
                ErrorKind::kLimit);
  }
  if (args.args.size() > macro.params.size()) {
    throw_error("TypeError: macro '" + name + "' takes not more than " +
                std::to_string(macro.params.size()) + " argument(s)");
  }
  std::vector<Value> bound(macro.params.size());
  std::vector<bool> given(macro.params.size(), false);
  for (size_t i = 0; i < args.args.size(); ++i) { bound[i] = args.args[i]; given[i] = true; }
  for (auto& [key, v] : args.kwargs) {
    size_t i = 0;
    while (i < macro.params.size() && macro.params[i].name != key) ++i;
    if (i == macro.params.size()) throw_error("TypeError: macro '" + name + "' takes no keyword argument '" + key + "'");
    if (given[i]) throw_error("TypeError: macro '" + name + "' got multiple values for argument '" + key + "'");
    bound[i] = v;
    given[i] = true;
  }
  ++call_depth_;
  FrameScope scope(*this, &root_);
  for (const auto& [k, v] : captured) assign(k, v);
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const MacroParam& p = macro.params[i];
    if (!given[i]) {
      bound[i] = p.default_value ? eval(*p.default_value)
                                 : Value::undefined("parameter '" + p.name + "' was not provided");
    }
    assign(p.name, bound[i]);
  }
  std::string out = capture(macro.body);
  --call_depth_;
  return Value(std::move(out));
}

}  // namespace folio::jinja
