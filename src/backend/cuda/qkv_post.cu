#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_e4m3.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/qkv_post.h"
#include "backend/cuda/rope_math.cuh"

namespace folio::cuda {
namespace {

constexpr int kWarps = 4;  // heads per block, one warp each
constexpr int kMaxHeadDim = 256;

template <typename T>
struct Args {
  const T* qkv;
  const T* bias;
  const T* q_norm;
  const T* k_norm;
  const int32_t* positions;
  const float* inv_freq;
  const int64_t* slot_mapping;
  T* q_out;
  T* k_cache;  // uint8_t e4m3 codes in fact when the kernel's kFp8 is set
  T* v_cache;
  int num_heads, num_kv_heads, head_dim;
  float eps;
  int early;  // pdl_early_reads(): the reads below that need no wait come before it
};

// Token t's rope table in shared memory ([half] cos, then [half] sin), by the whole block.
template <typename T>
__device__ __forceinline__ void rope_table(const Args<T>& a, int t, float* smem, int half) {
  const int32_t pos = a.positions[t];
  for (int i = threadIdx.x; i < half; i += blockDim.x)
    rope_cos_sin(pos, a.inv_freq[i], &smem[i], &smem[half + i]);
  __syncthreads();
}

// grid (num_tokens, ceil((num_heads + 2 * num_kv_heads) / kWarps)); warp w of block (t, y) owns
// head y * kWarps + w of token t: q heads, then k heads, then v heads. Lane l holds elements
// (p * 32 + l) * N + [0, N) for p < P, exactly the layout of rms_norm's warp-per-row kernel, so
// the norm's sum runs in the same order. Rope's partner element (i +- head_dim/2) usually sits in
// another lane: the warp trades its row through shared memory. kFp8: the caches hold e4m3 bytes;
// K and V are rounded to T as for a 16-bit cache, then encoded (what reshape_and_cache writes).
template <typename T, int N, bool kNorm, bool kFp8>
__global__ void __launch_bounds__(kWarps * 32) qkv_post_kernel(Args<T> a) {
  if (!a.early) pdl_wait();  // FOLIO_PDL_EARLY=0: everything after the wait
  constexpr int P = kMaxHeadDim / (32 * N);
  extern __shared__ float smem[];  // [half] cos, [half] sin, then [kWarps][head_dim] rows
  const int hd = a.head_dim, half = hd / 2;
  float* row_buf = smem + hd + (threadIdx.x / 32) * hd;
  const int t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.y * kWarps + warp;
  const int nh = a.num_heads, nkv = a.num_kv_heads;
  const int rotated = nh + nkv;  // q and k heads
  const bool live = h < rotated + nkv;
  const int q_size = nh * hd, kv_size = nkv * hd;
  const int col = h * hd;  // the row holds the q, k and v heads side by side, in that order
  const T* src = a.qkv + static_cast<int64_t>(t) * (q_size + 2 * kv_size) + col;
  const T* w = h < nh ? a.q_norm : a.k_norm;
  // What no kernel writes (bias, norm weights, the step's slots and positions from the host's
  // upload) is read, and cos/sin computed, before pdl_wait, overlapping the qkv GEMM's tail; only
  // the qkv row itself follows it. Every load goes out before the block waits at the barrier.
  float v[P][N], wv[P][N], bv[P][N];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int e = (p * 32 + lane) * N;
    if (live && e < hd) {
      if (a.bias) load_floats<N>(a.bias + col + e, bv[p]);
      if (kNorm && h < rotated) load_floats<N>(w + e, wv[p]);
    }
  }
  const int64_t slot = live ? a.slot_mapping[t] : -1;
  if (static_cast<int>(blockIdx.y) * kWarps < rotated)  // uniform over the block
    rope_table(a, t, smem, half);
  pdl_wait();  // pdl.cuh: the qkv rows come from the previous kernel
  pdl_launch_dependents();
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int e = (p * 32 + lane) * N;
    if (live && e < hd) {
      load_floats<N>(src + e, v[p]);
      if (a.bias) {  // split_qkv: fp32 add, rounded to T
#pragma unroll
        for (int j = 0; j < N; ++j) v[p][j] = to_float(from_float<T>(v[p][j] + bv[p][j]));
      }
    }
  }
  if (!live) return;
  if (h >= rotated) {  // v head: straight to the cache
    if (slot < 0) return;
    if constexpr (kFp8) {  // v[p] holds T values already
      uint8_t* dst = reinterpret_cast<uint8_t*>(a.v_cache) + slot * kv_size + (h - rotated) * hd;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int e = (p * 32 + lane) * N;
        if (e < hd) store_e4m3<N>(dst + e, v[p]);
      }
      return;
    }
    T* dst = a.v_cache + slot * kv_size + (h - rotated) * hd;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int e = (p * 32 + lane) * N;
      if (e < hd) store_floats<N>(dst + e, v[p]);
    }
    return;
  }
  if constexpr (kNorm) {  // rms_norm_warp_kernel's arithmetic, in its order
    float ss = 0.f;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int e = (p * 32 + lane) * N;
      if (e < hd) {
#pragma unroll
        for (int j = 0; j < N; ++j) ss += v[p][j] * v[p][j];
      }
    }
    const float inv = rsqrtf(warp_sum(ss) / hd + a.eps);
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int e = (p * 32 + lane) * N;
      if (e < hd) {
#pragma unroll
        for (int j = 0; j < N; ++j) v[p][j] = to_float(from_float<T>(v[p][j] * inv * wv[p][j]));
      }
    }
  }
  // Rope: publish the (rounded) row, then rotate each own element against its partner.
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int e = (p * 32 + lane) * N;
    if (e < hd) {
#pragma unroll
      for (int j = 0; j < N; ++j) row_buf[e + j] = v[p][j];
    }
  }
  __syncwarp();
  T* dst = nullptr;  // kFp8: k heads write through k8 instead
  [[maybe_unused]] uint8_t* k8 = nullptr;
  if (h < nh) {
    dst = a.q_out + (static_cast<int64_t>(t) * nh + h) * hd;
  } else {
    if (slot < 0) return;
    if constexpr (kFp8)
      k8 = reinterpret_cast<uint8_t*>(a.k_cache) + slot * kv_size + (h - nh) * hd;
    else
      dst = a.k_cache + slot * kv_size + (h - nh) * hd;
  }
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int e = (p * 32 + lane) * N;
    if (e < hd) {
      float out[N];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const int x = e + j;
        if (x < half) {
          out[j] = rope_lo(v[p][j], row_buf[x + half], smem[x], smem[half + x]);
        } else {
          const int i = x - half;
          out[j] = rope_hi(row_buf[i], v[p][j], smem[i], smem[half + i]);
        }
      }
      if constexpr (kFp8) {
        if (k8) {  // rounded to T first, as the unfused chain's k is
          float r[N];
#pragma unroll
          for (int j = 0; j < N; ++j) r[j] = to_float(from_float<T>(out[j]));
          store_e4m3<N>(k8 + e, r);
          continue;
        }
      }
      store_floats<N>(dst + e, out);
    }
  }
}

