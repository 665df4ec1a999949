// FOLIO_CHECK: invariants that only a bug can break. On failure it prints the condition, the
// place and an optional message, then aborts. Never use it for user input: that gets a Status.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace folio::detail {
[[noreturn]] inline void check_failed(const char* cond, const char* file, int line,
                                      const char* msg) {
  std::fprintf(stderr, "folio: CHECK failed at %s:%d: %s%s%s\n", file, line, cond,
               msg[0] ? " — " : "", msg);
  std::abort();
}
}  // namespace folio::detail

#define FOLIO_CHECK(cond, ...)                                                          \
  do {                                                                                  \
    if (!(cond)) ::folio::detail::check_failed(#cond, __FILE__, __LINE__, "" __VA_ARGS__); \
  } while (0)
