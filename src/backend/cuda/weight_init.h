// Device-side weight initialisation and conversion for the executor's loader:
//  - fill_uniform: deterministic pseudo-random values in [-scale, scale) (`--load-format dummy`),
//    computed on the GPU from (seed, element index) so an 8B model needs no host buffers;
//  - fill_constant: every element = value (norm weights of dummy models);
//  - convert: a checkpoint tensor of another precision (fp32, fp16, bf16) into the model dtype.
// All are asynchronous on `stream`; sizes are element counts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

enum class SourceType { kF32, kF16, kBF16 };

Status fill_uniform(DType dtype, void* dst, size_t n, float scale, uint64_t seed, void* stream);
// The [rows, cols] block at (row0, col0) of the [*, full_cols] matrix fill_uniform would make
// with the same seed, written contiguously to dst: a tensor-parallel rank's slice of a dummy
// weight has exactly the values of the single-GPU model's.
Status fill_uniform_slice(DType dtype, void* dst, size_t rows, size_t cols, size_t full_cols,
                          size_t row0, size_t col0, float scale, uint64_t seed, void* stream);
Status fill_constant(DType dtype, void* dst, size_t n, float value, void* stream);
Status convert(SourceType src_type, const void* src, DType dtype, void* dst, size_t n,
               void* stream);

}  // namespace folio::cuda
