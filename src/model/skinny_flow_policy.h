// When batch-1 decode runs the MLP's gate_up -> down as a SkinnyFlow pair (backend/cuda/
// skinny_gemm.h; wired in cuda_llama_decode_mlp.cc): down's warps wait per segment of act
// instead of for gate_up's whole grid. A pure rule, here so that it is tested without a GPU.
#pragma once

#include "base/status.h"
#include "model/model_config.h"

namespace folio {

// The largest gate_up (16-bit [2 x intermediate, hidden] of one rank) that takes the flow by
// default. Measured on H200s (src/backend/cuda/NOTES.md, sessions 39-40), B3 with and without:
// Llama-3.2-3B on one GPU (96 MiB) -5.7%, Llama-3-8B at -tp 2 (112 MiB a rank) -4.7 to -6.7%;
// the 8B on one GPU (224 MiB) +0.4% on two machines of three, the 70B at -tp 2 (448 MiB) +2.5%.
// Nothing between 128 and 224 MiB was measured.
inline constexpr double kSkinnyFlowMaxGateUpBytes = 128.0 * (1 << 20);

// `rank`: the rank's config (intermediate_size already divided by the TP world). `env`: the
// value of FOLIO_SKINNY_FLOW or null: "0" off, "1" (or "tp", its session-39 spelling) on,
// unset the size rule above; anything else is an error naming the variable.
Result<bool> skinny_flow_enabled(const ModelConfig& rank, const char* env);

}  // namespace folio
