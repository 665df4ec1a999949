// AdmissionHeadroom: the KV blocks the scheduler keeps free for the growth of the groups it runs,
// so that admitting new prompts does not fill the cache and force preemptions a few hundred
// steps later (SGLang's admission control, `--schedule-conservativeness`; vLLM admits whatever
// prompt chunk fits and preempts by recompute when the cache runs out).
//
// Each live sequence is expected to grow to its current length plus the output it may still
// produce:
//   - certain outputs (ignore_eos, no stop strings or stop ids, not beam search: the request
//     runs to max_tokens, as in every benchmark) count in full;
//   - other outputs count as ratio x min(remaining, 4096): the ratio starts at
//     min(0.7 x conservativeness, 1), decays linearly over 600 steps that decode to 0.14 of
//     that, and returns to its start after a preemption or when nothing runs (SGLang's
//     constants: a request that may stop at EOS rarely uses all of max_tokens).
// Expected blocks = ceil(expected length / block size) - blocks it holds now, at least 0. A
// group of n > 1 not yet forked also counts its n - 1 siblings' outputs (and their partial
// prompt block, copied on write). Prefix sharing is not credited: the estimate errs high.
#pragma once

#include <cstdint>

#include "core/request.h"
#include "kv/kv_cache_manager.h"

namespace folio {

class AdmissionHeadroom {
 public:
  // conservativeness 0 turns the headroom off (every expected_blocks is 0).
  AdmissionHeadroom(double conservativeness, int max_model_len);

  bool enabled() const { return init_ratio_ > 0.0; }
  double ratio() const { return ratio_; }
  // Blocks `g`'s live sequences are still expected to need beyond what they hold in `kv`.
  int64_t expected_blocks(const SequenceGroup& g, const KvCacheManager& kv) const;
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
  double init_ratio_;
  double min_ratio_;
  double decay_;
  double ratio_;
};

}  // namespace folio
