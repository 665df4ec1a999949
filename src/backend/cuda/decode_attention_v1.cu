// Decode kernel v1 (kept so one GPU run compares it with v2; see decode_attention.h): per
// partition, K is scored into shared memory, the scores are turned into exp(score - max), then V
// is read in a second pass. head_dim 64 or 128.
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/paged_kernel_args.cuh"
#include "backend/cuda/decode_attention_impl.h"

namespace folio::cuda::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

template <typename T>
struct DecodeArgs : PagedPointers<T> {
  float* partial_out;  // [num_seqs, num_heads, max_partitions, head_dim]
  float* partial_m;    // [num_seqs, num_heads, max_partitions]
  float* partial_l;
  int num_heads, num_kv_heads, block_size, num_chunks, partition_size, max_partitions;
  float scale;
};

// grid (num_kv_heads * num_chunks, num_seqs, max_partitions), kThreads threads.
// A token's K (or V) row of D elements is read by a group of TG = D/8 lanes, 16 bytes each, so a
// warp covers 32/TG tokens per step. Phase 1 scores the partition's tokens for the GC heads into
// shared memory, phase 2 turns them into exp(score - max), phase 3 accumulates P·V per lane and
// reduces across lanes then warps.
template <typename T, int D, int GC>
__global__ void __launch_bounds__(kThreads) decode_kernel(DecodeArgs<T> a) {
  constexpr int TG = D / 8, TPW = 32 / TG;
  extern __shared__ float smem[];
  const int P = a.partition_size;
  float* q_s = smem;                  // [GC][D]
  float* logits = q_s + GC * D;       // [GC][P]
  float* red = logits + GC * P;       // [kWarps][GC][D]
  float* ml = red + kWarps * GC * D;  // [GC] max, then [GC] sum

  const int kvh = blockIdx.x / a.num_chunks, chunk = blockIdx.x % a.num_chunks;
  const int s = blockIdx.y, part = blockIdx.z;
  const int G = a.num_heads / a.num_kv_heads;
  const int gcount = min(GC, G - chunk * GC);
  const int h0 = kvh * G + chunk * GC;
  const int ctx = a.context_lens[s];
  const int nparts = min(max(1, (ctx + P - 1) / P), a.max_partitions);
  if (part >= nparts) return;
  const int start = part * P;
  const int n = max(0, min(ctx - start, P));
  const int row = a.query_start[s];
  const int32_t* table = a.block_table + a.block_table_start[s];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int lig = lane % TG, tiw = lane / TG;

  for (int i = tid; i < GC * D; i += kThreads) {
    const int g = i / D;
    q_s[i] = g < gcount
                 ? to_float(a.q[(static_cast<int64_t>(row) * a.num_heads + h0 + g) * D + i % D])
                 : 0.f;
  }
  __syncthreads();

  const int64_t slot_stride = static_cast<int64_t>(a.num_kv_heads) * D;
  const int64_t head_off = static_cast<int64_t>(kvh) * D + lig * 8;
  {
    float qr[GC][8];
#pragma unroll
    for (int g = 0; g < GC; ++g)
#pragma unroll
      for (int j = 0; j < 8; ++j) qr[g][j] = q_s[g * D + lig * 8 + j];
    for (int base = warp * TPW; base < n; base += kWarps * TPW) {  // warp-uniform bound
      const int t = base + tiw;
      float kf[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      if (t < n) {
        const int pos = start + t;
        const int64_t slot =
            static_cast<int64_t>(table[pos / a.block_size]) * a.block_size + pos % a.block_size;
        load_floats<8>(a.k_cache + slot * slot_stride + head_off, kf);
      }
#pragma unroll
      for (int g = 0; g < GC; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) dot += qr[g][j] * kf[j];
#pragma unroll
        for (int o = TG / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (t < n && lig == 0) logits[g * P + t] = dot * a.scale;
      }
    }
  }
  __syncthreads();

  for (int g = warp; g < GC; g += kWarps) {
    float m = -INFINITY;
    for (int t = lane; t < n; t += 32) m = fmaxf(m, logits[g * P + t]);
    m = warp_max(m);
    float l = 0.f;
    for (int t = lane; t < n; t += 32) {
      const float e = __expf(logits[g * P + t] - m);
      logits[g * P + t] = e;
      l += e;
    }
    l = warp_sum(l);
    if (lane == 0) {
      ml[g] = m;
      ml[GC + g] = l;
    }
  }
  __syncthreads();

  float acc[GC][8];
#pragma unroll
  for (int g = 0; g < GC; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.f;
  for (int base = warp * TPW; base < n; base += kWarps * TPW) {
    const int t = base + tiw;
    if (t < n) {
      const int pos = start + t;
      const int64_t slot =
          static_cast<int64_t>(table[pos / a.block_size]) * a.block_size + pos % a.block_size;
      float vf[8];
      load_floats<8>(a.v_cache + slot * slot_stride + head_off, vf);
#pragma unroll
      for (int g = 0; g < GC; ++g) {
        const float p = logits[g * P + t];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][j] += p * vf[j];
      }
    }
  }
#pragma unroll
  for (int g = 0; g < GC; ++g)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float v = acc[g][j];
#pragma unroll
      for (int o = TG; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[g][j] = v;
    }
  if (tiw == 0)
#pragma unroll
    for (int g = 0; g < GC; ++g)
#pragma unroll
      for (int j = 0; j < 8; ++j) red[(warp * GC + g) * D + lig * 8 + j] = acc[g][j];
  __syncthreads();

  for (int i = tid; i < gcount * D; i += kThreads) {
    const int g = i / D, d = i % D, h = h0 + g;
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += red[(w * GC + g) * D + d];
    if (nparts == 1) {
      const float l = ml[GC + g];
      a.out[(static_cast<int64_t>(row) * a.num_heads + h) * D + d] =
          from_float<T>(l > 0.f ? o / l : 0.f);
    } else {
      const int64_t pi = (static_cast<int64_t>(s) * a.num_heads + h) * a.max_partitions + part;
      a.partial_out[pi * D + d] = o;
      if (d == 0) {
        a.partial_m[pi] = ml[g];
        a.partial_l[pi] = ml[GC + g];
      }
    }
  }
}

// grid (num_heads, num_seqs), D threads: merges the partitions of sequences that were split.
template <typename T, int D>
__global__ void decode_reduce_kernel(DecodeArgs<T> a) {
  const int h = blockIdx.x, s = blockIdx.y;
  const int P = a.partition_size;
  // Clamped: a plan made from other context lengths must not send reads past the workspace.
  const int nparts = min((a.context_lens[s] + P - 1) / P, a.max_partitions);
  if (nparts <= 1) return;
  const int64_t base = (static_cast<int64_t>(s) * a.num_heads + h) * a.max_partitions;
  const float* m = a.partial_m + base;
  const float* l = a.partial_l + base;
  float M = -INFINITY;
  for (int p = 0; p < nparts; ++p) M = fmaxf(M, m[p]);
  float L = 0.f, o = 0.f;
  const int d = threadIdx.x;
  for (int p = 0; p < nparts; ++p) {
    const float w = __expf(m[p] - M);
    L += l[p] * w;
    o += a.partial_out[(base + p) * D + d] * w;
  }
  const int row = a.query_start[s];
  a.out[(static_cast<int64_t>(row) * a.num_heads + h) * D + d] = from_float<T>(o / L);
}

size_t smem_bytes(int gc, int d, int p) {
  return sizeof(float) *
         (static_cast<size_t>(gc) * d * (1 + kWarps) + static_cast<size_t>(gc) * p + 2 * gc);
}

template <typename T, int D, int GC>
Status launch(const DecodeArgs<T>& a, int num_seqs, int grid_x, void* stream) {
  const dim3 grid(grid_x, num_seqs, a.max_partitions);
  decode_kernel<T, D, GC>
      <<<grid, kThreads, smem_bytes(GC, D, a.partition_size), as_stream(stream)>>>(a);
  FOLIO_RETURN_IF_ERROR(launch_status("decode_kernel"));
  if (a.max_partitions > 1) {
    decode_reduce_kernel<T, D><<<dim3(a.num_heads, num_seqs), D, 0, as_stream(stream)>>>(a);
    FOLIO_RETURN_IF_ERROR(launch_status("decode_reduce_kernel"));
  }
  return Status();
}

template <typename T, int D>
Status launch_d(const DecodeArgs<T>& a, int num_seqs, int gc, void* stream) {
  const int grid_x = a.num_kv_heads * a.num_chunks;
  switch (gc) {
    case 1:
      return launch<T, D, 1>(a, num_seqs, grid_x, stream);
    case 2:
      return launch<T, D, 2>(a, num_seqs, grid_x, stream);
    case 4:
      return launch<T, D, 4>(a, num_seqs, grid_x, stream);
    default:
      return launch<T, D, 8>(a, num_seqs, grid_x, stream);
  }
}

}  // namespace

