// Per-call timings of the per-layer small ops, old kernels vs new, for the Llama-3-8B shape
// (hidden 4096, 32 q / 8 kv heads, head_dim 128) at T = 1, 256 and 2048, plus the Qwen3-style chain
// with qk norm. Runs only with FOLIO_CUDA_BENCH=1 and asserts nothing about speed. Each figure is
// the median over 11 rounds of (time of 100 back-to-back calls) / 100, CUDA events, bf16.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/kv_cache_ops.h"
#include "backend/cuda/qkv_post.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/split_qkv.h"
#include "bench_util.h"
#include "small_ops_test_util.h"

namespace folio::cuda {
namespace {

using bench::bench_enabled;

using testing::DevTensor;

template <typename F>
double per_call_us(F&& f) {
  constexpr int kCalls = 100;
  for (int i = 0; i < 10; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int r = 0; r < 11; ++r) {
    cudaEventRecord(a);
    for (int i = 0; i < kCalls; ++i) f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0 / kCalls;
}

TEST(SmallOpsBench, OldVsNewPerCallMicroseconds) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the small ops";
  const DType dt = DType::kBF16;
  const int H = 4096, nh = 32, nkv = 8, hd = 128, qs = nh * hd, kvs = nkv * hd;
  std::mt19937 rng(5);
  for (int T : {1, 256, 2048, 16384}) {
    auto x = DevTensor::upload(dt, testing::random_vec(static_cast<size_t>(T) * H, rng));
    auto w = DevTensor::upload(dt, testing::random_vec(H, rng, 0.5f, 1.5f));
    auto y = DevTensor::poisoned(dt, x.n);
    auto norm = [&](RmsNormKernel k) {
      return per_call_us([&] {
        (void)rms_norm_with(k, dt, nullptr, x.data(), w.data(), y.data(), T, H, 1e-5f, nullptr);
      });
    };
    std::printf("T=%4d rms_norm 4096:  warp-per-row %6.2f us  block-per-row %6.2f us\n", T,
                norm(RmsNormKernel::kWarpPerRow), norm(RmsNormKernel::kBlockPerRow));

    auto qkv =
        DevTensor::upload(dt, testing::random_vec(static_cast<size_t>(T) * (qs + 2 * kvs), rng));
    auto qn = DevTensor::upload(dt, testing::random_vec(hd, rng, 0.5f, 1.5f));
    auto kn = DevTensor::upload(dt, testing::random_vec(hd, rng, 0.5f, 1.5f));
    auto q = DevTensor::poisoned(dt, static_cast<size_t>(T) * qs);
    auto k = DevTensor::poisoned(dt, static_cast<size_t>(T) * kvs);
    auto v = DevTensor::poisoned(dt, static_cast<size_t>(T) * kvs);
    auto d_pos = testing::upload_raw(testing::make_positions(T, rng));
    auto d_freq = testing::upload_raw(testing::make_inv_freq(hd));
    int64_t num_slots = 0;
    auto d_slots = testing::upload_raw(testing::make_slots(T, 16, rng, &num_slots));
    auto kc = DevTensor::poisoned(dt, static_cast<size_t>(num_slots) * kvs);
    auto vc = DevTensor::poisoned(dt, kc.n);
    auto rope_us = [&](RopeKernel kern) {
      return per_call_us([&] {
        (void)rope_with(kern, dt, q.data(), k.data(), d_pos.as<int32_t>(), d_freq.as<float>(), T,
                        nh, nkv, hd, nullptr);
      });
    };
    std::printf("T=%4d rope 32/8x128:  legacy %6.2f us  new %6.2f us\n", T,
                rope_us(RopeKernel::kLegacy), rope_us(RopeKernel::kAuto));

    auto chain = [&](RopeKernel kern, bool norm_qk) {
      return per_call_us([&] {
        (void)split_qkv(dt, qkv.data(), nullptr, q.data(), k.data(), v.data(), T, qs, kvs, nullptr);
        if (norm_qk) {
          (void)rms_norm(dt, q.data(), qn.data(), q.data(), T * nh, hd, 1e-6f, nullptr);
          (void)rms_norm(dt, k.data(), kn.data(), k.data(), T * nkv, hd, 1e-6f, nullptr);
        }
        (void)rope_with(kern, dt, q.data(), k.data(), d_pos.as<int32_t>(), d_freq.as<float>(), T,
                        nh, nkv, hd, nullptr);
        (void)reshape_and_cache(dt, k.data(), v.data(), d_slots.as<int64_t>(), T, kvs, kc.data(),
                                vc.data(), nullptr);
      });
    };
    auto fused = [&](bool norm_qk, QkvPostForm form) {
      QkvPostParams p;
      p.dtype = dt;
      p.num_tokens = T;
      p.num_heads = nh;
      p.num_kv_heads = nkv;
      p.head_dim = hd;
      p.qkv = qkv.data();
      p.q_norm = norm_qk ? qn.data() : nullptr;
      p.k_norm = norm_qk ? kn.data() : nullptr;
      p.positions = d_pos.as<int32_t>();
      p.inv_freq = d_freq.as<float>();
      p.slot_mapping = d_slots.as<int64_t>();
      p.q_out = q.data();
      p.k_cache = kc.data();
      p.v_cache = vc.data();
      p.form = form;
      return per_call_us([&] { (void)qkv_post(p, nullptr); });
    };
    // qkv_post's bytes: the qkv rows read, q and the K/V rows written.
    const double bytes = 2.0 * T * (qs + 2 * kvs) * 2;
    for (bool norm_qk : {false, true}) {
      std::printf(
          "T=%4d %s: chain(legacy rope) %6.2f us  chain(new rope) %6.2f us  qkv_post %6.2f us\n", T,
          norm_qk ? "split+qknorm+rope+kv" : "split+rope+kv       ",
          chain(RopeKernel::kLegacy, norm_qk), chain(RopeKernel::kAuto, norm_qk),
          fused(norm_qk, QkvPostForm::kAuto));
      for (QkvPostForm form : {QkvPostForm::kHeads, QkvPostForm::kPairs}) {
        if (norm_qk && form == QkvPostForm::kPairs) continue;
        const double us = fused(norm_qk, form);
        std::printf("T=%5d qkv_post%s, %s: %8.2f us, %.2f TB/s\n", T, norm_qk ? " (qk norm)" : "",
                    form == QkvPostForm::kHeads ? "warp per head" : "rope pairs", us,
                    bytes / us / 1e6);
      }
    }
  }
}

}  // namespace
}  // namespace folio::cuda
