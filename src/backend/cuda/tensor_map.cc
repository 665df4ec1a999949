#include "backend/cuda/tensor_map.h"

#include "backend/cuda/tensor_map_check.h"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace folio::cuda {
namespace {

// The driver's encoder, looked up once (null when the driver lacks it).
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A 3-D 16-bit tensor (dims innermost first, byte strides of dims 1 and 2), 128-byte swizzled.
Status encode_3d(CUtensorMap* map, DType dt, const void* base, const cuuint64_t (&dims)[3],
                 const cuuint64_t (&strides)[2], const cuuint32_t (&box)[3]) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encoder();
  if (encode == nullptr) return unimplemented("tensor map: the driver has no cuTensorMapEncodeTiled");
  const CUtensorMapDataType type =
      dt == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode(map, type, 3, const_cast<void*>(base), dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return internal_error("tensor map: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return Status();
}

}  // namespace

Status encode_paged_cache_map(CUtensorMap* map, DType dt, const void* cache, int num_kv_heads,
                              int head_dim, int box_slots) {
  FOLIO_RETURN_IF_ERROR(check_paged_cache_map(cache, num_kv_heads, head_dim, box_slots));
  const cuuint64_t row_bytes = static_cast<cuuint64_t>(head_dim) * 2;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim),
                              static_cast<cuuint64_t>(num_kv_heads), 0x7fffffffull};
  const cuuint64_t strides[2] = {row_bytes, row_bytes * num_kv_heads};  // bytes, dims 1 and 2
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(box_slots)};
  return encode_3d(map, dt, cache, dims, strides, box);
}

Status encode_rows_map(CUtensorMap* map, DType dt, const void* rows, int num_tokens,
                       int num_heads, int head_dim, int box_heads, int box_tokens) {
  FOLIO_RETURN_IF_ERROR(
      check_rows_map(rows, num_tokens, num_heads, head_dim, box_heads, box_tokens));
  const cuuint64_t row_bytes = static_cast<cuuint64_t>(head_dim) * 2;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim),
                              static_cast<cuuint64_t>(num_heads),
                              static_cast<cuuint64_t>(num_tokens)};
  const cuuint64_t strides[2] = {row_bytes, row_bytes * num_heads};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_heads),
                             static_cast<cuuint32_t>(box_tokens)};
  return encode_3d(map, dt, rows, dims, strides, box);
}

namespace {

// Encoded maps remembered by (base address, dtype, geometry, box): encode(map) runs once per
// key. Freed and reallocated buffers (tests, engine restarts) would otherwise accumulate: a map
// only describes addresses, so a stale entry is harmless but useless, and the cache is emptied
// at `cap` entries. Safe to call from several threads (tensor-parallel workers).
// Each caller passes its own lambda type, so each instantiation keeps its own map.
template <typename Encode>
Status remembered(CUtensorMap* map, const void* base, DType dt, const std::array<int, 5>& geometry,
                  size_t cap, Encode&& encode) {
  using Key = std::tuple<const void*, int, std::array<int, 5>>;
  static std::mutex mu;
  static std::map<Key, CUtensorMap> maps;
  const Key key{base, static_cast<int>(dt), geometry};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = maps.find(key); it != maps.end()) {
      *map = it->second;
      return Status();
    }
  }
  FOLIO_RETURN_IF_ERROR(encode(map));
  std::lock_guard<std::mutex> lock(mu);
  if (maps.size() >= cap) maps.clear();
  maps.emplace(key, *map);
  return Status();
}

}  // namespace

Status cached_paged_cache_map(CUtensorMap* map, DType dt, const void* cache, int num_kv_heads,
                              int head_dim, int box_slots) {
  return remembered(map, cache, dt, {num_kv_heads, head_dim, box_slots, 0, 0}, 1024,
                    [&](CUtensorMap* m) {
                      return encode_paged_cache_map(m, dt, cache, num_kv_heads, head_dim,
                                                    box_slots);
                    });
}

Status cached_rows_map(CUtensorMap* map, DType dt, const void* rows, int num_tokens, int num_heads,
                       int head_dim, int box_heads, int box_tokens) {
  return remembered(map, rows, dt, {num_tokens, num_heads, head_dim, box_heads, box_tokens}, 4096,
                    [&](CUtensorMap* m) {
                      return encode_rows_map(m, dt, rows, num_tokens, num_heads, head_dim,
                                             box_heads, box_tokens);
                    });
}

}  // namespace folio::cuda
