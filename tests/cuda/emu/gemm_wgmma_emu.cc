// Runs the Hopper GEMM's device code (src/backend/cuda/gemm_wgmma_kernel.cuh) on the SIMT
// emulator (simt_emu.h; wgmma, TMA and mbarriers from shim/, flags from shim gpu_flag_ptx.cuh)
// against a double-precision reference: bf16 and fp16, m below, at and above the 256-row tile,
// n of 1-3 column tiles, accumulate on and off, and grids of 1-7 blocks that split the tiles'
// k iterations every way stream-K can (a tile finished by the next block, a tile spread over
// three or more blocks, blocks with one iteration). Each case runs twice: TMA copies landing as
// late as the protocol allows (lazy), then at issue with warpgroup 0 lagging (eager), both under
// the happens-before race check. Also checks that every flag is back at zero. Built and run by
// scripts/emu-gemm-wgmma.sh; exits non-zero on any miss.
// clang-format off
#include "simt_emu.h"  // first: the kernel's headers use its shims
#include "backend/cuda/gemm_wgmma_kernel.cuh"
#include "backend/cuda/tensor_map.h"
// clang-format on

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

using namespace folio::cuda::gemm_wgmma_detail;
using folio::cuda::DType;

template <typename T>
void kernel(Args a, Maps maps) {
  gemm_wgmma_body<T>(a, maps, emu::smem());
}

struct Case {
  DType dt;
  int m, n, k, blocks;
  bool accumulate;
};

template <typename T>
float to_f(T v) {
  return static_cast<float>(v);
}

template <typename T>
bool run(const Case& c, std::mt19937& rng, double* err) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<T> x(static_cast<size_t>(c.m) * c.k), w(static_cast<size_t>(c.n) * c.k),
      y(static_cast<size_t>(c.m) * c.n);
  for (auto& v : x) v = T(u(rng));
  for (auto& v : w) v = T(u(rng));
  for (auto& v : y) v = T(u(rng));
  const std::vector<T> y0 = y;
  Args a{};
  a.y = y.data();
  a.m = c.m;
  a.n = c.n;
  a.k = c.k;
  a.accumulate = c.accumulate;
  a.m_tiles = (c.m + BM - 1) / BM;
  a.k_iters = c.k / BK;
  a.total_iters = static_cast<int64_t>(a.m_tiles) * (c.n / BN) * a.k_iters;
  a.x_box_rows = a.m_tiles == 1 ? (c.m + 63) / 64 * 64 : BM;
  std::vector<int> flags(c.blocks, 0);
  std::vector<float> partials(static_cast<size_t>(c.blocks) * kPartialFloats, NAN);
  a.flags = flags.data();
  a.partials = partials.data();
  Maps maps;
  if (!folio::cuda::encode_rows_map(&maps.x, c.dt, x.data(), c.m, 1, c.k, 1, a.x_box_rows).ok() ||
      !folio::cuda::encode_rows_map(&maps.w, c.dt, w.data(), c.n, 1, c.k, 1, BN).ok())
    return false;
  emu::launch(kernel<T>, dim3(c.blocks), kThreads, kSmemBytes, a, maps);
  double worst = 0, scale = 0;
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      double ref = c.accumulate ? to_f(y0[static_cast<size_t>(i) * c.n + j]) : 0.0;
      for (int kk = 0; kk < c.k; ++kk)
        ref += static_cast<double>(to_f(x[static_cast<size_t>(i) * c.k + kk])) *
               to_f(w[static_cast<size_t>(j) * c.k + kk]);
      const double got = to_f(y[static_cast<size_t>(i) * c.n + j]);
      worst = std::max(worst, std::fabs(got - ref));
      if (!std::isfinite(got)) worst = INFINITY;
      scale = std::max(scale, std::fabs(ref));
    }
  *err = worst / scale;
  for (int f : flags)
    if (f != 0) {
      std::printf("a flag left at %d\n", f);
      return false;
    }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const DType bf = DType::kBF16, fp = DType::kFP16;
  const std::vector<Case> cases = {
      {bf, 256, 256, 512, 3, false},  // tile 0 finished by block 1, tile 1 by block 2
      {fp, 200, 384, 256, 5, true},   // rows past m, accumulate
      {bf, 300, 128, 192, 4, false},  // two row tiles of one column tile
      {bf, 1, 256, 128, 1, true},     // one block walks both tiles
      {bf, 64, 128, 1024, 7, false},  // one tile over seven blocks
      {fp, 129, 256, 64, 2, false},   // one iteration per tile
      {bf, 256, 128, 1024, 2, true},  // both rings wrap several times
  };
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;
  int failures = 0;
  std::mt19937 rng(1);
  for (int pass = 0; pass < 2; ++pass) {
    emu::copy_policy = pass == 0 ? emu::CopyPolicy::kLazy : emu::CopyPolicy::kEager;
    emu::lagging_group = pass == 0 ? -1 : 0;
    emu::race_check = true;
    for (size_t i = 0; i < cases.size(); ++i) {
      if (only >= 0 && static_cast<int>(i) != only) continue;
      const Case& c = cases[i];
      double err = INFINITY;
      const bool ran = c.dt == bf ? run<__nv_bfloat16>(c, rng, &err) : run<__half>(c, rng, &err);
      // Output rounding: bf16 2^-9 and fp16 2^-12 relative, of the largest |y| at most.
      const bool ok = ran && err < (c.dt == bf ? 8e-3 : 1e-3);
      failures += !ok;
      std::printf("%s %-5s case %zu %s m%d n%d k%d blocks %d%s: max err / max |y| %.3g\n",
                  ok ? "ok  " : "FAIL", pass == 0 ? "lazy" : "eager", i,
                  c.dt == bf ? "bf16" : "fp16", c.m, c.n, c.k, c.blocks,
                  c.accumulate ? " accumulate" : "", err);
      std::fflush(stdout);
    }
  }
  return failures == 0 ? 0 : 1;
}
