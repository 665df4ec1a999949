// parallel_for: splits [0, n) into chunks run on a process-wide pool of worker threads.
//
// Why not OpenMP: libgomp's workers spin after each region, and next to OpenBLAS's own threads
// on a small machine that spinning starved the BLAS threads (a test went from 3 s to 170 s).
// These workers sleep on a condition variable between jobs. The caller runs chunks too and
// returns when all are done. Not reentrant: a body must not call parallel_for itself (nested
// calls run serially).
#pragma once

#include <cstdint>
#include <functional>

namespace folio {

// Runs body(begin, end) over chunks of at least `grain` items. Serial when n <= grain.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

// Worker threads plus the caller.
int parallel_width();

}  // namespace folio
