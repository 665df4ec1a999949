// FOLIO_CUDA_BENCH=1 only: decode_mlp (one persistent launch) against the four launches it
// replaces, on Llama-3-8B's shapes (H 4096, I 14336), 20 back-to-back calls each over 4 layers'
// weights (1.5 GB: nothing stays in L2), microseconds per layer and the weight stream's TB/s.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "backend/cuda/decode_mlp.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/skinny_gemm.h"
#include "bench_util.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using bench::bench_enabled;

TEST(DecodeMlpBench, Llama8B) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time decode_mlp";
  constexpr int H = 4096, I = 14336, A = 4096, kLayers = 4, kCalls = 20;
  const DType dt = DType::kBF16;
  const auto device = device_info(0);
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  const size_t layer_elems = static_cast<size_t>(H) * A + 2ull * I * H + static_cast<size_t>(H) * I;
  auto weights = DeviceBuffer::allocate(2 * layer_elems * kLayers);
  auto vecs = DeviceBuffer::allocate(2 * (4 * H + 2 * I) + 64);
  auto sync = DeviceBuffer::allocate(sizeof(unsigned) * kDecodeMlpSyncWords);
  ASSERT_TRUE(weights.ok() && vecs.ok() && sync.ok());
  // Small values everywhere (bf16 0x3c00 ~ 0.0078): finite sums, the time is what counts.
  FOLIO_ASSERT_OK(memset_async(weights->data(), 0x3c, weights->bytes()));
  FOLIO_ASSERT_OK(memset_async(vecs->data(), 0x3c, vecs->bytes()));
  FOLIO_ASSERT_OK(memset_async(sync->data(), 0, sync->bytes()));
  auto* w0 = static_cast<uint16_t*>(weights->data());
  auto* v = static_cast<uint16_t*>(vecs->data());
  uint16_t *attn = v, *x = v + H, *norm = v + 2 * H, *normed = v + 3 * H, *act = v + 4 * H;
  auto layer = [&](int l) { return w0 + static_cast<size_t>(l % kLayers) * layer_elems; };
  // Two untimed calls first (module loading, shared-memory opt-in), then kCalls between events.
  auto time_us = [&](auto&& body) -> double {
    body(0);
    body(1);
    cudaEvent_t e0, e1;
    EXPECT_EQ(cudaEventCreate(&e0), cudaSuccess);
    EXPECT_EQ(cudaEventCreate(&e1), cudaSuccess);
    EXPECT_EQ(cudaEventRecord(e0, nullptr), cudaSuccess);
    for (int c = 0; c < kCalls; ++c) body(c);
    EXPECT_EQ(cudaEventRecord(e1, nullptr), cudaSuccess);
    EXPECT_EQ(cudaEventSynchronize(e1), cudaSuccess);
    float ms = 0;
    EXPECT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return 1e3 * ms / kCalls;
  };
  const double fused = time_us([&](int c) {
    const uint16_t* w = layer(c);
    DecodeMlpParams p;
    p.dtype = dt;
    p.hidden = H;
    p.inter = I;
    p.attn_width = A;
    p.attn = attn;
    p.w_o = w;
    p.post_norm = norm;
    p.eps = 1e-5f;
    p.w_gate_up = w + static_cast<size_t>(H) * A;
    p.w_down = w + static_cast<size_t>(H) * A + 2ull * I * H;
    p.x = x;
    p.act = act;
    p.sync = static_cast<unsigned*>(sync->data());
    EXPECT_TRUE(decode_mlp(p, *device, nullptr).ok());
  });
  const double chain = time_us([&](int c) {
    const uint16_t* w = layer(c);
    EXPECT_TRUE(skinny_gemm(dt, attn, w, x, 1, H, A, true, nullptr).ok());
    EXPECT_TRUE(rms_norm(dt, x, norm, normed, 1, H, 1e-5f, nullptr).ok());
    EXPECT_TRUE(skinny_gemm_silu(dt, normed, w + static_cast<size_t>(H) * A, act, 1, I, H,
                                 nullptr).ok());
    EXPECT_TRUE(skinny_gemm(dt, act, w + static_cast<size_t>(H) * A + 2ull * I * H, x, 1, H, I,
                            true, nullptr).ok());
  });
  const double bytes = 2.0 * layer_elems;
  std::printf("decode_mlp Llama-3-8B layer: fused %.1f us (%.2f TB/s), four launches %.1f us "
              "(%.2f TB/s)\n", fused, bytes / fused * 1e-6, chain, bytes / chain * 1e-6);
}

}  // namespace
}  // namespace folio::cuda
