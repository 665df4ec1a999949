#include "model/cuda_llama_weights.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cuda/weight_init.h"
#include "model/weight_layout.h"

namespace folio {
namespace {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Result<cuda::SourceType> source_type(const TensorView& t) {
  switch (t.dtype) {
    case DType::kF32: return cuda::SourceType::kF32;
    case DType::kF16: return cuda::SourceType::kF16;
    case DType::kBF16: return cuda::SourceType::kBF16;
  }
  return invalid_argument("tensor " + t.name + ": unsupported dtype");
}

// Copies one part (a tensor, or a rank's slice of it) from the checkpoint into the arena at
// `dst`, converting on the GPU through `staging` (some rows at a time) when its precision is not
// the model's; padding rows are zeroed.
Status upload_part(const TensorView& t, const WeightPart& p, cuda::DType dtype, std::byte* dst,
                   cuda::DeviceBuffer& staging) {
  FOLIO_ASSIGN_OR_RETURN(cuda::SourceType src, source_type(t));
  const bool same = (src == cuda::SourceType::kBF16 && dtype == cuda::DType::kBF16) ||
                    (src == cuda::SourceType::kF16 && dtype == cuda::DType::kFP16);
  const size_t esize = dtype_size(t.dtype), cols = static_cast<size_t>(p.cols);
  const size_t src_pitch = static_cast<size_t>(p.full_cols()) * esize;
  const std::byte* src0 = t.data + (static_cast<size_t>(p.row0) * p.full_cols() + p.col0) * esize;
  const size_t valid = static_cast<size_t>(p.valid_rows);
  // Rows [r, r + n) of the part to `to` (contiguous, `esize` bytes an element).
  auto copy_rows = [&](void* to, size_t r, size_t n) {
    if (p.whole_rows()) return cuda::copy(to, src0 + r * src_pitch, n * cols * esize);
    return cuda::copy_2d(to, cols * esize, src0 + r * src_pitch, src_pitch, cols * esize, n);
  };
  if (same) {
    FOLIO_RETURN_IF_ERROR(copy_rows(dst, 0, valid));
  } else {
    if (staging.bytes() == 0) {
      FOLIO_ASSIGN_OR_RETURN(staging, cuda::DeviceBuffer::allocate(64u << 20));
    }
    const size_t chunk = std::max<size_t>(1, staging.bytes() / (cols * esize));
    if (cols * esize > staging.bytes())
      return unimplemented("tensor " + t.name + ": rows too wide to convert");
    for (size_t r = 0; r < valid; r += chunk) {
      const size_t n = std::min(chunk, valid - r);
      FOLIO_RETURN_IF_ERROR(copy_rows(staging.data(), r, n));
      FOLIO_RETURN_IF_ERROR(
          cuda::convert(src, staging.data(), dtype, dst + r * cols * 2, n * cols, nullptr));
      FOLIO_RETURN_IF_ERROR(cuda::synchronize());  // staging is reused by the next chunk
    }
  }
  if (valid < static_cast<size_t>(p.rows))
    FOLIO_RETURN_IF_ERROR(cuda::memset_async(dst + valid * cols * 2, 0,
                                             (static_cast<size_t>(p.rows) - valid) * cols * 2));
  return Status();
}

Status allocate(cuda::DType dtype, const WeightLayout& L, cuda::DeviceBuffer& arena) {
  auto buf = cuda::DeviceBuffer::allocate(L.total);
  if (!buf.ok())
    return resource_exhausted("the model's weights (" + std::to_string(L.total >> 20) +
                              " MiB in " + cuda::dtype_name(dtype) +
                              ") do not fit in GPU memory: " + buf.status().message());
  arena = std::move(*buf);
  return Status();
}

}  // namespace

size_t CudaLlamaWeights::num_bytes(const ModelConfig& config, cuda::DType, const TpShard* shard) {
  return build_weight_layout(config, shard).total;
}

Result<cuda::DType> resolve_cuda_dtype(const std::string& flag, const ModelConfig& config) {
  if (flag == "auto") return config.dtype == "float16" ? cuda::DType::kFP16 : cuda::DType::kBF16;
  if (flag == "bfloat16" || flag == "bf16") return cuda::DType::kBF16;
  if (flag == "float16" || flag == "fp16" || flag == "half") return cuda::DType::kFP16;
  if (flag == "float32" || flag == "fp32" || flag == "float")
    return unimplemented("--dtype " + flag + " is not supported on CUDA (use bfloat16 or float16)");
  return invalid_argument("--dtype must be auto, bfloat16 or float16, got " + flag);
}

namespace {

CudaLlamaWeights bind(const ModelConfig& c, cuda::DType dtype, const WeightLayout& L,
                      cuda::DeviceBuffer arena) {
  CudaLlamaWeights w;
  const auto* base = static_cast<const std::byte*>(arena.data());
  auto at = [&](size_t off) -> const void* { return off == kNoTensor ? nullptr : base + off; };
  w.dtype = dtype;
  w.embed = at(L.embed);
  w.final_norm = at(L.final_norm);
  w.lm_head = c.tie_word_embeddings ? w.embed : at(L.lm_head);
  for (const LayerOffsets& o : L.layers)
    w.layers.push_back({at(o.input_norm), at(o.qkv), at(o.qkv_bias), at(o.q_norm), at(o.k_norm),
                        at(o.o_proj), at(o.post_norm), at(o.gate_up), at(o.down)});
  w.arena = std::move(arena);
  return w;
}

}  // namespace

Result<CudaLlamaWeights> CudaLlamaWeights::load(const ModelConfig& c, const Checkpoint& ck,
                                                cuda::DType dtype, const TpShard* shard) {
  const WeightLayout L = build_weight_layout(c, shard);
  cuda::DeviceBuffer arena, staging;
  FOLIO_RETURN_IF_ERROR(allocate(dtype, L, arena));
  for (const WeightPart& p : L.parts) {
    FOLIO_ASSIGN_OR_RETURN(const TensorView* t, ck.get(p.name));
    if (t->shape != p.shape)
      return invalid_argument("tensor " + p.name + " in " + t->file + " has shape " +
                              shape_str(t->shape) + ", expected " + shape_str(p.shape));
    FOLIO_RETURN_IF_ERROR(
        upload_part(*t, p, dtype, static_cast<std::byte*>(arena.data()) + p.offset, staging));
  }
  FOLIO_RETURN_IF_ERROR(cuda::synchronize());
  return bind(c, dtype, L, std::move(arena));
}

Result<CudaLlamaWeights> CudaLlamaWeights::dummy(const ModelConfig& c, cuda::DType dtype,
                                                 uint64_t seed, const TpShard* shard) {
  const WeightLayout L = build_weight_layout(c, shard);
  cuda::DeviceBuffer arena;
  FOLIO_RETURN_IF_ERROR(allocate(dtype, L, arena));
  for (size_t i = 0; i < L.parts.size(); ++i) {
    const WeightPart& p = L.parts[i];
    const size_t cols = static_cast<size_t>(p.cols), rows = static_cast<size_t>(p.rows);
    const size_t valid = static_cast<size_t>(p.valid_rows);
    auto* dst = static_cast<std::byte*>(arena.data()) + p.offset;
    // A distinct stream of values per tensor: (seed, tensor index) mixed into the hash seed. The
    // values depend on the element's place in the whole tensor, not on the slice.
    const uint64_t s = seed * 0x100000001b3ull + (i + 1) * 0xd6e8feb86659fd93ull;
    FOLIO_RETURN_IF_ERROR(
        p.dummy_scale == kDummyOnes
            ? cuda::fill_constant(dtype, dst, rows * cols, 1.f, nullptr)
            : cuda::fill_uniform_slice(dtype, dst, valid, cols, static_cast<size_t>(p.full_cols()),
                                       static_cast<size_t>(p.row0), static_cast<size_t>(p.col0),
                                       p.dummy_scale, s, nullptr));
    if (valid < rows)  // vocabulary padding
      FOLIO_RETURN_IF_ERROR(
          cuda::memset_async(dst + valid * cols * 2, 0, (rows - valid) * cols * 2));
  }
  FOLIO_RETURN_IF_ERROR(cuda::synchronize());
  return bind(c, dtype, L, std::move(arena));
}

}  // namespace folio
