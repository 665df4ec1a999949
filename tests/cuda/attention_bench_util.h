// Internal to the attention benchmarks (attention_bench_test.cc: K1; prefill_bench_test.cc:
// K2): the shapes, an fp8 random fill, a paged batch, the event timing (per launch or queued
// behind an L2 eviction) and the FOLIO_BENCH_K2_KERNELS switch; bench_util.h's helpers beside.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/decode_attention.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/skinny_gemm.h"
#include "base/fp8.h"
#include "bench_util.h"
#include "cuda_test_util.h"

namespace folio::cuda::attention_bench {

using bench::bench_enabled;
using bench::fill_random;

constexpr int kHeads = 32, kKvHeads = 8, kDim = 128;

// FOLIO_BENCH_K2_KERNELS=v3tma,v3tmaq: K2 only (no K1 shapes), those prefill kernels and v1
// (every output's cross-check), for quick A/B runs. Unset: everything.
inline const std::string& k2_kernel_filter() {
  static const std::string f = [] {
    const char* e = std::getenv("FOLIO_BENCH_K2_KERNELS");
    std::string list;
    if (e != nullptr) list.append(",").append(e).append(",");
    return list;
  }();
  return f;
}
inline bool k2_kernel_selected(PrefillKernel k) {
  std::string key(",");
  key.append(prefill_kernel_name(k)).append(",");
  return k2_kernel_filter().empty() || k == PrefillKernel::kV1 ||
         k2_kernel_filter().find(key) != std::string::npos;
}

// The comma-separated items of environment variable `var`, each read by `parse(item, out)`
// (false: malformed). `fallback` when the variable is unset or empty, or (with a note on stderr
// saying what was `expected`) when an item is malformed.
template <typename T, typename Parse>
std::vector<T> env_list(const char* var, const char* expected, std::vector<T> fallback,
                        Parse parse) {
  const char* e = std::getenv(var);
  if (e == nullptr || *e == '\0') return fallback;
  std::vector<T> out;
  std::string list(e);
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    T item{};
    if (!parse(list.substr(at, end - at), item)) {
      std::fprintf(stderr, "%s=%s: expected %s\n", var, e, expected);
      return fallback;
    }
    out.push_back(item);
    at = end + 1;
  }
  return out;
}

// K1's shapes (batch x context) and page sizes: the by default; FOLIO_BENCH_K1_SHAPES=
// "64x2048,96x2048" and FOLIO_BENCH_K1_PAGES="16,8,1" time others (each shape within the bench's
// buffers: batch x context <= 128 x 8192 tokens, context <= 8192).
struct K1Shape {
  int batch, ctx;
};
inline std::vector<K1Shape> k1_shapes() {
  return env_list<K1Shape>("FOLIO_BENCH_K1_SHAPES", "BxL,... within 128 x 8192",
                           {{1, 8192}, {32, 2048}, {128, 2048}, {128, 8192}},
                           [](const std::string& item, K1Shape& c) {
                             int used = 0;
                             return std::sscanf(item.c_str(), "%dx%d%n", &c.batch, &c.ctx,
                                                &used) == 2 &&
                                    used == static_cast<int>(item.size()) && c.batch >= 1 &&
                                    c.ctx >= 1 && c.ctx <= 8192 &&
                                    int64_t{c.batch} * c.ctx <= int64_t{128} * 8192;
                           });
}
inline std::vector<int> k1_pages() {
  return env_list<int>("FOLIO_BENCH_K1_PAGES", "page sizes 1..256", {16, 1},
                       [](const std::string& item, int& bs) {
                         int used = 0;
                         return std::sscanf(item.c_str(), "%d%n", &bs, &used) == 1 &&
                                used == static_cast<int>(item.size()) && bs >= 1 && bs <= 256;
                       });
}

// Fills a device buffer with random finite e4m3 codes (values in [-1, 1]), 16 MiB replicated.
inline void fill_random_fp8(void* dst, size_t bytes, std::mt19937& rng) {
  const size_t chunk = std::min<size_t>(bytes, 16u << 20);
  auto host = testing::random_vec(chunk, rng);
  std::vector<uint8_t> codes(chunk);
  for (size_t i = 0; i < chunk; ++i) codes[i] = float_to_fp8_e4m3(host[i]);
  for (size_t off = 0; off < bytes; off += chunk)
    ASSERT_TRUE(
        copy(static_cast<char*>(dst) + off, codes.data(), std::min(chunk, bytes - off)).ok());
}

inline std::vector<float> download_bf16(const void* src, size_t n) {
  std::vector<uint16_t> bits(n);
  EXPECT_TRUE(copy(bits.data(), src, n * 2).ok());
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = testing::from_bits(DType::kBF16, bits[i]);
  return out;
}

struct Batch {
  std::vector<int32_t> qs{0}, ctx, bts{0}, bt;
  DeviceBuffer d_qs, d_ctx, d_bts, d_bt;
};

// The batch's host arrays to the device.
inline void upload(Batch& b) {
  b.d_qs = testing::upload_raw(b.qs);
  b.d_ctx = testing::upload_raw(b.ctx);
  b.d_bts = testing::upload_raw(b.bts);
  b.d_bt = testing::upload_raw(b.bt);
}

