#include "tokenizer/jinja_budget.h"

#include <string>

#include "tokenizer/jinja_error.h"

namespace folio::jinja {
namespace {
thread_local Budget* g_active = nullptr;
}  // namespace

void Budget::charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) {
    throw_error("template exceeded its step budget of " + std::to_string(limits_.max_steps) +
                    " (an endless or very large loop?)",
                ErrorKind::kLimit);
  }
}

void Budget::check_string_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    throw_error("string of " + std::to_string(bytes) + " bytes exceeds the output cap of " +
                    std::to_string(limits_.max_output_bytes) + " bytes",
                ErrorKind::kLimit);
  }
}

void Budget::check_list_size(size_t items) const {
  if (items > limits_.max_items) {
    throw_error("list of " + std::to_string(items) + " items exceeds the cap of " +
                    std::to_string(limits_.max_items),
                ErrorKind::kLimit);
  }
}

Budget* active_budget() { return g_active; }

ActiveBudgetScope::ActiveBudgetScope(Budget* budget) : previous_(g_active) { g_active = budget; }
ActiveBudgetScope::~ActiveBudgetScope() { g_active = previous_; }

void charge(int64_t steps, size_t bytes) {
  if (g_active) g_active->charge(steps + static_cast<int64_t>(bytes / 16));
}
void check_string_size(size_t bytes) {
  if (g_active) g_active->check_string_size(bytes);
}
void check_list_size(size_t items) {
  if (g_active) g_active->check_list_size(items);
}
int max_data_depth() { return g_active ? g_active->limits().max_data_depth : 128; }

}  // namespace folio::jinja
