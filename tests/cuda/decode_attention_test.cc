// Paged decode attention (flash-decoding split + merge) against the CPU reference, every kernel
// (v2, v1 where it applies, tc at head_dim 128): bf16/fp16, head_dim 8..256 (16 is the tiny test
// model's, 80 and 96 have lane groups with idle lanes), MHA/GQA 4/8/MQA and odd head counts, block
// sizes 1/3/8/16/32 with partial last blocks, forced small and multi-tile partitions, contexts past
// 16k tokens, NaN in the slots past each sequence's end (CUDA-graph replays:
// decode_attention_graph_test.cc).
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

std::string name(const DecodeCase& c) {
  return std::string(dtype_name(c.dt)) + "_h" + std::to_string(c.heads) + "_kv" +
         std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) + "_bs" +
         std::to_string(c.block_size) + "_p" + std::to_string(c.partition_size) +
         "_" + testing::decode_kernel_name(c.kernel) +
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
              std::to_string(c.partition_size) + " " + testing::decode_kernel_name(c.kernel) +
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

}  // namespace
}  // namespace folio::cuda
