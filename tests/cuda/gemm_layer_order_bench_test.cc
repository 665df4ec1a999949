// Prefill products in a layer's order against each product alone, run only when
// FOLIO_CUDA_BENCH=1 (prints figures, asserts nothing about speed).
//
// Why: in a 16384-token prefill step the qkv product takes ~1.69 ms per layer (stage times)
// against 1.05 ms in GemmBench's isolated launches, while the other products are level
// (src/backend/cuda/NOTES.md, session 34). This runs Llama-3-8B's layer without attention at
// m 16384 on the engine's Gemm (Gemm::create() with the engine's defaults):
//   rms_norm -> qkv -> o_proj (+=) -> rms_norm -> gate_up -> silu_and_mul -> down (+=)
// repeated for several layers, each op between its own events on the legacy stream as the
// stage timer does, then each product alone, kRuns launches back to back. If qkv is slow only
// in the layer's order, the cause is what runs before it (the down product's sustained load,
// its accumulate's write-back), not the engine.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/gemm.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/silu_and_mul.h"
#include "bench_util.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using bench::bench_enabled;
using bench::fill_random;

constexpr int kM = 16384, kH = 4096, kI = 14336, kQkvN = 6144;
constexpr int kLayers = 12;  // the first 2 are warm-up
constexpr int kWarm = 2;

// Device buffers of a layer at m tokens: activations and one layer's weights (shared by every
// layer: L2 holds 50 MiB, so reuse across layers gains nothing).
struct LayerBuffers {
  Result<DeviceBuffer> x, normed, qkv, attn, gate_up, act;
  Result<DeviceBuffer> w_qkv, w_o, w_gate_up, w_down, w_norm;
  bool ok() const {
    for (auto* b :
         {&x, &normed, &qkv, &attn, &gate_up, &act, &w_qkv, &w_o, &w_gate_up, &w_down, &w_norm})
      if (!b->ok()) return false;
    return true;
  }
};

LayerBuffers allocate_layer(std::mt19937& rng) {
  const auto bytes = [](size_t rows, size_t cols) {
    return DeviceBuffer::allocate(2 * rows * cols);
  };
  LayerBuffers b{bytes(kM, kH),     bytes(kM, kH), bytes(kM, kQkvN), bytes(kM, kH),
                 bytes(kM, 2 * kI), bytes(kM, kI), bytes(kQkvN, kH), bytes(kH, kH),
                 bytes(2 * kI, kH), bytes(kH, kI), bytes(1, kH)};
  if (!b.ok()) return b;
  for (auto* d : {&b.x, &b.attn, &b.w_qkv, &b.w_o, &b.w_gate_up, &b.w_down, &b.w_norm})
    fill_random((*d)->data(), (*d)->bytes(), rng);
  return b;
}

struct Op {
  const char* name;
  double flop;  // 0 for the elementwise ops
  std::function<Status(cudaStream_t)> run;
};

