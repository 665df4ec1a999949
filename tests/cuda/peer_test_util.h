// Helpers of the peer all-reduce tests (peer_all_reduce_test.cc, peer_all_reduce_two_shot_test.cc):
// a group of ranks with their buffers on rank threads, the host's rank-order sum, random inputs.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/dtype.h"
#include "backend/cuda/peer_all_reduce.h"
#include "backend/cuda/rms_norm.h"
#include "cuda_test_util.h"
#include "dist/rank_threads.h"

namespace folio::cuda {

using testing::from_bits;
using testing::to_bits;

inline int gpus() {
  auto n = device_count();
  return n.ok() ? *n : 0;
}

// Every rank's buffers, made and freed on the rank's thread (its device current).
struct PeerGroup {
  // max_bytes: the one-shot staging's limit; buf_bytes: each rank's buffer (default the same).
  explicit PeerGroup(int world, size_t max_bytes, size_t buf_bytes = 0)
      : threads(world), ranks(world), bufs(world) {
    status = threads.run([&](int r) -> Status {
      FOLIO_RETURN_IF_ERROR(set_device(r));
      FOLIO_RETURN_IF_ERROR(PeerAllReduceRank::enable_peer_access(r, world));
      FOLIO_ASSIGN_OR_RETURN(ranks[r], PeerAllReduceRank::allocate(r, world, max_bytes));
      FOLIO_ASSIGN_OR_RETURN(bufs[r], DeviceBuffer::allocate(buf_bytes ? buf_bytes : max_bytes));
      return Status();
    });
    if (!status.ok()) return;
    std::vector<PeerAllReduceRank*> views;
    for (auto& r : ranks) views.push_back(r.get());
    PeerAllReduceRank::connect(views);
  }
  ~PeerGroup() {
    (void)threads.run([&](int r) {
      bufs[r] = DeviceBuffer();
      ranks[r].reset();
      return Status();
    });
  }
  int world() const { return threads.world(); }
  RankThreads threads;
  std::vector<std::unique_ptr<PeerAllReduceRank>> ranks;
  std::vector<DeviceBuffer> bufs;
  Status status;
};

// The sum of the ranks' element i in rank order in fp32, rounded once.
inline std::vector<uint16_t> reference_sum(DType dt, const std::vector<std::vector<uint16_t>>& in) {
  std::vector<uint16_t> out(in[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    float acc = 0.0f;
    for (const auto& rank : in) acc += from_bits(dt, rank[i]);
    out[i] = to_bits(dt, acc);
  }
  return out;
}

// n elements of dt drawn uniformly from [lo, hi), in order.
inline std::vector<uint16_t> random_bits(DType dt, size_t n, std::mt19937& rng, float lo,
                                         float hi) {
  std::vector<uint16_t> v(n);
  for (auto& b : v) b = to_bits(dt, std::uniform_real_distribution<float>(lo, hi)(rng));
  return v;
}

// One such vector per rank.
inline std::vector<std::vector<uint16_t>> random_ranks(int world, DType dt, size_t n,
                                                       std::mt19937& rng, float lo, float hi) {
  std::vector<std::vector<uint16_t>> in;
  for (int r = 0; r < world; ++r) in.push_back(random_bits(dt, n, rng, lo, hi));
  return in;
}

// One device buffer per call holding that call's input (xs), and one of the same size for its
// output (ys), on the current device.
inline Status upload_calls(const std::vector<std::vector<uint16_t>>& calls,
                           std::vector<DeviceBuffer>& xs, std::vector<DeviceBuffer>& ys) {
  for (const auto& in : calls) {
    const size_t bytes = in.size() * 2;
    FOLIO_ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::allocate(bytes));
    FOLIO_ASSIGN_OR_RETURN(DeviceBuffer y, DeviceBuffer::allocate(bytes));
    FOLIO_RETURN_IF_ERROR(copy(x.data(), in.data(), bytes));
    xs.push_back(std::move(x));
    ys.push_back(std::move(y));
  }
  return Status();
}

// Replays `graph` `replays` times and waits; on rank 1, 24 memsets of `hold` on a stream of its
// own run meanwhile and slow it down, so that rank 0 runs ahead of its pair.
inline Status replay_with_rank1_slowed(int rank, CudaGraph& graph, DeviceBuffer& hold,
                                       int replays) {
  cudaStream_t side = nullptr;
  if (rank == 1) {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    for (int k = 0; k < 24; ++k)
      FOLIO_RETURN_IF_ERROR(memset_async(hold.data(), k, hold.bytes(), side));
  }
  Status st;
  for (int replay = 0; replay < replays && st.ok(); ++replay) st = graph.launch(nullptr);
  if (st.ok()) st = synchronize();
  if (side) cudaStreamDestroy(side);
  return st;
}

// What a graph test reads back per call: x after the replays, and for the fused calls y and
// rms_norm (rms_norm.h) of that x, which y must equal bit for bit.
struct CallOutputs {
  std::vector<std::vector<uint16_t>> x, y, y_ref;
};

// Fills `out` from the calls' buffers (16-bit elements, rows of `dim`); fused(i) says whether
// call i was the fused all-reduce + RMSNorm with weight `w`. Overwrites ys[i] of the fused calls.
template <typename Fused>
Status read_back_calls(DType dt, const std::vector<DeviceBuffer>& xs, std::vector<DeviceBuffer>& ys,
                       const void* w, int dim, Fused fused, CallOutputs& out) {
  const size_t calls = xs.size();
  out.x.assign(calls, {});
  out.y.assign(calls, {});
  out.y_ref.assign(calls, {});
  for (size_t i = 0; i < calls; ++i) {
    const size_t n = xs[i].bytes() / 2;
    out.x[i].resize(n);
    FOLIO_RETURN_IF_ERROR(copy(out.x[i].data(), xs[i].data(), n * 2));
    if (!fused(static_cast<int>(i))) continue;
    out.y[i].resize(n);
    FOLIO_RETURN_IF_ERROR(copy(out.y[i].data(), ys[i].data(), n * 2));
    FOLIO_RETURN_IF_ERROR(rms_norm(dt, xs[i].data(), w, ys[i].data(), static_cast<int>(n / dim),
                                   dim, 1e-5f, nullptr));
    out.y_ref[i].resize(n);
    FOLIO_RETURN_IF_ERROR(copy(out.y_ref[i].data(), ys[i].data(), n * 2));
  }
  return Status();
}

// Microseconds per captured call: one warm-up replay of `graph` (holding `calls` calls), then
// `replays` timed back to back.
inline Result<double> graph_call_us(CudaGraph& graph, int calls, int replays) {
  FOLIO_RETURN_IF_ERROR(graph.launch(nullptr));
  FOLIO_RETURN_IF_ERROR(synchronize());
  const auto t0 = std::chrono::steady_clock::now();
  for (int rep = 0; rep < replays; ++rep) FOLIO_RETURN_IF_ERROR(graph.launch(nullptr));
  FOLIO_RETURN_IF_ERROR(synchronize());
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return us / (static_cast<double>(replays) * calls);
}

#define FOLIO_REQUIRE_PEER_GPUS()                                        \
  do {                                                                   \
    FOLIO_REQUIRE_GPU();                                                 \
    if (gpus() < 2 || !PeerAllReduceRank::all_peers_reachable(2))        \
      GTEST_SKIP() << "needs 2 GPUs with peer access, found " << gpus(); \
  } while (0)

}  // namespace folio::cuda
