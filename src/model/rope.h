// Rotary embedding frequencies for a config: default (theta^(-2i/d)), linear, llama3 or yarn
// scaling, the same values Hugging Face's rope init functions compute, in double precision.
#pragma once

#include <vector>

#include "model/model_config.h"

namespace folio {

// [head_dim / 2] inverse frequencies, rounded to rope.inv_freq_precision.
std::vector<double> rope_inv_freq(const RopeConfig& rope, int head_dim);
// The same in full double precision.
std::vector<double> exact_rope_inv_freq(const RopeConfig& rope, int head_dim);

}  // namespace folio
