// CudaLlamaExecutor: the step (plan, layers) and the KV block copies; its inputs are checked
// and uploaded in cuda_llama_step_inputs.cc, its logits computed and delivered in
// cuda_llama_logits.cc.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "backend/cuda/embedding.h"
#include "backend/cuda/kv_cache_ops.h"
#include "backend/cuda/qkv_post.h"
#include "backend/cuda/rms_norm.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/silu_and_mul.h"
#include "backend/cuda/skinny_gemm.h"
#include "backend/cuda/split_qkv.h"
#include "base/log.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {

Status ensure_device(cuda::DeviceBuffer& buf, size_t bytes) {
  if (buf.bytes() >= bytes) return Status();
  buf = cuda::DeviceBuffer();  // free first: the old and new sizes need not both fit
  FOLIO_ASSIGN_OR_RETURN(buf, cuda::DeviceBuffer::allocate(bytes));
  return Status();
}

Status ensure_pinned(cuda::PinnedHostBuffer& buf, size_t bytes) {
  if (buf.bytes() >= bytes) return Status();
  buf = cuda::PinnedHostBuffer();
  FOLIO_ASSIGN_OR_RETURN(buf, cuda::PinnedHostBuffer::allocate(bytes * 3 / 2 + 16));
  return Status();
}

size_t CudaLlamaExecutor::Impl::layer_block_bytes() const {
  return static_cast<size_t>(kv.block_size) * config.kv_size() *
         (kv_fp8() ? 1 : cuda::dtype_size(dt));
}

Status CudaLlamaExecutor::Impl::forward(const ForwardBatch& b, const CacheView& c,
                                        const LogitsRequest& req) {
  FOLIO_RETURN_IF_ERROR(validate(b, c));
  staging ^= 1;  // this step's pinned staging copies (see Impl::staging)
  FOLIO_RETURN_IF_ERROR(wait_staging_slot());
  const int T = b.num_tokens();
  if (T == 0) {
    if (req.host_logits) req.host_logits->clear();
    if (req.samples) req.samples->clear();
    return Status();
  }
  FOLIO_RETURN_IF_ERROR(reserve_activations(T));
  bool all_decode = true;
  for (int s = 0; s < b.num_seqs(); ++s)
    all_decode = all_decode && b.query_start[s + 1] - b.query_start[s] == 1;
  cascade_on = false;
  if (all_decode) FOLIO_RETURN_IF_ERROR(plan_cascade_step(b));  // may set cascade_on
  // A cascade step replays its bucket's cascade graph (cuda_llama_cascade.cc).
  if (all_decode && &c == &cache && (!cascade_on || cascade_graphable)) {
    if (const int bucket = graph_bucket(b.num_seqs()); bucket > 0)
      return forward_graph(b, req, bucket);
  }
  if (timer) timer->begin_step(nullptr);
  StepArrays d;
  FOLIO_RETURN_IF_ERROR(upload(b, d));
  mark("upload");
  // Plan attention once for the step; every layer reuses it.
  cuda::DecodePlan decode;
  cuda::PrefillPlan prefill;
  if (all_decode) {
    if (!cascade_on) {  // a cascade step's layers run on cascade_plan (plan_cascade_step)
      FOLIO_ASSIGN_OR_RETURN(decode, plan_decode(b.context_lens));
      FOLIO_RETURN_IF_ERROR(ensure_device(attn_workspace, decode.workspace_bytes));
    }
  } else {
    FOLIO_ASSIGN_OR_RETURN(prefill, cuda::plan_prefill_attention(b.query_start, config.num_heads,
                                                                 config.num_kv_heads));
    if (split_mixed) FOLIO_RETURN_IF_ERROR(plan_step_attention(b));
  }
  FOLIO_RETURN_IF_ERROR(run_layers({T, b.num_seqs()}, d, c, all_decode ? &decode : nullptr,
                                   all_decode ? nullptr : &prefill, attn_workspace.data()));
  return shard.world > 1 ? compute_logits_tp(b, d, req) : compute_logits(b, d, req);
}