// QkvPostForm::kPairs: grid (num_tokens), kPairThreads threads. Task j of token t is head
// h = j / (half / W) and i0 = (j % (half / W)) * W; it loads x[i0, i0 + W) and x[half + i0, ...),
// so each thread holds whole rope pairs and needs no other lane's elements. A thread takes up to
// kPairTasks tasks per pass, every load issued before the first is worked on. The arithmetic is
// the warp-per-head kernel's (no qk norm): bias added in fp32 and rounded to T, rope_math.cuh's
// pinned rope on the rounded values, each output rounded to T (then e4m3 for an fp8 cache).
constexpr int kPairThreads = 256;
constexpr int kPairTasks = 4;

template <typename T, int W, bool kFp8>
__global__ void __launch_bounds__(kPairThreads) qkv_post_pairs_kernel(Args<T> a) {
  if (!a.early) pdl_wait();  // FOLIO_PDL_EARLY=0: everything after the wait
  extern __shared__ float smem[];  // [half] cos, [half] sin
  const int hd = a.head_dim, half = hd / 2, chunks = half / W;
  const int t = blockIdx.x;
  const int nh = a.num_heads, nkv = a.num_kv_heads, rotated = nh + nkv;
  const int q_size = nh * hd, kv_size = nkv * hd, tasks = (rotated + nkv) * chunks;
  const T* row = a.qkv + static_cast<int64_t>(t) * (q_size + 2 * kv_size);
  const int64_t slot = a.slot_mapping[t];
  rope_table(a, t, smem, half);
  pdl_wait();  // pdl.cuh: the qkv rows come from the previous kernel
  pdl_launch_dependents();
  for (int base = 0; base < tasks; base += kPairTasks * kPairThreads) {
    float lo[kPairTasks][W], hi[kPairTasks][W];
#pragma unroll
    for (int k = 0; k < kPairTasks; ++k) {
      const int j = base + k * kPairThreads + threadIdx.x;
      if (j >= tasks) break;
      const int h = j / chunks, i0 = (j % chunks) * W;
      const int col = h * hd;  // the row holds the q, k and v heads side by side, in that order
      load_floats<W>(row + col + i0, lo[k]);
      load_floats<W>(row + col + half + i0, hi[k]);
      if (a.bias) {  // split_qkv: fp32 add, rounded to T
        float blo[W], bhi[W];
        load_floats<W>(a.bias + col + i0, blo);
        load_floats<W>(a.bias + col + half + i0, bhi);
#pragma unroll
        for (int e = 0; e < W; ++e) {
          lo[k][e] = to_float(from_float<T>(lo[k][e] + blo[e]));
          hi[k][e] = to_float(from_float<T>(hi[k][e] + bhi[e]));
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kPairTasks; ++k) {
      const int j = base + k * kPairThreads + threadIdx.x;
      if (j >= tasks) break;
      const int h = j / chunks, i0 = (j % chunks) * W;
      if (h >= nh && slot < 0) continue;  // k and v rows of a token without a slot
      if (h >= rotated) {  // v head: straight to the cache
        const int64_t off = slot * kv_size + (h - rotated) * hd + i0;
        if constexpr (kFp8) {
          uint8_t* dst = reinterpret_cast<uint8_t*>(a.v_cache) + off;
          store_e4m3<W>(dst, lo[k]);
          store_e4m3<W>(dst + half, hi[k]);
        } else {
          store_floats<W>(a.v_cache + off, lo[k]);
          store_floats<W>(a.v_cache + off + half, hi[k]);
        }
        continue;
      }
      float out_lo[W], out_hi[W];
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const float c = smem[i0 + e], s = smem[half + i0 + e];
        out_lo[e] = rope_lo(lo[k][e], hi[k][e], c, s);
        out_hi[e] = rope_hi(lo[k][e], hi[k][e], c, s);
      }
      if (h < nh) {
        T* dst = a.q_out + (static_cast<int64_t>(t) * nh + h) * hd + i0;
        store_floats<W>(dst, out_lo);
        store_floats<W>(dst + half, out_hi);
        continue;
      }
      const int64_t off = slot * kv_size + (h - nh) * hd + i0;
      if constexpr (kFp8) {  // rounded to T first, as the unfused chain's k is
#pragma unroll
        for (int e = 0; e < W; ++e) {
          out_lo[e] = to_float(from_float<T>(out_lo[e]));
          out_hi[e] = to_float(from_float<T>(out_hi[e]));
        }
        uint8_t* dst = reinterpret_cast<uint8_t*>(a.k_cache) + off;
        store_e4m3<W>(dst, out_lo);
        store_e4m3<W>(dst + half, out_hi);
      } else {
        store_floats<W>(a.k_cache + off, out_lo);
        store_floats<W>(a.k_cache + off + half, out_hi);
      }
    }
  }
}

template <typename T>
Args<T> make_args(const QkvPostParams& p) {
  return Args<T>{static_cast<const T*>(p.qkv),
                 static_cast<const T*>(p.bias),
                 static_cast<const T*>(p.q_norm),
                 static_cast<const T*>(p.k_norm),
                 p.positions,
                 p.inv_freq,
                 p.slot_mapping,
                 static_cast<T*>(p.q_out),
                 static_cast<T*>(p.k_cache),
                 static_cast<T*>(p.v_cache),
                 p.num_heads,
                 p.num_kv_heads,
                 p.head_dim,
                 p.eps,
                 pdl_early_reads() ? 1 : 0};
}

template <typename T, int N>
void launch_heads(const QkvPostParams& p, void* stream) {
  const int heads = p.num_heads + 2 * p.num_kv_heads;
  const dim3 grid(p.num_tokens, (heads + kWarps - 1) / kWarps);
  const size_t smem = sizeof(float) * p.head_dim * (1 + kWarps);
  const bool fp8 = p.kv_dtype == KvCacheDtype::kFp8E4m3;
  const auto kernel =
      p.q_norm ? (fp8 ? qkv_post_kernel<T, N, true, true> : qkv_post_kernel<T, N, true, false>)
               : (fp8 ? qkv_post_kernel<T, N, false, true> : qkv_post_kernel<T, N, false, false>);
  (void)launch_pdl(kernel, grid, dim3(kWarps * 32), smem, stream, "qkv_post_kernel",
                   make_args<T>(p));
}

template <typename T, int W>
void launch_pairs(const QkvPostParams& p, void* stream) {
  const size_t smem = sizeof(float) * p.head_dim;
  const auto kernel = p.kv_dtype == KvCacheDtype::kFp8E4m3 ? qkv_post_pairs_kernel<T, W, true>
                                                            : qkv_post_pairs_kernel<T, W, false>;
  (void)launch_pdl(kernel, dim3(p.num_tokens), dim3(kPairThreads), smem, stream,
                   "qkv_post_pairs_kernel", make_args<T>(p));
}

// Pointers aligned to `bytes` (null ones pass).
bool aligned(std::initializer_list<const void*> ptrs, uintptr_t bytes) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % bytes != 0) return false;
  return true;
}

}  // namespace

