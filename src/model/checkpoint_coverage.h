// Every tensor of a checkpoint is one folio's model reads. A tensor left over means the
// checkpoint's model differs from the one folio builds from its config.json (a bias folio has
// no place for, a quantization scale, another architecture's layer), and running without it
// would silently change the outputs; transformers only warns there, vLLM's loaders mostly fail.
#pragma once

#include "base/status.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace folio {

// OK when each tensor of `ck` is read by the model `config` describes (WeightLayout's names), or
// is one transformers also skips: `*.rotary_emb.inv_freq` buffers of old checkpoints, and
// `lm_head.weight` of a tied model. Else an error naming the folder and the first few leftovers.
Status check_every_tensor_is_read(const ModelConfig& config, const Checkpoint& ck);

}  // namespace folio
