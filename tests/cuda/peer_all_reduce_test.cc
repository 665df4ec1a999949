// The peer all-reduce (backend/cuda/peer_all_reduce.h) on 2+ GPUs against the host's sum of the
// ranks' inputs in rank order (fp32, rounded once: the bits every rank must get), over sizes
// from one vector to the buffers' limit, many calls in a row (both staging halves, the flags'
// counters) and inside CUDA graphs replayed; the fused all-reduce + RMSNorm against the plain
// all-reduce followed by rms_norm. PeerAllReduceBench (FOLIO_CUDA_BENCH=1) times it
// against NCCL's all-reduce per message size, both replayed from graphs. Skips without 2 GPUs.
#include "backend/cuda/peer_all_reduce.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/rms_norm.h"
#include "bench_util.h"
#include "cuda_test_util.h"
#include "dist/communicator.h"
#include "dist/rank_threads.h"
#include "peer_test_util.h"

namespace folio::cuda {
namespace {

constexpr size_t kMaxBytes = size_t{2} << 20;

TEST(PeerAllReduce, MatchesTheRankOrderSumOnEveryRankOverSizesAndCalls) {
  FOLIO_REQUIRE_PEER_GPUS();
  const int world = gpus() >= 4 && PeerAllReduceRank::all_peers_reachable(4) ? 4 : 2;
  PeerGroup g(world, kMaxBytes);
  FOLIO_ASSERT_OK(g.status);
  std::mt19937 rng(5);
  int calls = 0;
  for (const DType dt : {DType::kBF16, DType::kFP16})
    for (const size_t elems : {size_t{8}, size_t{4096}, size_t{3 * 4096 + 8}, size_t{64 * 4096},
                               size_t{333 * 1024}, kMaxBytes / 2}) {
      for (int round = 0; round < 3; ++round, ++calls) {
        const auto in = random_ranks(world, dt, elems, rng, -4, 4);
        std::vector<std::vector<uint16_t>> out(world, std::vector<uint16_t>(elems));
        FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
          FOLIO_RETURN_IF_ERROR(copy(g.bufs[r].data(), in[r].data(), elems * 2));
          FOLIO_RETURN_IF_ERROR(
              peer_all_reduce_sum(g.ranks[r]->view(), dt, g.bufs[r].data(), elems, nullptr));
          return copy(out[r].data(), g.bufs[r].data(), elems * 2);
        }));
        const std::vector<uint16_t> want = reference_sum(dt, in);
        for (int r = 0; r < world; ++r)
          ASSERT_EQ(out[r], want) << dtype_name(dt) << " " << elems << " elements, rank " << r
                                  << ", round " << round;
      }
    }
  std::printf("peer all-reduce over %d ranks: %d calls bit-exact\n", world, calls);
}

// The fused form writes the same x and the same rms_norm(x), bit for bit, as the all-reduce
// then rms_norm (rms_norm.h) on every rank; plain and fused calls interleave on one set of
// counters.
TEST(PeerAllReduce, FusedRmsNormMatchesAllReduceThenRmsNorm) {
  FOLIO_REQUIRE_PEER_GPUS();
  const int world = 2;
  PeerGroup g(world, kMaxBytes);
  FOLIO_ASSERT_OK(g.status);
  std::mt19937 rng(21);
  int checked = 0;
  for (const DType dt : {DType::kBF16, DType::kFP16})
    for (const int dim : {4096, 3584, 896, 5120})
      for (const int rows : {1, 7, 64, 200}) {
        if (!peer_all_reduce_norm_fits(g.ranks[0]->view(), rows, dim)) continue;
        const size_t n = static_cast<size_t>(rows) * dim;
        const auto in = random_ranks(world, dt, n, rng, -2, 2);
        const std::vector<uint16_t> weight = random_bits(dt, dim, rng, 0.5f, 1.5f);
        // [fused x, fused y, plain x, plain y] per rank.
        std::vector<std::vector<std::vector<uint16_t>>> out(
            world, std::vector<std::vector<uint16_t>>(4, std::vector<uint16_t>(n)));
        FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
          FOLIO_ASSIGN_OR_RETURN(DeviceBuffer w, DeviceBuffer::allocate(dim * 2));
          FOLIO_ASSIGN_OR_RETURN(DeviceBuffer y, DeviceBuffer::allocate(n * 2));
          FOLIO_RETURN_IF_ERROR(copy(w.data(), weight.data(), dim * 2));
          const PeerAllReduceView& v = g.ranks[r]->view();
          void* x = g.bufs[r].data();
          FOLIO_RETURN_IF_ERROR(copy(x, in[r].data(), n * 2));
          FOLIO_RETURN_IF_ERROR(
              peer_all_reduce_rms_norm(v, dt, x, w.data(), y.data(), rows, dim, 1e-5f, nullptr));
          FOLIO_RETURN_IF_ERROR(copy(out[r][0].data(), x, n * 2));
          FOLIO_RETURN_IF_ERROR(copy(out[r][1].data(), y.data(), n * 2));
          FOLIO_RETURN_IF_ERROR(copy(x, in[r].data(), n * 2));
          FOLIO_RETURN_IF_ERROR(peer_all_reduce_sum(v, dt, x, n, nullptr));
          FOLIO_RETURN_IF_ERROR(rms_norm(dt, x, w.data(), y.data(), rows, dim, 1e-5f, nullptr));
          FOLIO_RETURN_IF_ERROR(copy(out[r][2].data(), x, n * 2));
          return copy(out[r][3].data(), y.data(), n * 2);
        }));
        const std::vector<uint16_t> sum = reference_sum(dt, in);
        for (int r = 0; r < world; ++r) {
          const std::string what = std::string(dtype_name(dt)) + " [" + std::to_string(rows) +
                                   ", " + std::to_string(dim) + "] rank " + std::to_string(r);
          ASSERT_EQ(out[r][2], sum) << what;
          ASSERT_EQ(out[r][0], sum) << what;
          ASSERT_EQ(out[r][1], out[r][3]) << what;
          ASSERT_EQ(out[r][1], out[0][1]) << what;
        }
        ++checked;
      }
  EXPECT_GE(checked, 24);
}

