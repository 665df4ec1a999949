// Resource limits for rendering untrusted templates, and the per-render budget that enforces them.
//
// A chat template comes from a downloaded model folder, so it is untrusted code: a render must
// end with an error, never hang or exhaust memory. Every statement, expression, loop iteration
// and every byte or item a builtin produces is charged against a step budget; strings are capped
// at the output cap and lists at max_items; call and data nesting are capped too. The active
// budget is thread-local for the duration of one render (value operations deep inside builtins
// charge it without threading a parameter through every call); outside a render it is a no-op.
#pragma once

#include <cstddef>
#include <cstdint>

namespace folio::jinja {

struct Limits {
  int64_t max_steps = 4'000'000;          // ~0.1-0.5 s of work
  size_t max_output_bytes = 1u << 20;     // rendered text, and any single string value
  size_t max_items = 1'000'000;           // any single list (range(), *, +, append)
  int max_call_depth = 64;                // macro recursion
  int max_data_depth = 128;               // nesting while printing/comparing/serializing data
  int max_parse_depth = 200;              // expression/statement nesting in the source
};

class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}
  const Limits& limits() const { return limits_; }
  int64_t steps() const { return steps_; }
  // Throws JinjaError(kLimit) once the step budget is spent.
  void charge(int64_t steps);
  void check_string_size(size_t bytes) const;
  void check_list_size(size_t items) const;

 private:
  Limits limits_;
  int64_t steps_ = 0;
};

// The budget of the render running on this thread, or nullptr.
Budget* active_budget();

// Installs a budget as the thread's active one for its lifetime.
class ActiveBudgetScope {
 public:
  explicit ActiveBudgetScope(Budget* budget);
  ~ActiveBudgetScope();
  ActiveBudgetScope(const ActiveBudgetScope&) = delete;
  ActiveBudgetScope& operator=(const ActiveBudgetScope&) = delete;

 private:
  Budget* previous_;
};

// Charges the active budget, if any: `steps` plus one step per 16 bytes produced.
void charge(int64_t steps, size_t bytes = 0);
// Checks a string/list about to be created against the active budget's caps.
void check_string_size(size_t bytes);
void check_list_size(size_t items);
// Data nesting cap of the active budget (a default when none is active).
int max_data_depth();

}  // namespace folio::jinja
