#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/weight_init.h"

namespace folio::cuda {
namespace {

// splitmix64 of (seed, index): independent of the launch shape, so the values only depend on
// the seed and the element's position.
__device__ __forceinline__ float uniform_at(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f * 2.f - 1.f;  // [-1, 1)
}

template <typename T>
__global__ void fill_uniform_kernel(T* dst, size_t n, float scale, uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = from_float<T>(uniform_at(seed, i) * scale);
}

template <typename T>
__global__ void fill_uniform_slice_kernel(T* dst, size_t rows, size_t cols, size_t full_cols,
                                          size_t row0, size_t col0, float scale, uint64_t seed) {
  const size_t n = rows * cols;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / cols, c = i % cols;
    dst[i] = from_float<T>(uniform_at(seed, (row0 + r) * full_cols + col0 + c) * scale);
  }
}

template <typename T>
__global__ void fill_constant_kernel(T* dst, size_t n, float value) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = from_float<T>(value);
}

template <typename S>
__device__ __forceinline__ float source_to_float(S v) { return to_float(v); }
template <>
__device__ __forceinline__ float source_to_float(float v) { return v; }

template <typename S, typename T>
__global__ void convert_kernel(const S* src, T* dst, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = from_float<T>(source_to_float(src[i]));
}

// A grid-stride launch: enough blocks to fill the GPU, capped for small tensors.
unsigned grid_for(size_t n) {
  const size_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

}  // namespace

Status fill_uniform(DType dtype, void* dst, size_t n, float scale, uint64_t seed, void* stream) {
  if (n == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    fill_uniform_kernel<T><<<grid_for(n), 256, 0, as_stream(stream)>>>(static_cast<T*>(dst), n,
                                                                       scale, seed);
    return launch_status("fill_uniform_kernel");
  });
}

Status fill_uniform_slice(DType dtype, void* dst, size_t rows, size_t cols, size_t full_cols,
                          size_t row0, size_t col0, float scale, uint64_t seed, void* stream) {
  const size_t n = rows * cols;
  if (n == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    fill_uniform_slice_kernel<T><<<grid_for(n), 256, 0, as_stream(stream)>>>(
        static_cast<T*>(dst), rows, cols, full_cols, row0, col0, scale, seed);
    return launch_status("fill_uniform_slice_kernel");
  });
}

Status fill_constant(DType dtype, void* dst, size_t n, float value, void* stream) {
  if (n == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    fill_constant_kernel<T><<<grid_for(n), 256, 0, as_stream(stream)>>>(static_cast<T*>(dst), n,
                                                                        value);
    return launch_status("fill_constant_kernel");
  });
}

Status convert(SourceType src_type, const void* src, DType dtype, void* dst, size_t n,
               void* stream) {
  if (n == 0) return Status();
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    T* out = static_cast<T*>(dst);
    const unsigned g = grid_for(n);
    cudaStream_t s = as_stream(stream);
    if (src_type == SourceType::kF32)
      convert_kernel<<<g, 256, 0, s>>>(static_cast<const float*>(src), out, n);
    else if (src_type == SourceType::kF16)
      convert_kernel<<<g, 256, 0, s>>>(static_cast<const __half*>(src), out, n);
    else
      convert_kernel<<<g, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(src), out, n);
    return launch_status("convert_kernel");
  });
}

}  // namespace folio::cuda
