#include <string>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_e4m3.cuh"
#include "backend/cuda/kv_cache_ops.h"

namespace folio::cuda {
namespace {

// One block per token, threads over N-element packs of the K and V rows.
template <typename T, int N>
__global__ void reshape_and_cache_kernel(const T* k, const T* v, const int64_t* slot_mapping,
                                         int kv_width, T* k_cache, T* v_cache) {
  const int t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;
  const int64_t src = static_cast<int64_t>(t) * kv_width, dst = slot * kv_width;
  for (int i = threadIdx.x * N; i < kv_width; i += blockDim.x * N) {
    *reinterpret_cast<Pack<T, N>*>(k_cache + dst + i) =
        *reinterpret_cast<const Pack<T, N>*>(k + src + i);
    *reinterpret_cast<Pack<T, N>*>(v_cache + dst + i) =
        *reinterpret_cast<const Pack<T, N>*>(v + src + i);
  }
}

// The fp8 cache (kv_dtype kFp8E4m3): the same walk, each N-element pack converted to N e4m3
// bytes (fp8_e4m3.cuh) on its way into the cache.
template <typename T, int N>
__global__ void reshape_and_cache_fp8_kernel(const T* k, const T* v, const int64_t* slot_mapping,
                                             int kv_width, uint8_t* k_cache, uint8_t* v_cache) {
  const int t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;
  const int64_t src = static_cast<int64_t>(t) * kv_width, dst = slot * kv_width;
  for (int i = threadIdx.x * N; i < kv_width; i += blockDim.x * N) {
    float f[N];
    load_floats<N>(k + src + i, f);
    store_e4m3<N>(k_cache + dst + i, f);
    load_floats<N>(v + src + i, f);
    store_e4m3<N>(v_cache + dst + i, f);
  }
}

// grid (pairs, caches): each block moves one block of cache c in 16-byte words, from the pool at
// src_bases[c] to the pool at dst_bases[c] (the same pool for copy-on-write; a device cache and a
// pinned host pool, which the kernel reads or writes across the bus, for swapping).
__global__ void copy_blocks_kernel(const void* const* src_bases, void* const* dst_bases,
                                   size_t block_words, const BlockCopy* pairs) {
  const BlockCopy c = pairs[blockIdx.x];
  const uint4* src = static_cast<const uint4*>(src_bases[blockIdx.y]) +
                     static_cast<int64_t>(c.src) * block_words;
  uint4* dst = static_cast<uint4*>(dst_bases[blockIdx.y]) + static_cast<int64_t>(c.dst) * block_words;
  for (size_t i = threadIdx.x; i < block_words; i += blockDim.x) dst[i] = src[i];
}

Status launch_copy_blocks(const char* what, const void* const* src_bases, void* const* dst_bases,
                          int num_caches, size_t block_bytes, const BlockCopy* pairs,
                          int num_pairs, void* stream) {
  if (num_pairs == 0 || num_caches == 0) return Status();
  if (block_bytes % 16 != 0)
    return invalid_argument(std::string(what) + ": block of " + std::to_string(block_bytes) +
                            " bytes is not a multiple of 16");
  if (num_caches > 65535) return invalid_argument(std::string(what) + ": more than 65535 caches");
  if (num_pairs < 0) return invalid_argument(std::string(what) + ": negative pair count");
  const dim3 grid(num_pairs, num_caches);
  copy_blocks_kernel<<<grid, 256, 0, as_stream(stream)>>>(src_bases, dst_bases, block_bytes / 16,
                                                          pairs);
  return launch_status("copy_blocks_kernel");
}

}  // namespace

Status reshape_and_cache(DType dtype, const void* k, const void* v, const int64_t* slot_mapping,
                         int num_tokens, int kv_width, void* k_cache, void* v_cache, void* stream,
                         KvCacheDtype kv_dtype) {
  if (num_tokens == 0) return Status();
  // The packed paths need 16-byte aligned bases (an fp8 row pack is then 8-byte aligned).
  const bool pack8 = pack8_ok(kv_width, {k, v, k_cache, v_cache});
  if (kv_dtype == KvCacheDtype::kFp8E4m3) {
    return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
      auto go = [&](auto kernel) {
        kernel<<<num_tokens, 128, 0, as_stream(stream)>>>(
            static_cast<const T*>(k), static_cast<const T*>(v), slot_mapping, kv_width,
            static_cast<uint8_t*>(k_cache), static_cast<uint8_t*>(v_cache));
      };
      if (pack8)
        go(reshape_and_cache_fp8_kernel<T, 8>);
      else
        go(reshape_and_cache_fp8_kernel<T, 1>);
      return launch_status("reshape_and_cache_fp8_kernel");
    });
  }
  return FOLIO_DISPATCH_DTYPE(dtype, T, [&] {
    auto go = [&](auto kernel) {
      kernel<<<num_tokens, 128, 0, as_stream(stream)>>>(
          static_cast<const T*>(k), static_cast<const T*>(v), slot_mapping, kv_width,
          static_cast<T*>(k_cache), static_cast<T*>(v_cache));
    };
    if (pack8)
      go(reshape_and_cache_kernel<T, 8>);
    else
      go(reshape_and_cache_kernel<T, 1>);
    return launch_status("reshape_and_cache_kernel");
  });
}

Status copy_blocks(void* const* caches, int num_caches, size_t block_bytes,
                   const BlockCopy* pairs, int num_pairs, void* stream) {
  return launch_copy_blocks("copy_blocks", caches, caches, num_caches, block_bytes, pairs,
                            num_pairs, stream);
}

Status swap_blocks(const void* const* src_bases, void* const* dst_bases, int num_caches,
                   size_t block_bytes, const BlockCopy* pairs, int num_pairs, void* stream) {
  return launch_copy_blocks("swap_blocks", src_bases, dst_bases, num_caches, block_bytes, pairs,
                            num_pairs, stream);
}

}  // namespace folio::cuda
