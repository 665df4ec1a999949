// Decode GEMM timings for the report, run only when FOLIO_CUDA_BENCH=1 (asserts nothing about
// speed): Llama-3-8B's four linear layers (bf16) at decode batch m = 1..256, cuBLASLt's first
// heuristic algorithm against the autotuned plan, gemm_wgmma and cublasGemmEx. Each run is timed alone with CUDA events after a
// 256 MiB read that evicts L2 (in a real forward the other layers' weights do), median of 20.
// Reads, not a memset: a write eviction leaves ~50 MB of dirty lines whose write-back the timed
// GEMM pays (~9 us, which understated every small shape here before 2026-11-25).
// TB/s counts the weight bytes only (n·k·2), the floor of what a decode GEMM must read.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_wgmma.h"
#include "backend/cuda/skinny_gemm.h"
#include "bench_util.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using bench::bench_enabled;
using bench::kLlamaLayers;
using bench::Layer;
using bench::Operands;

// L2 eviction by reading `flush` (a [n, 8192] bf16 matrix) with a GEMV into `flush_xy`.
struct Evictor {
  DeviceBuffer w, xy;
  void run(cudaStream_t s) {
    const int n = static_cast<int>(w.bytes() / 2 / 8192);
    auto* xy_bytes = static_cast<char*>(xy.data());
    EXPECT_TRUE(skinny_gemm(DType::kBF16, xy_bytes, w.data(), xy_bytes + 8192 * 2, 1, n, 8192,
                            false, s)
                    .ok());
  }
};

// Median microseconds of one launch of `op` on s, L2 evicted before each run.
float median_us(const std::function<Status()>& op, Evictor& flush, cudaStream_t s) {
  constexpr int kRuns = 20;
  std::vector<cudaEvent_t> ev(2 * kRuns);
  for (auto& e : ev) EXPECT_EQ(cudaEventCreate(&e), cudaSuccess);
  for (int r = 0; r < kRuns; ++r) {
    flush.run(s);
    EXPECT_EQ(cudaEventRecord(ev[2 * r], s), cudaSuccess);
    EXPECT_TRUE(op().ok());
    EXPECT_EQ(cudaEventRecord(ev[2 * r + 1], s), cudaSuccess);
  }
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  std::vector<float> us(kRuns);
  for (int r = 0; r < kRuns; ++r) {
    EXPECT_EQ(cudaEventElapsedTime(&us[r], ev[2 * r], ev[2 * r + 1]), cudaSuccess);
    us[r] *= 1000.f;
  }
  for (auto e : ev) cudaEventDestroy(e);
  std::sort(us.begin(), us.end());
  return us[kRuns / 2];
}

// The same for one matmul_nt (the plan already exists).
float median_us(Gemm& g, const void* x, const void* w, void* y, int m, int n, int k, bool acc,
                Evictor& flush, cudaStream_t s) {
  return median_us([&] { return g.matmul_nt(DType::kBF16, x, w, y, m, n, k, acc, s); }, flush, s);
}

// The L2 evictor (a 256 MiB weight read) and the stream every bench here times on.
struct Rig {
  Evictor flush;
  cudaStream_t stream = nullptr;
  ~Rig() {
    if (stream) cudaStreamDestroy(stream);
  }
  // Null (after a test failure) when the buffers or the stream cannot be had.
  static std::unique_ptr<Rig> create() {
    auto w = DeviceBuffer::allocate(256u << 20);
    auto xy = DeviceBuffer::allocate(size_t{2} * (8192 + (128u << 20) / 8192));
    EXPECT_TRUE(w.ok() && xy.ok());
    if (!w.ok() || !xy.ok()) return nullptr;
    std::unique_ptr<Rig> rig(new Rig{Evictor{std::move(*w), std::move(*xy)}});
    EXPECT_EQ(cudaStreamCreateWithFlags(&rig->stream, cudaStreamNonBlocking), cudaSuccess);
    return rig->stream ? std::move(rig) : nullptr;
  }
};

