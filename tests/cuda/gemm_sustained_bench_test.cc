// cuBLASLt's candidates for the prefill products under sustained load, run only when
// FOLIO_CUDA_BENCH=1 (prints figures, asserts nothing about speed).
//
// The protocol production uses under FOLIO_GEMM_TUNE_LARGE_M (gemm_sustained_tune.h: why, and how
// the candidates are timed), run on Llama-3-8B's four products at m 16384 with random operands,
// printing every candidate's median launch beside the heuristic's first. FOLIO_BENCH_SUSTAINED_M
// sets m (default 16384); at decode m (B2's 256 runs power-capped too) only gate_up and down
// mean much: the smaller weights stay in L2 across a burst, which a real step never allows.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "backend/cuda/device_memory.h"
#include "backend/cuda/gemm_sustained_tune.h"
#include "bench_util.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using bench::bench_enabled;
using bench::kLlamaLayers;
using bench::Layer;
using bench::Operands;

int bench_m() {
  const char* e = std::getenv("FOLIO_BENCH_SUSTAINED_M");
  const int m = e ? std::atoi(e) : 0;
  return m > 0 ? m : 16384;
}

TEST(GemmBench, LargeMCandidatesSustained) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time cuBLASLt's candidates";
  constexpr size_t kWorkspace = 32u << 20;  // Gemm::create's default
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  auto ws = DeviceBuffer::allocate(kWorkspace);
  ASSERT_TRUE(ws.ok());
  std::mt19937 rng(5);
  const cudaStream_t s = nullptr;  // the legacy stream, as the engine's forward
  const int m = bench_m();
  for (const Layer& sh : kLlamaLayers) {
    Operands ops = Operands::random(sh, m, rng);
    ASSERT_TRUE(ops.ok());
    LtPlan plan;
    ASSERT_TRUE(plan.describe_nt(CUDA_R_16BF, CUDA_R_16BF, m, sh.n, sh.k).ok());
    const LtProblem prob{handle, plan.desc, plan.a, plan.b, plan.c, kWorkspace};
    auto cands = heuristic_algos(prob, kSustainedCandidates);
    ASSERT_TRUE(cands.ok() && !cands->empty());
    const TuneBuffers buf{ops.w->data(), ops.x->data(), ops.y->data(), ws->data(), nullptr, 0};
    auto r = time_candidates_sustained(prob, *cands, buf, 1.f, sh.acc ? 1.f : 0.f, s);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const double flop = 2.0 * m * sh.n * sh.k;
    std::printf("%s m %d n %d k %d: %zu candidates, median of %d launches each; keeps #%d\n",
                sh.name, m, sh.n, sh.k, cands->size(), (kSustainedRounds - 1) * kSustainedBurst,
                r->chosen);
    for (size_t c = 0; c < cands->size(); ++c) {
      const float med = r->median_us[c];
      std::printf("  #%zu %9.1f us %6.1f TFLOP/s %5.2fx of #0  (%s)\n", c, med, flop / (med * 1e6),
                  r->median_us[0] / med, algo_config((*cands)[c].algo).c_str());
    }
    std::fflush(stdout);
  }
  cublasLtDestroy(handle);
}

}  // namespace
}  // namespace folio::cuda
