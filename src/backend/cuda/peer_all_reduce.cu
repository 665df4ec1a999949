#include <algorithm>
#include <string>
#include <utility>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/peer_all_reduce.h"
#include "backend/cuda/peer_sync.cuh"
#include "backend/cuda/rms_norm.h"

namespace folio::cuda {
namespace {

// Every call, plain or fused with the norm, runs the same grid (kPeerMaxBlocks x kThreads), so
// each block's call counter (hence the staging half) is the same in every block and on every
// rank.
constexpr int kThreads = 512;

// A rank raises call c's flag at most one call ahead of a waiter (it cannot finish call c+1
// before the waiter raised its own flags of c+1), so wait_flag's "at least c" is the test.
// The block's call number (its counter + 1) and the byte offset of that call's staging half.
__device__ __forceinline__ uint32_t begin_call(const PeerAllReduceView& v, size_t& half) {
  __shared__ uint32_t call_shared;
  if (threadIdx.x == 0) call_shared = v.calls[blockIdx.x] + 1;
  __syncthreads();
  const uint32_t call = call_shared;
  half = (call & 1u) * static_cast<size_t>(v.world) * v.max_bytes;
  return call;
}

// Thread p tells rank p this block's part is there, then waits for rank p's. The barrier before
// orders the block's stores before the release (cumulative, system scope), and the acquire plus
// the barrier after order the peers' stores before the block's reads.
__device__ __forceinline__ void exchange_flags(const PeerAllReduceView& v, uint32_t call) {
  __syncthreads();
  const int t = threadIdx.x, b = blockIdx.x;
  if (t < v.world) {
    store_release_sys(v.flags[t] + b * kPeerMaxRanks + v.rank, call);
    wait_flag(v.flags[v.rank] + b * kPeerMaxRanks + t, call);
  }
  __syncthreads();
}

__device__ __forceinline__ void push_vector(const PeerAllReduceView& v, size_t half, int i,
                                            uint4 val) {
  for (int p = 0; p < v.world; ++p) {
    auto* slot = static_cast<char*>(v.staging[p]) + half + v.rank * v.max_bytes;
    reinterpret_cast<uint4*>(slot)[i] = val;
  }
}

// Vector i summed over the ranks' slots in rank order, in fp32, read through L2.
template <typename T>
__device__ __forceinline__ void sum_vector(const PeerAllReduceView& v, size_t half, int i,
                                           float (&acc)[8]) {
  const auto* own = static_cast<const char*>(v.staging[v.rank]) + half;
#pragma unroll
  for (int k = 0; k < 8; ++k) acc[k] = 0.0f;
  for (int p = 0; p < v.world; ++p) {
    const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(own + p * v.max_bytes) + i);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[k] += to_float(e[k]);
  }
}

// Block b owns rows b, b + grid, ...: it pushes them, exchanges flags, then per row sums the
// packs into x (rounded to T) and normalises as rms_norm's block kernel does (rms_norm_smem.cuh
// explains the order: virtual warps of 32 packs, a warp_sum each, then one over the partials).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    peer_all_reduce_norm_kernel(PeerAllReduceView v, T* x, const T* weight, T* y, int rows, int dim,
                                float eps) {
  size_t half = 0;
  const uint32_t call = begin_call(v, half);
  const int packs = dim / 8, vwarps = (packs + 31) / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = kThreads / 32;
  for (int r = blockIdx.x; r < rows; r += gridDim.x)
    for (int i = threadIdx.x; i < packs; i += kThreads)
      push_vector(v, half, r * packs + i, reinterpret_cast<const uint4*>(x)[r * packs + i]);
  exchange_flags(v, call);
  __shared__ float partial[32];
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    T* xr = x + static_cast<size_t>(r) * dim;
    for (int vw = warp; vw < vwarps; vw += warps) {  // warp-uniform
      const int i = vw * 32 + lane;
      float ss = 0.f;
      if (i < packs) {
        float acc[8];
        sum_vector<T>(v, half, r * packs + i, acc);
        store_floats<8>(xr + i * 8, acc);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          acc[j] = to_float(from_float<T>(acc[j]));  // the value just stored, as rms_norm reads it
          ss += acc[j] * acc[j];
        }
      }
      ss = warp_sum(ss);
      if (lane == 0) partial[vw] = ss;
    }
    __syncthreads();
    const float t = lane < vwarps ? partial[lane] : 0.f;
    const float inv = rsqrtf(warp_sum(t) / dim + eps);
    for (int vw = warp; vw < vwarps; vw += warps) {
      const int i = vw * 32 + lane;
      if (i < packs) {  // the pack this thread stored above
        float a[8], w[8];
        load_floats<8>(xr + i * 8, a);
        load_floats<8>(weight + i * 8, w);
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] = a[j] * inv * w[j];
        store_floats<8>(y + static_cast<size_t>(r) * dim + i * 8, a);
      }
    }
    __syncthreads();  // partial is reused by the next row
  }
  if (threadIdx.x == 0) v.calls[blockIdx.x] = call;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    peer_all_reduce_kernel(PeerAllReduceView v, T* buf, int vectors) {
  size_t half = 0;
  const uint32_t call = begin_call(v, half);
  const int first = blockIdx.x * kThreads + threadIdx.x, stride = gridDim.x * kThreads;
  // 1. This rank's vectors into slot [rank] of every rank's staging half; 2. the flags.
  for (int i = first; i < vectors; i += stride)
    push_vector(v, half, i, reinterpret_cast<const uint4*>(buf)[i]);
  exchange_flags(v, call);
  // 3. The slots summed in rank order (the same bits on every rank).
  for (int i = first; i < vectors; i += stride) {
    float acc[8];
    sum_vector<T>(v, half, i, acc);
    store_floats<8>(buf + static_cast<size_t>(i) * 8, acc);
  }
  if (threadIdx.x == 0) v.calls[blockIdx.x] = call;
}

}  // namespace