TEST(GemmBench, LlamaDecodeShapesHeuristicVsTuned) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the decode GEMMs";
  const auto& layers = kLlamaLayers;
  const int ms[] = {1, 8, 32, 128, 256};
  std::mt19937 rng(7);
  auto off = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  auto on = Gemm::create(32u << 20, GemmAutotune::kOn, 0);
  ASSERT_TRUE(off.ok() && on.ok());
  auto rig = Rig::create();
  ASSERT_TRUE(rig);
  Evictor& flush = rig->flush;
  cudaStream_t s = rig->stream;
  std::printf("%-8s %4s %6s %6s | %10s %7s | %10s %7s | %6s %9s\n", "layer", "m", "n", "k",
              "heur us", "TB/s", "tuned us", "TB/s", "gain", "tune ms");
  for (const Layer& L : layers) {
    const int max_m = ms[std::size(ms) - 1];
    Operands ops = Operands::random(L, max_m, rng);
    ASSERT_TRUE(ops.w.ok() && ops.x.ok() && ops.y.ok());
    const auto& w = ops.w;
    const auto& x = ops.x;
    const auto& y = ops.y;
    for (int m : ms) {
      ASSERT_TRUE((*off)->prepare(DType::kBF16, x->data(), w->data(), m, L.n, L.k, L.acc, s).ok());
      const auto t0 = std::chrono::steady_clock::now();
      const Status st = (*on)->prepare(DType::kBF16, x->data(), w->data(), m, L.n, L.k, L.acc, s);
      const double tune_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ASSERT_TRUE(st.ok()) << st.to_string();
      const float h =
          median_us(**off, x->data(), w->data(), y->data(), m, L.n, L.k, L.acc, flush, s);
      const float t =
          median_us(**on, x->data(), w->data(), y->data(), m, L.n, L.k, L.acc, flush, s);
      const double bytes = 2.0 * L.n * L.k;
      std::printf("%-8s %4d %6d %6d | %10.1f %7.2f | %10.1f %7.2f | %5.2fx %9.1f\n", L.name, m, L.n,
                  L.k, h, bytes / (h * 1e6), t, bytes / (t * 1e6), h / t, tune_ms);
    }
  }
  std::printf("tuned plans: %zu, of which %zu chose another algorithm than the heuristic's first\n",
              (*on)->tuned_plans(), (*on)->retuned_plans());
}

// gemm_wgmma (gemm_wgmma.h) against cuBLASLt's first heuristic algorithm at the mid-batch decode
// sizes, with the same eviction; TFLOP/s beside TB/s (m 256 sits at the H100's ridge).
TEST(GemmBench, WgmmaAgainstCublasLt) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the decode GEMMs";
  alignas(16) static char probe[16];
  if (!gemm_wgmma_fits(DType::kBF16, 1, 128, 64, probe, probe, probe))
    GTEST_SKIP() << "gemm_wgmma needs an sm_90 device";
  const int ms[] = {64, 128, 192, 256, 384, 512};
  std::mt19937 rng(7);
  auto lt = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  ASSERT_TRUE(lt.ok());
  const size_t ws_bytes = gemm_wgmma_workspace_bytes(gemm_wgmma_max_blocks());
  auto ws = DeviceBuffer::allocate(ws_bytes);
  ASSERT_TRUE(ws.ok());
  ASSERT_EQ(cudaMemset(ws->data(), 0, ws_bytes), cudaSuccess);
  auto rig = Rig::create();
  ASSERT_TRUE(rig);
  Evictor& flush = rig->flush;
  cudaStream_t s = rig->stream;
  std::printf("wgmma blocks %d\n%-8s %4s %6s %6s | %9s %6s %7s | %9s %6s %7s | %6s\n",
              gemm_wgmma_max_blocks(), "layer", "m", "n", "k", "lt us", "TB/s", "TFLOP/s",
              "wgmma us", "TB/s", "TFLOP/s", "gain");
  for (const Layer& L : kLlamaLayers) {
    const int max_m = ms[std::size(ms) - 1];
    Operands ops = Operands::random(L, max_m, rng);
    ASSERT_TRUE(ops.w.ok() && ops.x.ok() && ops.y.ok());
    const auto& w = ops.w;
    const auto& x = ops.x;
    const auto& y = ops.y;
    for (int m : ms) {
      ASSERT_TRUE((*lt)->prepare(DType::kBF16, x->data(), w->data(), m, L.n, L.k, L.acc, s).ok());
      const float a = median_us(**lt, x->data(), w->data(), y->data(), m, L.n, L.k, L.acc, flush, s);
      const float b = median_us(
          [&] {
            return gemm_wgmma(DType::kBF16, x->data(), w->data(), y->data(), m, L.n, L.k, L.acc,
                              ws->data(), ws->bytes(), s);
          },
          flush, s);
      const double bytes = 2.0 * L.n * L.k, flop = 2.0 * m * L.n * L.k;
      std::printf("%-8s %4d %6d %6d | %9.1f %6.2f %7.1f | %9.1f %6.2f %7.1f | %5.2fx\n", L.name, m,
                  L.n, L.k, a, bytes / (a * 1e6), flop / (a * 1e6), b, bytes / (b * 1e6),
                  flop / (b * 1e6), a / b);
    }
  }
}

