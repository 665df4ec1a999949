#include "base/env.h"

#include <cstdlib>
#include <string>

namespace folio {

Result<int> env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi)
    return invalid_argument(std::string(name) + "=" + v + " (expected an integer in [" +
                            std::to_string(lo) + ", " + std::to_string(hi) + "])");
  return static_cast<int>(x);
}

}  // namespace folio