// Embedding and every layer, on `stream` (the legacy stream, or a capture stream).
Status CudaLlamaExecutor::Impl::run_layers(StepShape sh, const StepArrays& d, const CacheView& c,
                                           const cuda::DecodePlan* decode,
                                           const cuda::PrefillPlan* prefill, void* workspace) {
  // With TP each rank gathers its vocabulary slice (other ids give zero rows); the all-reduce
  // completes the rows.
  FOLIO_RETURN_IF_ERROR(cuda::embedding(dt, weights.embed, d.token_ids, x.data(), sh.tokens,
                                        config.hidden_size, shard.local_vocab, stream,
                                        shard.vocab_start));
  mark("embedding");
  FOLIO_RETURN_IF_ERROR(
      tp_all_reduce_norm(x.data(), sh.tokens,
                         qkv_norm_in_skinny(0, sh.tokens) ? nullptr : weights.layers[0].input_norm,
                         normed.data(), input_normed));
  for (int l = 0; l < config.num_layers; ++l)
    FOLIO_RETURN_IF_ERROR(layer(l, sh, d, c, decode, prefill, workspace));
  return Status();
}

// x += o_proj(attention(rope(qkv(rms_norm(x))))); x += down(silu_and_mul(gate_up(rms_norm(x)))).
// The residual adds happen inside the GEMMs (accumulate): one rounding of x per add.
Status CudaLlamaExecutor::Impl::layer(int l, StepShape sh, const StepArrays& d, const CacheView& c,
                                      const cuda::DecodePlan* decode,
                                      const cuda::PrefillPlan* prefill, void* workspace) {
  const CudaLayerWeights& w = weights.layers[l];
  const int T = sh.tokens, H = config.hidden_size, I = config.intermediate_size;
  const int hd = config.head_dim, nh = config.num_heads, nkv = config.num_kv_heads;
  const int qs = config.q_size(), kvs = config.kv_size();
  const float eps = static_cast<float>(config.rms_norm_eps);
  // At m where a GEMM runs on the skinny kernel (batch 1), the norm before it is computed inside
  // it (skinny_gemm.h: bit-identical; FOLIO_FUSED_NORM=0: a launch of its own).
  // `norm_fits`: the norm may move into a skinny launch (the caller checks the routing).
  auto norm_fits = [&](bool on, const void* norm_w) {
    return on && cuda::rms_norm_is_block_pack8(H) && cuda::skinny_norm_supported(dt, T, H, norm_w);
  };
  const int qkv_n = qs + 2 * kvs;
  const bool normed_before = std::exchange(input_normed, false);  // by the all-reduce (TP)
  if (qkv_norm_in_skinny(l, T)) {
    cuda::SkinnyProblem pr{x.data(), w.qkv, qkv.data(), T, qkv_n, H};
    pr.norm_weight = w.input_norm;
    pr.norm_eps = eps;
    FOLIO_RETURN_IF_ERROR(cuda::skinny_gemm(dt, pr, stream));
    mark("norm_qkv_gemm");
  } else {
    if (!normed_before) {
      FOLIO_RETURN_IF_ERROR(
          cuda::rms_norm(dt, x.data(), w.input_norm, normed.data(), T, H, eps, stream));
      mark("rms_norm");
    }
    FOLIO_RETURN_IF_ERROR(
        gemm->matmul_nt(dt, normed.data(), w.qkv, qkv.data(), T, qkv_n, H, false, stream));
    mark("qkv_gemm");
  }
  // Decode on kernel tc: the attention kernel does qkv_post's work itself (decode_attention.h).
  const bool qkv_in_attention = decode && !cascade_on && fused_qkv_attn && fused_qkv_post &&
                                !config.qk_norm && cuda::decode_fuses_qkv_post(*decode);
  if (qkv_in_attention) {
    // Nothing to launch: the attention call below takes the raw qkv rows (p.qkv_post).
  } else if (fused_qkv_post && hd % 2 == 0 && hd <= 256) {
    // split + bias + Qwen3 q/k norm + rope + K/V into the cache, one launch (qkv_post.h:
    // bit-identical to the chain below).
    cuda::QkvPostParams qp;
    qp.dtype = dt;
    qp.kv_dtype = kv.dtype;
    qp.num_tokens = T;
    qp.num_heads = nh;
    qp.num_kv_heads = nkv;
    qp.head_dim = hd;
    qp.eps = eps;
    qp.qkv = qkv.data();
    qp.bias = w.qkv_bias;
    qp.q_norm = config.qk_norm ? w.q_norm : nullptr;
    qp.k_norm = config.qk_norm ? w.k_norm : nullptr;
    qp.positions = d.positions;
    qp.inv_freq = inv_freq.as<float>();
    qp.slot_mapping = d.slot_mapping;
    qp.q_out = q.data();
    qp.k_cache = c.k[l];
    qp.v_cache = c.v[l];
    FOLIO_RETURN_IF_ERROR(cuda::qkv_post(qp, stream));
    mark("qkv_post");
  } else {
    FOLIO_RETURN_IF_ERROR(cuda::split_qkv(dt, qkv.data(), w.qkv_bias, q.data(), k.data(), v.data(),
                                          T, qs, kvs, stream));
    mark("split_qkv");
    if (config.qk_norm) {  // Qwen3: RMSNorm over each head's head_dim, before rope
      FOLIO_RETURN_IF_ERROR(
          cuda::rms_norm(dt, q.data(), w.q_norm, q.data(), T * nh, hd, eps, stream));
      FOLIO_RETURN_IF_ERROR(
          cuda::rms_norm(dt, k.data(), w.k_norm, k.data(), T * nkv, hd, eps, stream));
      mark("qk_norm");
    }
    FOLIO_RETURN_IF_ERROR(cuda::rope(dt, q.data(), k.data(), d.positions, inv_freq.as<float>(), T,
                                     nh, nkv, hd, stream));
    mark("rope");
    FOLIO_RETURN_IF_ERROR(cuda::reshape_and_cache(dt, k.data(), v.data(), d.slot_mapping, T, kvs,
                                                  c.k[l], c.v[l], stream, kv.dtype));
    mark("kv_write");
  }
  cuda::PagedAttentionParams p;
  p.dtype = dt;
  p.kv_dtype = kv.dtype;
  p.num_seqs = sh.seqs;
  p.num_heads = nh;
  p.num_kv_heads = nkv;
  p.head_dim = hd;
  p.block_size = kv.block_size;
  p.scale = static_cast<float>(config.softmax_scale());
  p.sliding_window = attention_window(l);
  p.q = q.data();
  p.k_cache = c.k[l];
  p.v_cache = c.v[l];
  p.out = attn.data();
  p.query_start = d.query_start;
  p.context_lens = d.context_lens;
  p.block_table_start = d.block_table_start;
  p.block_table = d.block_table;
  p.step_partition = d.step_partition;
  if (qkv_in_attention) {
    p.qkv_post.qkv = qkv.data();
    p.qkv_post.bias = w.qkv_bias;
    p.qkv_post.positions = d.positions;
    p.qkv_post.inv_freq = inv_freq.as<float>();
    p.qkv_post.slot_mapping = d.slot_mapping;
  }
  FOLIO_RETURN_IF_ERROR(
      decode && cascade_on
          ? cuda::cascade_attention(p, cascade_plan, cascade_ws.data(), stream, cascade_tuning)
      : decode      ? cuda::decode_attention(p, *decode, workspace, stream)
      : split_mixed ? step_attention(p)
                    : cuda::prefill_attention(p, *prefill, stream));
  // step_attention marks each of its groups (a mixed step's decode rows as attn_decode).
  if (decode || !split_mixed) mark(decode ? "attn_decode" : "attn_prefill");
  if (decode && T == 1 && shard.world == 1 && decode_mlp && fused_gate_up_silu) {
    bool done = false;
    FOLIO_RETURN_IF_ERROR(run_decode_mlp(l, done));
    if (done) return Status();
  }
  // Decode at batch 1: gate_up and silu_and_mul in one skinny launch (bit-identical), the norm
  // too where it fits.
  const bool mlp_skinny = fused_gate_up_silu &&
                          gemm->routes_to_skinny(T, 2 * I, H, normed.data(), w.gate_up, act.data());
  const bool mlp_norm_fused = mlp_skinny && norm_fits(fused_norm_mlp, w.post_norm);
  const bool residual = shard.rank == 0;
  bool post_normed = false;  // by the all-reduce (TP)
  FOLIO_RETURN_IF_ERROR(row_parallel(attn.data(), w.o_proj, T, qs, residual,
                                     mlp_norm_fused ? nullptr : w.post_norm, post_normed,
                                     {"o_gemm", "o_gemm_all_reduce"}));
  if (!mlp_norm_fused && !post_normed) {
    FOLIO_RETURN_IF_ERROR(
        cuda::rms_norm(dt, x.data(), w.post_norm, normed.data(), T, H, eps, stream));
    mark("rms_norm");
  }
  if (mlp_skinny) {
    cuda::SkinnyProblem pr{
        mlp_norm_fused ? x.data() : normed.data(), w.gate_up, act.data(), T, I, H};
    if (mlp_norm_fused) {
      pr.norm_weight = w.post_norm;
      pr.norm_eps = eps;
    }
    // Batch 1: gate_up and down as a SkinnyFlow pair where skinny_flow_enabled chose it.
    if (skinny_flow && T == 1 &&
        gemm->routes_to_skinny(T, H, I, act.data(), w.down, x.data())) {
      FOLIO_RETURN_IF_ERROR(run_skinny_flow(pr, w, residual));
      return tp_all_reduce_norm(x.data(), T, next_input_norm(l, T), normed.data(), input_normed);
    }
    FOLIO_RETURN_IF_ERROR(cuda::skinny_gemm_silu(dt, pr, stream));
    mark(mlp_norm_fused ? "norm_gate_up_silu" : "gate_up_silu");
  } else {
    FOLIO_RETURN_IF_ERROR(
        gemm->matmul_nt(dt, normed.data(), w.gate_up, gate_up.data(), T, 2 * I, H, false, stream));
    mark("gate_up_gemm");
    FOLIO_RETURN_IF_ERROR(cuda::silu_and_mul(dt, gate_up.data(), act.data(), T, I, stream));
    mark("silu_mul");
  }
  return row_parallel(act.data(), w.down, T, I, residual, next_input_norm(l, T), input_normed,
                      {"down_gemm", "down_gemm_all_reduce"});
}

