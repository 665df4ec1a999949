#include <string>
#include <utility>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/peer_all_reduce.h"

namespace folio::cuda {
namespace {

// Every call runs the same grid, so each block's call counter (hence the staging half) is the
// same in every block and on every rank.
constexpr int kThreads = 512;
constexpr unsigned long long kSpinTimeoutNs = 60ull * 1000 * 1000 * 1000;

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// A rank raises call c's flag at most one call ahead of a waiter (it cannot finish call c+1
// before the waiter raised its own flags of c+1), so "at least c" is the test.
__device__ void wait_flag(const uint32_t* flag, uint32_t call) {
  const unsigned long long start = global_ns();
  for (int spins = 0; static_cast<int32_t>(load_acquire_sys(flag) - call) < 0; ++spins)
    if ((spins & 1023) == 1023 && global_ns() - start > kSpinTimeoutNs) __trap();
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    peer_all_reduce_kernel(PeerAllReduceView v, T* buf, int vectors) {
  __shared__ uint32_t call_shared;
  const int b = blockIdx.x, t = threadIdx.x;
  if (t == 0) call_shared = v.calls[b] + 1;
  __syncthreads();
  const uint32_t call = call_shared;
  const size_t half = (call & 1u) * static_cast<size_t>(v.world) * v.max_bytes;
  const int stride = gridDim.x * kThreads;
  // 1. This rank's vectors into slot [rank] of every rank's staging half.
  for (int i = b * kThreads + t; i < vectors; i += stride) {
    const uint4 val = reinterpret_cast<const uint4*>(buf)[i];
    for (int p = 0; p < v.world; ++p) {
      auto* slot = static_cast<char*>(v.staging[p]) + half + v.rank * v.max_bytes;
      reinterpret_cast<uint4*>(slot)[i] = val;
    }
  }
  __syncthreads();
  // 2. Thread p tells rank p this block's part is there, then waits for rank p's. The barrier
  // orders the block's stores before the release (cumulative, system scope), and the acquire
  // plus the barrier below order the peers' stores before this block's reads.
  if (t < v.world) {
    store_release_sys(v.flags[t] + b * kPeerMaxRanks + v.rank, call);
    wait_flag(v.flags[v.rank] + b * kPeerMaxRanks + t, call);
  }
  __syncthreads();
  // 3. The slots summed in rank order (the same bits on every rank), read through L2 (the peers
  // wrote them there).
  const auto* own = static_cast<const char*>(v.staging[v.rank]) + half;
  for (int i = b * kThreads + t; i < vectors; i += stride) {
    float acc[8] = {};
    for (int p = 0; p < v.world; ++p) {
      const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(own + p * v.max_bytes) + i);
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] += to_float(e[k]);
    }
    store_floats<8>(buf + static_cast<size_t>(i) * 8, acc);
  }
  if (t == 0) v.calls[b] = call;
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
    peer_all_reduce_kernel<T><<<kPeerMaxBlocks, kThreads, 0, as_stream(stream)>>>(
        v, static_cast<T*>(buf), vectors);
    return launch_status("peer_all_reduce_kernel");
  });
}

bool PeerAllReduceRank::all_peers_reachable(int world) {
  if (world < 2 || world > kPeerMaxRanks) return false;
  for (int a = 0; a < world; ++a)
    for (int b = 0; b < world; ++b) {
      int ok = 0;
      if (a != b && (cudaDeviceCanAccessPeer(&ok, a, b) != cudaSuccess || !ok)) return false;
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
  FOLIO_ASSIGN_OR_RETURN(r->staging_, DeviceBuffer::allocate(2 * world * max_bytes));
  FOLIO_ASSIGN_OR_RETURN(r->flags_, DeviceBuffer::allocate(flag_bytes));
  FOLIO_ASSIGN_OR_RETURN(r->calls_, DeviceBuffer::allocate(sizeof(uint32_t) * kPeerMaxBlocks));
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemset(r->flags_.data(), 0, flag_bytes));
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemset(r->calls_.data(), 0, r->calls_.bytes()));
  r->view_.rank = rank;
  r->view_.world = world;
  r->view_.max_bytes = max_bytes;
  r->view_.calls = r->calls_.as<uint32_t>();
  return Result<std::unique_ptr<PeerAllReduceRank>>(std::move(r));
}

void PeerAllReduceRank::connect(const std::vector<PeerAllReduceRank*>& ranks) {
  for (PeerAllReduceRank* r : ranks)
    for (size_t p = 0; p < ranks.size(); ++p) {
      r->view_.staging[p] = ranks[p]->staging_.data();
      r->view_.flags[p] = ranks[p]->flags_.as<uint32_t>();
    }
}

}  // namespace folio::cuda