bool peer_all_reduce_fits(const PeerAllReduceView& v, size_t bytes) {
  return v.world >= 2 && bytes <= v.max_bytes && bytes % 16 == 0;
}

Status peer_all_reduce_sum(const PeerAllReduceView& v, DType dt, void* buf, size_t elems,
                           void* stream) {
  const size_t bytes = elems * dtype_size(dt);
  if (!peer_all_reduce_fits(v, bytes) || reinterpret_cast<uintptr_t>(buf) % 16 != 0)
    return internal_error("peer all-reduce: " + std::to_string(bytes) +
                          " bytes do not fit its buffers or 16-byte vectors");
  const int vectors = static_cast<int>(bytes / 16);
  // A plain launch: it starts once every earlier kernel has ended, which the staging halves'
  // reuse relies on. Launched with PDL (the next kernel's weight loads overlapping the exchange)
  // B3 -tp 2 ran 2.4% slower (NOTES.md, session 37).
  return FOLIO_DISPATCH_DTYPE(dt, T, [&] {
    peer_all_reduce_kernel<T>
        <<<kPeerMaxBlocks, kThreads, 0, as_stream(stream)>>>(v, static_cast<T*>(buf), vectors);
    return launch_status("peer_all_reduce_kernel");
  });
}

bool peer_all_reduce_norm_fits(const PeerAllReduceView& v, int rows, int dim) {
  return rows > 0 && rms_norm_is_block_pack8(dim) &&  // at most 1024 packs: 32 virtual warps
         peer_all_reduce_fits(v, static_cast<size_t>(rows) * dim * 2);
}

Status peer_all_reduce_rms_norm(const PeerAllReduceView& v, DType dt, void* x, const void* weight,
                                void* y, int rows, int dim, float eps, void* stream) {
  if (!peer_all_reduce_norm_fits(v, rows, dim) ||
      (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(weight) |
       reinterpret_cast<uintptr_t>(y)) %
              16 !=
          0)
    return internal_error("peer all-reduce + rms_norm: [" + std::to_string(rows) + ", " +
                          std::to_string(dim) + "] does not fit");
  return FOLIO_DISPATCH_DTYPE(dt, T, [&] {
    peer_all_reduce_norm_kernel<T><<<kPeerMaxBlocks, kThreads, 0, as_stream(stream)>>>(
        v, static_cast<T*>(x), static_cast<const T*>(weight), static_cast<T*>(y), rows, dim, eps);
    return launch_status("peer_all_reduce_norm_kernel");
  });
}