// Tensor parallelism: o_proj and down are row-parallel; rank 0 adds its partial product to the
// residual, the others overwrite x with theirs, and one all-reduce sums them (no-op alone).
// Prefill-sized steps run each product by chunks beside its all-reduce (tp_overlaps), the norm
// then left to the caller.
Status CudaLlamaExecutor::Impl::row_parallel(const void* a, const void* w, int tokens, int k,
                                             bool residual, const void* norm_weight,
                                             bool& was_normed, RowParallelStages stages) {
  was_normed = false;
  if (tp_overlaps(tokens)) {
    FOLIO_RETURN_IF_ERROR(row_parallel_overlapped(a, w, tokens, k, residual));
    mark(stages.overlapped);
    return Status();
  }
  FOLIO_RETURN_IF_ERROR(
      gemm->matmul_nt(dt, a, w, x.data(), tokens, config.hidden_size, k, residual, stream));
  mark(stages.product);
  return tp_all_reduce_norm(x.data(), tokens, norm_weight, normed.data(), was_normed);
}

// The next layer's input norm rides on the end-of-layer all-reduce where it can (not after the
// last layer: the final norm runs on the logits rows only).
const void* CudaLlamaExecutor::Impl::next_input_norm(int l, int tokens) const {
  const bool next = l + 1 < config.num_layers && !qkv_norm_in_skinny(l + 1, tokens);
  return next ? weights.layers[l + 1].input_norm : nullptr;
}

