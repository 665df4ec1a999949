#include "base/host_copy_rate.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace folio {

Result<double> measure_host_copy_gbps(size_t bytes, int runs) {
  if (bytes < (size_t{1} << 20) || runs < 1)
    return invalid_argument("measure_host_copy_gbps: at least 1 MiB and one run");
  std::unique_ptr<char[]> src(new (std::nothrow) char[bytes]);
  std::unique_ptr<char[]> dst(new (std::nothrow) char[bytes]);
  if (!src || !dst)
    return resource_exhausted("measure_host_copy_gbps: cannot allocate 2 x " +
                              std::to_string(bytes >> 20) + " MiB");
  std::memset(src.get(), 1, bytes);
  std::memcpy(dst.get(), src.get(), bytes);  // faults dst in; not timed
  std::vector<double> seconds;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.get(), src.get(), bytes);
    const auto t1 = std::chrono::steady_clock::now();
    seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    // The next copy's source depends on this one's result, so no copy can be elided.
    src[static_cast<size_t>(r)] = static_cast<char>(dst[bytes - 1 - static_cast<size_t>(r)] + 1);
  }
  std::nth_element(seconds.begin(), seconds.begin() + runs / 2, seconds.end());
  const double median = seconds[static_cast<size_t>(runs / 2)];
  if (median <= 0) return internal_error("measure_host_copy_gbps: the clock did not advance");
  return 2.0 * static_cast<double>(bytes) / median / 1e9;
}

}  // namespace folio
