// Private to cuda_llama_executor*.cc: the executor's state and the forward's building blocks.
// Buffers only grow; every device call is on the legacy default stream (nullptr), so the step's
// uploads, kernels and the logits copy are ordered without events.
#pragma once

#include <memory>
#include <vector>

#include "backend/cuda/decode_attention.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/dtype.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/logits_gemm.h"
#include "backend/cuda/prefill_attention.h"
#include "model/cuda_llama_executor.h"
#include "model/cuda_llama_weights.h"
#include "model/cuda_tp_rank.h"

namespace folio {

// Grows `buf` to at least `bytes` (never shrinks; the old contents are dropped).
Status ensure_device(cuda::DeviceBuffer& buf, size_t bytes);

// Where each layer's K and V cache lives: the real cache, or the profiling forward's scratch.
struct CacheView {
  std::vector<void*> k, v;  // [num_layers], each [num_slots, num_kv_heads, head_dim]
  int64_t num_slots = 0;
};

// The step's ForwardBatch arrays on the device (one upload, offsets into one buffer).
struct StepArrays {
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int64_t* slot_mapping = nullptr;
  const int32_t* query_start = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* block_table_start = nullptr;
  const int32_t* block_table = nullptr;
  const int32_t* logits_rows = nullptr;
};

// Rows of logits computed per lm_head GEMM: bounds the fp32 logits buffer (256 x 128k vocab =
// 128 MiB) however many rows a step asks for (prompt_logprobs asks for every prompt token).
inline constexpr int kLogitsChunkRows = 256;

struct CudaLlamaExecutor::Impl {
  // With tensor parallelism `config` is this rank's view (rank_config: local heads, KV heads and
  // intermediate size) and `full_config` the whole model; without, both are the model.
  ModelConfig config, full_config;
  TpShard shard;  // world 1 (the whole model) without tensor parallelism
  const CudaTpRank* tp = nullptr;
  CudaExecutorOptions options;
  cuda::DType dt = cuda::DType::kBF16;
  cuda::DeviceInfo info;
  KvCacheShape kv;
  CudaMemoryReport report;
  CudaLlamaWeights weights;
  std::unique_ptr<cuda::Gemm> gemm;
  std::unique_ptr<cuda::LogitsGemm> logits_gemm;
  cuda::DeviceBuffer inv_freq;  // [head_dim / 2] fp32

  // KV cache: one arena, layer l's K then V; the swap pool has the same layout on the host.
  cuda::DeviceBuffer kv_arena;
  cuda::PinnedHostBuffer swap_arena;
  CacheView cache;
  std::vector<void*> swap_k, swap_v;
  cuda::DeviceBuffer cache_ptrs;  // device [2 * num_layers] bases for copy_blocks
  cuda::DeviceBuffer copy_pairs;

  // Step inputs: packed on the host (pinned), uploaded in one copy.
  cuda::PinnedHostBuffer host_in;
  cuda::DeviceBuffer dev_in;
  // Activations, [tokens, width] each, sized for max_num_batched_tokens.
  int act_tokens = 0;
  cuda::DeviceBuffer x, normed, qkv, q, k, v, attn, gate_up, act;
  cuda::DeviceBuffer rows, rows_normed, logits;  // [kLogitsChunkRows, hidden | vocab]
  cuda::DeviceBuffer attn_workspace;
  cuda::DeviceBuffer gathered;  // TP: [world, kLogitsChunkRows, local_vocab] fp32 logits
  Status deferred;  // a copy/swap failure, returned by the next execute()

  size_t layer_block_bytes() const;  // one block of one layer's K (or V) cache
  Status reserve_activations(int tokens);
  Status upload(const ForwardBatch& b, StepArrays& d);
  Status validate(const ForwardBatch& b, const CacheView& c) const;
  Status forward(const ForwardBatch& b, const CacheView& c, std::vector<float>* logits);
  Status layer(int l, const ForwardBatch& b, const StepArrays& d, const CacheView& c,
               const cuda::DecodePlan* decode, const cuda::PrefillPlan* prefill);
  Status compute_logits(const ForwardBatch& b, const StepArrays& d, std::vector<float>* out);
  // Tensor parallelism (cuda_llama_executor_tp.cc): x = sum of x over the ranks (no-op alone);
  // logits of the rank's vocabulary slice, gathered to rank 0 (the only one that fills `out`).
  Status tp_all_reduce(void* buf, size_t elements);
  Status compute_logits_tp(const ForwardBatch& b, const StepArrays& d, std::vector<float>* out);
  // Ok alone; with TP, every rank's `st` agreed on (an error anywhere is an error everywhere).
  Status tp_barrier(const Status& st);
};

}  // namespace folio
