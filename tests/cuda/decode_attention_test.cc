// Paged decode attention (flash-decoding split + merge) against the CPU reference, every kernel
// (v2, v1 where it applies, tc at head_dim 128): bf16/fp16, head_dim 8..256 (16 is the tiny test
// model's, 80 and 96 have lane groups with idle lanes), MHA/GQA 4/8/MQA and odd head counts, block
// sizes 1/3/8/16/32 with partial last blocks, forced small and multi-tile partitions, contexts past
// 16k tokens, NaN in the slots past each sequence's end, and CUDA-graph replays of a bounded plan
// with new lengths and block tables (and, for tc's step split, a new partition size per replay).
// The fp8 (e4m3) cache runs the same checks (v2; a v1 plan falls back to v2) on random finite
// codes, against the reference over the values they decode to.
#include "backend/cuda/decode_attention.h"

#include <cuda_runtime.h>

#include <cstdlib>

#include "attention_test_util.h"

namespace folio::cuda {
namespace {

using testing::AttentionProblem;
using testing::SeqSpec;

struct DecodeCase {
  DType dt;
  int heads, kv_heads, head_dim, block_size;
  int partition_size;  // 0: the planner's choice
  DecodeKernel kernel = DecodeKernel::kV2;
  int lane_vectors = 0;  // DecodePlan::lane_vectors (v2)
  int head_chunk = 0;    // DecodePlan::head_chunk (v2)
  KvCacheDtype kv = KvCacheDtype::kAuto;
  int tc_ring = -1;      // DecodePlan::tc_ring_stages (tc)
  int tc_bulk = -1;      // DecodePlan::tc_ring_bulk (tc)
};

const char* kernel_name(DecodeKernel k) {
  return k == DecodeKernel::kV1   ? "v1"
         : k == DecodeKernel::kTc ? "tc"
         : k == DecodeKernel::kV2 ? "v2"
                                  : "planner";
}

std::string name(const DecodeCase& c) {
  return std::string(dtype_name(c.dt)) + "_h" + std::to_string(c.heads) + "_kv" +
         std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) + "_bs" +
         std::to_string(c.block_size) + "_p" + std::to_string(c.partition_size) +
         "_" + kernel_name(c.kernel) +
         (c.lane_vectors ? "_lanes" + std::to_string(c.lane_vectors) : "") +
         (c.head_chunk ? "_hc" + std::to_string(c.head_chunk) : "") +
         (c.kv == KvCacheDtype::kFp8E4m3 ? "_fp8" : "") +
         (c.tc_ring >= 0 ? "_ring" + std::to_string(c.tc_ring) : "") +
         (c.tc_ring > 0 && c.tc_bulk == 1 ? "_bulk" : c.tc_ring > 0 && c.tc_bulk == 2 ? "_frags" : "");
}

void PrintTo(const DecodeCase& c, std::ostream* os) {
  *os << name(c);
}

// Runs decode_attention on `prob` with `plan` twice (the plan is reused by every layer: the
// second run, into a re-poisoned output, must agree).
void check(AttentionProblem& prob, const DecodePlan& plan, const std::string& what) {
  auto ws = DeviceBuffer::allocate(plan.workspace_bytes);
  ASSERT_TRUE(ws.ok());
  const double tol = testing::attention_tol(prob.dt);
  FOLIO_ASSERT_OK(decode_attention(prob.params(), plan, ws->data(), nullptr));
  FOLIO_ASSERT_OK(synchronize());
  EXPECT_LT(prob.error(), tol) << what << ", partition " << plan.partition_size << " x "
                               << plan.max_partitions;
  prob.dout.poison();
  FOLIO_ASSERT_OK(decode_attention(prob.params(), plan, ws->data(), nullptr));
  EXPECT_LT(prob.error(), tol) << what << ", second run";
}

class DecodeAttentionTest : public ::testing::TestWithParam<DecodeCase> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }

  void run(const std::vector<SeqSpec>& seqs, bool poison_past_end = false) {
    const DecodeCase& c = GetParam();
    std::mt19937 rng(7 + c.heads * 31 + c.block_size + c.head_dim);
    AttentionProblem prob(c.dt, c.heads, c.kv_heads, c.head_dim, c.block_size, seqs, rng, c.kv);
    if (poison_past_end) prob.poison_slots_past_end();
    auto plan = plan_decode_attention(prob.context_lens, c.heads, c.kv_heads, c.head_dim,
                                      /*num_sms=*/132, c.partition_size, c.kernel);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    plan->lane_vectors = c.lane_vectors;
    plan->head_chunk = c.head_chunk;
    plan->tc_ring_stages = c.tc_ring;
    plan->tc_ring_bulk = c.tc_bulk;
    check(prob, *plan, name(c));
  }
};

