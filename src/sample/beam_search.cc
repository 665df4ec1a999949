#include "sample/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "base/check.h"
#include "sample/logprobs.h"

namespace folio {

BeamSearchConfig BeamSearchConfig::from_params(const SamplingParams& params,
                                               std::span<const int32_t> model_eos_ids) {
  BeamSearchConfig c;
  c.beam_width = params.n;
  c.length_penalty = params.length_penalty;
  c.early_stopping = params.early_stopping ? EarlyStopping::kTrue : EarlyStopping::kFalse;
  c.max_tokens = params.max_tokens;
  c.min_tokens = params.min_tokens;
  if (!params.ignore_eos) c.eos_token_ids.assign(model_eos_ids.begin(), model_eos_ids.end());
  for (int32_t t : params.stop_token_ids)
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), t) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(t);
  return c;
}

Result<BeamSearch> BeamSearch::create(BeamSearchConfig config) {
  if (config.beam_width < 1)
    return invalid_argument("beam width must be at least 1, got " + std::to_string(config.beam_width));
  if (config.max_tokens < 1)
    return invalid_argument("max_tokens must be at least 1, got " + std::to_string(config.max_tokens));
  if (config.min_tokens < 0 || config.min_tokens > config.max_tokens)
    return invalid_argument("min_tokens must be in [0, max_tokens], got " +
                            std::to_string(config.min_tokens));
  if (!std::isfinite(config.length_penalty))
    return invalid_argument("length_penalty must be finite");
  for (int32_t t : config.eos_token_ids)
    if (t < 0) return invalid_argument("EOS ids must be >= 0, got " + std::to_string(t));
  return BeamSearch(std::move(config));
}

BeamSearch::BeamSearch(BeamSearchConfig config) : config_(std::move(config)) {
  live_.push_back(Beam{});  // the prompt: one row at the first step (HF's other W-1 start dead)
}

bool BeamSearch::is_eos(int32_t token) const {
  return std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(), token) !=
         config_.eos_token_ids.end();
}

std::vector<BeamSearch::Candidate> BeamSearch::top_candidates(std::span<const float> logits,
                                                              int vocab) const {
  const int num_rows = static_cast<int>(live_.size());
  const int n_eos = static_cast<int>(config_.eos_token_ids.size());
  const size_t k = std::min<size_t>(static_cast<size_t>(std::max(2, 1 + n_eos)) * config_.beam_width,
                                    static_cast<size_t>(num_rows) * vocab);
  const bool mask_eos = num_generated_ < config_.min_tokens;
  // A min-heap of the k best by (acc desc, flat index asc): front() is the worst kept.
  auto better = [](const Candidate& a, const Candidate& b) {
    if (a.acc != b.acc) return a.acc > b.acc;
    return a.parent != b.parent ? a.parent < b.parent : a.token < b.token;
  };
  std::vector<Candidate> heap;
  heap.reserve(k + 1);
  for (int b = 0; b < num_rows; ++b) {
    auto row = logits.subspan(static_cast<size_t>(b) * vocab, static_cast<size_t>(vocab));
    const double lse = log_sum_exp(row);
    for (int32_t v = 0; v < vocab; ++v) {
      float lp = static_cast<float>(static_cast<double>(row[v]) - lse);
      if (mask_eos && is_eos(v)) lp = -std::numeric_limits<float>::infinity();
      const Candidate c{lp + live_[b].cum, b, v, false};
      if (std::isnan(c.acc)) continue;
      if (heap.size() < k) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), better);
      } else if (better(c, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), better);
        heap.back() = c;
        std::push_heap(heap.begin(), heap.end(), better);
      }
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  const bool at_max = num_generated_ + 1 >= config_.max_tokens;
  for (Candidate& c : heap) c.hit = at_max || is_eos(c.token);
  return heap;
}

std::vector<BeamChild> BeamSearch::step(std::span<const float> logits, int vocab) {
  FOLIO_CHECK(!done_, "step() after the search is done");
  FOLIO_CHECK(vocab > 0 && logits.size() == live_.size() * static_cast<size_t>(vocab),
              "logits must be [num_live, vocab]");
  const std::vector<Candidate> cands = top_candidates(logits, vocab);

  // Finished first: it reads the parents' tokens before live_ is replaced.
  update_finished(cands);

  std::vector<BeamChild> children;
  std::vector<Beam> next;
  for (const Candidate& c : cands) {
    if (static_cast<int>(next.size()) == config_.beam_width) break;
    if (c.hit) continue;
    Beam beam{live_[c.parent].tokens, c.acc};
    beam.tokens.push_back(c.token);
    next.push_back(std::move(beam));
    children.push_back({c.parent, c.token});
  }
  live_ = std::move(next);
  ++num_generated_;
  update_stopping(cands);
  if (done_) children.clear();
  return children;
}

void BeamSearch::update_finished(const std::vector<Candidate>& cands) {
  const size_t w = static_cast<size_t>(config_.beam_width);
  if (config_.early_stopping == EarlyStopping::kTrue && finished_.size() == w) return;
  if (!improvement_possible_) return;
  const int length = num_generated_ + 1;
  const float denom = static_cast<float>(std::pow(static_cast<double>(length),
                                                  static_cast<double>(config_.length_penalty)));
  // Only the first W of the K candidates may finish; the rest only back up the live beams.
  for (size_t j = 0; j < std::min(w, cands.size()); ++j) {
    const Candidate& c = cands[j];
    if (!c.hit) continue;
    BeamHypothesis h{live_[c.parent].tokens, c.acc, c.acc / denom, is_eos(c.token)};
    h.tokens.push_back(c.token);
    // Insert after every hypothesis scoring >= it (earlier ones win ties), keep the best W.
    auto pos = std::upper_bound(finished_.begin(), finished_.end(), h.score,
                                [](float s, const BeamHypothesis& x) { return s > x.score; });
    if (static_cast<size_t>(pos - finished_.begin()) >= w) continue;
    finished_.insert(pos, std::move(h));
    if (finished_.size() > w) finished_.pop_back();
  }
}

void BeamSearch::update_stopping(const std::vector<Candidate>& cands) {
  const size_t w = static_cast<size_t>(config_.beam_width);
  const bool all_hit = std::all_of(cands.begin(), cands.end(), [](const Candidate& c) { return c.hit; });
  if (all_hit || live_.empty()) {
    done_ = true;
    return;
  }
  if (improvement_possible_ && finished_.size() == w) {
    const bool never = config_.early_stopping == EarlyStopping::kNever;
    const int length = (never && config_.length_penalty > 0.0f) ? config_.max_tokens : num_generated_;
    const float best_possible =
        live_.front().cum / static_cast<float>(std::pow(static_cast<double>(length),
                                                        static_cast<double>(config_.length_penalty)));
    improvement_possible_ = best_possible > finished_.back().score;
  }
  if (!improvement_possible_) done_ = true;
  if (config_.early_stopping == EarlyStopping::kTrue && finished_.size() == w) done_ = true;
}

}  // namespace folio
