// Paged decode attention inside CUDA graphs: a graph captured once around decode_attention with a
// bounded plan, replayed after new context lengths and block tables are written into the same
// device arrays (v1, v2 and tc, 16-bit and fp8 caches), and tc's step split, whose partition size
// comes from a device int written before each replay.
#include <cuda_runtime.h>

#include "attention_test_util.h"
#include "backend/cuda/decode_attention.h"

namespace folio::cuda {
namespace {

using testing::AttentionProblem;
using testing::SeqSpec;

// CUDA-graph use: a graph captured once around decode_attention with a bounded plan, replayed
// after new context lengths (any in [1, bound]) and block tables are written into the same
// device arrays.
TEST(DecodeAttentionGraphTest, BoundedPlanReplaysWithNewLengths) {
  FOLIO_REQUIRE_GPU();
  constexpr int kSeqs = 5, kBound = 3000, kHeads = 8, kKv = 2, kDim = 128, kBs = 16;
  struct G {
    int partition_size;
    DecodeKernel kernel;
    KvCacheDtype kv = KvCacheDtype::kAuto;
  };
  constexpr KvCacheDtype kFp8 = KvCacheDtype::kFp8E4m3;
  for (G g : {G{0, DecodeKernel::kV2}, G{2048, DecodeKernel::kV2}, G{0, DecodeKernel::kV1},
              G{0, DecodeKernel::kV2, kFp8}, G{2048, DecodeKernel::kV2, kFp8},
              G{0, DecodeKernel::kV1, kFp8}, G{0, DecodeKernel::kTc}, G{2048, DecodeKernel::kTc},
              G{0, DecodeKernel::kTc, kFp8}}) {
    SCOPED_TRACE(std::string(testing::decode_kernel_name(g.kernel)) + " partition " +
                 std::to_string(g.partition_size) + (g.kv == kFp8 ? " fp8" : ""));
    std::mt19937 rng(11 + g.partition_size);
    // Sized for the bound: every later table fits in these arrays.
    AttentionProblem prob(DType::kBF16, kHeads, kKv, kDim, kBs,
                          std::vector<SeqSpec>(kSeqs, SeqSpec{kBound, 1}), rng, g.kv);
    const int num_blocks = static_cast<int>(prob.k_cache.size() / (size_t{kKv} * kDim * kBs));
    auto plan = plan_decode_attention_bounded(kSeqs, kBound, kHeads, kKv, kDim, 132,
                                              g.partition_size, g.kernel);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    // The auto split of 5 x 2 heads x 24 partitions fits a wave: short sequences split finer.
    EXPECT_EQ(plan->refine_partitions, g.partition_size == 0 && g.kernel != DecodeKernel::kV1);
    auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
    ASSERT_TRUE(ws.ok());
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const Status launched = decode_attention(prob.params(), *plan, ws->data(), stream);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    FOLIO_ASSERT_OK(launched);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

    const std::vector<std::vector<int32_t>> length_sets = {{1, 17, kBound, 2048, 100},
                                                           {kBound, kBound, kBound, kBound, kBound},
                                                           {1, 1, 1, 1, 1},
                                                           {16, 1025, 129, 2999, 64},
                                                           {2, 3, 33, 513, 2047}};
    std::uniform_int_distribution<int> block(0, num_blocks - 1);
    for (const auto& lens : length_sets) {
      prob.context_lens = lens;
      for (auto& b : prob.block_table) b = block(rng);  // new tables (reads may share blocks)
      cpu::paged_attention(prob.cpu_args(), prob.q.data(), prob.k_cache.data(), prob.v_cache.data(),
                           prob.ref.data());
      FOLIO_ASSERT_OK(copy(prob.d_context_lens.data(), lens.data(), lens.size() * 4));
      FOLIO_ASSERT_OK(copy(prob.d_bt.data(), prob.block_table.data(), prob.block_table.size() * 4));
      prob.dout.poison();
      FOLIO_ASSERT_OK(synchronize());
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_LT(prob.error(), testing::attention_tol(DType::kBF16))
          << "lengths " << lens[0] << "," << lens[1] << "," << lens[2] << "," << lens[3] << ","
          << lens[4];
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// A graph plan with DecodePlan::step_split (tc's wave split chosen per step): the partition size
// comes from a device int written before each replay, as the executor uploads it with the step's
// lengths. 0, sizes that are no multiple of 64 and sizes a sequence would need more than
// max_partitions (2) of fall back to the plan's size, sequence by sequence.
TEST(DecodeAttentionGraphTest, StepSplitTakesEachStepsPartition) {
  FOLIO_REQUIRE_GPU();
  constexpr int kSeqs = 5, kBound = 3000, kHeads = 8, kKv = 2, kDim = 128, kBs = 16;
  // 5 x 2 blocks on 4 SMs are 1.25 resident waves of tc's 2 blocks per SM (16-bit), on 3 SMs
  // 1.1 waves of 3 (fp8): inside the planner's window for a step split.
  for (KvCacheDtype kv : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4m3}) {
    const bool fp8 = kv == KvCacheDtype::kFp8E4m3;
    const int sms = fp8 ? 3 : 4;
    SCOPED_TRACE(fp8 ? "fp8" : "bf16");
    std::mt19937 rng(23);
    AttentionProblem prob(DType::kBF16, kHeads, kKv, kDim, kBs,
                          std::vector<SeqSpec>(kSeqs, SeqSpec{kBound, 1}), rng, kv);
    const int num_blocks = static_cast<int>(prob.k_cache.size() / (size_t{kKv} * kDim * kBs));
    auto plan = plan_decode_attention_bounded(kSeqs, kBound, kHeads, kKv, kDim, sms, 0,
                                              DecodeKernel::kTc, DecodeCacheFormat{kBs, fp8});
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    ASSERT_TRUE(plan->step_split);
    EXPECT_EQ(plan->max_partitions, 2);
    auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
    auto step = DeviceBuffer::allocate(4);
    ASSERT_TRUE(ws.ok() && step.ok());
    PagedAttentionParams params = prob.params();
    params.step_partition = static_cast<const int32_t*>(step->data());
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const Status launched = decode_attention(params, *plan, ws->data(), stream);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    FOLIO_ASSERT_OK(launched);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    struct Step {
      std::vector<int32_t> lens;
      int32_t partition;
    };
    const std::vector<Step> steps = {
        {{kBound, kBound, kBound, kBound, kBound}, 2048},  // every sequence in 2
        {{1, 17, kBound, 2048, 100}, 1024},                // 3000 would need 3: its plan's 4096
        {{kBound, 2999, 1025, 64, 3}, 0},                  // the plan's 4096
        {{kBound, 1500, 1500, 700, 2}, 100},               // no multiple of 64: the plan's
        {{16, 100, 128, 64, 1}, 64},                       // small partitions: 100 and 128 split
        {{2047, 2048, 2049, 1, kBound}, 2048}};
    std::uniform_int_distribution<int> block(0, num_blocks - 1);
    for (const Step& st : steps) {
      prob.context_lens = st.lens;
      for (auto& b : prob.block_table) b = block(rng);
      cpu::paged_attention(prob.cpu_args(), prob.q.data(), prob.k_cache.data(), prob.v_cache.data(),
                           prob.ref.data());
      FOLIO_ASSERT_OK(copy(prob.d_context_lens.data(), st.lens.data(), st.lens.size() * 4));
      FOLIO_ASSERT_OK(copy(prob.d_bt.data(), prob.block_table.data(), prob.block_table.size() * 4));
      FOLIO_ASSERT_OK(copy(step->data(), &st.partition, 4));
      prob.dout.poison();
      FOLIO_ASSERT_OK(synchronize());
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_LT(prob.error(), testing::attention_tol(DType::kBF16))
          << "partition " << st.partition << ", lengths " << st.lens[0] << "," << st.lens[1] << ","
          << st.lens[2] << "," << st.lens[3] << "," << st.lens[4];
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

}  // namespace
}  // namespace folio::cuda
