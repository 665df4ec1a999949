// The double-precision product the GEMM tests compare against: y = x · w^T (+ y0), x [m, k],
// w [n, k], y [m, n], row-major.
#pragma once

#include <vector>

namespace folio::cuda::testing {

inline std::vector<float> gemm_reference(const std::vector<float>& x, const std::vector<float>& w,
                                         const std::vector<float>* y0, int m, int n, int k) {
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = y0 ? (*y0)[static_cast<size_t>(i) * n + j] : 0.0;
      for (int e = 0; e < k; ++e)
        acc += static_cast<double>(x[static_cast<size_t>(i) * k + e]) *
               w[static_cast<size_t>(j) * k + e];
      y[static_cast<size_t>(i) * n + j] = static_cast<float>(acc);
    }
  return y;
}

}  // namespace folio::cuda::testing
