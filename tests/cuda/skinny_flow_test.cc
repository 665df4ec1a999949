// SkinnyFlow (skinny_gemm.h): gate_up (+ silu) as the producer and down as the consumer that
// waits per segment of act instead of for the producer's grid. The pair must give the bits of
// the two plain launches (the consumer's tile, r2u4, named for the reference), launch after
// launch on the same cumulative counters, on a stream (the consumer overlapping the producer
// under PDL) and replayed from a CUDA graph; the API rejects what it cannot pair.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "backend/cuda/skinny_gemm.h"
#include "cuda_test_util.h"

namespace folio::cuda {
namespace {

using testing::DevTensor;

#define FLOW_EXPECT_OK(expr)                              \
  do {                                                    \
    const ::folio::Status flow_st_ = (expr);              \
    EXPECT_TRUE(flow_st_.ok()) << flow_st_.to_string();  \
  } while (0)

struct FlowCase {
  DType dt;
  int inter, hidden;  // act has inter elements (consumer k); x and y hidden
  bool norm, accumulate;
};

class FlowPair {
 public:
  FlowPair(const FlowCase& c, std::mt19937& rng)
      : c_(c),
        x_(DevTensor::upload(c.dt, rand(c.hidden, rng))),
        w_gate_up_(DevTensor::upload(c.dt, rand(size_t{2} * c.inter * static_cast<size_t>(c.hidden), rng, 0.05f))),
        w_down_(DevTensor::upload(c.dt, rand(static_cast<size_t>(c.hidden) * c.inter, rng, 0.05f))),
        norm_w_(DevTensor::upload(c.dt, rand(c.hidden, rng))),
        y0_(rand(c.hidden, rng)) {}

  // y after gate_up then down: with the flow's counters, or as the two plain launches.
  std::vector<float> run(unsigned long long* counters, void* stream) {
    DevTensor act = DevTensor::poisoned(c_.dt, c_.inter);
    DevTensor y = c_.accumulate ? DevTensor::upload(c_.dt, y0_)
                                : DevTensor::poisoned(c_.dt, c_.hidden);
    enqueue(counters, act, y, stream);
    EXPECT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), cudaSuccess);
    return y.download();
  }

  void enqueue(unsigned long long* counters, DevTensor& act, DevTensor& y, void* stream) {
    SkinnyProblem up{x_.data(), w_gate_up_.data(), act.data(), 1, c_.inter, c_.hidden};
    if (c_.norm) {
      up.norm_weight = norm_w_.data();
      up.norm_eps = 1e-5f;
    }
    const SkinnyProblem down{act.data(), w_down_.data(), y.data(), 1, c_.hidden, c_.inter,
                             c_.accumulate};
    if (counters == nullptr) {
      FLOW_EXPECT_OK(skinny_gemm_silu(c_.dt, up, stream));
      FLOW_EXPECT_OK(skinny_gemm(c_.dt, down, stream, SkinnyVariant::kRows2Unroll4));
    } else {
      FLOW_EXPECT_OK(skinny_gemm_silu(c_.dt, up, SkinnyFlow{counters, true}, stream));
      FLOW_EXPECT_OK(skinny_gemm_flow(c_.dt, down, SkinnyFlow{counters, false}, stream));
    }
  }

  const FlowCase& c() const { return c_; }

 private:
  static std::vector<float> rand(size_t n, std::mt19937& rng, float scale = 1.f) {
    auto v = testing::random_vec(n, rng);
    for (float& f : v) f *= scale;
    return v;
  }

  FlowCase c_;
  DevTensor x_, w_gate_up_, w_down_, norm_w_;
  std::vector<float> y0_;
};

std::string name(const FlowCase& c) {
  return std::string(dtype_name(c.dt)) + " inter " + std::to_string(c.inter) + " hidden " +
         std::to_string(c.hidden) + (c.norm ? " norm" : "") + (c.accumulate ? " acc" : "");
}

// The Llama-3-8B shape, a last segment of 8 elements, one short segment, and other hidden sizes
// (multiples of 8, as the skinny kernel needs). Consumer k of 128 (16 packs: half the warp's lanes
// have none; a TP rank of the 2-layer fixture) and 1032 (129 packs: lane 0 alone reaches the
// second segment) hung the warp's ballots before every lane ran the warp's iterations.
std::vector<FlowCase> cases() {
  std::vector<FlowCase> out;
  for (DType dt : {DType::kBF16, DType::kFP16})
    for (auto [inter, hidden] : {std::pair{14336, 4096}, std::pair{2056, 520}, std::pair{1000, 64},
                                 std::pair{3072, 1032}, std::pair{128, 128}, std::pair{1032, 256}})
      for (bool norm : {false, true})
        for (bool acc : {false, true}) out.push_back({dt, inter, hidden, norm, acc});
  return out;
}