// Beyond two ranks each rank's stores cross to world - 1 peers at once, which PCIe P2P serves
// poorly (vLLM turns its custom all-reduce off there too): more than two ranks also need native
// atomics between every pair, which NVLink gives and PCIe P2P does not.
bool PeerAllReduceRank::all_peers_reachable(int world) {
  if (world < 2 || world > kPeerMaxRanks) return false;
  // Block b waits only for block b of the other ranks, so all kPeerMaxBlocks blocks must be
  // resident at once (a small MIG slice might not hold them). The current device stands for
  // all: tensor-parallel GPUs are one model.
  int device = 0, sms = 0, per_sm_plain = 0, per_sm_norm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm_plain, peer_all_reduce_kernel<__nv_bfloat16>, kThreads, 0) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm_norm, peer_all_reduce_norm_kernel<__nv_bfloat16>, kThreads, 0) != cudaSuccess ||
      std::min(per_sm_plain, per_sm_norm) * sms < kPeerMaxBlocks)
    return false;
  for (int a = 0; a < world; ++a)
    for (int b = 0; b < world; ++b) {
      if (a == b) continue;
      int ok = 0;
      if (cudaDeviceCanAccessPeer(&ok, a, b) != cudaSuccess || !ok) return false;
      if (world > 2 && (cudaDeviceGetP2PAttribute(&ok, cudaDevP2PAttrNativeAtomicSupported, a, b) !=
                            cudaSuccess ||
                        !ok))
        return false;
    }
  return true;
}

Status PeerAllReduceRank::enable_peer_access(int rank, int world) {
  for (int p = 0; p < world; ++p) {
    if (p == rank) continue;
    const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();  // not an error: clear it
      continue;
    }
    FOLIO_CUDA_RETURN_IF_ERROR(e);
  }
  return Status();
}

Result<std::unique_ptr<PeerAllReduceRank>> PeerAllReduceRank::allocate(int rank, int world,
                                                                       size_t max_bytes) {
  if (world < 2 || world > kPeerMaxRanks || rank < 0 || rank >= world || max_bytes % 16 != 0)
    return invalid_argument("peer all-reduce: bad rank / world / size");
  auto r = std::unique_ptr<PeerAllReduceRank>(new PeerAllReduceRank());
  const size_t flag_bytes = sizeof(uint32_t) * kPeerMaxBlocks * kPeerMaxRanks;
  const size_t call_bytes = sizeof(uint32_t) * kPeerMaxBlocks;
  FOLIO_ASSIGN_OR_RETURN(r->staging_, DeviceBuffer::allocate(2 * world * max_bytes));
  FOLIO_ASSIGN_OR_RETURN(r->flags_, DeviceBuffer::allocate(flag_bytes));
  FOLIO_ASSIGN_OR_RETURN(r->calls_, DeviceBuffer::allocate(call_bytes));
  const size_t two_shot_slots = size_t{kTwoShotMaxBlocks} * kPeerMaxRanks;
  FOLIO_ASSIGN_OR_RETURN(r->two_shot_flags_,
                         DeviceBuffer::allocate(sizeof(uint32_t) * two_shot_slots));
  FOLIO_ASSIGN_OR_RETURN(r->two_shot_ptrs_,
                         DeviceBuffer::allocate(sizeof(uint64_t) * two_shot_slots));
  FOLIO_ASSIGN_OR_RETURN(r->two_shot_calls_,
                         DeviceBuffer::allocate(sizeof(uint32_t) * kTwoShotMaxBlocks));
  for (DeviceBuffer* b : {&r->flags_, &r->calls_, &r->two_shot_flags_, &r->two_shot_calls_})
    FOLIO_CUDA_RETURN_IF_ERROR(cudaMemset(b->data(), 0, b->bytes()));
  // Zeroed before returning: another rank's first call may raise a flag here right after.
  FOLIO_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  r->view_.rank = rank;
  r->view_.world = world;
  r->view_.max_bytes = max_bytes;
  r->view_.calls = r->calls_.as<uint32_t>();
  r->view_.two_shot_calls = r->two_shot_calls_.as<uint32_t>();
  r->view_.two_shot_resident = peer_two_shot_resident_blocks(world);
  return Result<std::unique_ptr<PeerAllReduceRank>>(std::move(r));
}

void PeerAllReduceRank::connect(const std::vector<PeerAllReduceRank*>& ranks) {
  for (PeerAllReduceRank* r : ranks)
    for (size_t p = 0; p < ranks.size(); ++p) {
      r->view_.staging[p] = ranks[p]->staging_.data();
      r->view_.flags[p] = ranks[p]->flags_.as<uint32_t>();
      r->view_.two_shot_flags[p] = ranks[p]->two_shot_flags_.as<uint32_t>();
      r->view_.two_shot_ptrs[p] = ranks[p]->two_shot_ptrs_.as<uint64_t>();
    }
}

}  // namespace folio::cuda
