// The two-shot peer all-reduce (backend/cuda/peer_all_reduce.h) on 2+ GPUs: in place, every
// rank's buffer summed in rank order (fp32, rounded once) over sizes from one 16-byte vector to
// a 16k-token prefill's activations, odd sizes whose parts differ per rank, calls in a row, and
// inside CUDA graphs beside one-shot and fused-norm calls with one rank held back. The form
// chosen by size. PeerAllReduceBench.TwoShot (FOLIO_CUDA_BENCH=1) times both forms against NCCL.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/peer_all_reduce.h"
#include "backend/cuda/rms_norm.h"
#include "bench_util.h"
#include "cuda_test_util.h"
#include "dist/communicator.h"
#include "peer_test_util.h"

namespace folio::cuda {
namespace {

constexpr size_t kStagingBytes = size_t{2} << 20;

int widest_world() {
  for (const int w : {8, 4, 2})
    if (gpus() >= w && PeerAllReduceRank::all_peers_reachable(w)) return w;
  return 0;
}

TEST(PeerAllReduceTwoShot, MatchesTheRankOrderSumOnEveryRankOverSizesAndCalls) {
  FOLIO_REQUIRE_PEER_GPUS();
  const size_t max_elems = size_t{16384} * 4096;  // a 16k-token prefill of hidden 4096: 128 MiB
  std::vector<int> worlds = {2};
  if (widest_world() > 2) worlds.push_back(widest_world());
  for (const int world : worlds) {
    PeerGroup g(world, kStagingBytes, max_elems * 2);
    FOLIO_ASSERT_OK(g.status);
    ASSERT_TRUE(peer_all_reduce_two_shot_fits(g.ranks[0]->view(), 16));
    std::mt19937 rng(17 + world);
    int calls = 0;
    for (const DType dt : {DType::kBF16, DType::kFP16})
      for (const size_t elems : {size_t{8}, size_t{3 * 8}, size_t{7 * 8}, size_t{4096},
                                 size_t{333 * 1024 + 8}, size_t{1} << 20, max_elems}) {
        const int rounds = elems == max_elems ? 1 : 3;
        for (int round = 0; round < rounds; ++round, ++calls) {
          const auto in = random_ranks(world, dt, elems, rng, -4, 4);
          std::vector<std::vector<uint16_t>> out(world, std::vector<uint16_t>(elems));
          // The grid changes between calls (the same on every rank): 64, 1, 7, 256 blocks.
          const int grids[] = {64, 1, 7, 256};
          const int grid = std::min(grids[calls % 4], g.ranks[0]->view().two_shot_resident);
          FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
            g.ranks[r]->mutable_view().two_shot_blocks = grid;
            FOLIO_RETURN_IF_ERROR(copy(g.bufs[r].data(), in[r].data(), elems * 2));
            FOLIO_RETURN_IF_ERROR(
                peer_all_reduce_two_shot(g.ranks[r]->view(), dt, g.bufs[r].data(), elems, nullptr));
            return copy(out[r].data(), g.bufs[r].data(), elems * 2);
          }));
          const std::vector<uint16_t> want = reference_sum(dt, in);
          for (int r = 0; r < world; ++r)
            ASSERT_EQ(out[r], want)
                << dtype_name(dt) << " " << elems << " elements, world " << world << ", rank " << r
                << ", round " << round << ", " << grid << " blocks";
        }
      }
    std::printf("two-shot all-reduce over %d ranks: %d calls bit-exact\n", world, calls);
  }
}

TEST(PeerAllReduceTwoShot, FormBySize) {
  FOLIO_REQUIRE_PEER_GPUS();
  PeerGroup g(2, kStagingBytes, 16);
  FOLIO_ASSERT_OK(g.status);
  PeerAllReduceView v = g.ranks[0]->view();
  using F = PeerAllReduceForm;
  v.two_shot_from = size_t{1} << 20;
  EXPECT_EQ(peer_all_reduce_form(v, 8 << 10), F::kOneShot);
  EXPECT_EQ(peer_all_reduce_form(v, (size_t{1} << 20) - 16), F::kOneShot);
  EXPECT_EQ(peer_all_reduce_form(v, size_t{1} << 20), F::kTwoShot);
  EXPECT_EQ(peer_all_reduce_form(v, size_t{256} << 20), F::kTwoShot);
  EXPECT_EQ(peer_all_reduce_form(v, 8), F::kNone);  // half a vector: NCCL
  v.two_shot_from = size_t{64} << 20;               // past the staging: two-shot before NCCL
  EXPECT_EQ(peer_all_reduce_form(v, size_t{4} << 20), F::kTwoShot);
  EXPECT_EQ(peer_all_reduce_form(v, kStagingBytes), F::kOneShot);
  v.two_shot_from = kPeerTwoShotOff;
  EXPECT_EQ(peer_all_reduce_form(v, kStagingBytes), F::kOneShot);
  EXPECT_EQ(peer_all_reduce_form(v, size_t{4} << 20), F::kNone);
}

