// Cascade (shared-prefix) decode attention against the CPU reference: rows whose block tables
// share prefixes (one prefix for all, shuffled groups, nested groups, whole tables shared as
// parallel-sampling siblings share them, no sharing), bf16/fp16, head_dim 64/128, GQA 4/7/8, MHA
// and MQA, pages 16/8/1 with partial last blocks, small items (many partials per row) and the
// default plan, NaN in the slots past each row's end; an fp8 e4m3 cache (the wgmma kernel only:
// plans leaving items to the mma.sync kernel are refused). Each row's output is checked on its own,
// so one wrong row cannot hide in a norm over the batch.
#include "backend/cuda/cascade_attention.h"

#include <cuda_runtime.h>

#include <tuple>

#include "attention_test_util.h"
#include "backend/cascade_plan.h"
#include "cascade_test_util.h"

namespace folio::cuda {
namespace {

using testing::AttentionProblem;
using testing::CascadeDeviceCopy;
using testing::SeqSpec;

struct Case {
  DType dt;
  int heads, kv_heads, head_dim, block_size;
  KvCacheDtype kv = KvCacheDtype::kAuto;
};

std::string name(const Case& c) {
  return std::string(dtype_name(c.dt)) + "_h" + std::to_string(c.heads) + "_kv" +
         std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) + "_bs" +
         std::to_string(c.block_size) + (c.kv == KvCacheDtype::kAuto ? "" : "_fp8");
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << name(c);
}

class CascadeAttentionTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { FOLIO_REQUIRE_GPU(); }

