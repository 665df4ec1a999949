// ForwardBatch: everything one model step needs, as plain id arrays (no pointers into host
// bookkeeping), so a backend can upload it in one go and the CPU and CUDA paths see the same thing.
//
// A step runs `num_seqs` sequences; sequence s contributes the tokens
// [query_start[s], query_start[s+1]) of the flattened token arrays. Those are its new tokens at
// positions [context_len[s] - q_len, context_len[s]): prefill, a prefill chunk after a prefix-cache
// hit, or a single decode token are all the same shape.
//
// The KV cache is paged: physical slot = block_id * block_size + offset. Token mode (LightLLM
// TokenAttention) is block_size 1, where a block id is a slot id. Sequence s's block table is
// block_table[block_table_start[s], block_table_start[s+1]) (CSR), logical block i holding
// positions [i*block_size, (i+1)*block_size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace folio {

struct ForwardBatch {
  // Per token, [num_tokens].
  std::vector<int32_t> token_ids;
  std::vector<int32_t> positions;
  std::vector<int64_t> slot_mapping;  // where this token's K/V is written

  // Per sequence, [num_seqs] or [num_seqs + 1].
  std::vector<int32_t> query_start;        // [num_seqs + 1], query_start[0] == 0
  std::vector<int32_t> context_lens;       // [num_seqs] tokens in KV after this step
  std::vector<int32_t> block_table_start;  // [num_seqs + 1]
  std::vector<int32_t> block_table;        // [block_table_start.back()] physical block ids

  // Rows of the flattened token arrays whose logits the step returns, in output order
  // (usually the last token of each sequence that samples; every prompt token for
  // prompt_logprobs).
  std::vector<int32_t> logits_rows;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(context_lens.size()); }
  // Empties every array, keeping their capacity (the engine rebuilds one batch every step).
  void clear() {
    for (auto* v : {&token_ids, &positions, &query_start, &context_lens, &block_table_start,
                    &block_table, &logits_rows})
      v->clear();
    slot_mapping.clear();
  }
};

// Asynchronous steps (Executor::launch_sampled): token id -(1 + j) in a launched step stands for
// the token of sample j of the step launched before it.
inline int32_t placeholder_token(int sample) { return -1 - sample; }
inline int placeholder_sample(int32_t token_id) { return -1 - token_id; }

// The reference of the device's resolution: every placeholder in `token_ids` replaced by its
// sample's token from `previous` (the step before's sampled tokens, in row order). False if a
// placeholder names no sample of `previous`.
inline bool resolve_placeholders(std::vector<int32_t>& token_ids,
                                 const std::vector<int32_t>& previous) {
  for (int32_t& id : token_ids) {
    if (id >= 0) continue;
    const int j = placeholder_sample(id);
    if (j >= static_cast<int>(previous.size())) return false;
    id = previous[static_cast<size_t>(j)];
  }
  return true;
}

// One (src, dst) pair of block ids: a copy-on-write copy within the device cache, or a swap
// between the device cache and the host swap pool.
struct BlockCopy {
  int32_t src;
  int32_t dst;
};

}  // namespace folio
