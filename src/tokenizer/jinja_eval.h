// Evaluator: runs a parsed template (jinja_ast.h) against variables and produces text.
//
// One Evaluator serves one render on one thread (after an error it is not reused). Variables live in a chain of frames: the root
// frame holds the render's variables and globals; each for loop and macro call pushes a frame,
// so `set` inside a loop stays inside it (as in Jinja, hence namespace()). Everything is charged
// to a Budget (jinja_budget.h); errors throw JinjaError with the innermost node's line filled in.
#pragma once

#include <ctime>
#include <functional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_budget.h"
#include "tokenizer/jinja_value.h"

namespace folio::jinja {

class Evaluator {
 public:
  using Clock = std::function<std::tm()>;  // local time for strftime_now
  Evaluator(const Limits& limits, Clock clock);
  // Empties every container the template mutated (see record_mutation).
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Renders `body`; `vars` (a dict) seeds the root frame over the globals.
  std::string render(const Body& body, const Value& vars);

  Value eval(const Expr& e);
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, Value input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);
  Budget& budget() { return budget_; }
  // Values are reference counted, so a template can build a cycle (`l.append(l)`,
  // `set ns.me = ns`), and every cycle runs through a mutated list or namespace. They are
  // recorded here and emptied when the render ends, so no render leaks memory. Consequence for
  // callers of Template::render: containers in `vars` that the template mutates end up empty.
  void record_mutation(const Value& container);
  std::tm now() const { return clock_(); }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  struct Frame {
    Frame* parent = nullptr;
    std::vector<std::pair<std::string, Value>> vars;
  };
  class FrameScope;

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_stmt(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  std::string capture(const Body& body);
  Value apply_filter_chain(const Expr& chain, Value input);
  Value call_macro(const Stmt& macro, const std::vector<std::pair<std::string, Value>>& captured,
                   CallArgs& args);
  void write(std::string_view text);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  void assign_targets(const std::vector<std::string>& targets, const Value& v);

  Value eval_expr(const Expr& e);
  Value eval_compare(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first_child);

  Budget budget_;
  Clock clock_;
  Frame root_;
  Frame* current_ = &root_;
  std::vector<Value> mutated_;
  std::unordered_set<const void*> mutated_ids_;
  std::vector<std::string> outputs_;  // output stack: macro calls and block captures push one
  int call_depth_ = 0;
};

// Attribute and item access with Jinja's semantics (methods first for attributes, items first
// for subscripts; missing ones give an undefined carrying Jinja's message).
Value get_attribute(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python binary operators (+ - * / // % **) and `~`.
Value binary_op(const std::string& op, const Value& a, const Value& b);

}  // namespace folio::jinja