QkvPostForm qkv_post_form(const QkvPostParams& p) {
  static const QkvPostForm forced = [] {
    const char* e = std::getenv("FOLIO_QKV_POST");
    const std::string v = e ? e : "";
    return v == "heads"   ? QkvPostForm::kHeads
           : v == "pairs" ? QkvPostForm::kPairs
                          : QkvPostForm::kAuto;
  }();
  QkvPostForm f = p.form != QkvPostForm::kAuto ? p.form : forced;
  if (f == QkvPostForm::kAuto)
    f = p.num_tokens >= kQkvPostPairsMinTokens ? QkvPostForm::kPairs : QkvPostForm::kHeads;
  return p.q_norm && f == QkvPostForm::kPairs ? QkvPostForm::kHeads : f;
}

Status qkv_post(const QkvPostParams& p, void* stream) {
  const std::string shape = " (num_tokens " + std::to_string(p.num_tokens) + ", heads " +
                            std::to_string(p.num_heads) + "/" + std::to_string(p.num_kv_heads) +
                            ", head_dim " + std::to_string(p.head_dim) + ")";
  if (p.head_dim <= 0 || p.head_dim % 2 != 0 || p.head_dim > kMaxHeadDim)
    return invalid_argument("qkv_post: head_dim must be even and in [2, 256]" + shape);
  if (p.num_tokens < 0 || p.num_heads <= 0 || p.num_kv_heads <= 0)
    return invalid_argument("qkv_post: bad sizes" + shape);
  if ((p.q_norm == nullptr) != (p.k_norm == nullptr))
    return invalid_argument("qkv_post: q_norm and k_norm must both be given or both be null");
  if (p.form == QkvPostForm::kPairs && p.q_norm)
    return invalid_argument("qkv_post: the pairs form has no qk norm (a head's sum needs a warp)");
  if (p.num_tokens == 0) return Status();
  if (!p.qkv || !p.positions || !p.inv_freq || !p.slot_mapping || !p.q_out || !p.k_cache ||
      !p.v_cache)
    return invalid_argument("qkv_post: null input or output pointer");
  if ((p.num_heads + 2 * p.num_kv_heads + kWarps - 1) / kWarps > 65535)
    return invalid_argument("qkv_post: too many heads" + shape);
  if (qkv_post_form(p) == QkvPostForm::kPairs) {
    // 4-element packs where half a head is a multiple of 4 and every pack is aligned (the row
    // stride is then a multiple of 8 elements); single elements otherwise.
    const bool pack4 = (p.head_dim / 2) % 4 == 0 &&
                       aligned({p.qkv, p.bias, p.q_out, p.k_cache, p.v_cache}, 8);
    return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
      if (pack4)
        launch_pairs<T, 4>(p, stream);
      else
        launch_pairs<T, 1>(p, stream);
      return launch_status("qkv_post_pairs_kernel");
    });
  }
  // N = 8 exactly when rms_norm's warp kernel would take its 8-wide path for the same rows (the
  // summation order depends on it); the row stride is then a multiple of 8 as well (and an fp8
  // cache's 8-element packs 8-byte aligned).
  const bool pack8 =
      pack8_ok(p.head_dim, {p.qkv, p.bias, p.q_norm, p.k_norm, p.q_out, p.k_cache, p.v_cache});
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    if (pack8)
      launch_heads<T, 8>(p, stream);
    else
      launch_heads<T, 1>(p, stream);
    return launch_status("qkv_post_kernel");
  });
}

}  // namespace folio::cuda