// 36 calls in one graph per rank: two-shot, one-shot and fused-norm calls in turn on one
// stream, replayed 3 times, rank 1 held back by a 256 MiB memset before every fourth call and
// slowed by memsets on a side stream. Each form keeps its own counters. Right after each
// two-shot call rank 0 overwrites its buffer with its input again: a rank leaving before the
// other has read its part would hand it the overwritten values. So per two-shot call rank 0
// ends with its input and rank 1 with s_3, where s_1 = in_0 + in_1 and s_k = in_0 + s_(k-1);
// the other calls sum both ranks' results of the replay before.
TEST(PeerAllReduceTwoShot, StaysPairedInGraphsBesideTheOneShot) {
  FOLIO_REQUIRE_PEER_GPUS();
  const int world = 2, calls = 36, dim = 4096;
  constexpr int kReplays = 3;
  const DType dt = DType::kBF16;
  const int rows_of[] = {1, 64, 300, 2048};  // 300 and 2048 rows: past the 2 MiB staging
  PeerGroup g(world, kStagingBytes, 16);
  FOLIO_ASSERT_OK(g.status);
  std::mt19937 rng(41);
  std::vector<std::vector<std::vector<uint16_t>>> in(world);  // [rank][call][elems]
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < calls; ++i)
      in[r].push_back(random_bits(dt, static_cast<size_t>(rows_of[i % 4]) * dim, rng, -2, 2));
  const std::vector<uint16_t> weight = random_bits(dt, dim, rng, 0.5f, 1.5f);
  // form of call i: 0 two-shot, 1 one-shot, 2 one-shot + norm (where the staging holds it)
  auto form = [&](int i) {
    const size_t bytes = in[0][i].size() * 2;
    const int f = i % 3;
    return f > 0 && !peer_all_reduce_fits(g.ranks[0]->view(), bytes) ? 0 : f;
  };
  std::vector<CallOutputs> out(world);  // per rank: x, and the fused calls' y against its norm
  FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
    std::vector<DeviceBuffer> xs, ys, inputs, unused;
    FOLIO_RETURN_IF_ERROR(upload_calls(in[r], xs, ys));
    FOLIO_RETURN_IF_ERROR(upload_calls(in[r], inputs, unused));
    FOLIO_ASSIGN_OR_RETURN(DeviceBuffer w, DeviceBuffer::allocate(dim * 2));
    FOLIO_RETURN_IF_ERROR(copy(w.data(), weight.data(), dim * 2));
    FOLIO_ASSIGN_OR_RETURN(DeviceBuffer hold, DeviceBuffer::allocate(size_t{256} << 20));
    const PeerAllReduceView& v = g.ranks[r]->view();
    auto graph = CudaGraph::capture([&](void* s) -> Status {
      for (int i = 0; i < calls; ++i) {
        if (r == 1 && i % 4 == 0)
          FOLIO_RETURN_IF_ERROR(memset_async(hold.data(), i, hold.bytes(), s));
        const int rows = rows_of[i % 4];
        const size_t n = static_cast<size_t>(rows) * dim;
        switch (form(i)) {
          case 0:
            FOLIO_RETURN_IF_ERROR(peer_all_reduce_two_shot(v, dt, xs[i].data(), n, s));
            if (r == 0) FOLIO_RETURN_IF_ERROR(copy_async(xs[i].data(), inputs[i].data(), n * 2, s));
            break;
          case 1:
            FOLIO_RETURN_IF_ERROR(peer_all_reduce_sum(v, dt, xs[i].data(), n, s));
            break;
          default:
            FOLIO_RETURN_IF_ERROR(peer_all_reduce_rms_norm(v, dt, xs[i].data(), w.data(),
                                                           ys[i].data(), rows, dim, 1e-5f, s));
        }
      }
      return Status();
    });
    if (!graph.ok()) return graph.status();
    FOLIO_RETURN_IF_ERROR(replay_with_rank1_slowed(r, *graph, hold, kReplays));
    return read_back_calls(
        dt, xs, ys, w.data(), dim, [&](int i) { return form(i) == 2; }, out[r]);
  }));
  int forms[3] = {0, 0, 0};
  for (int i = 0; i < calls; ++i) {
    ++forms[form(i)];
    if (form(i) == 0) {
      std::vector<uint16_t> s = reference_sum(dt, {in[0][i], in[1][i]});
      for (int replay = 1; replay < kReplays; ++replay) s = reference_sum(dt, {in[0][i], s});
      ASSERT_EQ(out[0].x[i], in[0][i]) << "call " << i << " rank 0 (restored)";
      ASSERT_EQ(out[1].x[i], s) << "call " << i << " rank 1";
      continue;
    }
    std::vector<uint16_t> want = reference_sum(dt, {in[0][i], in[1][i]});
    for (int replay = 1; replay < kReplays; ++replay) want = reference_sum(dt, {want, want});
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(out[r].x[i], want) << "call " << i << " rank " << r;
      if (form(i) == 2) {
        ASSERT_EQ(out[r].y[i], out[r].y_ref[i]) << "call " << i << " rank " << r;
      }
    }
  }
  std::printf("two-shot / one-shot / fused calls: %d / %d / %d, each replayed %d times\n", forms[0],
              forms[1], forms[2], kReplays);
}

