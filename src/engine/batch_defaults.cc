#include "engine/batch_defaults.h"

#include <algorithm>
#include <cctype>

namespace folio {

namespace {

constexpr size_t kLargeGpuBytes = size_t{70} << 30;

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// vLLM keeps the A100 80GB on the small defaults: a large step budget measured slower there
// (vLLM PR 17885).
bool large_gpu(const GpuSummary& gpu) {
  return gpu.total_memory >= kLargeGpuBytes && lower(gpu.name).find("a100") == std::string::npos;
}

}  // namespace

BatchLimits default_batch_limits(UsageContext usage, const GpuSummary* gpu) {
  const bool serving = usage == UsageContext::kServer;
  if (gpu == nullptr) return {2048, 256};
  if (large_gpu(*gpu)) return {serving ? 8192 : 16384, 1024};
  return {serving ? 2048 : 8192, 256};
}

void resolve_batch_limits(EngineConfig& config, const GpuSummary* gpu) {
  const BatchLimits d = default_batch_limits(config.usage, gpu);
  SchedulerConfig& s = config.sched;
  if (s.max_num_batched_tokens == 0) {
    s.max_num_batched_tokens = d.max_num_batched_tokens;
    if (!s.enable_chunked_prefill)
      s.max_num_batched_tokens = std::max(s.max_num_batched_tokens, s.max_model_len);
  }
  if (s.max_num_seqs == 0) s.max_num_seqs = d.max_num_seqs;
}

}  // namespace folio
