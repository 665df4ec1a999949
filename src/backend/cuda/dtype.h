// DType: the element type of activations, weights and the KV cache on the GPU. Launchers take
// untyped pointers plus a DType so the executor can pick the model's precision at run time;
// every op computes in fp32 internally.
#pragma once

#include <cstddef>

namespace folio::cuda {

enum class DType { kBF16, kFP16 };

inline constexpr size_t dtype_size(DType) { return 2; }
inline constexpr const char* dtype_name(DType d) { return d == DType::kBF16 ? "bf16" : "fp16"; }

}  // namespace folio::cuda
