// PeerOverlapBench (FOLIO_CUDA_BENCH=1, 2 GPUs): a row-parallel product of a prefill step and its
// two-shot all-reduce, on two ranks, serial against overlapped by chunks of rows (each chunk's
// all-reduce on a second, high-priority stream beside the next chunk's product; what
// CudaLlamaExecutor does at -tp 2 with FOLIO_TP_OVERLAP_CHUNKS, cuda_llama_tp_overlap.cc), over
// the chunk count and the all-reduce's grid. Shapes: the down projections of
// Llama-3-8B and -70B at -tp 2 over 16384 tokens. Times are rank 0's, per product + all-reduce,
// the median of 5 after one warm-up, every variant run by both ranks together.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/gemm.h"
#include "bench_util.h"
#include "peer_test_util.h"

namespace folio::cuda {
namespace {

struct RankState {
  std::unique_ptr<Gemm> gemm;
  DeviceBuffer x, w;
  CudaStream comm;
  cudaEvent_t ev[4] = {};
};

// Median milliseconds of `body` on the legacy stream (events around it).
Result<double> time_ms(RankState& s, const std::function<Status()>& body) {
  std::vector<double> ms;
  for (int rep = 0; rep < 6; ++rep) {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.ev[2], nullptr));
    FOLIO_RETURN_IF_ERROR(body());
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.ev[3], nullptr));
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(s.ev[3]));
    float t = 0;
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, s.ev[2], s.ev[3]));
    if (rep > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

TEST(PeerOverlapBench, ProductBesideTwoShot) {
  FOLIO_REQUIRE_PEER_GPUS();
  if (!bench::bench_enabled()) GTEST_SKIP() << "FOLIO_CUDA_BENCH=1 runs the benchmarks";
  struct Shape {
    const char* name;
    int n, k;
  };
  const int M = 16384;
  for (Shape sh : {Shape{"8B down", 4096, 7168}, Shape{"70B down", 8192, 14336}}) {
    const size_t y_bytes = size_t{2} * M * sh.n;
    PeerGroup g(2, size_t{1} << 20, y_bytes);
    FOLIO_ASSERT_OK(g.status);
    std::vector<std::unique_ptr<RankState>> st;
    for (int r = 0; r < 2; ++r) st.push_back(std::make_unique<RankState>());
    FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
      RankState& s = *st[r];
      FOLIO_ASSIGN_OR_RETURN(s.gemm, Gemm::create(32u << 20, GemmAutotune::kOff, 0));
      FOLIO_ASSIGN_OR_RETURN(s.x, DeviceBuffer::allocate(size_t{2} * M * sh.k));
      FOLIO_ASSIGN_OR_RETURN(s.w, DeviceBuffer::allocate(size_t{2} * sh.n * sh.k));
      FOLIO_RETURN_IF_ERROR(memset_async(s.x.data(), 0x3C, s.x.bytes(), nullptr));
      FOLIO_RETURN_IF_ERROR(memset_async(s.w.data(), 0x3C, s.w.bytes(), nullptr));
      FOLIO_RETURN_IF_ERROR(s.comm.create(true));
      for (auto& e : s.ev) FOLIO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
      return synchronize();
    }));
    // chunks 1: serial.
    auto run = [&](int chunks, int blocks, bool product, bool reduce) {
      std::vector<double> ms(2);
      const Status ran = g.threads.run([&](int r) -> Status {
        RankState& s = *st[r];
        PeerAllReduceView v = g.ranks[r]->view();
        v.two_shot_blocks = std::min(blocks, v.two_shot_resident);
        auto* y = g.bufs[r].as<char>();
        auto comm = static_cast<cudaStream_t>(s.comm.get());
        const int rows = (M / chunks + 63) / 64 * 64;
        FOLIO_ASSIGN_OR_RETURN(
            ms[r], time_ms(s, [&]() -> Status {
              for (int r0 = 0; r0 < M; r0 += rows) {
                const int n = std::min(rows, M - r0);
                char* yc = y + size_t{2} * r0 * sh.n;
                if (product)
                  FOLIO_RETURN_IF_ERROR(
                      s.gemm->matmul_nt(DType::kBF16, s.x.as<char>() + size_t{2} * r0 * sh.k,
                                        s.w.data(), yc, n, sh.n, sh.k, false, nullptr));
                if (!reduce) continue;
                FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.ev[0], nullptr));
                FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(comm, s.ev[0], 0));
                FOLIO_RETURN_IF_ERROR(
                    peer_all_reduce_two_shot(v, DType::kBF16, yc, size_t{1} * n * sh.n, comm));
              }
              FOLIO_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.ev[1], comm));
              FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(nullptr, s.ev[1], 0));
              return Status();
            }));
        return Status();
      });
      EXPECT_TRUE(ran.ok()) << ran.to_string();
      return ms[0];
    };
    const double product = run(1, 64, true, false), reduce = run(1, 64, false, true);
    std::printf(
        "%s [%d x %d] . [%d x %d]^T: product %.3f ms, all-reduce (64 blocks) %.3f ms, "
        "serial %.3f ms\n",
        sh.name, M, sh.k, sh.n, sh.k, product, reduce, run(1, 64, true, true));
    for (int blocks : {8, 16, 32, 64})
      std::printf("  all-reduce alone in 4 chunks on %d blocks: %.3f ms\n", blocks,
                  run(4, blocks, false, true));
    for (int chunks : {2, 4, 8})
      for (int blocks : {16, 32, 64})
        std::printf("  %d chunks, %2d blocks: %.3f ms\n", chunks, blocks,
                    run(chunks, blocks, true, true));
    FOLIO_ASSERT_OK(g.threads.run([&](int r) -> Status {
      for (auto& e : st[r]->ev) cudaEventDestroy(e);
      st[r].reset();  // on the rank's device
      return Status();
    }));
  }
}

}  // namespace
}  // namespace folio::cuda
