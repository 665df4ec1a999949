#include "sched/admission_headroom.h"

#include <algorithm>
#include <cmath>

namespace folio {

namespace {

// A request that runs to max_tokens: nothing but the length limit can end it.
bool output_is_certain(const SamplingParams& p) {
  return p.ignore_eos && p.stop.empty() && p.stop_token_ids.empty() && !p.use_beam_search;
}

}  // namespace

AdmissionHeadroom::AdmissionHeadroom(double conservativeness, int max_model_len, bool reactive)
    : max_model_len_(max_model_len),
      reactive_(reactive),
      init_ratio_(std::min(kInitRatio * conservativeness, 1.0)),
      min_ratio_(reactive ? 0.0 : init_ratio_ * kMinRatioFactor),
      decay_((init_ratio_ - min_ratio_) / kDecaySteps),
      ratio_(reactive ? 0.0 : init_ratio_) {}

int64_t AdmissionHeadroom::expected_output(const SequenceGroup& g, const Sequence& s) const {
  // The same output cap as the scheduler's: max_tokens within max_model_len.
  const int budget = std::min(g.params.max_tokens, max_model_len_ - g.prompt_len);
  const int64_t remaining = std::max<int64_t>(0, int64_t{g.prompt_len} + budget - s.num_tokens());
  if (output_is_certain(g.params)) return remaining;
  return static_cast<int64_t>(
      std::ceil(ratio_ * static_cast<double>(std::min<int64_t>(remaining, kClipOutputTokens))));
}

void AdmissionHeadroom::add_growth(const SequenceGroup& g, int block_size,
                                   std::vector<Growth>* out) const {
  for (const Sequence& s : g.seqs) {
    if (s.finished()) continue;
    const int64_t left = expected_output(g, s);
    out->push_back({s.num_tokens(), left});
    if (!g.forked)  // the siblings the prompt's end will fork: a copied block each, then outputs
      for (int i = 1; i < g.params.n; ++i) out->push_back({block_size, left});
  }
}

int64_t AdmissionHeadroom::peak_blocks(std::span<const Growth> by_left_desc, int block_size,
                                       int window) {
  const int64_t bs = block_size;
  // Positions (p - window, p] span at most ceil((window - 1) / bs) + 1 blocks.
  const int64_t cap_blocks = window > 0 ? (window - 1 + bs - 1) / bs + 1 : 0;
  const int64_t cap = cap_blocks * bs;
  int64_t peak = 0, lengths = 0, growing = 0, capped = 0;
  for (const Growth& e : by_left_desc) {
    if (cap > 0 && e.length >= cap) {
      ++capped;
    } else {
      lengths += e.length;
      ++growing;
    }
    // The growing entries, all alive until this one ends e.left steps from now:
    // sum_j ceil((length_j + left) / bs) <= (sum_j length_j + growing x (left + bs - 1)) / bs,
    // and none holds more than cap_blocks.
    int64_t blocks = (lengths + growing * (e.left + bs - 1)) / bs;
    if (cap > 0) blocks = std::min(blocks, growing * cap_blocks);
    peak = std::max(peak, capped * cap_blocks + blocks);
  }
  return peak;
}

void AdmissionHeadroom::insert_sorted(std::vector<Growth>& by_left_desc, const Growth& e) {
  auto at = std::upper_bound(by_left_desc.begin(), by_left_desc.end(), e,
                             [](const Growth& a, const Growth& b) { return a.left > b.left; });
  by_left_desc.insert(at, e);
}

void AdmissionHeadroom::end_step(bool preempted, bool decoded, bool idle) {
  if (preempted) {
    ratio_ = init_ratio_;
  } else if (idle) {
    ratio_ = reactive_ ? 0.0 : init_ratio_;
  } else if (decoded) {
    ratio_ = std::max(min_ratio_, ratio_ - decay_);
  }
}

}  // namespace folio