// Three calls captured in one graph per rank, replayed twice: the call counters live on the
// device, so replays keep pairing the ranks' calls and alternating the staging halves.
TEST(PeerAllReduce, ReplaysFromCudaGraphs) {
  FOLIO_REQUIRE_PEER_GPUS();
  const int world = 2;
  const DType dt = DType::kBF16;
  const size_t elems = 16 * 4096;
  PeerGroup g(world, kMaxBytes);
  FOLIO_ASSERT_OK(g.status);
  std::mt19937 rng(9);
  const auto in = random_ranks(world, dt, elems, rng, -1, 1);
  std::vector<std::vector<uint16_t>> out(world, std::vector<uint16_t>(elems));
  FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
    FOLIO_RETURN_IF_ERROR(copy(g.bufs[r].data(), in[r].data(), elems * 2));
    auto graph = CudaGraph::capture([&](void* s) -> Status {
      for (int i = 0; i < 3; ++i)
        FOLIO_RETURN_IF_ERROR(
            peer_all_reduce_sum(g.ranks[r]->view(), dt, g.bufs[r].data(), elems, s));
      return Status();
    });
    if (!graph.ok()) return graph.status();
    for (int replay = 0; replay < 2; ++replay) FOLIO_RETURN_IF_ERROR(graph->launch(nullptr));
    FOLIO_RETURN_IF_ERROR(synchronize());
    return copy(out[r].data(), g.bufs[r].data(), elems * 2);
  }));
  std::vector<std::vector<uint16_t>> want = in;
  for (int call = 0; call < 6; ++call) {
    const std::vector<uint16_t> s = reference_sum(dt, want);
    for (auto& rank : want) rank = s;
  }
  for (int r = 0; r < world; ++r) EXPECT_EQ(out[r], want[r]) << "rank " << r;
}

