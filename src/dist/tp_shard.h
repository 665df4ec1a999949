// TpShard: which slice of every weight and of the KV heads one tensor-parallel rank holds
// (Megatron-style), as plain integers so it is testable without a GPU.
//
//   q/k/v, gate/up   column-parallel: rank r holds a contiguous range of output rows (heads for
//                    attention, intermediate features for the MLP);
//   o_proj, down     row-parallel: rank r holds the matching input columns; the partial sums
//                    are added by one all-reduce after attention and one after the MLP;
//   embed, lm_head   vocabulary-parallel: the vocabulary is padded to a multiple of world and
//                    rank r holds rows [r * local_vocab, (r + 1) * local_vocab); rows at or past
//                    vocab_size (the padding) are zero.
// KV heads: with num_kv_heads >= world, each rank holds num_kv_heads / world of them; with fewer
// (world % num_kv_heads == 0), each rank holds one, replicated: rank r uses kv head
// r * num_kv_heads / world, the one its query heads attend to.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace folio {

struct TpShard {
  int rank = 0, world = 1;
  // Attention, in heads.
  int head_start = 0, local_heads = 0;
  int kv_head_start = 0, local_kv_heads = 0;
  bool kv_replicated = false;
  // MLP, in intermediate features.
  int inter_start = 0, local_inter = 0;
  // Vocabulary (embedding rows and logits columns).
  int vocab_size = 0, padded_vocab = 0, vocab_start = 0, local_vocab = 0;

  // Rows of this rank's vocabulary slice that are real tokens (the rest is padding): in
  // [0, local_vocab].
  int valid_vocab_rows() const;
  bool is_whole() const { return world == 1; }
};

// Checks that the model can be split `world` ways (clear errors otherwise) and returns rank's
// slice. head_dim does not change.
Result<TpShard> make_tp_shard(int num_heads, int num_kv_heads, int intermediate_size,
                              int vocab_size, int rank, int world);

// World 1: rank 0 holds everything (the single-GPU model, no padding).
TpShard whole_model_shard(int num_heads, int num_kv_heads, int intermediate_size, int vocab_size);

// Why a model cannot be split `world` ways, or ok (the checks of make_tp_shard, once for all
// ranks, for startup errors).
Status check_tp_divisibility(int num_heads, int num_kv_heads, int intermediate_size, int world);

}  // namespace folio