TEST_P(DecodeAttentionTest, MixedContextLengths) {
  run({{1, 1}, {17, 1}, {33, 1}, {1000, 1}, {2049, 1}, {130, 1}});
}

TEST_P(DecodeAttentionTest, OddLengthsAroundPartitionEdges) {
  run({{31, 1}, {32, 1}, {65, 1}, {1023, 1}, {1025, 1}, {7, 1}, {3, 1}});
}

// The keys and values of the slots past each sequence's end (in its last, partial block) are NaN:
// none may reach the output, not even as 0 * NaN (block size 1 has no such slots).
TEST_P(DecodeAttentionTest, NanPastTheEndStaysOut) {
  run({{1, 1}, {17, 1}, {33, 1}, {1000, 1}, {131, 1}, {7, 1}}, /*poison_past_end=*/true);
}

std::vector<DecodeCase> cases() {
  const std::vector<DecodeCase> base = {
      {DType::kBF16, 32, 8, 128, 16, 0},   // llama3-8B shape
      {DType::kBF16, 32, 8, 128, 16, 64},  // forced split + merge
      {DType::kFP16, 7, 7, 64, 1, 0},      // MHA, odd heads, token mode
      {DType::kBF16, 12, 1, 128, 8, 32},   // MQA: 12 heads in 2 chunks
      {DType::kFP16, 6, 2, 64, 32, 128},   // group of 3
      {DType::kBF16, 40, 8, 64, 1, 0},     // group of 5, token mode
      {DType::kFP16, 16, 4, 128, 16, 0},
      {DType::kBF16, 64, 8, 128, 16, 0},   // group of 8 (llama-70B shape)
      {DType::kBF16, 4, 2, 16, 16, 0},     // the tiny test model
      {DType::kFP16, 6, 3, 16, 1, 32},     // head_dim 16, token mode, split
      {DType::kBF16, 10, 2, 80, 8, 32},    // head_dim 80: 10 of 16 lanes per row
      {DType::kFP16, 5, 5, 80, 3, 0},      // odd block size
      {DType::kBF16, 12, 4, 96, 16, 128},  // head_dim 96
      {DType::kBF16, 8, 1, 256, 32, 0},    // head_dim 256, MQA
      {DType::kFP16, 16, 2, 256, 16, 64},  // head_dim 256, group of 8, split
      {DType::kBF16, 3, 1, 32, 8, 0},      // head_dim 32, group of 3
      {DType::kBF16, 2, 1, 8, 16, 32},     // head_dim 8: 32 tokens per warp step
  };
  std::vector<DecodeCase> out;
  for (DecodeCase c : base) {
    out.push_back(c);
    if (c.head_dim >= 128 && c.heads / c.kv_heads <= 4) {  // v2 can take 2 vectors per lane here
      DecodeCase wide = c;
      wide.lane_vectors = 2;
      out.push_back(wide);
    }
    for (int hc : {1, 2}) {  // fewer q heads per block than the group
      if (c.heads / c.kv_heads <= hc) continue;
      DecodeCase split = c;
      split.head_chunk = hc;
      out.push_back(split);
    }
    if ((c.head_dim == 64 || c.head_dim == 128) && c.block_size != 3) {
      c.kernel = DecodeKernel::kV1;
      out.push_back(c);
    }
  }
  // The fp8 cache: head_dim 64/128 (and the odd ones), groups 1/4/8 and MQA, block sizes 1, 16,
  // 32 (and 8), forced splits, fewer q heads per block than the group, two vectors per lane, and
  // v1 plans (run as v2).
  const std::vector<DecodeCase> fp8 = {
      {DType::kBF16, 32, 8, 128, 16, 0},                           // llama3-8B shape, group 4
      {DType::kBF16, 32, 8, 128, 16, 64},                          // forced split + merge
      {DType::kFP16, 32, 8, 128, 1, 0},                            // token mode
      {DType::kBF16, 32, 8, 128, 16, 0, DecodeKernel::kV2, 0, 2},  // head chunk 2
      {DType::kBF16, 32, 8, 128, 16, 0, DecodeKernel::kV2, 2},     // two 8-byte chunks per lane
      {DType::kFP16, 8, 8, 256, 1, 64, DecodeKernel::kV2, 2},      // the same, head_dim 256
      {DType::kFP16, 8, 8, 64, 1, 0},                              // MHA, token mode
      {DType::kBF16, 16, 16, 128, 32, 128},                        // MHA, block 32, split
      {DType::kBF16, 64, 8, 128, 32, 0},                           // group of 8
      {DType::kFP16, 16, 2, 128, 1, 32},                           // group of 8, token mode, split
      {DType::kBF16, 8, 2, 64, 16, 32},                            // head_dim 64, group 4, split
      {DType::kBF16, 12, 1, 64, 8, 0},                             // MQA: 12 heads in 2 chunks
      {DType::kBF16, 32, 8, 128, 16, 0, DecodeKernel::kV1},        // v1 plan -> v2
      {DType::kFP16, 8, 2, 64, 1, 64, DecodeKernel::kV1},          // v1 plan, split, token mode
      {DType::kBF16, 10, 2, 80, 8, 32},                            // head_dim 80: idle lanes
      {DType::kBF16, 4, 2, 16, 16, 0},                             // the tiny test model
      {DType::kFP16, 8, 1, 256, 32, 0},                            // head_dim 256
  };
  for (DecodeCase c : fp8) {
    c.kv = KvCacheDtype::kFp8E4m3;
    out.push_back(c);
  }
  // The tensor-core kernel (head_dim 128), each with a 16-bit and an fp8 cache: groups 1, 3 (via
  // MQA's second chunk), 4, 7 and 8, 12 heads on one KV head (chunks of 8 and 4), block sizes 1,
  // 3, 8, 16 and 32, forced splits.
  const std::vector<DecodeCase> tc = {
      {DType::kBF16, 32, 8, 128, 16, 0},   // llama3-8B shape
      {DType::kBF16, 32, 8, 128, 16, 64},  // forced split + merge
      {DType::kFP16, 32, 8, 128, 1, 0},    // token mode
      {DType::kBF16, 12, 1, 128, 8, 32},   // MQA: 12 heads in chunks of 8 and 4
      {DType::kFP16, 16, 4, 128, 16, 0},
      {DType::kBF16, 64, 8, 128, 16, 0},   // group of 8 (llama-70B shape)
      {DType::kBF16, 28, 4, 128, 16, 0},   // group of 7 (qwen2.5-7B shape)
      {DType::kFP16, 16, 16, 128, 32, 128},  // MHA, block 32, split
      {DType::kBF16, 8, 2, 128, 3, 0},     // odd block size
      {DType::kFP16, 16, 2, 128, 1, 32},   // group of 8, token mode, split
  };
  // Each in every form: K/V waiting in registers, and in a shared-memory ring of 2 or 3 stages
  // filled by cp.async (fill 0) or by bulk row copies read back as pieces (1) or as fragments
  // (2; an fp8 cache falls back to 1).
  struct Form {
    int ring, fill;
  };
  for (DecodeCase c : tc) {
    c.kernel = DecodeKernel::kTc;
    for (KvCacheDtype kv : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4m3})
      for (Form f : {Form{0, 0}, Form{2, 0}, Form{3, 0}, Form{2, 1}, Form{3, 1}, Form{2, 2},
                     Form{3, 2}}) {
        c.kv = kv;
        c.tc_ring = f.ring;
        c.tc_bulk = f.fill;  // explicit: -1 would take the default (fragments on the H200)
        out.push_back(c);
      }
  }
  // The planner's own choice (tc at head_dim 128).
  for (DecodeCase c : {DecodeCase{DType::kBF16, 32, 8, 128, 16, 0},
                       DecodeCase{DType::kFP16, 64, 8, 128, 1, 0}}) {
    c.kernel = DecodeKernel::kDefault;
    out.push_back(c);
    c.kv = KvCacheDtype::kFp8E4m3;
    out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeAttentionTest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return name(info.param); });