// cuBLAS's own entry point (cublasGemmEx, CUBLAS_GEMM_DEFAULT: cuBLAS picks the kernel by its own
// heuristics) against Gemm's cuBLASLt first choice, bf16 in and out, over decode batches and
// prefill chunks. LogitsGemm takes gemmex because it was 2x faster there at m 128 (logits_gemm.h);
// this asks whether the layer products would gain the same.
TEST(GemmBench, GemmExAgainstCublasLt) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the GEMMs";
  const int ms[] = {64, 128, 256, 512, 2048, 16384};
  std::mt19937 rng(7);
  auto lt = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  ASSERT_TRUE(lt.ok());
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  auto rig = Rig::create();
  ASSERT_TRUE(rig);
  Evictor& flush = rig->flush;
  cudaStream_t s = rig->stream;
  ASSERT_EQ(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
  std::printf("%-8s %5s %6s %6s | %9s %7s | %9s %7s | %6s\n", "layer", "m", "n", "k", "lt us",
              "TFLOP/s", "gemmex us", "TFLOP/s", "gain");
  for (const Layer& L : kLlamaLayers) {
    const int max_m = ms[std::size(ms) - 1];
    Operands ops = Operands::random(L, max_m, rng);
    ASSERT_TRUE(ops.w.ok() && ops.x.ok() && ops.y.ok());
    const void* w = ops.w->data();
    const void* x = ops.x->data();
    void* y = ops.y->data();
    for (int m : ms) {
      ASSERT_TRUE((*lt)->prepare(DType::kBF16, x, w, m, L.n, L.k, L.acc, s).ok());
      const float a = median_us(**lt, x, w, y, m, L.n, L.k, L.acc, flush, s);
      const float alpha = 1.f, beta = L.acc ? 1.f : 0.f;
      const float b = median_us(
          [&] {
            const cublasStatus_t st = cublasGemmEx(
                h, CUBLAS_OP_T, CUBLAS_OP_N, L.n, m, L.k, &alpha, w, CUDA_R_16BF, L.k, x,
                CUDA_R_16BF, L.k, &beta, y, CUDA_R_16BF, L.n, CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT);
            return st == CUBLAS_STATUS_SUCCESS ? Status() : internal_error("cublasGemmEx failed");
          },
          flush, s);
      const double flop = 2.0 * m * L.n * L.k;
      std::printf("%-8s %5d %6d %6d | %9.1f %7.1f | %9.1f %7.1f | %5.2fx\n", L.name, m, L.n, L.k, a,
                  flop / (a * 1e6), b, flop / (b * 1e6), a / b);
    }
  }
  cublasDestroy(h);
}

// A prefill chunk's products at m 16384 in one launch against 8 launches of 2048 rows each (the
// rows are independent), timed as one span: whether cuBLASLt's kernel for the huge m or the
// clocks under a long launch make m 16384 slower per FLOP than m 2048.
TEST(GemmBench, LargeMInOneLaunchOrRowChunks) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the GEMMs";
  constexpr int kM = 16384, kChunk = 2048;
  std::mt19937 rng(7);
  auto lt = Gemm::create(32u << 20, GemmAutotune::kOff, 0);
  ASSERT_TRUE(lt.ok());
  auto rig = Rig::create();
  ASSERT_TRUE(rig);
  Evictor& flush = rig->flush;
  cudaStream_t s = rig->stream;
  std::printf("%-8s %6s %6s | %10s %7s | %12s %7s | %6s\n", "layer", "n", "k", "one us",
              "TFLOP/s", "8 chunks us", "TFLOP/s", "gain");
  for (const Layer& L : kLlamaLayers) {
    Operands ops = Operands::random(L, kM, rng);
    ASSERT_TRUE(ops.w.ok() && ops.x.ok() && ops.y.ok());
    const char* x = static_cast<const char*>(ops.x->data());
    char* y = static_cast<char*>(ops.y->data());
    const void* w = ops.w->data();
    const float one = median_us(**lt, x, w, y, kM, L.n, L.k, L.acc, flush, s);
    const float chunks = median_us(
        [&] {
          for (int r = 0; r < kM; r += kChunk) {
            Status st = (*lt)->matmul_nt(DType::kBF16, x + size_t{2} * r * L.k, w,
                                         y + size_t{2} * r * L.n, kChunk, L.n, L.k, L.acc, s);
            if (!st.ok()) return st;
          }
          return Status();
        },
        flush, s);
    const double flop = 2.0 * kM * L.n * L.k;
    std::printf("%-8s %6d %6d | %10.1f %7.1f | %12.1f %7.1f | %5.2fx\n", L.name, L.n, L.k, one,
                flop / (one * 1e6), chunks, flop / (chunks * 1e6), one / chunks);
  }
}

}  // namespace
}  // namespace folio::cuda
