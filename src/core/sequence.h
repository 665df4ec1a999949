// Sequence: one stream of tokens (prompt, then generated tokens) and how much of it is in the KV
// cache. Plain data owned by its SequenceGroup (core/request.h); the scheduler is the only writer.
//
// Invariant: 0 <= num_computed <= num_tokens(). Tokens [0, num_computed) have K/V in the cache;
// the scheduler's whole job is making num_computed catch up with num_tokens() (vLLM V1): a
// prefill, a prefill chunk, a prefix-cache hit and a decode step differ only in the counts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace folio {

using TokenId = int32_t;
using SeqId = int64_t;
using GroupId = int64_t;

enum class SeqStatus : uint8_t {
  kWaiting,           // not in the KV cache (new, or preempted by recompute)
  kRunning,           // holds device KV blocks
  kSwapped,           // its KV lives in the host swap pool
  kFinishedStopped,   // EOS / stop token / stop string (decided by the engine)
  kFinishedLength,    // max_tokens or max_model_len reached
  kFinishedAborted,   // cancelled by the client
  kFinishedError,     // can never be served (too long for the cache or the model)
};

inline bool is_finished(SeqStatus s) { return s >= SeqStatus::kFinishedStopped; }
const char* seq_status_name(SeqStatus s);

struct Sequence {
  SeqId id = 0;
  std::vector<TokenId> tokens;  // prompt tokens, then generated ones
  int prompt_len = 0;
  int num_computed = 0;         // tokens [0, num_computed) are in the KV cache
  SeqStatus status = SeqStatus::kWaiting;

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_output_tokens() const { return num_tokens() - prompt_len; }
  int num_uncomputed() const { return num_tokens() - num_computed; }
  std::span<const TokenId> output_tokens() const {
    return std::span<const TokenId>(tokens).subspan(static_cast<size_t>(prompt_len));
  }
  bool finished() const { return is_finished(status); }
};

}  // namespace folio