TEST(DecodeAttentionLongTest, ContextsPast16kTokens) {
  FOLIO_REQUIRE_GPU();
  struct L {
    int block_size, partition_size;
    DecodeKernel kernel;
    int lane_vectors = 0;
    KvCacheDtype kv = KvCacheDtype::kAuto;
  };
  // 2048..16384: partitions of several 1024-token slot tiles (v2 double-buffers them).
  constexpr KvCacheDtype kFp8 = KvCacheDtype::kFp8E4m3;
  for (L c :
       {L{16, 0, DecodeKernel::kV2}, L{1, 0, DecodeKernel::kV2}, L{16, 4096, DecodeKernel::kV2},
        L{1, 16384, DecodeKernel::kV2}, L{8, 2048, DecodeKernel::kV2, 2},
        L{16, 0, DecodeKernel::kV1}, L{1, 0, DecodeKernel::kV1},
        L{16, 0, DecodeKernel::kV2, 0, kFp8}, L{1, 16384, DecodeKernel::kV2, 0, kFp8},
        L{16, 0, DecodeKernel::kTc}, L{1, 16384, DecodeKernel::kTc},
        L{16, 0, DecodeKernel::kTc, 0, kFp8}, L{8, 2048, DecodeKernel::kTc, 0, kFp8}}) {
    std::mt19937 rng(c.block_size + c.partition_size);
    AttentionProblem prob(DType::kBF16, 8, 2, 128, c.block_size,
                          {{16411, 1}, {20000, 1}, {5, 1}, {2049, 1}}, rng, c.kv);
    auto plan =
        plan_decode_attention(prob.context_lens, 8, 2, 128, 132, c.partition_size, c.kernel);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    EXPECT_GT(plan->max_partitions, 1);
    plan->lane_vectors = c.lane_vectors;
    check(prob, *plan,
          "block_size " + std::to_string(c.block_size) + " partition " +
              std::to_string(c.partition_size) + " " + kernel_name(c.kernel) +
              " lane_vectors " + std::to_string(c.lane_vectors) + (c.kv == kFp8 ? " fp8" : ""));
  }
}

