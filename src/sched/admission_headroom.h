// AdmissionHeadroom: the KV blocks the scheduler keeps free for the growth of the groups it runs,
// so that admitting new prompts does not fill the cache and force preemptions a few hundred
// steps later (SGLang's admission control, `--schedule-conservativeness`; vLLM admits whatever
// prompt chunk fits and preempts by recompute when the cache runs out).
//
// Each live sequence is an entry (length now, tokens it is still expected to produce):
//   - certain outputs (ignore_eos, no stop strings or stop ids, not beam search: the request
//     runs to max_tokens, as in every benchmark) count in full;
//   - other outputs count as ratio x min(remaining, 4096). SGLang's ratio (`reactive` false)
//     starts at min(0.7 x conservativeness, 1), decays linearly over 600 steps that decode to
//     0.14 of that, and returns to its start after a preemption or when nothing runs (a request
//     that may stop at EOS rarely uses all of max_tokens). The reactive ratio (folio's default)
//     starts at 0 and returns there when nothing runs; a preemption raises it to
//     min(0.7 x conservativeness, 1), from where it decays to 0 over 600 decoding steps. So
//     outputs that may stop early are admitted as vLLM admits them (their lengths now, with a
//     partial block each: the next tokens' room) until the cache has shown that they outgrow
//     it, and a load that fits is never held back (outputs that stop early on an H200, and
//     AdmissionSimBench: NOTES.md, session 44). Its price is a load whose uncertain outputs do
//     run to max_tokens and overfill the pool at the first admission (the ratio still 0): B2
//     sent with EOS honoured ran 9,049 output tok/s against SGLang's ratio 9,334 and vLLM's
//     9,033 on an H200 (session 46, bench/results/README.md, which also lists two variants
//     modelled and not kept).
// A group of n > 1 not yet forked also has its n - 1 siblings as entries (a copied block each).
// The check is LightLLM's (its router's admission test for TokenAttention): if every entry grows
// by one token per step until its expected output ends, the cache holds the most just before an
// entry ends; with the entries sorted by tokens left, longest first, that peak is
//   max over i of  sum_{j <= i} (length_j + left_i),
// which is exact for certain outputs and far below the sum of final lengths when outputs differ
// (early finishers free their blocks before the long ones peak). Prefix sharing is not credited.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/request.h"

namespace folio {

class AdmissionHeadroom {
 public:
  struct Growth {
    int64_t length;  // tokens now (an uncomputed prompt counts: its blocks come soon)
    int64_t left;    // tokens still expected
  };

  // conservativeness 0 turns the headroom off; `reactive`: the ratio above starts at 0.
  AdmissionHeadroom(double conservativeness, int max_model_len, bool reactive);

  bool enabled() const { return init_ratio_ > 0.0; }
  double ratio() const { return ratio_; }
  // Appends the entries of `g`'s live sequences (and of the siblings it will fork).
  void add_growth(const SequenceGroup& g, int block_size, std::vector<Growth>* out) const;
  // The most blocks of `block_size` tokens the entries hold at once (the peak above, with a
  // partial block per entry), for entries sorted by `left`, largest first. With a sliding
  // `window` (> 0) an entry holds at most the C blocks its last `window` positions span: an
  // entry already that long counts C, and the others' sum at each end at most C each (an upper
  // bound of the sum of their capped sizes).
  static int64_t peak_blocks(std::span<const Growth> by_left_desc, int block_size, int window = 0);
  // Inserts `e` into `by_left_desc`, keeping it sorted by left, largest first.
  static void insert_sorted(std::vector<Growth>& by_left_desc, const Growth& e);
  // Once per schedule(): `preempted` this step, the step `decoded` (ran decode rows), `idle`
  // (no group runs after it).
  void end_step(bool preempted, bool decoded, bool idle);

  static constexpr int kClipOutputTokens = 4096;  // an uncertain output counts at most this much
  static constexpr int kDecaySteps = 600;
  static constexpr double kInitRatio = 0.7;
  static constexpr double kMinRatioFactor = 0.14;

 private:
  // Output tokens `s` (of `g`) is still expected to produce.
  int64_t expected_output(const SequenceGroup& g, const Sequence& s) const;

  int max_model_len_;
  bool reactive_;  // the ratio starts (and returns when idle) at 0, rising at a preemption
  double init_ratio_;
  double min_ratio_;  // where it decays to: 0.14 of the start, or 0 when reactive
  double decay_;
  double ratio_;
};

}  // namespace folio
