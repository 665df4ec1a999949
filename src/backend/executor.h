// Executor: the variation point between backends (cpu reference, cuda). It owns the model weights
// and the KV cache on its device and runs one ForwardBatch at a time. One thread (the engine's)
// calls it; it is not thread-safe.
//
// Order within a step, as the engine issues it: swap_in / swap_out / copy_blocks first, then
// execute. Logits come back on the host as [logits_rows.size(), vocab_size] fp32, or, with
// execute_sampled, only sampled tokens and the rows the host still needs.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "backend/device_sampling.h"
#include "backend/forward_batch.h"
#include "backend/kv_cache_dtype.h"
#include "base/status.h"

namespace folio {

struct KvCacheShape {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;
  int num_blocks = 0;       // device blocks
  int num_swap_blocks = 0;  // host swap pool blocks
  KvCacheDtype dtype = KvCacheDtype::kAuto;  // element storage (kv_cache_dtype.h)
};

class Executor {
 public:
  virtual ~Executor() = default;

  virtual std::string device_name() const = 0;
  // The memory copy rate of the device(s) this executor runs on, measured now, in GB/s of bytes
  // read plus written (copies of buffers far beyond any cache): what a memory-bound decode
  // step's bandwidth floor divides by (folio bench latency). Several GPUs: their sum.
  virtual Result<double> measure_copy_gbps() const {
    return unimplemented(device_name() + " cannot measure its copy rate");
  }
  virtual int vocab_size() const = 0;
  virtual const KvCacheShape& kv_shape() const = 0;

  // Runs the model over the batch, writing the step's K/V into the cache, and returns the logits
  // of batch.logits_rows.
  virtual Status execute(const ForwardBatch& batch, std::vector<float>& logits) = 0;

  // Device sampling (optional): runs the step like execute(), samples `sampling.rows` on the
  // device into `samples` (one per row, in order; the contract of sample/sampler.h), and returns
  // only the logits of `sampling.host_rows`, as [host_rows.size(), vocab] fp32. A backend that
  // says false to samples_on_device() is only ever called through execute().
  virtual bool samples_on_device() const { return false; }
  virtual Status execute_sampled(const ForwardBatch& /*batch*/,
                                 const DeviceSamplingBatch& /*sampling*/,
                                 std::vector<float>& /*host_logits*/,
                                 std::vector<DeviceSample>& /*samples*/) {
    return unimplemented(device_name() + " does not sample on the device");
  }

  // Asynchronous steps (optional; what the engine's async scheduling runs on). launch_sampled()
  // queues a step like execute_sampled() with no host rows (sampling.host_rows empty) and
  // returns before the device has run it; collect_samples() waits for the oldest launched step
  // not yet collected and returns its samples. At most two steps are launched and not collected.
  // A launched step's token ids may be placeholders: id -(1 + j) stands for the token of sample
  // j (sampling.rows[j]) of the step launched just before it, resolved on the device. Block
  // copies and swaps issued between launches run after the steps launched before them.
  virtual bool launches_async() const { return false; }
  virtual Status launch_sampled(const ForwardBatch& /*batch*/,
                                const DeviceSamplingBatch& /*sampling*/) {
    return unimplemented(device_name() + " does not launch steps asynchronously");
  }
  virtual Status collect_samples(std::vector<DeviceSample>& /*samples*/) {
    return unimplemented(device_name() + " does not launch steps asynchronously");
  }

  // Copies whole blocks within the device cache (copy-on-write), all layers, in one operation.
  virtual void copy_blocks(std::span<const BlockCopy> copies) = 0;
  // Device block src -> host swap block dst.
  virtual void swap_out(std::span<const BlockCopy> copies) = 0;
  // Host swap block src -> device block dst.
  virtual void swap_in(std::span<const BlockCopy> copies) = 0;
};

}  // namespace folio
