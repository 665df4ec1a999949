// The two-shot peer all-reduce (peer_all_reduce.h): in place, no staging, for messages of any
// size. Per call, block b of every rank:
//   1. stores buf's address into slot [b][rank] of every rank and raises flag [b][rank] there to
//      2c - 1 (c: the block's call number); waits for every rank's flag [b][p] >= 2c - 1 on its
//      own memory and reads their addresses. A rank's buf is complete by then: the kernels that
//      wrote it ended before this one started.
//   2. sums its share of this rank's part (vectors [rank * part, (rank + 1) * part)) over every
//      rank's buf in rank order in fp32, rounds once and stores the result into every rank's buf.
//      Rank p reads and writes only part p of any buf, so the parts never race.
//   3. raises flag [b][rank] to 2c on every rank and waits for every rank's 2c: after that, no
//      rank still reads this rank's buf (its next kernels may overwrite it) and every rank's
//      stores into it are visible.
// Block b waits only for block b of the other ranks. Blocks dispatch in order, so progress needs
// only the lowest unfinished block running on every rank; the grid (v.two_shot_blocks) is still
// kept within what is resident at once (peer_all_reduce_two_shot_fits), so no block queues
// behind a spinning one. A rank can be at most one phase
// ahead of a waiter, so the flags' "at least" test pairs the calls; counters live on the device,
// so graphs replay it.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/peer_all_reduce.h"
#include "backend/cuda/peer_sync.cuh"

namespace folio::cuda {
namespace {

constexpr int kTwoShotThreads = 512;

// W: the world size. Each thread keeps kLoads 16-byte loads in flight per iteration: U vectors
// from each of the W ranks.
template <typename T, int W>
__global__ void __launch_bounds__(kTwoShotThreads)
    peer_two_shot_kernel(PeerAllReduceView v, T* buf, size_t vectors) {
  constexpr int kLoads = 8, U = kLoads / W > 0 ? kLoads / W : 1;
  __shared__ uint32_t call_shared;
  __shared__ uint4* bufs[W];
  const int t = threadIdx.x, b = blockIdx.x, rank = v.rank;
  if (t == 0) call_shared = v.two_shot_calls[b] + 1;
  __syncthreads();
  const uint32_t call = call_shared;
  const int slot = b * kPeerMaxRanks;
  if (t < W) {  // thread t talks to rank t
    v.two_shot_ptrs[t][slot + rank] = reinterpret_cast<uint64_t>(buf);
    store_release_sys(v.two_shot_flags[t] + slot + rank, 2 * call - 1);
    wait_flag(v.two_shot_flags[rank] + slot + t, 2 * call - 1);
    bufs[t] = reinterpret_cast<uint4*>(
        *reinterpret_cast<volatile uint64_t*>(v.two_shot_ptrs[rank] + slot + t));
  }
  __syncthreads();
  const size_t part = (vectors + W - 1) / W;
  const size_t lo = min(vectors, rank * part), hi = min(vectors, lo + part);
  const size_t stride = static_cast<size_t>(gridDim.x) * kTwoShotThreads;
  for (size_t i0 = lo + static_cast<size_t>(b) * kTwoShotThreads + t; i0 < hi; i0 += stride * U) {
    uint4 raw[U][W];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int p = 0; p < W; ++p)
        if (i0 + u * stride < hi) raw[u][p] = __ldcg(bufs[p] + i0 + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const size_t i = i0 + u * stride;
      if (i >= hi) break;
      float acc[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] = 0.0f;
#pragma unroll
      for (int p = 0; p < W; ++p) {
        const T* e = reinterpret_cast<const T*>(&raw[u][p]);
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[k] += to_float(e[k]);
      }
      uint4 sum;
      T* s = reinterpret_cast<T*>(&sum);
#pragma unroll
      for (int k = 0; k < 8; ++k) s[k] = from_float<T>(acc[k]);
#pragma unroll
      for (int p = 0; p < W; ++p) __stcg(bufs[p] + i, sum);
    }
  }
  __syncthreads();  // the block's stores before the release (cumulative at system scope)
  if (t < W) {
    store_release_sys(v.two_shot_flags[t] + slot + rank, 2 * call);
    wait_flag(v.two_shot_flags[rank] + slot + t, 2 * call);
  }
  if (t == 0) v.two_shot_calls[b] = call;
}

template <typename T>
void* kernel_for(int world) {
  switch (world) {
    case 2:
      return reinterpret_cast<void*>(peer_two_shot_kernel<T, 2>);
    case 4:
      return reinterpret_cast<void*>(peer_two_shot_kernel<T, 4>);
    case 8:
      return reinterpret_cast<void*>(peer_two_shot_kernel<T, 8>);
    default:
      return nullptr;
  }
}

}  // namespace

int peer_two_shot_resident_blocks(int world) {
  int device = 0, sms = 0, fewest = kTwoShotMaxBlocks;
  if (!kernel_for<__nv_bfloat16>(world)) return 0;
  for (void* kernel : {kernel_for<__nv_bfloat16>(world), kernel_for<__half>(world)}) {
    int per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kTwoShotThreads, 0) !=
            cudaSuccess) {
      (void)cudaGetLastError();  // reported as "none resident", not against a later launch
      return 0;
    }
    fewest = std::min(fewest, per_sm * sms);
  }
  return fewest;
}

bool peer_all_reduce_two_shot_fits(const PeerAllReduceView& v, size_t bytes) {
  return (v.world == 2 || v.world == 4 || v.world == 8) && v.two_shot_calls != nullptr &&
         bytes > 0 && bytes % 16 == 0 && v.two_shot_blocks >= 1 &&
         v.two_shot_blocks <= v.two_shot_resident;
}

PeerAllReduceForm peer_all_reduce_form(const PeerAllReduceView& v, size_t bytes) {
  const bool two = v.two_shot_from != kPeerTwoShotOff && peer_all_reduce_two_shot_fits(v, bytes);
  if (two && bytes >= v.two_shot_from) return PeerAllReduceForm::kTwoShot;
  if (peer_all_reduce_fits(v, bytes)) return PeerAllReduceForm::kOneShot;
  return two ? PeerAllReduceForm::kTwoShot : PeerAllReduceForm::kNone;
}

Status peer_all_reduce_two_shot(const PeerAllReduceView& v, DType dt, void* buf, size_t elems,
                                void* stream) {
  const size_t bytes = elems * dtype_size(dt);
  if (!peer_all_reduce_two_shot_fits(v, bytes) || reinterpret_cast<uintptr_t>(buf) % 16 != 0)
    return internal_error("peer all-reduce (two-shot): " + std::to_string(bytes) + " bytes over " +
                          std::to_string(v.world) +
                          " ranks are not whole 16-byte vectors on 2, 4 or 8 ranks");
  size_t vectors = bytes / 16;
  return FOLIO_DISPATCH_DTYPE(dt, T, [&] {
    PeerAllReduceView view = v;
    void* args[] = {&view, &buf, &vectors};
    FOLIO_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(kernel_for<T>(v.world), dim3(v.two_shot_blocks),
                                                dim3(kTwoShotThreads), args, 0, as_stream(stream)));
    return Status();
  });
}

}  // namespace folio::cuda
