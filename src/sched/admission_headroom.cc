#include "sched/admission_headroom.h"

#include <algorithm>
#include <cmath>

namespace folio {

namespace {

// A request that runs to max_tokens: nothing but the length limit can end it.
bool output_is_certain(const SamplingParams& p) {
  return p.ignore_eos && p.stop.empty() && p.stop_token_ids.empty() && !p.use_beam_search;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

AdmissionHeadroom::AdmissionHeadroom(double conservativeness, int max_model_len)
    : max_model_len_(max_model_len),
      init_ratio_(std::min(kInitRatio * conservativeness, 1.0)),
      min_ratio_(init_ratio_ * kMinRatioFactor),
      decay_((init_ratio_ - min_ratio_) / kDecaySteps),
      ratio_(init_ratio_) {}

int64_t AdmissionHeadroom::expected_output(const SequenceGroup& g, const Sequence& s) const {
  // The same output cap as the scheduler's: max_tokens within max_model_len.
  const int budget = std::min(g.params.max_tokens, max_model_len_ - g.prompt_len);
  const int64_t remaining = std::max<int64_t>(0, int64_t{g.prompt_len} + budget - s.num_tokens());
  if (output_is_certain(g.params)) return remaining;
  return static_cast<int64_t>(
      std::ceil(ratio_ * static_cast<double>(std::min<int64_t>(remaining, kClipOutputTokens))));
}

int64_t AdmissionHeadroom::expected_blocks(const SequenceGroup& g, const KvCacheManager& kv) const {
  if (!enabled()) return 0;
  const int64_t bs = kv.block_size();
  int64_t blocks = 0;
  for (const Sequence& s : g.seqs) {
    if (s.finished()) continue;
    const int64_t out = expected_output(g, s);
    const int64_t held = kv.has_seq(s.id) ? static_cast<int64_t>(kv.block_table(s.id).size()) : 0;
    blocks += std::max<int64_t>(0, ceil_div(s.num_tokens() + out, bs) - held);
    if (!g.forked)  // the siblings the prompt's end will fork: their outputs and a copied block
      blocks += int64_t{g.params.n - 1} * (ceil_div(out, bs) + 1);
  }
  return blocks;
}

void AdmissionHeadroom::end_step(bool preempted, bool decoded, bool idle) {
  if (preempted || idle) {
    ratio_ = init_ratio_;
  } else if (decoded) {
    ratio_ = std::max(min_ratio_, ratio_ - decay_);
  }
}

}  // namespace folio