// Microseconds per all-reduce of each size: two-shot on grids of 64, 128 and 256 blocks,
// one-shot (where its staging holds the message) and NCCL, each as calls captured in a graph and
// replayed, over every GPU (8, 4 or 2).
TEST(PeerAllReduceBench, TwoShot) {
  FOLIO_REQUIRE_GPU();
  if (!bench::bench_enabled()) GTEST_SKIP() << "FOLIO_CUDA_BENCH=1 runs the benchmarks";
  const int world = widest_world();
  if (world == 0) GTEST_SKIP() << "needs 2 GPUs with peer access";
  const size_t staging = size_t{8} << 20, max_bytes = size_t{256} << 20;
  PeerGroup g(world, staging, max_bytes);
  FOLIO_ASSERT_OK(g.status);
  auto id = Communicator::unique_id();
  if (!id.ok()) GTEST_SKIP() << id.status().message();
  std::vector<std::unique_ptr<Communicator>> comms(world);
  FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
    FOLIO_ASSIGN_OR_RETURN(comms[r], Communicator::init(*id, r, world));
    return memset_async(g.bufs[r].data(), 0, max_bytes);
  }));
  const int grids[] = {64, 128, 256};
  for (size_t bytes = 64 << 10; bytes <= max_bytes; bytes *= 2) {
    const int calls = static_cast<int>(std::clamp<size_t>((size_t{1} << 30) / bytes, 4, 100));
    double us[5] = {0, 0, 0, 0, 0};  // two-shot on each grid, one-shot, NCCL
    for (int form = 0; form < 5; ++form) {
      if (form == 3 && bytes > staging) continue;
      if (form < 3 && !peer_all_reduce_two_shot_fits(g.ranks[0]->view(), bytes)) continue;
      std::vector<double> rank_us(world);
      FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
        if (form < 3) g.ranks[r]->mutable_view().two_shot_blocks = grids[form];
        const PeerAllReduceView& v = g.ranks[r]->view();
        void* buf = g.bufs[r].data();
        auto graph = CudaGraph::capture([&](void* s) -> Status {
          for (int i = 0; i < calls; ++i)
            FOLIO_RETURN_IF_ERROR(
                form < 3    ? peer_all_reduce_two_shot(v, DType::kBF16, buf, bytes / 2, s)
                : form == 3 ? peer_all_reduce_sum(v, DType::kBF16, buf, bytes / 2, s)
                            : comms[r]->all_reduce_sum(buf, bytes / 2, CommType::kBF16, s));
          return Status();
        });
        if (!graph.ok()) return graph.status();
        FOLIO_ASSIGN_OR_RETURN(rank_us[r], graph_call_us(*graph, calls, 3));
        return Status();
      }));
      us[form] = rank_us[0];
    }
    // algbw: the message over the time (NCCL's convention).
    std::printf(
        "all-reduce %7zu KiB bf16 over %d GPUs: two-shot on 64 / 128 / 256 blocks %8.2f "
        "/ %8.2f / %8.2f us, one-shot %8.2f us, NCCL %8.2f us; algbw two-shot(128) %6.1f "
        "GB/s, NCCL %6.1f GB/s\n",
        bytes >> 10, world, us[0], us[1], us[2], us[3], us[4], bytes / us[1] / 1e3,
        bytes / us[4] / 1e3);
  }
  FOLIO_ASSERT_OK(g.threads.run([&](int r) {
    comms[r].reset();
    return Status();
  }));
}

}  // namespace
}  // namespace folio::cuda