std::vector<Op> layer_ops(Gemm& g, LayerBuffers& b) {
  const DType bf = DType::kBF16;
  void* x = b.x->data();
  void* normed = b.normed->data();
  const void* nw = b.w_norm->data();
  const auto flop = [](double n, double k) { return 2.0 * kM * n * k; };
  return {
      {"rms_norm", 0,
       [=](cudaStream_t s) { return rms_norm(bf, x, nw, normed, kM, kH, 1e-5f, s); }},
      {"qkv", flop(kQkvN, kH),
       [&, normed](cudaStream_t s) {
         return g.matmul_nt(bf, normed, b.w_qkv->data(), b.qkv->data(), kM, kQkvN, kH, false, s);
       }},
      {"o_proj", flop(kH, kH),
       [&, x](cudaStream_t s) {
         return g.matmul_nt(bf, b.attn->data(), b.w_o->data(), x, kM, kH, kH, true, s);
       }},
      {"rms_norm2", 0,
       [=](cudaStream_t s) { return rms_norm(bf, x, nw, normed, kM, kH, 1e-5f, s); }},
      {"gate_up", flop(2 * kI, kH),
       [&, normed](cudaStream_t s) {
         return g.matmul_nt(bf, normed, b.w_gate_up->data(), b.gate_up->data(), kM, 2 * kI, kH,
                            false, s);
       }},
      {"silu_mul", 0,
       [&](cudaStream_t s) {
         return silu_and_mul(bf, b.gate_up->data(), b.act->data(), kM, kI, s);
       }},
      {"down", flop(kH, kI),
       [&, x](cudaStream_t s) {
         return g.matmul_nt(bf, b.act->data(), b.w_down->data(), x, kM, kH, kI, true, s);
       }},
  };
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `order` (indices into ops) `reps` times with an event between every two ops; returns
// each op's times in microseconds, the first `warm` repetitions dropped.
std::vector<std::vector<float>> time_in_order(const std::vector<Op>& ops,
                                              const std::vector<int>& order, int reps, int warm) {
  cudaStream_t s = nullptr;  // the legacy stream, as the engine's forward
  std::vector<cudaEvent_t> ev(static_cast<size_t>(reps) * order.size() + 1);
  for (auto& e : ev) EXPECT_EQ(cudaEventCreate(&e), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(ev[0], s), cudaSuccess);
  size_t i = 0;
  for (int r = 0; r < reps; ++r)
    for (int o : order) {
      EXPECT_TRUE(ops[o].run(s).ok()) << ops[o].name;
      EXPECT_EQ(cudaEventRecord(ev[++i], s), cudaSuccess);
    }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::vector<float>> us(ops.size());
  i = 0;
  for (int r = 0; r < reps; ++r)
    for (int o : order) {
      float ms = 0;
      EXPECT_EQ(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]), cudaSuccess);
      ++i;
      if (r >= warm) us[o].push_back(ms * 1000.f);
    }
  for (auto e : ev) cudaEventDestroy(e);
  return us;
}

TEST(GemmBench, PrefillProductsInLayerOrderOrAlone) {
  FOLIO_REQUIRE_GPU();
  if (!bench_enabled()) GTEST_SKIP() << "set FOLIO_CUDA_BENCH=1 to time the layer's products";
  std::mt19937 rng(11);
  auto g = Gemm::create();
  ASSERT_TRUE(g.ok());
  LayerBuffers b = allocate_layer(rng);
  ASSERT_TRUE(b.ok()) << "not enough GPU memory for a 16384-token layer";
  const std::vector<Op> ops = layer_ops(**g, b);
  std::vector<int> all(ops.size());
  for (size_t o = 0; o < ops.size(); ++o) all[o] = static_cast<int>(o);
  const auto in_order = time_in_order(ops, all, kLayers, kWarm);
  std::printf("m %d, %d layers timed (median us; TFLOP/s)\n", kM, kLayers - kWarm);
  std::printf("%-10s | %16s | %16s | %6s\n", "op", "layer order", "alone x10", "ratio");
  double total_order = 0, total_alone = 0;
  for (size_t o = 0; o < ops.size(); ++o) {
    const auto alone = time_in_order(ops, {static_cast<int>(o)}, kLayers, kWarm);
    const float a = median(in_order[o]), z = median(alone[o]);
    total_order += a;
    total_alone += z;
    const auto rate = [&](float us) { return ops[o].flop > 0 ? ops[o].flop / (us * 1e6) : 0.0; };
    std::printf("%-10s | %9.1f %6.1f | %9.1f %6.1f | %5.2fx\n", ops[o].name, a, rate(a), z, rate(z),
                a / z);
    std::fflush(stdout);
  }
  std::printf("%-10s | %9.1f %6s | %9.1f %6s | %5.2fx\n", "layer", total_order, "", total_alone, "",
              total_order / total_alone);
}

}  // namespace
}  // namespace folio::cuda