// DecodePlan::tc_ring_stages takes -1 (pick), 0 (registers) or 2..4 stages; anything else is an
// error before any launch.
TEST(DecodeAttentionPlanTest, RejectsBadRingStages) {
  FOLIO_REQUIRE_GPU();
  std::mt19937 rng(3);
  AttentionProblem prob(DType::kBF16, 8, 2, 128, 16, {{100, 1}, {7, 1}}, rng);
  auto plan = plan_decode_attention(prob.context_lens, 8, 2, 128, 132, 0, DecodeKernel::kTc);
  ASSERT_TRUE(plan.ok());
  for (int stages : {1, 5, -2}) {
    plan->tc_ring_stages = stages;
    EXPECT_EQ(decode_attention(prob.params(), *plan, nullptr, nullptr).code(),
              StatusCode::kInvalidArgument)
        << stages;
  }
  plan->tc_ring_stages = 4;
  check(prob, *plan, "ring of 4");
  for (int bulk : {3, -2}) {
    plan->tc_ring_bulk = bulk;
    EXPECT_EQ(decode_attention(prob.params(), *plan, nullptr, nullptr).code(),
              StatusCode::kInvalidArgument)
        << "tc_ring_bulk " << bulk;
  }
  plan->tc_ring_bulk = 1;
  check(prob, *plan, "ring of 4, bulk rows");
  plan->tc_ring_bulk = 2;
  check(prob, *plan, "ring of 4, bulk rows as fragments");
}

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
    SCOPED_TRACE(std::string(kernel_name(g.kernel)) + " partition " +
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
