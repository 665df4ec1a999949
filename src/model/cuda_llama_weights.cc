#include "model/cuda_llama_weights.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "backend/cuda/weight_init.h"

namespace folio {
namespace {

using Shape = std::vector<int64_t>;
constexpr size_t kNone = std::numeric_limits<size_t>::max();
constexpr float kOnes = -1.f;  // dummy init: constant 1 (norm weights)

// One checkpoint tensor's place in the arena: the block [row0, row0 + rows) x [col0, col0 + cols)
// of the checkpoint's [full_rows, full_cols] tensor (1-D tensors are [n, 1]), of which the first
// valid_rows rows exist in the checkpoint (the rest is vocabulary padding, zero). Parts of a
// fused matrix follow each other.
struct Part {
  std::string name;
  Shape shape;  // the checkpoint's (whole) shape
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0, valid_rows = 0;
  size_t offset = 0;  // bytes into the arena
  float dummy_scale = 1.f;

  int64_t full_cols() const { return shape.size() > 1 ? shape[1] : 1; }
  bool whole_rows() const { return col0 == 0 && cols == full_cols(); }
};

// A row range (and optionally a column range) of a tensor for one rank.
struct Slice {
  int64_t row0 = 0, rows = -1, col0 = 0, cols = -1, valid_rows = -1;  // -1: all
};

struct LayerOffsets {
  size_t input_norm, qkv, qkv_bias = kNone, q_norm = kNone, k_norm = kNone, o_proj, post_norm,
                     gate_up, down;
};

struct Layout {
  std::vector<Part> parts;
  size_t total = 0;
  size_t embed, final_norm, lm_head = kNone;
  std::vector<LayerOffsets> layers;

  // Starts a new (256-byte aligned) tensor and returns its offset.
  size_t begin() {
    total = (total + 255) / 256 * 256;
    return total;
  }
  void add(std::string name, Shape shape, float scale, Slice sl = {}) {
    Part p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.row0 = sl.row0;
    p.rows = sl.rows >= 0 ? sl.rows : p.shape[0];
    p.col0 = sl.col0;
    p.cols = sl.cols >= 0 ? sl.cols : p.full_cols();
    p.valid_rows = sl.valid_rows >= 0 ? sl.valid_rows : p.rows;
    p.offset = total;
    p.dummy_scale = scale;
    total += static_cast<size_t>(p.rows) * static_cast<size_t>(p.cols) * 2;  // bf16 and fp16
    parts.push_back(std::move(p));
  }
  size_t tensor(std::string name, Shape shape, float scale, Slice sl = {}) {
    const size_t off = begin();
    add(std::move(name), std::move(shape), scale, sl);
    return off;
  }
};

// Dummy scales use the whole model's fan-in, so every rank's values are the single-GPU model's.
Layout build_layout(const ModelConfig& c, const TpShard* shard) {
  const TpShard t =
      shard ? *shard
            : whole_model_shard(c.num_heads, c.num_kv_heads, c.intermediate_size, c.vocab_size);
  Layout L;
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  const int64_t hd = c.head_dim;
  const float s_h = 1.f / std::sqrt(static_cast<float>(h));
  const Slice vocab{t.vocab_start, t.local_vocab, 0, -1, t.valid_vocab_rows()};
  const Slice q_rows{t.head_start * hd, t.local_heads * hd};
  const Slice kv_rows{t.kv_head_start * hd, t.local_kv_heads * hd};
  const Slice q_cols{0, -1, t.head_start * hd, t.local_heads * hd};
  const Slice inter_rows{t.inter_start, t.local_inter};
  const Slice inter_cols{0, -1, t.inter_start, t.local_inter};
  L.embed = L.tensor("model.embed_tokens.weight", {c.vocab_size, h}, 1.f, vocab);
  L.final_norm = L.tensor("model.norm.weight", {h}, kOnes);
  if (!c.tie_word_embeddings) L.lm_head = L.tensor("lm_head.weight", {c.vocab_size, h}, s_h, vocab);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerOffsets o;
    o.input_norm = L.tensor(p + "input_layernorm.weight", {h}, kOnes);
    o.qkv = L.tensor(p + "self_attn.q_proj.weight", {q, h}, s_h, q_rows);
    L.add(p + "self_attn.k_proj.weight", {kv, h}, s_h, kv_rows);
    L.add(p + "self_attn.v_proj.weight", {kv, h}, s_h, kv_rows);
    if (c.qkv_bias) {
      o.qkv_bias = L.tensor(p + "self_attn.q_proj.bias", {q}, 0.02f, q_rows);
      L.add(p + "self_attn.k_proj.bias", {kv}, 0.02f, kv_rows);
      L.add(p + "self_attn.v_proj.bias", {kv}, 0.02f, kv_rows);
    }
    if (c.qk_norm) {
      o.q_norm = L.tensor(p + "self_attn.q_norm.weight", {c.head_dim}, kOnes);
      o.k_norm = L.tensor(p + "self_attn.k_norm.weight", {c.head_dim}, kOnes);
    }
    o.o_proj = L.tensor(p + "self_attn.o_proj.weight", {h, q}, 1.f / std::sqrt(float(q)), q_cols);
    o.post_norm = L.tensor(p + "post_attention_layernorm.weight", {h}, kOnes);
    o.gate_up = L.tensor(p + "mlp.gate_proj.weight", {inter, h}, s_h, inter_rows);
    L.add(p + "mlp.up_proj.weight", {inter, h}, s_h, inter_rows);
    o.down =
        L.tensor(p + "mlp.down_proj.weight", {h, inter}, 1.f / std::sqrt(float(inter)), inter_cols);
    L.layers.push_back(o);
  }
  L.begin();
  return L;
}

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
Status upload_part(const TensorView& t, const Part& p, cuda::DType dtype, std::byte* dst,
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

Status allocate(cuda::DType dtype, const Layout& L, cuda::DeviceBuffer& arena) {
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
  return build_layout(config, shard).total;
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

CudaLlamaWeights bind(const ModelConfig& c, cuda::DType dtype, const Layout& L,
                      cuda::DeviceBuffer arena) {
  CudaLlamaWeights w;
  const auto* base = static_cast<const std::byte*>(arena.data());
  auto at = [&](size_t off) -> const void* { return off == kNone ? nullptr : base + off; };
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
  const Layout L = build_layout(c, shard);
  cuda::DeviceBuffer arena, staging;
  FOLIO_RETURN_IF_ERROR(allocate(dtype, L, arena));
  for (const Part& p : L.parts) {
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
  const Layout L = build_layout(c, shard);
  cuda::DeviceBuffer arena;
  FOLIO_RETURN_IF_ERROR(allocate(dtype, L, arena));
  for (size_t i = 0; i < L.parts.size(); ++i) {
    const Part& p = L.parts[i];
    const size_t cols = static_cast<size_t>(p.cols), rows = static_cast<size_t>(p.rows);
    const size_t valid = static_cast<size_t>(p.valid_rows);
    auto* dst = static_cast<std::byte*>(arena.data()) + p.offset;
    // A distinct stream of values per tensor: (seed, tensor index) mixed into the hash seed. The
    // values depend on the element's place in the whole tensor, not on the slice.
    const uint64_t s = seed * 0x100000001b3ull + (i + 1) * 0xd6e8feb86659fd93ull;
    FOLIO_RETURN_IF_ERROR(
        p.dummy_scale == kOnes
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
