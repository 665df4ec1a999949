// The meaning of a cascade plan (src/backend/cascade_plan.h): per-item partial attention (max,
// sum, unnormalised accumulator) of each row over its item's tokens, merged per row over its
// slots, is the row's decode attention as cpu::paged_attention computes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cascade_plan.h"
#include "backend/cpu/cpu_ops.h"
#include "cascade_plan_test_util.h"

namespace folio {
namespace {

using namespace cascade_test;  // NOLINT: the tests' own helpers

// The plan's meaning: per-item partial attention (max, sum, unnormalised accumulator) of each
// row over its item's tokens, merged per row over its slots, is the row's decode attention.
void expect_partials_merge_to_attention(const Batch& b, const CascadeOptions& o, uint32_t seed) {
  constexpr int kHeads = 8, kKvHeads = 2, kDim = 16, kGroup = kHeads / kKvHeads;
  const int n = b.num_seqs();
  const CascadePlan p = b.plan(o);
  check_plan(b, p, o);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> q(size_t{1} * n * kHeads * kDim);
  std::vector<float> k(size_t{1} * b.num_blocks * b.bs * kKvHeads * kDim), v(k.size());
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = dist(rng);
  const double scale = 1.0 / std::sqrt(double{kDim});
  std::vector<double> m(size_t{1} * p.num_slots * kHeads), l(m.size()), acc(m.size() * kDim);
  for (const CascadeItem& it : p.items)
    for (int i = 0; i < it.num_rows; ++i) {
      const int s = p.rows[it.row_begin + i];
      const size_t slot = static_cast<size_t>(it.slot_begin + i);
      for (int h = 0; h < kHeads; ++h) {
        const float* qv = &q[(size_t{1} * s * kHeads + h) * kDim];
        std::vector<double> scores;
        for (int32_t t = it.tok_begin; t < it.tok_end; ++t) {
          const int64_t kv = int64_t{b.table[it.bt_start + t / b.bs]} * b.bs + t % b.bs;
          const float* kr = &k[(kv * kKvHeads + h / kGroup) * kDim];
          double dot = 0;
          for (int d = 0; d < kDim; ++d) dot += double{qv[d]} * kr[d];
          scores.push_back(dot * scale);
        }
        const double mx = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        double* o_acc = &acc[(slot * kHeads + h) * kDim];
        for (int32_t t = it.tok_begin; t < it.tok_end; ++t) {
          const double w = std::exp(scores[t - it.tok_begin] - mx);
          sum += w;
          const int64_t kv = int64_t{b.table[it.bt_start + t / b.bs]} * b.bs + t % b.bs;
          const float* vr = &v[(kv * kKvHeads + h / kGroup) * kDim];
          for (int d = 0; d < kDim; ++d) o_acc[d] += w * vr[d];
        }
        m[slot * kHeads + h] = mx;
        l[slot * kHeads + h] = sum;
      }
    }
  std::vector<int32_t> query_start(n + 1);
  std::iota(query_start.begin(), query_start.end(), 0);
  cpu::PagedAttentionArgs args;
  args.num_seqs = n;
  args.num_heads = kHeads;
  args.num_kv_heads = kKvHeads;
  args.head_dim = kDim;
  args.block_size = b.bs;
  args.scale = static_cast<float>(scale);
  args.query_start = query_start.data();
  args.context_lens = b.ctx.data();
  args.block_table_start = b.bts.data();
  args.block_table = b.table.data();
  std::vector<float> ref(q.size());
  cpu::paged_attention(args, q.data(), k.data(), v.data(), ref.data());
  for (int s = 0; s < n; ++s)
    for (int h = 0; h < kHeads; ++h) {
      double mx = -INFINITY;
      for (int32_t j = p.row_slot_start[s]; j < p.row_slot_start[s + 1]; ++j)
        mx = std::max(mx, m[size_t{1} * p.row_slots[j] * kHeads + h]);
      double den = 0, num[kDim] = {};
      for (int32_t j = p.row_slot_start[s]; j < p.row_slot_start[s + 1]; ++j) {
        const size_t sh = size_t{1} * p.row_slots[j] * kHeads + h;
        const double w = std::exp(m[sh] - mx);
        den += w * l[sh];
        for (int d = 0; d < kDim; ++d) num[d] += w * acc[sh * kDim + d];
      }
      const float* r = &ref[(size_t{1} * s * kHeads + h) * kDim];
      double norm = 0;
      for (int d = 0; d < kDim; ++d) norm = std::max(norm, std::abs(double{r[d]}));
      for (int d = 0; d < kDim; ++d)
        ASSERT_NEAR(num[d] / den, r[d], 1e-5 * norm) << "row " << s << " head " << h << " d " << d;
    }
}

TEST(CascadePlan, PartialsMergeToPagedAttention) {
  CascadeOptions o;
  o.max_rows_per_item = 3;
  o.max_tokens_per_item = 12;
  o.min_shared_tokens = 8;
  // Two levels (a 12-token root, three 16-token groups of five rows), two unrelated rows, in a
  // shuffled order.
  std::mt19937 rng(5);
  Batch b(4);
  const std::vector<int32_t> root = b.fresh_blocks(3);
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < 3; ++g) {
    prefixes.push_back(root);
    for (int32_t x : b.fresh_blocks(4)) prefixes.back().push_back(x);
  }
  prefixes.push_back({});
  prefixes.push_back({});
  std::vector<int> group_of = {3, 4};
  for (int g = 0; g < 3; ++g)
    for (int i = 0; i < 5; ++i) group_of.push_back(g);
  std::shuffle(group_of.begin(), group_of.end(), rng);
  for (int g : group_of) b.add(28 + 1 + static_cast<int32_t>(rng() % 10), prefixes[g]);
  b.permute_ids(rng);
  EXPECT_EQ(b.plan(o).num_segments, 4);
  expect_partials_merge_to_attention(b, o, 1);
  for (int iter = 0; iter < 20 && !HasFailure(); ++iter)
    expect_partials_merge_to_attention(random_batch(rng, 4, 24), o, 100 + iter);
}

}  // namespace
}  // namespace folio
