// BeamSearch against (a) a dense, literal transcription of transformers' vectorized _beam_search
// (W rows from the start with -1e9 dead beams, full argsorts, the -1e9 masking arithmetic in
// float) on small synthetic problems with EOS, length penalties and every early_stopping mode,
// and (b) exhaustive enumeration where beam search provably keeps everything.
#include "sample/beam_search.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "sample_test_util.h"

namespace folio {
namespace {

// Logits as a deterministic function of the generated prefix; EOS ids get a boost so that
// hypotheses finish at various lengths.
std::vector<float> model(const std::vector<int32_t>& prefix, int vocab, uint32_t salt,
                         const std::vector<int32_t>& eos, float eos_boost) {
  uint32_t h = 2166136261u ^ salt;
  for (int32_t t : prefix) h = (h ^ static_cast<uint32_t>(t + 1)) * 16777619u;
  std::vector<float> l = testing::random_logits(static_cast<size_t>(vocab), h, 2.5f);
  for (int32_t e : eos) l[e] += eos_boost;
  return l;
}

std::vector<float> log_softmax_f(const std::vector<float>& row) {
  const auto d = testing::log_softmax64(row);
  return std::vector<float>(d.begin(), d.end());
}

struct Result2 {
  std::vector<std::vector<int32_t>> seqs;
  std::vector<float> scores;
  int steps = 0;  // forward passes until the search stopped
};

// transformers' _beam_search for one batch item, written over dense arrays.
Result2 hf_reference(const BeamSearchConfig& c, int vocab, uint32_t salt, float eos_boost) {
  const int w = c.beam_width;
  const int n_eos = static_cast<int>(c.eos_token_ids.size());
  const int k = std::max(2, 1 + n_eos) * w;
  auto is_eos = [&](int32_t t) {
    return std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), t) != c.eos_token_ids.end();
  };
  auto stable_desc = [](const std::vector<float>& v) {
    std::vector<int> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] > v[b]; });
    return idx;
  };
  std::vector<std::vector<int32_t>> running(w), fin(w);
  std::vector<float> running_scores(w, -1e9f), fin_scores(w, -1e9f);
  running_scores[0] = 0.0f;
  std::vector<bool> is_fin(w, false);
  bool unsatisfied = true;
  int steps = 0;
  for (int cur = 0; cur < c.max_tokens; ++cur) {
    ++steps;
    std::vector<float> acc(static_cast<size_t>(w) * vocab);
    for (int b = 0; b < w; ++b) {
      std::vector<float> lp = log_softmax_f(model(running[b], vocab, salt, c.eos_token_ids, eos_boost));
      if (cur < c.min_tokens)
        for (int32_t e : c.eos_token_ids) lp[e] = -INFINITY;
      for (int v = 0; v < vocab; ++v) acc[b * vocab + v] = lp[v] + running_scores[b];
    }
    const auto order = stable_desc(acc);
    std::vector<float> top(k), top_running(k), top_fin(k);
    std::vector<std::vector<int32_t>> top_seqs(k);
    std::vector<bool> hit(k);
    const float denom = static_cast<float>(std::pow(cur + 1.0, c.length_penalty));
    bool all_fin = std::all_of(is_fin.begin(), is_fin.end(), [](bool x) { return x; });
    for (int j = 0; j < k; ++j) {
      const int b = order[j] / vocab, v = order[j] % vocab;
      top[j] = acc[order[j]];
      top_seqs[j] = running[b];
      top_seqs[j].push_back(v);
      hit[j] = is_eos(v) || cur + 1 >= c.max_tokens;
      top_running[j] = top[j] + (hit[j] ? 1.0f : 0.0f) * -1.0e9f;
      float f = top[j] / denom;
      if (all_fin && c.early_stopping == EarlyStopping::kTrue) f += -1.0e9f;
      if (!unsatisfied) f += -1.0e9f;
      if (!(hit[j] && j < w)) f += -1.0e9f;
      top_fin[j] = f;
    }
    const auto run_order = stable_desc(top_running);
    for (int b = 0; b < w; ++b) {
      running[b] = top_seqs[run_order[b]];
      running_scores[b] = top_running[run_order[b]];
    }
    std::vector<float> merged = fin_scores;
    merged.insert(merged.end(), top_fin.begin(), top_fin.end());
    const auto merge_order = stable_desc(merged);
    std::vector<std::vector<int32_t>> new_fin(w);
    std::vector<float> new_scores(w);
    std::vector<bool> new_is_fin(w);
    for (int i = 0; i < w; ++i) {
      const int m = merge_order[i];
      new_fin[i] = m < w ? fin[m] : top_seqs[m - w];
      new_scores[i] = merged[m];
      new_is_fin[i] = m < w ? static_cast<bool>(is_fin[m]) : (hit[m - w] && (m - w) < w);
    }
    fin = new_fin;
    fin_scores = new_scores;
    is_fin = new_is_fin;
    // stopping
    const int len = (c.early_stopping == EarlyStopping::kNever && c.length_penalty > 0.0f)
                        ? c.max_tokens : cur + 1;
    const float best = running_scores[0] / static_cast<float>(std::pow(len, c.length_penalty));
    all_fin = std::all_of(is_fin.begin(), is_fin.end(), [](bool x) { return x; });
    const float worst = all_fin ? *std::min_element(fin_scores.begin(), fin_scores.end()) : -1e9f;
    unsatisfied = unsatisfied && best > worst;
    const bool all_hit = std::all_of(hit.begin(), hit.end(), [](bool x) { return x; });
    if (!unsatisfied || (all_fin && c.early_stopping == EarlyStopping::kTrue) || all_hit) break;
  }
  return {fin, fin_scores, steps};
}

