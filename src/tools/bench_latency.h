// Batch latency (benchmark B3): B requests of N prompt tokens each, submitted together, each
// generating M tokens with EOS ignored; per iteration the time to first token (until every one
// of the B prompts has its first token: the prefill of the batch) and the time per output token:
// the mean duration of the steps in which all B requests decoded one token each and nothing else
// ran (SGLang's bench_one_batch measures the same step). Warm-up iterations run first and are
// not counted; each iteration draws fresh prompts, so the prefix cache never serves a prefill.
//
// Why not (total - TTFT) / (M - 1), the wall-clock form (kept as `tpot_wall_s`): when the batch's
// prompts take more than one step (B * N above --max-num-batched-tokens), requests start decoding
// one chunk apart and the early ones finish before the last one, so the steps after the last
// first token run ever smaller batches. At batch 16 x 8064 tokens with the default 2048-token
// budget the wall-clock form read 7.18 ms on an H200, 9% under the bandwidth floor of a batch-16
// step. Where no step ran the full batch (M smaller than the stagger, or B above the engine's
// --max-num-seqs), TPOT falls back to it.
//
// Beside the figure, the bandwidth floor of a decode step at batch B and mean context C:
//   (weight bytes read + B * C * kv_bytes_per_token) / bandwidth
// with the embedding table gathered, not read (docs/performance.md), C = N + M / 2 (a sliding
// layer's C capped at its window). Weights count at the model's dtype; K/V at 1 byte per element
// with --kv-cache-dtype fp8.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/executor.h"
#include "backend/kv_cache_dtype.h"
#include "base/status.h"
#include "engine/engine_core.h"
#include "model/model_config.h"

namespace folio::tools {

struct LatencyConfig {
  int batch_size = 1;
  int input_len = 32;
  int output_len = 128;
  int num_iters = 10;
  int num_iters_warmup = 2;
  uint64_t seed = 0;
};

struct LatencyIteration {
  double ttft_s = 0.0;       // submit -> the last of the batch's first tokens
  double total_s = 0.0;      // submit -> every request finished
  int full_batch_steps = 0;  // steps in which each of the B requests decoded one token, alone
  double tpot_s = 0.0;       // their mean duration; tpot_wall_s when there were none
  double tpot_wall_s = 0.0;  // (total - ttft) / (output_len - 1); 0 when output_len == 1
};

// Errors when the shape cannot fit the engine (context length, KV capacity for the batch).
Result<std::vector<LatencyIteration>> run_latency(EngineCore& engine, const LatencyConfig& c);

// Parameters read from memory by one decode step: every layer's projections and norms, the
// final norm and the LM head (the tied embedding counts once, as the head).
int64_t decode_weight_params(const ModelConfig& m);
// Bytes per element of the model's dtype: 2 for bfloat16/float16, 4 for float32.
int dtype_bytes(const ModelConfig& m);
// Bytes per K/V element in a cache of `kv` storage: 1 for fp8, else dtype_bytes(m).
int kv_dtype_bytes(const ModelConfig& m, KvCacheDtype kv);
// K and V of one token over all layers.
int64_t kv_bytes_per_token(const ModelConfig& m, KvCacheDtype kv = KvCacheDtype::kAuto);

struct BandwidthFloor {
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;  // the KV storage the floor assumes
  double weight_bytes = 0.0;
  double kv_bytes = 0.0;  // batch * context (windowed per layer) * kv_bytes_per_token
  double bytes_per_step = 0.0;
  double floor_s = 0.0;         // bytes_per_step / bandwidth
};
BandwidthFloor decode_bandwidth_floor(const ModelConfig& m, int batch, double mean_context,
                                      double bandwidth_gbps,
                                      KvCacheDtype kv = KvCacheDtype::kAuto);

// The rate the floor divides by, and where it came from (the JSON's `bandwidth_source`):
// "flag" (`flag_gbps` > 0, --bandwidth-gbps), else "measured" (Executor::measure_copy_gbps on
// the engine's own device(s), so that the floor is that GPU's), else "default"
// (kDefaultBandwidthGbps, the H100's measured copy rate) with `note` saying why the
// measurement failed.
inline constexpr double kDefaultBandwidthGbps = 3000.0;
struct FloorBandwidth {
  double gbps = kDefaultBandwidthGbps;
  std::string source = "default";
  std::string note;
};
FloorBandwidth resolve_floor_bandwidth(const Executor& executor, double flag_gbps);

// avg/percentile latencies, mean TTFT and TPOT (and the wall-clock form beside it, with the
// full-batch steps per iteration), the floor and floor / TPOT, and the floor's kv_cache_dtype.
nlohmann::json latency_json(const LatencyConfig& c, const std::vector<LatencyIteration>& iters,
                            const BandwidthFloor& floor, double bandwidth_gbps);

}  // namespace folio::tools
