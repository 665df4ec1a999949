// CudaTpExecutor: tensor parallelism over the GPUs of one host, as one Executor. The engine
// (one scheduler, one KV manager, one sampler) sees a single executor; underneath, `world` rank
// threads each own a GPU (cudaSetDevice(rank)), an NCCL communicator and a CudaLlamaExecutor
// holding that rank's shard of every layer (dist/tp_shard.h) and 1/world of the KV cache of
// every block (its KV heads; the same block ids on every rank, so the block tables need no
// translation). Each call fans out to every rank with the same inputs and waits for all of them;
// execute() returns rank 0's logits (the full vocabulary, gathered over NCCL).
//
// Per layer: one all-reduce after attention, one after the MLP (plus one after the embedding);
// the rest is the single-GPU forward on smaller matrices.
//
// Memory: each rank plans its own KV budget and the group takes the smallest block count.
// Errors: a rank failing before the first collective (out of memory while loading, a model that
// does not fit) is an error on every rank, never a hang; NCCL initialisation has a timeout.
// A device failure inside a step's collectives cannot be recovered from (the process should
// exit), as with NCCL anywhere.
//
// Engine thread only (like every Executor). Only built with FOLIO_CUDA; plain C++ header.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/executor.h"
#include "model/cuda_llama_executor.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace folio {

class CudaTpExecutor final : public Executor {
 public:
  // Ranks use devices [0, world). options.device and options.tp are ignored (set per rank).
  static Result<std::unique_ptr<CudaTpExecutor>> create(const ModelConfig& config,
                                                        const Checkpoint* checkpoint,
                                                        const CudaExecutorOptions& options,
                                                        int world, double nccl_timeout_s = 120.0);
  ~CudaTpExecutor() override;

  std::string device_name() const override;
  // The sum of the ranks' GPUs' rates, measured one GPU after the other from this thread (the
  // ranks are idle between steps).
  Result<double> measure_copy_gbps() const override;
  int vocab_size() const override;
  const KvCacheShape& kv_shape() const override;  // rank 0's: per-rank KV heads
  const CudaMemoryReport& memory_report() const;  // rank 0's
  int world() const;
  // Each rank's CudaLlamaExecutor::cascade_steps (the same on every rank: each plans the same
  // steps from the same batches).
  std::vector<int> cascade_steps_by_rank() const;

  Status execute(const ForwardBatch& batch, std::vector<float>& logits) override;
  // Rank 0 samples once after the vocabulary all-gather; the other ranks only run the step.
  bool samples_on_device() const override { return true; }
  Status execute_sampled(const ForwardBatch& batch, const DeviceSamplingBatch& sampling,
                         std::vector<float>& host_logits,
                         std::vector<DeviceSample>& samples) override;
  // Async scheduling: every rank launches the step (rank 0 samples and broadcasts the tokens to
  // the others, whose placeholders read them); only rank 0's samples are collected.
  bool launches_async() const override;
  Status launch_sampled(const ForwardBatch& batch, const DeviceSamplingBatch& sampling) override;
  Status collect_samples(std::vector<DeviceSample>& samples) override;
  void copy_blocks(std::span<const BlockCopy> copies) override;
  void swap_out(std::span<const BlockCopy> copies) override;
  void swap_in(std::span<const BlockCopy> copies) override;

  struct Group;

 private:
  explicit CudaTpExecutor(std::unique_ptr<Group> group);
  // Ok, or the first rank's deferred copy/swap failure.
  Status ranks_pending_error() const;
  // Runs the step on every rank; rank 0 samples when `sampling` is given.
  Status execute_on_ranks(const ForwardBatch& batch, const DeviceSamplingBatch* sampling,
                          std::vector<float>& logits, std::vector<DeviceSample>* samples);
  std::unique_ptr<Group> g_;
  // Launched steps not yet collected. Checked here, before any rank starts, because a refusal on
  // one rank alone would leave the others inside the step's collectives.
  int uncollected_ = 0;
};

// Ok when `world` GPUs are present and the model splits `world` ways; else a clear error.
Status check_tensor_parallel(const ModelConfig& config, int world);

}  // namespace folio