// Runs BeamSearch on the same model, checking the child/parent bookkeeping on the way.
Result2 run_beam_search(const BeamSearchConfig& c, int vocab, uint32_t salt, float eos_boost) {
  auto bs = BeamSearch::create(c);
  EXPECT_TRUE(bs.ok());
  int steps = 0;
  while (!bs->done()) {
    std::vector<float> logits;
    std::vector<std::vector<int32_t>> parents;
    for (int b = 0; b < bs->num_live(); ++b) {
      parents.push_back(bs->live_tokens(b));
      const auto l = model(bs->live_tokens(b), vocab, salt, c.eos_token_ids, eos_boost);
      logits.insert(logits.end(), l.begin(), l.end());
    }
    const auto children = bs->step(logits, vocab);
    if (!bs->done()) {
      EXPECT_EQ(static_cast<int>(children.size()), bs->num_live());
      for (size_t i = 0; i < children.size(); ++i) {
        auto want = parents[children[i].parent];
        want.push_back(children[i].token_id);
        EXPECT_EQ(bs->live_tokens(static_cast<int>(i)), want);
      }
    }
    EXPECT_LE(++steps, c.max_tokens);
  }
  Result2 out;
  out.steps = steps;
  for (const auto& h : bs->finished()) {
    out.seqs.push_back(h.tokens);
    out.scores.push_back(h.score);
    const float want = h.sum_logprobs /
                       static_cast<float>(std::pow(h.tokens.size(), c.length_penalty));
    EXPECT_FLOAT_EQ(h.score, want);
  }
  return out;
}

struct Case {
  int vocab, width, max_tokens;
  std::vector<int32_t> eos;
  float length_penalty;
  EarlyStopping early;
  float eos_boost;
};

TEST(BeamSearch, MatchesDenseHfTranscription) {
  const std::vector<Case> cases = {
      {8, 2, 5, {}, 1.0f, EarlyStopping::kFalse, 0.0f},
      {8, 4, 6, {}, 1.0f, EarlyStopping::kFalse, 0.0f},
      {8, 3, 6, {}, 0.0f, EarlyStopping::kFalse, 0.0f},
      {8, 2, 6, {0}, 1.0f, EarlyStopping::kFalse, 1.0f},
      {8, 3, 7, {7}, 1.0f, EarlyStopping::kTrue, 1.5f},
      {8, 4, 7, {3}, 2.0f, EarlyStopping::kNever, 1.0f},
      {8, 4, 7, {3}, -1.0f, EarlyStopping::kFalse, 1.0f},
      {8, 4, 7, {3}, 0.5f, EarlyStopping::kNever, 2.0f},
      {8, 2, 6, {1, 5}, 1.0f, EarlyStopping::kFalse, 1.0f},
      {9, 3, 6, {1, 5}, 1.0f, EarlyStopping::kTrue, 0.5f},
      {8, 4, 6, {2}, 1.0f, EarlyStopping::kFalse, 3.0f},
      {8, 3, 8, {2}, 1.0f, EarlyStopping::kNever, 3.0f},
      {8, 3, 8, {2}, 2.0f, EarlyStopping::kNever, 3.0f},
      {8, 3, 8, {2}, 1.0f, EarlyStopping::kTrue, 3.0f},
      {8, 2, 8, {2, 6}, 1.5f, EarlyStopping::kFalse, 3.0f},
  };
  int with_eos_finish = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    for (uint32_t salt = 0; salt < 12; ++salt) {
      const Case& k = cases[ci];
      BeamSearchConfig c;
      c.beam_width = k.width;
      c.max_tokens = k.max_tokens;
      c.min_tokens = (salt % 3 == 0 && !k.eos.empty()) ? 2 : 0;
      c.eos_token_ids = k.eos;
      c.length_penalty = k.length_penalty;
      c.early_stopping = k.early;
      const Result2 got = run_beam_search(c, k.vocab, salt, k.eos_boost);
      const Result2 want = hf_reference(c, k.vocab, salt, k.eos_boost);
      SCOPED_TRACE("case " + std::to_string(ci) + " salt " + std::to_string(salt));
      ASSERT_EQ(got.seqs.size(), want.seqs.size());
      EXPECT_EQ(got.steps, want.steps);
      for (size_t i = 0; i < got.seqs.size(); ++i) {
        EXPECT_EQ(got.seqs[i], want.seqs[i]) << "hypothesis " << i;
        EXPECT_NEAR(got.scores[i], want.scores[i], 1e-5f);
        if (got.seqs[i].size() < static_cast<size_t>(k.max_tokens)) ++with_eos_finish;
        if (c.min_tokens > 0) {
          EXPECT_GE(got.seqs[i].size(), 3u);
        }
      }
    }
  }
  EXPECT_GT(with_eos_finish, 50);  // the EOS paths were really exercised
}

