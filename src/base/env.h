// Integer settings read from the environment (FOLIO_* measuring and tuning switches), validated
// the same way everywhere: a malformed or out-of-range value is an error naming the variable.
#pragma once

#include "base/status.h"

namespace folio {

// The integer in `name`, or `fallback` when it is unset or empty; an error when it is not a
// whole integer within [lo, hi].
Result<int> env_int(const char* name, int fallback, int lo, int hi);

}  // namespace folio