  // Rows of `lens` tokens; row r takes group leader[r]'s first shared[r] tokens' blocks (whole
  // blocks; leader[r] == r: its own). Checks the cascade output per row, under the default plan
  // and under small items, and returns the small plan's saving.
  double run(const std::vector<int>& lens, const std::vector<int>& leader,
             const std::vector<int>& shared) {
    const Case& c = GetParam();
    std::mt19937 rng(11 + c.heads * 7 + c.block_size + c.head_dim);
    std::vector<SeqSpec> seqs;
    for (int len : lens) seqs.push_back({len, 1});
    AttentionProblem prob(c.dt, c.heads, c.kv_heads, c.head_dim, c.block_size, seqs, rng, c.kv);
    const bool fp8 = c.kv != KvCacheDtype::kAuto;
    for (size_t r = 0; r < lens.size(); ++r) {
      const int blocks = shared[r] / c.block_size;
      for (int b = 0; b < blocks; ++b)
        prob.block_table[prob.block_table_start[r] + b] =
            prob.block_table[prob.block_table_start[leader[r]] + b];
    }
    cpu::paged_attention(prob.cpu_args(), prob.q.data(), prob.k_cache.data(), prob.v_cache.data(),
                         prob.ref.data());
    prob.d_bt = testing::upload_raw(prob.block_table);
    prob.poison_slots_past_end();  // a shared block is never a row's last: nothing shared is NaN

    // The per-row kernel's error on the same rows: cascade must be about as accurate.
    double per_row_err = 0;
    {
      auto plan = plan_decode_attention(prob.context_lens, c.heads, c.kv_heads, c.head_dim, 132);
      EXPECT_TRUE(plan.ok());
      auto ws = DeviceBuffer::allocate(plan->workspace_bytes);
      EXPECT_TRUE(ws.ok());
      prob.dout.poison();
      EXPECT_TRUE(decode_attention(prob.params(), *plan, ws->data(), nullptr).ok());
      EXPECT_TRUE(synchronize().ok());
      per_row_err = prob.error();
    }
    double saving = 0;
    // The wgmma kernel (cascade_attention_wg.cuh), where it takes the geometry: not at all; the
    // engine's plan (wide items, one-row items packed, the rest on the mma.sync kernel); every
    // item of 2+ rows alone and one-row items packed; every item alone.
    const int engine_wide = cascade_wide_min_rows(prob.params());
    std::vector<int> wide_forms = {0};  // (an fp8 cache: never all on mma.sync)
    if (fp8) wide_forms.clear();
    if (engine_wide > 0) wide_forms.insert(wide_forms.end(), {engine_wide, 2, 1});
    EXPECT_FALSE(wide_forms.empty()) << "an fp8 case at a geometry cascade does not take";
    wide_forms.erase(std::unique(wide_forms.begin(), wide_forms.end()), wide_forms.end());
    for (bool small : {false, true})
      for (int wide_rows : wide_forms) {
        CascadeOptions o;
        o.max_rows_per_item = cascade_max_rows_per_item(c.heads, c.kv_heads);
        if (small) {
          o.max_rows_per_item = std::min(o.max_rows_per_item, 3);
          o.max_tokens_per_item = 2 * c.block_size;
          o.min_shared_tokens = c.block_size;
        }
        o.wide_min_rows = wide_rows;
        const CascadePlan plan = plan_cascade(prob.context_lens, prob.block_table_start,
                                              prob.block_table, c.block_size, o);
        if (small) saving = plan.saving();
        // On the wgmma kernel: the narrow items packed as the engine packs them
        // (cascade_wgmma_packs), as many as fit a block, 3 to a block (also in the 3-stage form:
        // Q through shared memory), and only the one-row items packed (the others on mma.sync).
        // And the bounded form the engine's CUDA graphs replay (counts read on the device, wider
        // grids, a larger workspace layout) of the engine's packs, of one-row packs beside the
        // mma.sync kernel, and of the mma.sync kernel alone (below).
        struct Form {
          int max_pack_items;
          bool one_row_only;
          CascadeTuning tuning;
          bool bounded = false;
        };
        std::vector<Form> forms = {{0, false, {}},     {64, false, {}}, {3, false, {}},
                                   {3, false, {}},     {0, true, {}},   {0, false, {}, true},
                                   {0, true, {}, true}};
        forms[3].tuning.wgmma_stages = 3;
        if (fp8) {  // an fp8 cache's own 4-stage form
          forms.push_back({3, false, {}});
          forms.back().tuning.wgmma_stages = 4;
        }
        if (wide_rows == 0)  // the mma.sync kernel's load forms on every item
          forms = {{-1, false, CascadeTuning{CascadeLoad::kBulkRows, true}},
                   {-1, false, CascadeTuning{CascadeLoad::kCpAsync, true}},
                   {-1, false, CascadeTuning{CascadeLoad::kBulkRows, false}},
                   {-1, false, CascadeTuning{CascadeLoad::kBulkRows, true}, true}};
        for (const Form& form : forms) {
          CascadeDeviceCopy dp(plan, c.heads, c.kv_heads, c.head_dim, form.max_pack_items,
                               form.one_row_only);
          // An fp8 cache refuses a plan that leaves items to the mma.sync kernel (its grid says
          // so; a graph's bounds without an mma.sync grid cannot see the device's counts, and the
          // engine never asks).
          const bool refused = fp8 && dp.mma_items() > 0;
          if (refused && form.bounded) continue;
          // (An fp8 cache has no mma.sync grid: its plans put every item on wgmma.)
          if (form.bounded) dp.make_bounded(29, 7, c.heads, c.head_dim, !fp8);
          const CascadeTuning& tuning = form.tuning;
          std::string how = tuning.load == CascadeLoad::kCpAsync ? "cp.async"
                            : !tuning.split_keys                 ? "bulk rows, unsplit keys"
                                                                 : "bulk rows";
          if (wide_rows > 0)
            how =
                "wgmma: items of " + std::to_string(wide_rows) + "+ rows (" +
                std::to_string(plan.num_wide_items) + " of " + std::to_string(plan.items.size()) +
                ") alone, " +
                std::to_string(dp.packs.empty() ? 0 : plan.items.size() - dp.packs.front()) +
                (form.one_row_only ? " one-row" : "") + " in packs of " + dp.pack_sizes() +
                (form.max_pack_items > 0 ? " (at most " + std::to_string(form.max_pack_items) + ")"
                                         : std::string(" (auto)")) +
                (tuning.wgmma_stages > 2 ? ", " + std::to_string(tuning.wgmma_stages) + " stages"
                                         : std::string());
          if (form.bounded) how += ", bounded (graph) form";
          prob.dout.poison();
          const Status st =
              cascade_attention(prob.params(), dp.view, dp.workspace.data(), nullptr, tuning);
          EXPECT_EQ(st.ok(), !refused) << how << ": " << st.to_string();
          if (refused) continue;
          EXPECT_TRUE(synchronize().ok());
          const std::vector<float> out = prob.dout.download();
          const double err = testing::rel_error(out, prob.ref);
          std::printf("%s %s, %s: cascade error %.2e, per-row kernel %.2e\n", name(c).c_str(),
                      small ? "small items" : "default plan", how.c_str(), err, per_row_err);
          EXPECT_LT(err, 2 * per_row_err + 1e-4);
          const size_t row = static_cast<size_t>(c.heads) * c.head_dim;
          for (size_t r = 0; r < lens.size(); ++r) {
            const std::vector<float> got(out.begin() + r * row, out.begin() + (r + 1) * row);
            const std::vector<float> want(prob.ref.begin() + r * row,
                                          prob.ref.begin() + (r + 1) * row);
            EXPECT_LT(testing::rel_error(got, want), testing::attention_tol(c.dt))
                << "row " << r << " of " << lens.size() << " (context " << lens[r] << ", shares "
                << shared[r] << " with row " << leader[r] << "), "
                << (small ? "small items" : "default plan") << ", " << how;
          }
        }
      }
    return saving;
  }
};

