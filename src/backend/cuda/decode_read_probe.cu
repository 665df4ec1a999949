// The read probe (decode_read_probe.h): tc's loads (decode_attention_tc.cuh's issue(), the same
// lane layouts from decode_attention_tc_layout.cuh) without its arithmetic.
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/decode_attention_tc_layout.cuh"
#include "backend/cuda/decode_read_probe.h"
#include "backend/cuda/paged_kernel_args.cuh"
#include "backend/cuda/smem_opt_in.h"

namespace folio::cuda {
namespace detail {
namespace {

// The attention kernels' pointers (k_cache / v_cache as bytes: C elements below), the geometry
// the loads need and the sink.
struct ProbeArgs : PagedPointers<uint8_t> {
  int num_kv_heads, block_size;
  uint32_t* sink;
};

// grid (num_kv_heads, num_seqs), 32 * kReadProbeWarps threads. C: the cache element (16-bit or
// uint8_t e4m3); the lane layouts are tc's (its mma type plays no part here).
template <typename C, int kDepth>
__global__ void __launch_bounds__(32 * kReadProbeWarps) decode_read_probe_kernel(ProbeArgs a) {
  using L = tc::Cache<__nv_bfloat16, C>;
  using Regs = tc::ChunkRegs<__nv_bfloat16, C>;
  constexpr int kW = kReadProbeWarps;
  const int kvh = blockIdx.x, s = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int pg = 4 * (g / 2) + g % 2;  // tc's pi(g)
  const int n = a.context_lens[s];
  const int32_t* table = a.block_table + a.block_table_start[s];
  const C* k_cache = reinterpret_cast<const C*>(a.k_cache);
  const C* v_cache = reinterpret_cast<const C*>(a.v_cache);
  const int64_t slot_stride = static_cast<int64_t>(a.num_kv_heads) * tc::kD;
  const int64_t head_off = static_cast<int64_t>(kvh) * tc::kD;
  const int nch = (n + tc::kChunk - 1) / tc::kChunk;

  // Lane L: the slot of token L % 16 of chunk c, -1 past the context (lanes >= 16 are never read).
  auto slot_of = [&](int c) {
    const int tok = c * tc::kChunk + lane % tc::kChunk;
    if (tok >= n) return -1;
    const int page = tok / a.block_size;
    return table[page] * a.block_size + (tok - page * a.block_size);
  };
  auto issue = [&](Regs& r, int slot_lane) {  // tc's loads
    tc::issue_chunk(r, k_cache, v_cache, slot_stride, head_off, slot_lane, pg, g, t);
  };
  auto fold = [](const Regs& r) {
    uint32_t x = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int q = 0; q < L::kKLoads; ++q)
        x ^= r.k[i][q].x ^ r.k[i][q].y ^ r.k[i][q].z ^ r.k[i][q].w;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int q = 0; q < L::kVLoads; ++q)
        x ^= r.v[i][q].x ^ r.v[i][q].y ^ r.v[i][q].z ^ r.v[i][q].w;
    return x;
  };

  // kDepth buffers in turn: buffer d holds chunk c + d kW; once folded it loads chunk
  // c + (d + kDepth) kW. Chunks past the end are zeros (no reads), which fold to nothing.
  Regs r[kDepth];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) issue(r[d], slot_of(warp + d * kW));
  int slot_next = slot_of(warp + kDepth * kW);
  uint32_t acc = 0;
#pragma unroll 1
  for (int c = warp; c < nch; c += kDepth * kW) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      acc ^= fold(r[d]);
      issue(r[d], slot_next);
      slot_next = slot_of(c + (d + kDepth + 1) * kW);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) a.sink[(static_cast<int64_t>(s) * a.num_kv_heads + kvh) * kW + warp] = acc;
}

template <typename C, int kDepth>
Status launch_probe(const ProbeArgs& a, int num_seqs, int blocks_per_sm, void* stream,
                    int* resident) {
  const auto kernel = decode_read_probe_kernel<C, kDepth>;
  // Shared memory per SM on sm_90: 228 KiB, of which each block reserves 1 KiB.
  const int smem = blocks_per_sm > 0 ? (228 * 1024) / blocks_per_sm - 1024 : 0;
  if (smem > 48 * 1024)
    FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), smem));
  const int threads = 32 * kReadProbeWarps;
  if (resident != nullptr)
    FOLIO_CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(resident, kernel, threads, smem));
  kernel<<<dim3(a.num_kv_heads, num_seqs), threads, smem, as_stream(stream)>>>(a);
  return launch_status("decode_read_probe_kernel");
}

template <typename C>
Status launch_depth(const ProbeArgs& a, int num_seqs, int depth, int blocks_per_sm, void* stream,
                    int* resident) {
  switch (depth) {
    case 1:
      return launch_probe<C, 1>(a, num_seqs, blocks_per_sm, stream, resident);
    case 2:
      return launch_probe<C, 2>(a, num_seqs, blocks_per_sm, stream, resident);
    default:
      return launch_probe<C, 3>(a, num_seqs, blocks_per_sm, stream, resident);
  }
}

}  // namespace
}  // namespace detail

Status decode_read_probe(const PagedAttentionParams& p, int depth, int blocks_per_sm,
                         uint32_t* sink, void* stream, int* resident) {
  if (p.head_dim != detail::tc::kD)
    return invalid_argument("decode_read_probe: head_dim must be 128");
  if (depth < 1 || depth > 3) return invalid_argument("decode_read_probe: depth must be 1, 2 or 3");
  if (blocks_per_sm < 0 || blocks_per_sm > 8)
    return invalid_argument("decode_read_probe: blocks_per_sm must be 0..8");
  if (p.num_seqs <= 0 || p.num_seqs > 65535 || p.num_kv_heads <= 0 || p.block_size <= 0 ||
      sink == nullptr)
    return invalid_argument("decode_read_probe: empty batch, bad geometry or no sink");
  detail::ProbeArgs a{};
  a.set_pointers(p);
  a.num_kv_heads = p.num_kv_heads;
  a.block_size = p.block_size;
  a.sink = sink;
  if (p.kv_dtype == KvCacheDtype::kFp8E4m3)
    return detail::launch_depth<uint8_t>(a, p.num_seqs, depth, blocks_per_sm, stream, resident);
  return detail::launch_depth<__nv_bfloat16>(a, p.num_seqs, depth, blocks_per_sm, stream, resident);
}

}  // namespace folio::cuda
