// The read probe (decode_read_probe.h): tc's loads and reads back in each of its forms
// (decode_attention_tc_layout.cuh's issue_chunk, decode_attention_tc_stages.cuh's cp.async and
// bulk-row stages) without its arithmetic.
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/decode_attention_tc_stages.cuh"
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

// What every form needs to find a lane's rows: the caches, the strides, tc's lane coordinates.
template <typename C>
struct Rows {
  const C* k;
  const C* v;
  int64_t slot_stride, head_off;
  int lane, g, t, pg;  // pg: tc's pi(g)
};

// The XOR of a chunk's pieces (zeros past the end fold to nothing).
template <typename C>
__device__ __forceinline__ uint32_t fold(const tc::ChunkRegs<__nv_bfloat16, C>& r) {
  using L = tc::Cache<__nv_bfloat16, C>;
  auto fold4 = [](const uint4& v) { return v.x ^ v.y ^ v.z ^ v.w; };
  uint32_t x = 0;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int q = 0; q < L::kKLoads; ++q) x ^= fold4(r.k[i][q]);
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int q = 0; q < L::kVLoads; ++q) x ^= fold4(r.v[i][q]);
  return x;
}

// The three forms, each: issue(d, ...) puts a chunk in flight into stage d, wait(d, round) waits
// for it (the round-th fill of stage d), read(d, ...) gives its pieces as tc's registers hold them.

// tc's register form: kDepth buffers of ChunkRegs, no shared memory.
template <typename C, int kDepth>
struct RegisterStages {
  static constexpr int kStageBytes = 0;  // shared memory per stage and warp
  tc::ChunkRegs<__nv_bfloat16, C> r[kDepth];
  __device__ void init(uint8_t*, uint64_t*, const Rows<C>&) {}
  __device__ void issue(int d, const Rows<C>& w, int slot_lane) {
    tc::issue_chunk(r[d], w.k, w.v, w.slot_stride, w.head_off, slot_lane, w.pg, w.g, w.t);
  }
  __device__ void wait(int, int) {}
  __device__ const tc::ChunkRegs<__nv_bfloat16, C>& read(int d, int, int, const Rows<C>&) {
    return r[d];
  }
};

// tc's cp.async ring: each lane's pieces into its own slots, [stage][load][lane].
template <typename C, int kDepth>
struct CpAsyncStages {
  static constexpr int kPer = tc::kLoadsPerLane<__nv_bfloat16, C>;
  static constexpr int kStageBytes = kPer * 32 * 16;
  uint4* ring;  // the warp's stages + lane
  tc::ChunkRegs<__nv_bfloat16, C> cur;
  __device__ void init(uint8_t* warp_smem, uint64_t*, const Rows<C>& w) {
    ring = reinterpret_cast<uint4*>(warp_smem) + w.lane;
  }
  __device__ void issue(int d, const Rows<C>& w, int slot_lane) {
    tc::issue_chunk_async<__nv_bfloat16, C>(ring + d * kPer * 32, w.k, w.v, w.slot_stride,
                                            w.head_off, slot_lane, w.pg, w.g, w.t);
    cp_async_commit();
  }
  // Stages are issued and read in turn, so the one read next is the oldest of kDepth groups.
  __device__ void wait(int, int) { cp_async_wait<kDepth - 1>(); }
  __device__ const tc::ChunkRegs<__nv_bfloat16, C>& read(int d, int, int, const Rows<C>&) {
    tc::read_chunk_async(cur, ring + d * kPer * 32);  // zero-filled past the end
    return cur;
  }
};