TEST_P(CascadeAttentionTest, OnePrefixForAll) {
  const int bs = GetParam().block_size, prefix = 20 * std::max(bs, 8);  // page 1: 160 tokens
  std::vector<int> lens, leader, shared;
  for (int r = 0; r < 37; ++r) {
    lens.push_back(prefix + 1 + (r * 13) % 50);
    leader.push_back(0);
    shared.push_back(prefix);
  }
  EXPECT_GT(run(lens, leader, shared), 0.5);
}

TEST_P(CascadeAttentionTest, ShuffledGroupsAndLoners) {
  const int bs = GetParam().block_size;
  std::vector<int> lens, leader, shared;
  std::mt19937 rng(3);
  std::vector<int> group(40);
  for (int r = 0; r < 40; ++r) group[r] = r < 35 ? r / 5 : -1;  // 7 groups of 5, 5 loners
  std::shuffle(group.begin(), group.end(), rng);
  std::vector<int> first(7, -1);
  for (int r = 0; r < 40; ++r) {
    const int g = group[r];
    lens.push_back(11 * bs + 1 + (r * 7) % (3 * bs + 5));  // past every shared block
    if (g < 0) {
      leader.push_back(r);
      shared.push_back(0);
      continue;
    }
    if (first[g] < 0) first[g] = r;
    leader.push_back(first[g]);
    shared.push_back((4 + g) * bs);
  }
  EXPECT_GT(run(lens, leader, shared), 0.2);
}

TEST_P(CascadeAttentionTest, NestedPrefixes) {
  // All rows share 6 blocks; rows of each of 3 subgroups share 5 more of their subgroup's.
  const int bs = GetParam().block_size;
  std::vector<int> lens, leader, shared;
  for (int r = 0; r < 24; ++r) {
    lens.push_back(14 * bs + 3 + r % 5);
    const int sub = r % 3;
    leader.push_back(r < 3 ? r : sub);  // rows 0..2 lead the subgroups (and share 6 blocks of 0)
    shared.push_back(r < 3 ? 0 : 11 * bs);
  }
  // The subgroup leaders take row 0's first 6 blocks, so every row shares those.
  for (int r = 1; r < 3; ++r) {
    leader[r] = 0;
    shared[r] = 6 * bs;
  }
  EXPECT_GT(run(lens, leader, shared), 0.3);
}

