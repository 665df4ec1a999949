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

// One checkpoint tensor's place in the arena. Parts of a fused matrix follow each other.
struct Part {
  std::string name;
  Shape shape;
  size_t offset;  // bytes into the arena
  float dummy_scale;
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
  void add(std::string name, Shape shape, float scale) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    parts.push_back({std::move(name), std::move(shape), total, scale});
    total += n * 2;  // bf16 and fp16 alike
  }
  size_t tensor(std::string name, Shape shape, float scale) {
    const size_t off = begin();
    add(std::move(name), std::move(shape), scale);
    return off;
  }
};

Layout build_layout(const ModelConfig& c) {
  Layout L;
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  const float s_h = 1.f / std::sqrt(static_cast<float>(h));
  L.embed = L.tensor("model.embed_tokens.weight", {c.vocab_size, h}, 1.f);
  L.final_norm = L.tensor("model.norm.weight", {h}, kOnes);
  if (!c.tie_word_embeddings) L.lm_head = L.tensor("lm_head.weight", {c.vocab_size, h}, s_h);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerOffsets o;
    o.input_norm = L.tensor(p + "input_layernorm.weight", {h}, kOnes);
    o.qkv = L.tensor(p + "self_attn.q_proj.weight", {q, h}, s_h);
    L.add(p + "self_attn.k_proj.weight", {kv, h}, s_h);
    L.add(p + "self_attn.v_proj.weight", {kv, h}, s_h);
    if (c.qkv_bias) {
      o.qkv_bias = L.tensor(p + "self_attn.q_proj.bias", {q}, 0.02f);
      L.add(p + "self_attn.k_proj.bias", {kv}, 0.02f);
      L.add(p + "self_attn.v_proj.bias", {kv}, 0.02f);
    }
    if (c.qk_norm) {
      o.q_norm = L.tensor(p + "self_attn.q_norm.weight", {c.head_dim}, kOnes);
      o.k_norm = L.tensor(p + "self_attn.k_norm.weight", {c.head_dim}, kOnes);
    }
    o.o_proj = L.tensor(p + "self_attn.o_proj.weight", {h, q}, 1.f / std::sqrt(float(q)));
    o.post_norm = L.tensor(p + "post_attention_layernorm.weight", {h}, kOnes);
    o.gate_up = L.tensor(p + "mlp.gate_proj.weight", {inter, h}, s_h);
    L.add(p + "mlp.up_proj.weight", {inter, h}, s_h);
    o.down = L.tensor(p + "mlp.down_proj.weight", {h, inter}, 1.f / std::sqrt(float(inter)));
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

// Copies one checkpoint tensor into the arena at `dst`, converting on the GPU through `staging`
// (chunk by chunk) when its precision is not the model's.
Status upload_tensor(const TensorView& t, cuda::DType dtype, void* dst,
                     cuda::DeviceBuffer& staging) {
  FOLIO_ASSIGN_OR_RETURN(cuda::SourceType src, source_type(t));
  const bool same = (src == cuda::SourceType::kBF16 && dtype == cuda::DType::kBF16) ||
                    (src == cuda::SourceType::kF16 && dtype == cuda::DType::kFP16);
  if (same) return cuda::copy(dst, t.data, t.num_bytes);
  const size_t esize = dtype_size(t.dtype), n = static_cast<size_t>(t.numel());
  if (staging.bytes() == 0) {
    FOLIO_ASSIGN_OR_RETURN(staging, cuda::DeviceBuffer::allocate(64u << 20));
  }
  const size_t chunk = staging.bytes() / esize;
  for (size_t i = 0; i < n; i += chunk) {
    const size_t m = std::min(chunk, n - i);
    FOLIO_RETURN_IF_ERROR(cuda::copy(staging.data(), t.data + i * esize, m * esize));
    FOLIO_RETURN_IF_ERROR(cuda::convert(src, staging.data(), dtype,
                                        static_cast<std::byte*>(dst) + i * 2, m, nullptr));
  }
  return cuda::synchronize();  // the staging buffer is reused by the next chunk/tensor
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

size_t CudaLlamaWeights::num_bytes(const ModelConfig& config, cuda::DType) {
  return build_layout(config).total;
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
                                                cuda::DType dtype) {
  const Layout L = build_layout(c);
  cuda::DeviceBuffer arena, staging;
  FOLIO_RETURN_IF_ERROR(allocate(dtype, L, arena));
  for (const Part& p : L.parts) {
    FOLIO_ASSIGN_OR_RETURN(const TensorView* t, ck.get(p.name));
    if (t->shape != p.shape)
      return invalid_argument("tensor " + p.name + " in " + t->file + " has shape " +
                              shape_str(t->shape) + ", expected " + shape_str(p.shape));
    FOLIO_RETURN_IF_ERROR(
        upload_tensor(*t, dtype, static_cast<std::byte*>(arena.data()) + p.offset, staging));
  }
  return bind(c, dtype, L, std::move(arena));
}

Result<CudaLlamaWeights> CudaLlamaWeights::dummy(const ModelConfig& c, cuda::DType dtype,
                                                 uint64_t seed) {
  const Layout L = build_layout(c);
  cuda::DeviceBuffer arena;
  FOLIO_RETURN_IF_ERROR(allocate(dtype, L, arena));
  for (size_t i = 0; i < L.parts.size(); ++i) {
    const Part& p = L.parts[i];
    size_t n = 1;
    for (int64_t d : p.shape) n *= static_cast<size_t>(d);
    void* dst = static_cast<std::byte*>(arena.data()) + p.offset;
    // A distinct stream of values per tensor: (seed, tensor index) mixed into the hash seed.
    const uint64_t s = seed * 0x100000001b3ull + (i + 1) * 0xd6e8feb86659fd93ull;
    FOLIO_RETURN_IF_ERROR(p.dummy_scale == kOnes
                              ? cuda::fill_constant(dtype, dst, n, 1.f, nullptr)
                              : cuda::fill_uniform(dtype, dst, n, p.dummy_scale, s, nullptr));
  }
  FOLIO_RETURN_IF_ERROR(cuda::synchronize());
  return bind(c, dtype, L, std::move(arena));
}

}  // namespace folio