// No EOS and W = V^(T-1): nothing is ever pruned, so the result is the exhaustive top W of all
// V^T sequences by sum of logprobs (equal lengths).
TEST(BeamSearch, NoEosEqualsExhaustiveTopW) {
  constexpr int kVocab = 4, kSteps = 3, kWidth = 16;
  for (uint32_t salt = 0; salt < 5; ++salt) {
    for (float lp : {1.0f, 0.0f, 2.0f}) {
      BeamSearchConfig c;
      c.beam_width = kWidth;
      c.max_tokens = kSteps;
      c.length_penalty = lp;
      const Result2 got = run_beam_search(c, kVocab, salt, 0.0f);
      std::vector<std::pair<double, std::vector<int32_t>>> all;
      for (int s = 0; s < 64; ++s) {
        std::vector<int32_t> seq, prefix;
        double sum = 0.0;
        for (int i = 0; i < kSteps; ++i) {
          const int32_t t = (s >> (2 * (kSteps - 1 - i))) & 3;
          sum += testing::log_softmax64(model(prefix, kVocab, salt, {}, 0.0f))[t];
          prefix.push_back(t);
        }
        all.push_back({sum, prefix});
      }
      std::stable_sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first > b.first; });
      ASSERT_EQ(got.seqs.size(), static_cast<size_t>(kWidth));
      for (int i = 0; i < kWidth; ++i) {
        EXPECT_EQ(got.seqs[i], all[i].second) << i;
        EXPECT_NEAR(got.scores[i], all[i].first / std::pow(kSteps, lp), 1e-5);
      }
    }
  }
}

TEST(BeamSearch, FirstStepTakesOneRowAndForksIt) {
  BeamSearchConfig c;
  c.beam_width = 3;
  c.max_tokens = 4;
  auto bs = BeamSearch::create(c);
  ASSERT_TRUE(bs.ok());
  EXPECT_EQ(bs->num_live(), 1);
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f, -1.0f};
  const auto children = bs->step(logits, 5);
  ASSERT_EQ(children.size(), 3u);
  EXPECT_EQ(children[0].token_id, 1);
  EXPECT_EQ(children[1].token_id, 3);
  EXPECT_EQ(children[2].token_id, 2);
  for (const auto& ch : children) EXPECT_EQ(ch.parent, 0);
  EXPECT_EQ(bs->num_live(), 3);
}

TEST(BeamSearch, RejectsBadConfigAndMapsParams) {
  BeamSearchConfig c;
  c.beam_width = 0;
  EXPECT_FALSE(BeamSearch::create(c).ok());
  c.beam_width = 2;
  c.min_tokens = 20;
  EXPECT_FALSE(BeamSearch::create(c).ok());
  SamplingParams p;
  p.n = 4;
  p.use_beam_search = true;
  p.early_stopping = true;
  p.stop_token_ids = {9, 2};
  const std::vector<int32_t> eos = {2, 3};
  auto m = BeamSearchConfig::from_params(p, eos);
  EXPECT_EQ(m.beam_width, 4);
  EXPECT_EQ(m.early_stopping, EarlyStopping::kTrue);
  EXPECT_EQ(m.eos_token_ids, (std::vector<int32_t>{2, 3, 9}));
  p.ignore_eos = true;
  EXPECT_EQ(BeamSearchConfig::from_params(p, eos).eos_token_ids, (std::vector<int32_t>{9, 2}));
}

}  // namespace
}  // namespace folio