// A paged batch of sequences with context lengths `lens` (q_len query rows each), their blocks
// spread over the cache in a random order.
inline Batch make_batch_lens(const std::vector<int>& lens, int q_len, int block_size,
                             std::mt19937& rng) {
  Batch b;
  size_t total = 0;
  for (int len : lens) total += static_cast<size_t>((len + block_size - 1) / block_size);
  std::vector<int32_t> phys(total);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  size_t at = 0;
  for (int len : lens) {
    const size_t per = static_cast<size_t>((len + block_size - 1) / block_size);
    b.qs.push_back(b.qs.back() + q_len);
    b.ctx.push_back(len);
    b.bt.insert(b.bt.end(), phys.begin() + at, phys.begin() + at + per);
    at += per;
    b.bts.push_back(static_cast<int32_t>(b.bt.size()));
  }
  upload(b);
  return b;
}

inline Batch make_batch(int batch, int context, int q_len, int block_size, std::mt19937& rng) {
  return make_batch_lens(std::vector<int>(static_cast<size_t>(batch), context), q_len, block_size,
                         rng);
}

// Median over 20 runs of the events around f(). With `before` (the queued method), before() is
// enqueued ahead of each run: the GPU is busy when the start event is recorded, so the host's
// launch latency of f's kernels is not timed (as triton's do_bench and FlashInfer's benchmarks
// measure), and before() can leave L2 cold. Without it, each run starts on an idle GPU and the
// figure includes the launch latency (a few microseconds).
template <typename F>
double median_us(F&& f, const std::function<void()>& before = {}) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    if (before) before();
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0;
}

// The floor K1's figures are stated against: a device-to-device copy of 1 GiB from src to dst
// (median_us's method; queued behind `before` when given), its time and its rate counting bytes
// read + bytes written.
struct CopyRate {
  double us, tbps;
};
inline CopyRate copy_rate_1gib(void* dst, const void* src,
                               const std::function<void()>& before = {}) {
  const size_t bytes = size_t{1} << 30;
  const double us =
      median_us([&] { (void)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice); }, before);
  return {us, 2.0 * bytes / us / 1e6};
}

inline PagedAttentionParams params(const Batch& b, int block_size, void* q, void* kc, void* vc,
                                   void* out) {
  PagedAttentionParams p;
  p.dtype = DType::kBF16;
  p.num_seqs = static_cast<int>(b.ctx.size());
  p.num_heads = kHeads;
  p.num_kv_heads = kKvHeads;
  p.head_dim = kDim;
  p.block_size = block_size;
  p.scale = 1.f / std::sqrt(128.f);
  p.q = q;
  p.k_cache = kc;
  p.v_cache = vc;
  p.out = out;
  p.query_start = b.d_qs.as<int32_t>();
  p.context_lens = b.d_ctx.as<int32_t>();
  p.block_table_start = b.d_bts.as<int32_t>();
  p.block_table = b.d_bt.as<int32_t>();
  return p;
}

// The benchmarks' device buffers, bf16: the K and V caches (cache_slots slots of kKvHeads x kDim
// each) and q and out (q_rows rows of kHeads x kDim); fill() makes K, V and q random.
struct AttentionBuffers {
  Result<DeviceBuffer> kc, vc, q, out;
  AttentionBuffers(size_t cache_slots, size_t q_rows)
      : kc(DeviceBuffer::allocate(cache_slots * kKvHeads * kDim * 2)),
        vc(DeviceBuffer::allocate(cache_slots * kKvHeads * kDim * 2)),
        q(DeviceBuffer::allocate(q_rows * kHeads * kDim * 2)),
        out(DeviceBuffer::allocate(q_rows * kHeads * kDim * 2)) {}
  bool ok() const { return kc.ok() && vc.ok() && q.ok() && out.ok(); }
  void fill(std::mt19937& rng) {  // K, V and q random
    for (auto* b : {&kc, &vc, &q}) fill_random((*b)->data(), (*b)->bytes(), rng);
  }
};

// The queued method's L2 eviction: a 256 MiB GEMV read (reads leave no dirty lines to write back,
// unlike a memset), long enough for the host to submit the timed kernel behind it.
struct L2Evictor {
  Result<DeviceBuffer> w = DeviceBuffer::allocate(size_t{16384} * 8192 * 2);
  Result<DeviceBuffer> xy = DeviceBuffer::allocate(size_t{16384} * 2 * 2);
  bool ok() const { return w.ok() && xy.ok(); }
  void operator()() const {
    auto* p = static_cast<char*>(xy->data());
    (void)skinny_gemm(DType::kBF16, p, w->data(), p + 16384 * 2, 1, 16384, 8192, false, nullptr);
  }
  // As median_us's `before`.
  std::function<void()> before() const {
    return [this] { (*this)(); };
  }
};

// The K1 benches' first line: the device and the queued copy rate of 1 GiB from buf's K to its V
// behind `evict_l2` (TB/s, read + write), which it returns. The copy overwrites V: it refills the
// buffers from `rng` after it.
inline double print_device_and_copy_rate(const DeviceInfo& info, AttentionBuffers& buf,
                                         const std::function<void()>& evict_l2, std::mt19937& rng) {
  const double tbps = copy_rate_1gib(buf.vc->data(), buf.kc->data(), evict_l2).tbps;
  std::printf("device: %s, %d SMs; queued copy %.2f TB/s (read + write)\n", info.name.c_str(),
              info.num_sms, tbps);
  buf.fill(rng);
  return tbps;
}

}  // namespace folio::cuda::attention_bench