Status launch_decode_v1(const PagedAttentionParams& p, const DecodePlan& plan,
                        const DecodeWorkspace& ws, void* stream) {
  if (p.head_dim != 64 && p.head_dim != 128)
    return unimplemented("decode_attention v1: head_dim " + std::to_string(p.head_dim) +
                         " (v1 supports 64 and 128)");
  if (plan.partition_size > 512)
    return invalid_argument("decode_attention v1: partition_size above 512");
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    DecodeArgs<T> a{};
    a.set_pointers(p);
    a.partial_out = ws.out;
    a.partial_m = ws.m;
    a.partial_l = ws.l;
    a.num_heads = p.num_heads;
    a.num_kv_heads = p.num_kv_heads;
    a.block_size = p.block_size;
    const int gc = decode_head_chunk(p.num_heads / p.num_kv_heads);
    a.num_chunks = (p.num_heads / p.num_kv_heads + gc - 1) / gc;
    a.partition_size = plan.partition_size;
    a.max_partitions = plan.max_partitions;
    a.scale = p.scale;
    return p.head_dim == 64 ? launch_d<T, 64>(a, p.num_seqs, gc, stream)
                            : launch_d<T, 128>(a, p.num_seqs, gc, stream);
  });
}

}  // namespace folio::cuda::detail