TEST(SkinnyFlow, PairGivesThePlainLaunchesBitsLaunchAfterLaunch) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(5);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (const FlowCase& c : cases()) {
    SCOPED_TRACE(name(c));
    auto counters = DeviceBuffer::allocate(8 * skinny_flow_words(c.inter));
    ASSERT_TRUE(counters.ok());
    auto* cnt = counters->as<unsigned long long>();
    FOLIO_ASSERT_OK(skinny_flow_init(cnt, c.inter, stream));
    FlowPair pair(c, rng);
    const std::vector<float> want = pair.run(nullptr, stream);
    for (int round = 0; round < 3; ++round) {  // the counters keep counting: rounds 1, 2, 3
      EXPECT_EQ(pair.run(cnt, stream), want) << "round " << round;
    }
    // Each segment counted every producer warp of every round, and the consumer's launches
    // count its blocks: 3 rounds.
    std::vector<unsigned long long> h(skinny_flow_words(c.inter));
    ASSERT_EQ(cudaMemcpy(h.data(), cnt, 8 * h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t j = 0; j + 1 < h.size(); ++j) {
      const int outs = std::min<int>(kSkinnyFlowSegment, c.inter - j * kSkinnyFlowSegment);
      EXPECT_EQ(h[j], 3ull * ((outs + 1) / 2)) << "segment " << j;
    }
    const int down_blocks = (c.hidden + 15) / 16;  // r2u4: 8 warps x 2 rows
    EXPECT_EQ(h.back(), 3ull * down_blocks);
  }
  cudaStreamDestroy(stream);
}

TEST(SkinnyFlow, GraphReplaysKeepTheBits) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(9);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (FlowCase c : {FlowCase{DType::kBF16, 14336, 4096, false, true},
                     FlowCase{DType::kFP16, 2056, 520, true, false}}) {
    SCOPED_TRACE(name(c));
    c.accumulate = false;  // a replay must not see the previous replay's y
    FlowPair pair(c, rng);
    const std::vector<float> want = pair.run(nullptr, stream);
    auto counters = DeviceBuffer::allocate(8 * skinny_flow_words(c.inter));
    ASSERT_TRUE(counters.ok());
    auto* cnt = counters->as<unsigned long long>();
    FOLIO_ASSERT_OK(skinny_flow_init(cnt, c.inter, stream));
    DevTensor act = DevTensor::poisoned(c.dt, c.inter);
    DevTensor y = DevTensor::poisoned(c.dt, c.hidden);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    for (int layer = 0; layer < 4; ++layer) pair.enqueue(cnt, act, y, stream);  // 4 pairs
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 3; ++replay) {
      ASSERT_EQ(cudaMemsetAsync(y.data(), 0xff, 2 * c.hidden, stream), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_EQ(y.download(), want) << "replay " << replay;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  cudaStreamDestroy(stream);
}

TEST(SkinnyFlow, RejectsWhatItCannotPair) {
  FOLIO_REQUIRE_GPU();
  const DType dt = DType::kBF16;
  DevTensor x = DevTensor::poisoned(dt, 2048), w = DevTensor::poisoned(dt, 2048 * 64);
  DevTensor y = DevTensor::poisoned(dt, 2 * 2048);
  auto counters = DeviceBuffer::allocate(8 * skinny_flow_words(2048));
  ASSERT_TRUE(counters.ok());
  auto* cnt = counters->as<unsigned long long>();
  const SkinnyProblem m1{x.data(), w.data(), y.data(), 1, 32, 1024};
  SkinnyProblem m2 = m1;
  m2.m = 2;
  EXPECT_FALSE(skinny_gemm_silu(dt, m1, SkinnyFlow{nullptr, true}, nullptr).ok());
  EXPECT_FALSE(skinny_gemm_silu(dt, m1, SkinnyFlow{cnt, false}, nullptr).ok());
  EXPECT_FALSE(skinny_gemm_silu(dt, m2, SkinnyFlow{cnt, true}, nullptr).ok());
  EXPECT_FALSE(skinny_gemm_flow(dt, m1, SkinnyFlow{cnt, true}, nullptr).ok());
  EXPECT_FALSE(skinny_gemm_flow(dt, m2, SkinnyFlow{cnt, false}, nullptr).ok());
  SkinnyProblem f32 = m1;
  f32.f32_out = true;
  EXPECT_FALSE(skinny_gemm_flow(dt, f32, SkinnyFlow{cnt, false}, nullptr).ok());
  EXPECT_FALSE(skinny_flow_init(nullptr, 2048, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // nothing was launched
}

}  // namespace
}  // namespace folio::cuda