// tc's bulk form: whole rows by bulk copies, a stage's mbarrier counting their bytes.
template <typename C, int kDepth>
struct BulkRowStages {
  static constexpr int kStageBytes = tc::kBulkStageBytes<C>;
  uint8_t* buf;   // the warp's stages
  uint64_t* bar;  // the warp's kDepth barriers
  tc::ChunkRegs<__nv_bfloat16, C> cur;
  __device__ void init(uint8_t* warp_smem, uint64_t* warp_bars, const Rows<C>& w) {
    buf = warp_smem;
    bar = warp_bars;
    if (w.lane == 0) {
      for (int d = 0; d < kDepth; ++d) mbarrier_init(bar + d, 1);
      fence_mbarrier_init();
    }
    __syncwarp();
  }
  __device__ void issue(int d, const Rows<C>& w, int slot_lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();  // bulk copies need sm_90; decode_read_probe checks the device first
#else
    __syncwarp();  // every lane has read the stage before it is refilled
    tc::issue_chunk_rows<C>(buf + d * kStageBytes, bar + d, w.k, w.v, w.slot_stride, w.head_off,
                            slot_lane, w.lane);
#endif
  }
  __device__ void wait(int d, int round) {
    mbarrier_wait_parity(bar + d, round & 1);
  }
  // Rows past the end (n tokens; c: the chunk) were not copied: their pieces become zeros.
  __device__ const tc::ChunkRegs<__nv_bfloat16, C>& read(int d, int c, int n, const Rows<C>& w) {
    using L = tc::Cache<__nv_bfloat16, C>;
    tc::read_chunk_rows(cur, buf + d * kStageBytes, w.pg, w.g, w.t);
#pragma unroll
    for (int x = 0; x < 2; ++x)
      if (c * tc::kChunk + w.pg + 2 * x >= n)
#pragma unroll
        for (int q = 0; q < L::kKLoads; ++q) cur.k[x][q] = make_uint4(0, 0, 0, 0);
    tc::zero_v_past_end(cur, c * tc::kChunk + 4 * w.t, n);
    return cur;
  }
};

// grid (num_kv_heads, num_seqs), 32 * kReadProbeWarps threads; dynamic shared memory: the warps'
// stages (kReadProbeWarps * kDepth * S::kStageBytes), then their barriers, then any padding.
// S: one of the stage forms above, kDepth chunks in flight per warp. Stage d of a warp holds its
// chunks c + d kW of each round; once folded it takes chunk c + (d + kDepth) kW. Chunks past the
// end read nothing and fold to nothing.
template <typename C, int kDepth, template <typename, int> class S>
__global__ void __launch_bounds__(32 * kReadProbeWarps) decode_read_probe_kernel(ProbeArgs a) {
  using Stages = S<C, kDepth>;
  constexpr int kW = kReadProbeWarps;
  extern __shared__ __align__(128) uint8_t probe_smem[];
  const int kvh = blockIdx.x, s = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  Rows<C> w{reinterpret_cast<const C*>(a.k_cache),
            reinterpret_cast<const C*>(a.v_cache),
            static_cast<int64_t>(a.num_kv_heads) * tc::kD,
            static_cast<int64_t>(kvh) * tc::kD,
            lane,
            g,
            lane % 4,
            4 * (g / 2) + g % 2};
  const int n = a.context_lens[s];
  const int32_t* table = a.block_table + a.block_table_start[s];
  const int nch = (n + tc::kChunk - 1) / tc::kChunk;

  // Lane L: the slot of token L % 16 of chunk c, -1 past the context.
  auto slot_of = [&](int c) {
    const int tok = c * tc::kChunk + lane % tc::kChunk;
    if (tok >= n) return -1;
    const int page = tok / a.block_size;
    return table[page] * a.block_size + (tok - page * a.block_size);
  };

  Stages st;
  uint64_t* bars = reinterpret_cast<uint64_t*>(probe_smem + kW * kDepth * Stages::kStageBytes);
  st.init(probe_smem + warp * kDepth * Stages::kStageBytes, bars + warp * kDepth, w);
#pragma unroll
  for (int d = 0; d < kDepth; ++d) st.issue(d, w, slot_of(warp + d * kW));
  int slot_next = slot_of(warp + kDepth * kW);  // one issue ahead: the table read off the path
  uint32_t acc = 0;
  int round = 0;
#pragma unroll 1
  for (int c = warp; c < nch; c += kDepth * kW, ++round) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      st.wait(d, round);
      acc ^= fold(st.read(d, c + d * kW, n, w));
      st.issue(d, w, slot_next);
      slot_next = slot_of(c + (d + kDepth + 1) * kW);
    }
  }
  if constexpr (Stages::kStageBytes > 0) cp_async_wait<0>();  // no zero fill left in flight
#pragma unroll
  for (int off = 16; off > 0; off /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) a.sink[(static_cast<int64_t>(s) * a.num_kv_heads + kvh) * kW + warp] = acc;
}