bool CudaLlamaExecutor::Impl::qkv_norm_in_skinny(int l, int tokens) const {
  const int H = config.hidden_size, qkv_n = config.q_size() + 2 * config.kv_size();
  const CudaLayerWeights& w = weights.layers[l];
  return fused_norm_qkv && cuda::rms_norm_is_block_pack8(H) &&
         cuda::skinny_norm_supported(dt, tokens, H, w.input_norm) &&
         gemm->routes_to_skinny(tokens, qkv_n, H, x.data(), w.qkv, qkv.data());
}

Status CudaLlamaExecutor::execute(const ForwardBatch& batch, std::vector<float>& logits) {
  if (!impl_->deferred.ok()) return impl_->deferred;
  if (!impl_->launched.empty()) return internal_error("execute with launched steps uncollected");
  impl_->launch_rows = -1;
  LogitsRequest req;
  req.host_logits = &logits;
  return impl_->forward(batch, impl_->cache, req);
}

Status CudaLlamaExecutor::execute_sampled(const ForwardBatch& batch,
                                          const DeviceSamplingBatch& sampling,
                                          std::vector<float>& host_logits,
                                          std::vector<DeviceSample>& samples) {
  if (!impl_->deferred.ok()) return impl_->deferred;
  if (!impl_->launched.empty())
    return internal_error("execute_sampled with launched steps uncollected");
  impl_->launch_rows = -1;
  LogitsRequest req;
  req.host_logits = &host_logits;
  req.sampling = &sampling;
  req.samples = &samples;
  return impl_->forward(batch, impl_->cache, req);
}

