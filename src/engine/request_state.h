// EngineCore::RequestState: the engine's private record of one live request (output side and
// bookkeeping the scheduler does not keep). Included only by the engine's own .cc files.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_core.h"
#include "sample/beam_search.h"
#include "sample/rng_stream.h"

namespace folio {

struct EngineCore::RequestState {
  GroupId gid = 0;
  std::string id;
  SamplingParams params;
  std::vector<int32_t> prompt;
  Sink sink;
  bool final_only = false;
  std::vector<std::unique_ptr<SequenceOutput>> outputs;  // by output index j
  std::unordered_map<SeqId, int> seq_index;
  int plp_next = 0;  // next prompt position whose logits are recorded (prompt_logprobs)
  std::vector<std::optional<PositionLogprobs>> prompt_logprobs;
  bool sent_prompt_logprobs = false;
  int num_cached_prompt_tokens = -1;  // known at the first schedule
  int num_generated = 0;
  std::chrono::steady_clock::time_point arrival;
  // Sequence 0's random stream (seeded, or keyed by the engine seed and the request id); sequence
  // j's is the same with seq_index j. Derived once: hashing the id every step showed in the host
  // loop.
  RngStream rng;
  std::optional<double> queue_time_s;
  // Beam search: the search state and, in its live-beam order, the sequence of each beam.
  std::optional<BeamSearch> beam;
  std::vector<SeqId> beam_seqs;
  std::unordered_map<SeqId, int> beam_rows;  // this step: beam sequence -> logits row
  // Async scheduling: whether steps may run ahead of this request's tokens.
  bool async_safe = false;
};

// A request whose steps may run one ahead of its tokens: no beams (their search needs the
// logits on the host), sampled on the device. n > 1 siblings each have their own placeholder.
// Prompt logprobs need the prompt's logits on the host: such a request is not async-safe until
// its prompt is computed (EngineCore::record_prompt_logprobs then counts it safe). Its last
// token, while still being sampled, is a placeholder the device resolves: as the next input,
// and in the penalties' ops (backend/device_sampling.h); min_tokens and the random stream's
// step count it. Stops (stop strings and tokens, EOS) are applied a step late.
bool async_safe(const SamplingParams& params);

}  // namespace folio