template <typename C, int kDepth, template <typename, int> class S>
Status launch_probe(const ProbeArgs& a, int num_seqs, int blocks_per_sm, void* stream,
                    int* resident) {
  const auto kernel = decode_read_probe_kernel<C, kDepth, S>;
  constexpr int kStageBytes = S<C, kDepth>::kStageBytes;  // + 8: a stage's barrier
  const int own = kStageBytes > 0 ? kReadProbeWarps * kDepth * (kStageBytes + 8) : 0;
  // Shared memory per SM on sm_90: 228 KiB, of which each block reserves 1 KiB.
  const int pad = blocks_per_sm > 0 ? (228 * 1024) / blocks_per_sm - 1024 : 0;
  const int smem = own > pad ? own : pad;
  if (smem > 48 * 1024) {  // at the device's most: opt_in_dynamic_smem sets a kernel's once
    int device = 0, most = 0;
    FOLIO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    FOLIO_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (smem > most)
      return invalid_argument("decode_read_probe: shared memory beyond the device's");
    FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), most));
  }
  const int threads = 32 * kReadProbeWarps;
  if (resident != nullptr)
    FOLIO_CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(resident, kernel, threads, smem));
  kernel<<<dim3(a.num_kv_heads, num_seqs), threads, smem, as_stream(stream)>>>(a);
  return launch_status("decode_read_probe_kernel");
}

template <typename C, template <typename, int> class S>
Status launch_depth(const ProbeArgs& a, int num_seqs, int depth, int blocks_per_sm, void* stream,
                    int* resident) {
  switch (depth) {
    case 1:
      return launch_probe<C, 1, S>(a, num_seqs, blocks_per_sm, stream, resident);
    case 2:
      return launch_probe<C, 2, S>(a, num_seqs, blocks_per_sm, stream, resident);
    case 3:
      return launch_probe<C, 3, S>(a, num_seqs, blocks_per_sm, stream, resident);
    default:
      if constexpr (S<C, 1>::kStageBytes == 0) {  // registers: depth <= 3 (checked before)
        return invalid_argument("decode_read_probe: depth");
      } else {
        switch (depth) {
          case 4:
            return launch_probe<C, 4, S>(a, num_seqs, blocks_per_sm, stream, resident);
          case 5:
            return launch_probe<C, 5, S>(a, num_seqs, blocks_per_sm, stream, resident);
          default:
            return launch_probe<C, 6, S>(a, num_seqs, blocks_per_sm, stream, resident);
        }
      }
  }
}

template <typename C>
Status launch_staging(const ProbeArgs& a, int num_seqs, ReadProbeStaging staging, int depth,
                      int blocks_per_sm, void* stream, int* resident) {
  switch (staging) {
    case ReadProbeStaging::kRegisters:
      return launch_depth<C, RegisterStages>(a, num_seqs, depth, blocks_per_sm, stream, resident);
    case ReadProbeStaging::kCpAsync:
      return launch_depth<C, CpAsyncStages>(a, num_seqs, depth, blocks_per_sm, stream, resident);
    default:
      return launch_depth<C, BulkRowStages>(a, num_seqs, depth, blocks_per_sm, stream, resident);
  }
}

}  // namespace
}  // namespace detail

Status decode_read_probe(const PagedAttentionParams& p, ReadProbeStaging staging, int depth,
                         int blocks_per_sm, uint32_t* sink, void* stream, int* resident) {
  if (p.head_dim != detail::tc::kD)
    return invalid_argument("decode_read_probe: head_dim must be 128");
  if (staging != ReadProbeStaging::kRegisters && staging != ReadProbeStaging::kCpAsync &&
      staging != ReadProbeStaging::kBulkRows)
    return invalid_argument("decode_read_probe: unknown staging");
  if (depth < 1 || depth > read_probe_max_depth(staging))
    return invalid_argument("decode_read_probe: depth out of range for this staging");
  if (blocks_per_sm < 0 || blocks_per_sm > 8)
    return invalid_argument("decode_read_probe: blocks_per_sm must be 0..8");
  if (p.num_seqs <= 0 || p.num_seqs > 65535 || p.num_kv_heads <= 0 || p.block_size <= 0 ||
      sink == nullptr)
    return invalid_argument("decode_read_probe: empty batch, bad geometry or no sink");
  if (staging == ReadProbeStaging::kBulkRows) {
    int device = 0, major = 0;
    FOLIO_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    FOLIO_CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 9) return invalid_argument("decode_read_probe: bulk copies need sm_90");
  }
  detail::ProbeArgs a{};
  a.set_pointers(p);
  a.num_kv_heads = p.num_kv_heads;
  a.block_size = p.block_size;
  a.sink = sink;
  if (p.kv_dtype == KvCacheDtype::kFp8E4m3)
    return detail::launch_staging<uint8_t>(a, p.num_seqs, staging, depth, blocks_per_sm, stream,
                                           resident);
  return detail::launch_staging<__nv_bfloat16>(a, p.num_seqs, staging, depth, blocks_per_sm, stream,
                                               resident);
}

}  // namespace folio::cuda
