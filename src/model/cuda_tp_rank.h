// CudaTpRank: what one tensor-parallel rank's CudaLlamaExecutor needs beyond the single-GPU
// options: its shard of the model, its NCCL communicator, and a host-side agreement between
// the ranks (CudaTpExecutor provides it) used before anything collective, so a rank that failed
// (out of memory while loading) turns into an error on every rank instead of a hang inside NCCL.
// Only built with FOLIO_CUDA; plain C++ header.
#pragma once

#include <cstdint>
#include <functional>

#include "backend/cuda/peer_all_reduce.h"
#include "base/status.h"
#include "dist/communicator.h"
#include "dist/tp_shard.h"
#include "model/model_config.h"

namespace folio {

struct CudaTpRank {
  TpShard shard;
  Communicator* comm = nullptr;
  // Every rank calls it at the same points with its own status and a value; it returns the
  // minimum of the values over the ranks, or an error when any rank's status is one (or a rank
  // has given up).
  std::function<Result<int64_t>(const Status&, int64_t)> agree;
  // Every rank's peer all-reduce buffers and flags; nullptr: NCCL for all.
  const cuda::PeerAllReduceView* peer = nullptr;
};

// The model as one rank sees it: its heads, KV heads and intermediate features; vocab_size stays
// the whole model's (token ids are validated against it; the rank's vocabulary slice is in the
// shard).
inline ModelConfig rank_config(const ModelConfig& c, const TpShard& s) {
  ModelConfig r = c;
  r.num_heads = s.local_heads;
  r.num_kv_heads = s.local_kv_heads;
  r.intermediate_size = s.local_inter;
  return r;
}

}  // namespace folio