// 48 calls back to back in one graph per rank, mixed sizes, plain and fused with the norm in
// turn, replayed 3 times. Rank 1 is held back before every third call by a 256 MiB memset, and
// slowed throughout by memsets on a stream of its own: rank 0 finishes a call's sums first and
// pushes the next call into the other staging half while rank 1 still reads this one (with a
// single half, rank 1 would sum rank 0's next message). The flags' pairing is exercised at
// speed, as decode graphs run them.
TEST(PeerAllReduce, StaysPairedWhenOneRankIsHeldBack) {
  FOLIO_REQUIRE_PEER_GPUS();
  const int world = 2, calls = 48, dim = 4096;
  constexpr int kReplays = 3;
  const DType dt = DType::kBF16;
  const int rows_of[] = {1, 8, 64, 200};
  PeerGroup g(world, kMaxBytes);
  FOLIO_ASSERT_OK(g.status);
  std::mt19937 rng(33);
  std::vector<std::vector<std::vector<uint16_t>>> in(world);  // [rank][call][elems]
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < calls; ++i)
      in[r].push_back(random_bits(dt, static_cast<size_t>(rows_of[i % 4]) * dim, rng, -2, 2));
  const std::vector<uint16_t> weight = random_bits(dt, dim, rng, 0.5f, 1.5f);
  std::vector<CallOutputs> out(world);  // per rank: x, and the fused calls' y against its norm
  FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
    std::vector<DeviceBuffer> xs, ys;
    FOLIO_RETURN_IF_ERROR(upload_calls(in[r], xs, ys));
    FOLIO_ASSIGN_OR_RETURN(DeviceBuffer w, DeviceBuffer::allocate(dim * 2));
    FOLIO_RETURN_IF_ERROR(copy(w.data(), weight.data(), dim * 2));
    FOLIO_ASSIGN_OR_RETURN(DeviceBuffer hold, DeviceBuffer::allocate(size_t{256} << 20));
    const PeerAllReduceView& v = g.ranks[r]->view();
    auto graph = CudaGraph::capture([&](void* s) -> Status {
      for (int i = 0; i < calls; ++i) {
        if (r == 1 && i % 3 == 0)
          FOLIO_RETURN_IF_ERROR(memset_async(hold.data(), i, hold.bytes(), s));
        const int rows = rows_of[i % 4];
        FOLIO_RETURN_IF_ERROR(
            i % 2 == 0
                ? peer_all_reduce_sum(v, dt, xs[i].data(), static_cast<size_t>(rows) * dim, s)
                : peer_all_reduce_rms_norm(v, dt, xs[i].data(), w.data(), ys[i].data(), rows, dim,
                                           1e-5f, s));
      }
      return Status();
    });
    if (!graph.ok()) return graph.status();
    FOLIO_RETURN_IF_ERROR(replay_with_rank1_slowed(r, *graph, hold, kReplays));
    return read_back_calls(
        dt, xs, ys, w.data(), dim, [&](int i) { return i % 2 == 1; }, out[r]);
  }));
  for (int i = 0; i < calls; ++i) {
    std::vector<uint16_t> want = reference_sum(dt, {in[0][i], in[1][i]});
    for (int replay = 1; replay < kReplays; ++replay) want = reference_sum(dt, {want, want});
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(out[r].x[i], want) << "call " << i << " rank " << r;
      if (i % 2 == 1) {
        ASSERT_EQ(out[r].y[i], out[r].y_ref[i]) << "call " << i << " rank " << r;
      }
    }
  }
}

// Microseconds per all-reduce of each size, peer stores against NCCL, each as 100 calls
// captured in a graph and replayed (what decode steps do), over every GPU (8, 4 or 2).
TEST(PeerAllReduceBench, AgainstNccl) {
  FOLIO_REQUIRE_GPU();
  if (!bench::bench_enabled()) GTEST_SKIP() << "FOLIO_CUDA_BENCH=1 runs the benchmarks";
  int world = 0;
  for (const int w : {8, 4, 2})
    if (world == 0 && gpus() >= w && PeerAllReduceRank::all_peers_reachable(w)) world = w;
  if (world == 0) GTEST_SKIP() << "needs 2 GPUs with peer access";
  const int calls = 100;
  const size_t max_bytes = size_t{8} << 20;
  PeerGroup g(world, max_bytes);
  FOLIO_ASSERT_OK(g.status);
  auto id = Communicator::unique_id();
  if (!id.ok()) GTEST_SKIP() << id.status().message();
  std::vector<std::unique_ptr<Communicator>> comms(world);
  FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
    FOLIO_ASSIGN_OR_RETURN(comms[r], Communicator::init(*id, r, world));
    return memset_async(g.bufs[r].data(), 0, max_bytes);
  }));
  for (size_t bytes = 8 << 10; bytes <= max_bytes; bytes *= 2) {
    double us[2] = {0, 0};
    for (int nccl = 0; nccl < 2; ++nccl) {
      std::vector<double> rank_us(world);
      FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
        auto graph = CudaGraph::capture([&](void* s) -> Status {
          for (int i = 0; i < calls; ++i)
            FOLIO_RETURN_IF_ERROR(
                nccl ? comms[r]->all_reduce_sum(g.bufs[r].data(), bytes / 2, CommType::kBF16, s)
                     : peer_all_reduce_sum(g.ranks[r]->view(), DType::kBF16, g.bufs[r].data(),
                                           bytes / 2, s));
          return Status();
        });
        if (!graph.ok()) return graph.status();
        FOLIO_ASSIGN_OR_RETURN(rank_us[r], graph_call_us(*graph, calls, 5));
        return Status();
      }));
      us[nccl] = rank_us[0];
    }
    std::printf("all-reduce %7zu KiB bf16 over %d GPUs: peer %7.2f us, NCCL %7.2f us (%.2fx)\n",
                bytes >> 10, world, us[0], us[1], us[1] / us[0]);
  }
  FOLIO_ASSERT_OK(g.threads.run([&](int r) {
    comms[r].reset();
    return Status();
  }));
}

}  // namespace
}  // namespace folio::cuda
