// BeamSearch: the per-step logic of beam search for one request, following Hugging Face
// transformers' vectorized `_beam_search` (generate(num_beams=W, num_return_sequences=W,
// do_sample=False)) with `length_penalty` and `early_stopping` (False / True / "never").
// Pure host logic: it sees logits, returns which beams continue; the engine owns the KV.
//
// One step, with t tokens generated so far (t = 0 at the first step, which has one live row):
//   1. for each live beam b: lp = log_softmax(logits[b]) (EOS ids at -inf while t < min_tokens);
//      candidate (b, v) scores acc = lp[v] + cum[b] (float, as HF);
//   2. take the K = max(2, 1 + #eos) * W best candidates over all beams (ties: lower b * V + v);
//      a candidate "hits" when v is an EOS id or t + 1 == max_tokens;
//   3. the first W non-hitting candidates become the live beams (children: parent index, token);
//   4. hitting candidates among the first W of the K become finished hypotheses scored
//      acc / (t + 1)^length_penalty, merged into the W best finished (kept best first) -- unless
//      early_stopping is True and W hypotheses are already finished, or the search was already
//      judged unable to improve;
//   5. HF's stopping heuristic: once W hypotheses are finished, stop when the best live beam's
//      cum / L^length_penalty is <= the worst finished score, with L = t + 1, or L = max_tokens
//      when early_stopping is "never" and length_penalty > 0. Also stop when early_stopping is
//      True and W are finished, or when every candidate hit (max_tokens reached).
// With no EOS in play it keeps the top W sequences by cumulative logprob, and at max_tokens the
// result is the live beams scored by cum / max_tokens^length_penalty.
// Deviation from HF (only for tiny vocabularies): when live * vocab < K, K shrinks to live * vocab
// instead of HF's padding with dead -1e9 beams.
// Not thread-safe; one per request, driven by the engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "core/sampling_params.h"

namespace folio {

enum class EarlyStopping { kFalse, kTrue, kNever };

struct BeamSearchConfig {
  int beam_width = 1;  // W
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::kFalse;
  int max_tokens = 16;  // HF max_new_tokens
  int min_tokens = 0;   // HF min_new_tokens: finishing ids are masked before this many tokens
  std::vector<int32_t> eos_token_ids;  // the ids that finish a beam; empty: none (ignore_eos)

  // From request params: W = n; finishing ids = the model's EOS ids (unless ignore_eos) plus
  // stop_token_ids. SamplingParams has no "never" value, so early_stopping maps to True/False.
  static BeamSearchConfig from_params(const SamplingParams& params,
                                      std::span<const int32_t> model_eos_ids);
};

struct BeamChild {
  int32_t parent = 0;  // index into the live beams before the step
  int32_t token_id = 0;
};

struct BeamHypothesis {
  std::vector<int32_t> tokens;  // generated tokens, the finishing EOS included when there is one
  float sum_logprobs = 0.0f;    // cumulative logprob (HF's running beam score)
  float score = 0.0f;           // sum_logprobs / tokens.size()^length_penalty
  bool ended_with_eos = false;  // finish reason: stop (true) or length (false)
};

class BeamSearch {
 public:
  static Result<BeamSearch> create(BeamSearchConfig config);

  // How many logits rows the next step() expects: 1 before the first step (the prompt), then
  // the live beams (normally W). 0 once done.
  int num_live() const { return done_ ? 0 : static_cast<int>(live_.size()); }
  bool done() const { return done_; }
  int num_generated() const { return num_generated_; }
  const std::vector<int32_t>& live_tokens(int beam) const { return live_[beam].tokens; }
  float live_cum_logprob(int beam) const { return live_[beam].cum; }

  // `logits` is [num_live(), vocab] row-major. Returns the new live beams in order (best
  // first); the engine gives child i the KV of `parent` plus `token_id` (a parent may have
  // several children or none: fork / free accordingly). Empty once the search is done.
  std::vector<BeamChild> step(std::span<const float> logits, int vocab);

  // The best hypotheses (up to W), best first. Final once done().
  const std::vector<BeamHypothesis>& finished() const { return finished_; }

 private:
  struct Beam {
    std::vector<int32_t> tokens;
    float cum = 0.0f;
  };
  struct Candidate {
    float acc;
    int32_t parent;
    int32_t token;
    bool hit;
  };

  explicit BeamSearch(BeamSearchConfig config);
  std::vector<Candidate> top_candidates(std::span<const float> logits, int vocab) const;
  void update_finished(const std::vector<Candidate>& cands);
  void update_stopping(const std::vector<Candidate>& cands);
  bool is_eos(int32_t token) const;

  BeamSearchConfig config_;
  std::vector<Beam> live_;
  std::vector<BeamHypothesis> finished_;  // best first, at most W
  int num_generated_ = 0;
  bool improvement_possible_ = true;  // HF's is_early_stop_heuristic_unsatisfied
  bool done_ = false;
};

}  // namespace folio
