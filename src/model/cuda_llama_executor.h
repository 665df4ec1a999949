// CudaLlamaExecutor: the Llama-family forward (Llama, Mistral, Qwen2, Qwen3) on one NVIDIA GPU,
// the same op sequence as CpuLlamaExecutor in bf16/fp16 with fp32 accumulation, over a paged KV
// cache in device memory (block size 1 is token mode) and a host swap pool in pinned memory.
//
// Per step: the ForwardBatch arrays go up in one copy into persistent buffers, attention is
// planned once (decode kernel when every sequence has one query token, else the prefill kernel,
// which takes mixed batches) and reused by every layer; logits come back as fp32
// [logits_rows, vocab]. No allocation happens per step once the buffers have grown.
//
// create() plans memory: weights, then a profiling forward at the largest step
// (max_num_batched_tokens tokens), then the KV cache takes what remains of
// gpu_memory_utilization x total memory (or exactly `num_blocks` when given). Errors (model too
// large, setting too low, unsupported head_dim) come back as Status.
//
// Engine thread only. Only built with FOLIO_CUDA; this header is plain C++.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "backend/kv_cache_dtype.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace folio {

struct CudaTpRank;  // model/cuda_tp_rank.h: a tensor-parallel rank's shard and communicator

struct CudaExecutorOptions {
  std::string dtype = "auto";          // auto (the checkpoint's; fp32 runs in bf16) | bfloat16 | float16
  double gpu_memory_utilization = 0.9;  // share of the GPU's total memory this executor may use
  int block_size = 16;                  // KV block size (1: token mode)
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;  // kFp8E4m3: one byte per K/V element
  bool cuda_graphs = true;              // replay decode steps as CUDA graphs (--enforce-eager: off)
  // Capture every batch-size bucket's decode graph when the executor is created (one GPU; as
  // vLLM and SGLang do before serving), so that no step at a new batch size runs eagerly or pays
  // its capture while requests wait. Off: each bucket is captured on its second step
  // (FOLIO_GRAPH_WARMUP=0 sets this off, for A/B runs).
  bool capture_graphs_at_startup = true;
  int num_blocks = 0;                   // explicit device KV blocks; 0: planned from memory
  double swap_space_gib = 0.0;          // pinned host swap pool
  int max_num_batched_tokens = 2048;    // the largest step (sizes the activations)
  int max_num_seqs = 256;
  int max_model_len = 0;                // 0: the model's max_context_len()
  uint64_t seed = 0;                    // dummy weights
  int device = 0;                       // the CUDA device (made current by create())
  // Tensor parallelism: this executor is one rank of a group (CudaTpExecutor owns them); it
  // holds its shard of every layer and of the KV heads. nullptr: the whole model.
  const CudaTpRank* tp = nullptr;
  // CudaTpExecutor: all-reduces by peer loads and stores (backend/cuda/peer_all_reduce.h)
  // where every GPU reaches every other; off: all by NCCL.
  bool custom_all_reduce = true;
};

// What create() measured and decided, for logs and tests.
struct CudaMemoryReport {
  std::string device;
  size_t total_bytes = 0;
  size_t weight_bytes = 0;
  size_t peak_bytes = 0;      // device memory in use after the profiling forward
  size_t kv_budget_bytes = 0; // what gpu_memory_utilization left for the KV cache
  size_t kv_block_bytes = 0;  // one block, all layers, K and V
  int num_blocks = 0;
  int max_len_seqs = 0;       // sequences of max_model_len that fit at once
};

class CudaLlamaExecutor final : public Executor {
 public:
  // checkpoint == nullptr: dummy random weights generated on the GPU from options.seed.
  static Result<std::unique_ptr<CudaLlamaExecutor>> create(const ModelConfig& config,
                                                           const Checkpoint* checkpoint,
                                                           const CudaExecutorOptions& options);
  ~CudaLlamaExecutor() override;

  std::string device_name() const override;
  Result<double> measure_copy_gbps() const override;  // options.device's, backend/cuda/copy_rate.h
  int vocab_size() const override;
  const KvCacheShape& kv_shape() const override;
  const CudaMemoryReport& memory_report() const;
  // Decode steps replayed as CUDA graphs so far (0 with --enforce-eager).
  int graph_steps() const;
  // Decode steps of a graph bucket that ran eagerly so far: a bucket's first step where its graph
  // was not captured at startup (CudaExecutorOptions::capture_graphs_at_startup), and a bucket's
  // first cascade step.
  int eager_decode_steps() const;
  // Decode CUDA graphs captured so far after the executor's creation (those captured at startup
  // are not counted): with startup capture, only a bucket's cascade graph (its bounds come from
  // its first cascade step) and, without it, every bucket's graphs on first use.
  int graph_captures() const;
  // Decode steps that ran cascade attention (rows sharing prefix blocks; cuda_llama_cascade.cc).
  int cascade_steps() const;
  // Of those, the steps that replayed a CUDA graph (cuda_llama_cascade.cc).
  int cascade_graph_steps() const;

  Status execute(const ForwardBatch& batch, std::vector<float>& logits) override;
  bool samples_on_device() const override { return true; }
  Status execute_sampled(const ForwardBatch& batch, const DeviceSamplingBatch& sampling,
                         std::vector<float>& host_logits,
                         std::vector<DeviceSample>& samples) override;
  // Async steps on one GPU (not under FOLIO_CUDA_STAGE_TIMES): placeholders resolved by
  // backend/cuda/placeholder_tokens.h, samples copied to pinned memory behind an event.
  bool launches_async() const override;
  Status launch_sampled(const ForwardBatch& batch, const DeviceSamplingBatch& sampling) override;
  Status collect_samples(std::vector<DeviceSample>& samples) override;
  // The copy/swap calls cannot return a Status (Executor's contract): a failure is kept and
  // returned by the next execute().
  void copy_blocks(std::span<const BlockCopy> copies) override;
  void swap_out(std::span<const BlockCopy> copies) override;
  void swap_in(std::span<const BlockCopy> copies) override;
  // The failure of a copy/swap that the next execute() will return (ok when none).
  Status pending_error() const;

  // Bytes of KV cache one block takes over all layers (K and V): 2 per element in the model's
  // 16-bit dtype, 1 with an fp8 cache.
  static size_t kv_block_bytes(const ModelConfig& config, int block_size,
                               KvCacheDtype kv_dtype = KvCacheDtype::kAuto);

  struct Impl;

 private:
  explicit CudaLlamaExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True when this build can reach at least one CUDA device (for `--device auto`).
bool cuda_device_available();
// Device 0's name and total memory, for the engine's defaults by GPU (engine/batch_defaults.h).
Status cuda_device_summary(std::string& name, size_t& total_memory);
// Ok when the CUDA kernels take this model's attention geometry (head_dim 64 or 128, heads a
// multiple of kv heads); else why not (Unimplemented).
Status cuda_model_supported(const ModelConfig& config);

}  // namespace folio
