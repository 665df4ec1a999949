// RngStream: the random stream of one sequence, and the exact draw the sampler makes from it.
//
// A stream is (key, sequence index, tag). Every draw is addressed by the step (the number of
// output tokens the sequence already has) and the token id, and computed by Philox4x32-10:
//
//   counter = { token_id >> 2, step, seq_index, tag },  key = { lo32(key), hi32(key) }
//   bits    = philox4x32_10(counter, key)[token_id & 3]
//   u       = ((bits >> 9) + 0.5) * 2^-23          (float, in (0, 1), exact)
//   E       = -logf(u)                               (an Exp(1) variate, > 0)
//
// The sampler picks argmax_i w_i / E_i over the surviving tokens (an "exponential race", the
// same as vLLM's probs / q.exponential_()): P(i wins) = w_i / sum_j w_j. Because each token's
// noise depends only on (stream, step, token id), the draw does not depend on which other rows
// share the batch, on what they asked for, on how many tokens survived filtering, or on the order
// tokens are visited, so a GPU kernel can reproduce it token-parallel. Replaying a sequence after
// preemption (recompute) redraws the same tokens, since the step is the output length.
//
// Keys: a request with a `seed` uses key = seed and tag kSeededTag, so its output is the same
// whatever else runs; otherwise key = mix(engine_seed, request id) with tag kUnseededTag (the two
// tags keep a seed from colliding with a derived key).
#pragma once

#include <cstdint>
#include <string_view>

#include "base/philox.h"

namespace folio {

struct RngStream {
  static constexpr uint32_t kSeededTag = 0x5EED5EEDu;
  static constexpr uint32_t kUnseededTag = 0xE1E1E1E1u;

  uint64_t key = 0;
  uint32_t seq_index = 0;  // index of the sequence within its request (n > 1)
  uint32_t tag = kUnseededTag;

  // A request that set `seed`; `seq_index` distinguishes its n parallel sequences.
  static RngStream seeded(uint64_t seed, uint32_t seq_index);
  // A request without a seed: key = splitmix64(engine_seed ^ fnv1a64(request_id)).
  static RngStream unseeded(uint64_t engine_seed, std::string_view request_id, uint32_t seq_index);

  // The 32 random bits for `token_id` at `step` (see the header comment for the layout).
  uint32_t bits(uint32_t step, uint32_t token_id) const {
    return bits4(step, token_id >> 2)[token_id & 3u];
  }
  // The Exp(1) variate E for `token_id` at `step`.
  float exponential(uint32_t step, uint32_t token_id) const;
  // The bits of the four tokens [4 * group, 4 * group + 4) at `step` (one Philox call).
  PhiloxCounter bits4(uint32_t step, uint32_t group) const {
    return philox4x32_10({group, step, seq_index, tag},
                         {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
  }
};

// SplitMix64's finalizer (Steele et al.): a bijective 64-bit mixer.
uint64_t splitmix64(uint64_t x);
// FNV-1a, 64-bit: a stable hash of a request id (platform independent, unlike std::hash).
uint64_t fnv1a64(std::string_view s);

}  // namespace folio
