// The GPU sampler: for each DeviceSampleRow, one token drawn from a row of fp32 logits already on
// the device, with the host Sampler's exact contract (backend/device_sampling.h), and the raw
// logprob record of the chosen token. Per row, one thread block:
//   1. apply the row's LogitOps in place (the touched raw values are saved first),
//   2. greedy argmax, or temperature then top-k (radix select of the k-th largest), top-p (radix
//      select of the nucleus boundary by mass, in double), min-p, and the Philox race,
//   3. restore the saved raw values,
//   4. logprobs of the raw row: log-sum-exp (double), the chosen token's logprob and rank, and
//      the top num_logprobs tokens (best first, ties to the lower id).
// Results land in device arrays that the caller copies back (a few bytes per row).
//
// Rows whose sampling is plain (sample_split_eligible), up to sample_split_max_rows() of them,
// take a split path instead: each row cut into chunks over ~256 blocks (at least 8 per row of a
// 128k vocabulary), so a batch-1 step does not scan 128k logits on one SM, nor a batch-256 step
// 256 rows on one block each (sample_rows_split.cu). FOLIO_SAMPLE_SPLIT=0 turns it off.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/device_sampling.h"
#include "base/status.h"

namespace folio::cuda {

// One row's result on the device; top entries live in a separate [rows, max_top] array.
struct SampleOut {
  int32_t token_id;
  int32_t rank;
  float logprob;
  int32_t num_top;
};

struct TopEntry {
  int32_t token_id;
  float logprob;
};

struct SampleRowsArgs {
  float* logits = nullptr;            // [num_logits_rows, vocab]; rows are edited and restored
  int vocab = 0;
  int num_logits_rows = 0;            // rows present in `logits`
  int logits_row_offset = 0;          // subtracted from DeviceSampleRow::logits_row
  const DeviceSampleRow* rows = nullptr;  // device [num_rows]
  int num_rows = 0;
  const LogitOp* ops = nullptr;       // device, indexed by the rows' op ranges
  float* op_saved = nullptr;          // device scratch, one float per op
  bool any_ops = false;               // false: skip the edit/restore kernels
  SampleOut* out = nullptr;           // device [num_rows]
  TopEntry* top = nullptr;            // device [num_rows, kMaxDeviceLogprobs]
  // The split path: the caller sets split_rows when every row is sample_split_eligible, and
  // provides scratch (kSampleSplitScratchBytes, zeroed once at allocation; each launch leaves it
  // fit for the next). Without either, every row takes the one-block-per-row kernels.
  bool split_rows = false;
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
};

inline constexpr int kSampleSplitMaxRows = 1024;
inline constexpr size_t kSampleSplitScratchBytes = 1 << 20;

// Rows the split path takes at most: FOLIO_SAMPLE_SPLIT_ROWS (1..kSampleSplitMaxRows; 32 was the
// limit before session 9) when set, else kSampleSplitMaxRows. Read once.
int sample_split_max_rows();

// No logits ops, no top-k / top-p / min-p filter, no top logprobs: greedy or temperature only.
inline bool sample_split_eligible(const DeviceSampleRow& r, int vocab) {
  return r.phase_end[3] == r.op_begin && (r.top_k <= 0 || r.top_k >= vocab) && r.top_p >= 1.0f &&
         r.min_p <= 0.0f && r.num_logprobs == 0;
}

// FOLIO_SAMPLE_SPLIT=0 disables the split path (read once).
bool sample_split_enabled();

// Launches the kernels on `stream`; rows must reference logits rows in
// [logits_row_offset, logits_row_offset + num_logits_rows).
Status sample_rows(const SampleRowsArgs& args, void* stream);

}  // namespace folio::cuda
