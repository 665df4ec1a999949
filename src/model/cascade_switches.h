// The FOLIO_CASCADE_* environment switches of the CUDA executor's cascade decode attention
// (cuda_llama_cascade.cc), parsed by a pure function so that they are tested without a GPU.
#pragma once

#include <functional>
#include <optional>

#include "backend/kv_cache_dtype.h"
#include "base/status.h"

namespace folio {

struct CascadeSwitches {
  // FOLIO_CASCADE_ATTENTION=0|1. Unset: on for one GPU, off under tensor parallelism (world > 1:
  // not yet run on 2 GPUs; =1 turns it on there).
  bool requested = true;
  bool wide = true;                 // FOLIO_CASCADE_WIDE=0|1: the wgmma kernel where it runs
  bool pack_one_row_only = false;   // FOLIO_CASCADE_PACKS=all|one-row
  // FOLIO_CASCADE_GRAPHS=0|1: cascade steps replay CUDA graphs where their plan allows (the
  // kernels read their counts on the device); 0 runs every cascade step eagerly, as before
  // session 51.
  bool graphs = true;
  // FOLIO_CASCADE_STAGES=2|3, or 4 over an fp8 cache (unset: CascadeTuning's).
  std::optional<int> wgmma_stages;
  // FOLIO_CASCADE_MIN_SAVING, a fraction in [0, 1); unset: cascade_default_min_saving(kv).
  double min_saving = 0.3;
};

// The least share of a step's reads a cascade plan must save to run, by cache: 0.3 for a 16-bit
// cache, 0.6 for fp8. H200 kernel figures (session 50, AttentionBench.K1SharedPrefix, b1024 x
// 2304): cascade's time is about proportional to the share it reads (16-bit: 2336 us reading
// everything, 476 at 17%; fp8: 2995 / 1018 at 33% / 549), while the per-row kernel runs
// 1590-2290 us over a 16-bit cache but 1143-1477 over fp8 (half the bytes, L2 absorbing
// repeats): the break-even is near a 30% saving for 16 bits and near 60% for fp8.
double cascade_default_min_saving(KvCacheDtype kv);

// `getenv` looks a variable up (null: unset); `world` is the tensor-parallel world, `kv` the
// cache's dtype. A value out of its set is an error naming the variable and what it expects.
Result<CascadeSwitches> read_cascade_switches(
    int world, KvCacheDtype kv, const std::function<const char*(const char*)>& getenv);

}  // namespace folio
