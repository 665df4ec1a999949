// Turns the host sampler's inputs (one SampleRow per sequence to sample) into the device
// sampler's plain rows and sparse logit ops (backend/device_sampling.h), and its results back
// into TokenLogprobs. The ops reproduce apply_logits_processors (sample/logits_processors.h)
// exactly: the same float operations on the same tokens in the same order, so the GPU sees the
// row the CPU Sampler would have built.
#pragma once

#include <cstdint>
#include <span>

#include "backend/device_sampling.h"
#include "sample/logits_processors.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"

namespace folio {

// True when the device sampler handles this request (it returns at most kMaxDeviceLogprobs).
bool device_can_sample(const SamplingParams& params);

// Appends the device row of `row` (its logits at index `logits_row` of ForwardBatch::logits_rows)
// and its ops. `ws` is scratch of the vocabulary's size. `in_flight`: async steps, the
// placeholder id of the sequence's last token when it is still being sampled (0: none); it
// counts as one more output token (min_tokens, the random stream's step) and its penalties go
// in as placeholder ops (backend/device_sampling.h).
void append_device_sample_row(const SampleRow& row, int32_t logits_row,
                              std::span<const int32_t> eos_token_ids, PenaltyWorkspace& ws,
                              DeviceSamplingBatch& batch, int32_t in_flight = 0);

// The TokenLogprobs the host Sampler would have returned for `s` with top-`k` logprobs (the
// chosen token appended to `top` when it is not among the best k).
TokenLogprobs to_token_logprobs(const DeviceSample& s, int k);

}  // namespace folio
