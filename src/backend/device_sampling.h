// Sampling on the device: what the engine asks a backend to sample for a step, so that the
// logits of ordinary rows never travel to the host (only a token, its logprob and rank, and the
// top-K come back). Plain data, backend-independent; the engine builds it from SamplingParams
// (engine/device_sampling_plan.h) and the CUDA executor runs it (backend/cuda/sample_rows.h).
//
// The contract is the host Sampler's (sample/sampler.h, row_sampler.h, rng_stream.h), step for
// step: logits processors as a list of sparse ops on the raw row, then greedy or temperature,
// top-k, top-p, min-p and the Philox exponential race, and logprobs of the raw row.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace folio {

// One sparse edit of a logits row, applied in phase order (see DeviceSampleRow::phase_end).
// Within one phase the ops of a row name distinct tokens (or are idempotent), so they can run in
// parallel; the phases mirror apply_logits_processors: bias, min-tokens mask, repetition,
// frequency + presence.
enum class LogitOpKind : int32_t {
  kAdd = 0,         // x += a                               (logit_bias)
  kSet = 1,         // x = a                                (min_tokens: a = -inf)
  kRepetition = 2,  // x = x > 0 ? x / a : x * a            (repetition_penalty a)
  kSubTwo = 3,      // x -= a; x -= b                       (frequency * count, presence)
  kNone = 4,        // nothing (a placeholder op whose token was already named; see below)
};

// Async steps (Executor::launch_sampled): a row whose sequence has a token in flight may end
// phase 2 and phase 3 each with one placeholder op, its token -(1 + j) (sample j of the step
// launched before, as in ForwardBatch::token_ids), resolved on the device before the ops run
// (resolve_placeholder_ops, the reference): with t the sampled token,
//   phase 2 (kRepetition): t already named in the phase -> kNone; else the op on t.
//   phase 3 (kSubTwo, a = frequency, b = presence): t named by op q of the phase -> q's count
//     goes up by one (q.a = a * (rint(q.a / a) + 1), the host's frequency * count) and the op
//     becomes kNone; else the op on t (count 1).
// The resolved ops equal those the host builds once t is known, up to their order in a phase.

struct LogitOp {
  int32_t token = 0;
  LogitOpKind kind = LogitOpKind::kAdd;
  float a = 0.0f;
  float b = 0.0f;
};

// One row to sample. POD: the CUDA backend uploads an array of these as is.
struct DeviceSampleRow {
  int32_t logits_row = 0;     // index into ForwardBatch::logits_rows
  float temperature = 1.0f;   // < 1e-5: greedy (Sampler::kGreedyTemperature)
  int32_t top_k = -1;         // <= 0 or >= vocab: off
  float top_p = 1.0f;         // >= 1: off
  float min_p = 0.0f;         // <= 0: off
  uint32_t rng_key_lo = 0, rng_key_hi = 0, rng_seq_index = 0, rng_tag = 0;  // RngStream
  uint32_t rng_step = 0;      // the sequence's output length
  int32_t num_logprobs = 0;   // top-K to return (0: the chosen token's record only)
  int32_t op_begin = 0;       // ops [op_begin, phase_end[3]) of DeviceSamplingBatch::ops,
  int32_t phase_end[4] = {0, 0, 0, 0};  // phase p is [p ? phase_end[p-1] : op_begin, phase_end[p])
};

struct DeviceSamplingBatch {
  std::vector<DeviceSampleRow> rows;  // ascending logits_row
  std::vector<LogitOp> ops;
  // Indices into ForwardBatch::logits_rows whose raw logits the host still needs (beam search,
  // prompt logprobs), ascending; they come back as [host_rows.size(), vocab] fp32.
  std::vector<int32_t> host_rows;

  void clear() {
    rows.clear();
    ops.clear();
    host_rows.clear();
  }
};

// What comes back per sampled row (the fields of sample/logprobs.h's TokenLogprobs).
struct DeviceSample {
  int32_t token_id = 0;
  float logprob = 0.0f;  // of the raw logits
  int32_t rank = 0;      // tokens with raw logit >= the chosen one's
  std::vector<std::pair<int32_t, float>> top;  // best first, num_logprobs entries
};

// The reference of the device's resolution of placeholder ops (above), in place; `previous`:
// the sampled tokens of the step launched before, in row order. False if an op names no sample.
bool resolve_placeholder_ops(DeviceSamplingBatch& batch, const std::vector<int32_t>& previous);

// The largest num_logprobs a backend must support per row (SamplingParams caps logprobs by
// --max-logprobs, whose default is 20).
inline constexpr int kMaxDeviceLogprobs = 64;

}  // namespace folio