namespace {

// The pairs into copy_pairs (cuda::copy waits for the legacy stream's kernels that read them).
Result<const BlockCopy*> upload_pairs(CudaLlamaExecutor::Impl& m,
                                      std::span<const BlockCopy> copies) {
  FOLIO_RETURN_IF_ERROR(ensure_device(m.copy_pairs, copies.size_bytes()));
  FOLIO_RETURN_IF_ERROR(cuda::copy(m.copy_pairs.data(), copies.data(), copies.size_bytes()));
  return m.copy_pairs.as<const BlockCopy>();
}

// Device cache <-> host pool, every layer's K and V, in one launch.
Status swap(CudaLlamaExecutor::Impl& m, std::span<const BlockCopy> copies, bool out) {
  for (const BlockCopy& c : copies)
    if (c.src < 0 || c.dst < 0 || (out ? c.dst : c.src) >= m.kv.num_swap_blocks ||
        (out ? c.src : c.dst) >= m.kv.num_blocks)
      return internal_error("swap: block pair (" + std::to_string(c.src) + ", " +
                            std::to_string(c.dst) + ") outside the pools");
  FOLIO_ASSIGN_OR_RETURN(const BlockCopy* pairs, upload_pairs(m, copies));
  void* const* dev = m.cache_ptrs.as<void*>();
  void* const* host = m.swap_ptrs.as<void*>();
  return cuda::swap_blocks(out ? dev : host, out ? host : dev, 2 * m.config.num_layers,
                           m.layer_block_bytes(), pairs, static_cast<int>(copies.size()), nullptr);
}

}  // namespace

void CudaLlamaExecutor::copy_blocks(std::span<const BlockCopy> copies) {
  if (copies.empty() || !impl_->deferred.ok()) return;
  Impl& m = *impl_;
  auto pairs = upload_pairs(m, copies);
  Status st = pairs.status();
  if (st.ok())
    st = cuda::copy_blocks(m.cache_ptrs.as<void*>(), 2 * m.config.num_layers, m.layer_block_bytes(),
                           *pairs, static_cast<int>(copies.size()), nullptr);
  if (!st.ok()) m.deferred = st;
}

void CudaLlamaExecutor::swap_out(std::span<const BlockCopy> copies) {
  if (copies.empty() || !impl_->deferred.ok()) return;
  if (Status st = swap(*impl_, copies, true); !st.ok()) impl_->deferred = st;
}

void CudaLlamaExecutor::swap_in(std::span<const BlockCopy> copies) {
  if (copies.empty() || !impl_->deferred.ok()) return;
  if (Status st = swap(*impl_, copies, false); !st.ok()) impl_->deferred = st;
}

}  // namespace folio
