// SequenceOutput: the output side of one generated sequence (index j of a request's n):
// incremental detokenization, stop conditions (EOS, stop token ids, stop strings across token
// boundaries, min_tokens) and what is new since the last delta. Engine thread only.
//
// Text contract: `text` never contains a stop string unless include_stop_str_in_output; while
// the sequence runs, the last (longest stop string - 1) bytes are held back from deltas because
// they may be the start of a stop string (vLLM does the same).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/sampling_params.h"
#include "engine/engine_client.h"
#include "sample/logprobs.h"
#include "sample/stop_checker.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace folio {

class SequenceOutput {
 public:
  // `tokenizer` may be null (no text; stop strings are then ignored).
  SequenceOutput(int index, const Tokenizer* tokenizer, const SamplingParams& params,
                 const std::vector<int32_t>& eos_token_ids);

  int index() const { return index_; }
  bool finished() const { return finish_reason_.has_value(); }
  int num_tokens() const { return static_cast<int>(token_ids_.size()); }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }

  // Records a sampled token and checks the stop conditions. Returns true when the sequence just
  // finished with "stop" (EOS, a stop token id or a stop string).
  bool add_token(int32_t token, const TokenLogprobs& lp);
  // Finishes for another reason ("length", "abort"); flushes the detokenizer.
  void finish(const std::string& reason);

  // What is new since the last call (text held back as described above).
  CompletionDelta take_delta();
  // The whole output so far, as one delta (offline results, beam search).
  CompletionDelta full();

 private:
  void append_text(const std::string& piece);
  void flush_detokenizer();
  size_t emit_limit() const;

  int index_;
  const SamplingParams& params_;
  StopChecker stop_;
  std::unique_ptr<IncrementalDetokenizer> detok_;
  std::vector<int32_t> token_ids_;
  std::vector<PositionLogprobs> logprobs_;
  std::string text_;
  double cumulative_logprob_ = 0.0;
  std::optional<std::string> finish_reason_;
  StopReason stop_reason_;
  // Emission cursors for take_delta().
  size_t emitted_tokens_ = 0, emitted_text_ = 0;
  bool emitted_finish_ = false;
};

}  // namespace folio