TEST_P(CascadeAttentionTest, WholeTablesSharedAndNoSharing) {
  // Siblings of parallel sampling: every full block shared, contexts on a block boundary and
  // one past it; then rows that share nothing.
  const int bs = GetParam().block_size;
  std::vector<int> lens, leader, shared;
  for (int r = 0; r < 12; ++r) {
    lens.push_back(r < 6 ? 8 * bs : 8 * bs + 1);
    leader.push_back(r < 6 ? 0 : 6);
    shared.push_back(r < 6 ? 7 * bs : 8 * bs);
  }
  EXPECT_GT(run(lens, leader, shared), 0.3);
  std::vector<int> alone_lens = {1, 2, bs, bs + 1, 5 * bs + 3, 70};
  std::vector<int> self = {0, 1, 2, 3, 4, 5}, none(6, 0);
  EXPECT_EQ(run(alone_lens, self, none), 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CascadeAttentionTest,
    ::testing::Values(Case{DType::kBF16, 32, 8, 128, 16}, Case{DType::kFP16, 32, 8, 128, 16},
                      Case{DType::kBF16, 32, 8, 128, 8}, Case{DType::kBF16, 28, 4, 128, 16},
                      Case{DType::kBF16, 64, 8, 128, 16}, Case{DType::kBF16, 8, 8, 64, 16},
                      Case{DType::kFP16, 16, 1, 64, 8}, Case{DType::kBF16, 32, 8, 128, 1},
                      Case{DType::kBF16, 4, 1, 128, 16},
                      Case{DType::kBF16, 32, 8, 128, 16, KvCacheDtype::kFp8E4m3},
                      Case{DType::kFP16, 32, 8, 128, 16, KvCacheDtype::kFp8E4m3},
                      Case{DType::kBF16, 32, 8, 128, 8, KvCacheDtype::kFp8E4m3},
                      Case{DType::kBF16, 64, 8, 128, 32, KvCacheDtype::kFp8E4m3}),
    [](const auto& info) { return name(info.param); });

TEST(CascadeAttention, RefusesWhatItDoesNotSupport) {
  PagedAttentionParams p;
  p.dtype = DType::kBF16;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_dim = 96;
  EXPECT_FALSE(cascade_supported(p));
  p.head_dim = 128;
  EXPECT_TRUE(cascade_supported(p));
  p.kv_dtype = KvCacheDtype::kFp8E4m3;  // an fp8 cache: the wgmma kernel's geometry only
  EXPECT_FALSE(cascade_supported(p)) << "block size 0";
  p.block_size = 16;
  EXPECT_TRUE(cascade_supported(p));
  EXPECT_TRUE(cascade_wide_supported(p));
  p.block_size = 1;
  EXPECT_FALSE(cascade_supported(p));
  p.block_size = 16;
  p.head_dim = 64;
  EXPECT_FALSE(cascade_supported(p));
  p.head_dim = 128;
  p.block_size = 0;
  EXPECT_EQ(cascade_max_rows_per_item(32, 8), 16);
  EXPECT_EQ(cascade_max_rows_per_item(64, 8), 8);
  EXPECT_EQ(cascade_max_rows_per_item(8, 8), 64);
  // The wide kernel: head_dim 128, pages of 8..64 (powers of two); above 32 query rows.
  p.kv_dtype = KvCacheDtype::kAuto;
  p.block_size = 16;
  EXPECT_TRUE(cascade_wide_supported(p));
  EXPECT_EQ(cascade_wide_min_rows(p), 9);  // GQA 4: 9 rows are 36 query rows
  for (int bs : {1, 4, 12, 128}) {
    p.block_size = bs;
    EXPECT_FALSE(cascade_wide_supported(p)) << bs;
    EXPECT_EQ(cascade_wide_min_rows(p), 0) << bs;
  }
  // The wgmma kernel's stages: 2 or 3, and 4 over an fp8 cache only (checked before any launch).
  p.block_size = 16;
  for (const auto& [kv, stages, ok] :
       {std::tuple{KvCacheDtype::kAuto, 4, false}, std::tuple{KvCacheDtype::kFp8E4m3, 5, false},
        std::tuple{KvCacheDtype::kFp8E4m3, 4, true}, std::tuple{KvCacheDtype::kAuto, 3, true}}) {
    p.kv_dtype = kv;
    CascadeTuning t;
    t.wgmma_stages = stages;
    const Status st = cascade_attention(p, CascadeDevicePlan{}, nullptr, nullptr, t);
    EXPECT_EQ(st.ok(), ok) << stages << " stages: " << st.to_string();
    if (!ok) {
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    }
  }
  // With rows to run: a plan needs its counts, and grids its kernels take (checked before any
  // launch, so the null arrays are never read).
  p.num_seqs = 1;
  CascadeDevicePlan plan;
  EXPECT_EQ(cascade_attention(p, plan, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
  const CascadeCounts counts;
  plan.counts = &counts;
  p.kv_dtype = KvCacheDtype::kFp8E4m3;
  plan.mma_blocks = 1;  // an fp8 cache has no mma.sync kernel
  EXPECT_EQ(cascade_attention(p, plan, nullptr, nullptr).code(), StatusCode::kUnimplemented);
  p.kv_dtype = KvCacheDtype::kAuto;
  p.head_dim = 64;
  p.num_heads = 8;
  EXPECT_FALSE(cascade_wide_supported(p));
  plan.mma_blocks = 0;
  plan.wgmma_blocks = 1;  // no wgmma kernel at head_dim 64
  EXPECT_EQ(cascade_attention(p, plan, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
  plan.wgmma_blocks = -1;
  EXPECT_EQ(cascade_attention(p, plan, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace folio::cuda
