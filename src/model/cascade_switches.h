// The FOLIO_CASCADE_* environment switches of the CUDA executor's cascade decode attention
// (cuda_llama_cascade.cc), parsed by a pure function so that they are tested without a GPU.
#pragma once

#include <functional>
#include <optional>

#include "base/status.h"

namespace folio {

struct CascadeSwitches {
  // FOLIO_CASCADE_ATTENTION=0|1. Unset: on for one GPU, off under tensor parallelism (world > 1:
  // not yet run on 2 GPUs; =1 turns it on there).
  bool requested = true;
  bool wide = true;                 // FOLIO_CASCADE_WIDE=0|1: the wgmma kernel where it runs
  bool pack_one_row_only = false;   // FOLIO_CASCADE_PACKS=all|one-row
  std::optional<int> wgmma_stages;  // FOLIO_CASCADE_STAGES=2|3 (unset: CascadeTuning's)
  double min_saving = 0.3;          // FOLIO_CASCADE_MIN_SAVING, a fraction in [0, 1)
};

// `getenv` looks a variable up (null: unset); `world` is the tensor-parallel world. A value out
// of its set is an error naming the variable and what it expects.
Result<CascadeSwitches> read_cascade_switches(
    int world, const std::function<const char*(const char*)>& getenv);

}  // namespace folio
