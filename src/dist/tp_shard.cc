#include "dist/tp_shard.h"

#include <algorithm>
#include <string>

namespace folio {

int TpShard::valid_vocab_rows() const {
  return std::clamp(vocab_size - vocab_start, 0, local_vocab);
}

TpShard whole_model_shard(int num_heads, int num_kv_heads, int intermediate_size, int vocab_size) {
  TpShard s;
  s.local_heads = num_heads;
  s.local_kv_heads = num_kv_heads;
  s.local_inter = intermediate_size;
  s.vocab_size = s.padded_vocab = s.local_vocab = vocab_size;
  return s;
}

Status check_tp_divisibility(int num_heads, int num_kv_heads, int intermediate_size, int world) {
  const std::string n = std::to_string(world);
  if (world < 1) return invalid_argument("--tensor-parallel-size must be >= 1, got " + n);
  if (num_heads < 1 || num_kv_heads < 1 || intermediate_size < 1)
    return invalid_argument("tensor parallelism: the model has no heads or no MLP");
  if (num_heads % world != 0)
    return invalid_argument("--tensor-parallel-size " + n + " does not divide the model's " +
                            std::to_string(num_heads) + " attention heads");
  if (num_kv_heads >= world ? num_kv_heads % world != 0 : world % num_kv_heads != 0)
    return invalid_argument("--tensor-parallel-size " + n + " and the model's " +
                            std::to_string(num_kv_heads) +
                            " KV heads: one must divide the other (KV heads are split across "
                            "ranks, or replicated when there are fewer than ranks)");
  if (intermediate_size % world != 0)
    return invalid_argument("--tensor-parallel-size " + n + " does not divide the model's " +
                            "intermediate_size " + std::to_string(intermediate_size));
  return Status();
}

Result<TpShard> make_tp_shard(int num_heads, int num_kv_heads, int intermediate_size,
                              int vocab_size, int rank, int world) {
  FOLIO_RETURN_IF_ERROR(check_tp_divisibility(num_heads, num_kv_heads, intermediate_size, world));
  if (rank < 0 || rank >= world)
    return invalid_argument("tensor-parallel rank " + std::to_string(rank) + " outside [0, " +
                            std::to_string(world) + ")");
  if (vocab_size < 1) return invalid_argument("tensor parallelism: the model has no vocabulary");
  TpShard s;
  s.rank = rank;
  s.world = world;
  s.local_heads = num_heads / world;
  s.head_start = rank * s.local_heads;
  s.kv_replicated = num_kv_heads < world;
  s.local_kv_heads = s.kv_replicated ? 1 : num_kv_heads / world;
  s.kv_head_start = s.kv_replicated ? rank * num_kv_heads / world : rank * s.local_kv_heads;
  s.local_inter = intermediate_size / world;
  s.inter_start = rank * s.local_inter;
  s.vocab_size = vocab_size;
  s.local_vocab = (vocab_size + world - 1) / world;
  s.padded_vocab = s.local_vocab * world;
  s.vocab_start = rank * s.local_vocab;
  return s;
}

}  // namespace folio
