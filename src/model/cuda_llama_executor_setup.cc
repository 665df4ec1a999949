// CudaLlamaExecutor: creation and memory planning (weights, activations, a profiling forward at
// the largest step, then the KV cache from what gpu_memory_utilization leaves).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/attention_params.h"
#include "backend/cuda/copy_rate.h"
#include "backend/cuda/decode_mlp.h"
#include "backend/cuda/memory_info.h"
#include "backend/cuda/skinny_gemm.h"
#include "base/env.h"
#include "base/log.h"
#include "model/cuda_llama_executor_impl.h"
#include "model/rope.h"
#include "model/skinny_flow_policy.h"

namespace folio {
namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1ull << 30));
  return buf;
}

// The largest step the scheduler can send: `tokens` new tokens in prefill sequences of at most
// max_len tokens (at most max_seqs of them). No K/V is written (slot -1); every sequence reads
// the same scratch blocks.
ForwardBatch profile_batch(int tokens, int max_len, int max_seqs, int block_size) {
  ForwardBatch b;
  b.query_start.push_back(0);
  b.block_table_start.push_back(0);
  const int seq_len = std::min(tokens, max_len);
  for (int s = 0; s < max_seqs && b.num_tokens() < tokens; ++s) {
    const int len = std::min(seq_len, tokens - b.num_tokens());
    for (int p = 0; p < len; ++p) {
      b.token_ids.push_back(p % 7);
      b.positions.push_back(p);
      b.slot_mapping.push_back(-1);
    }
    b.query_start.push_back(b.num_tokens());
    b.context_lens.push_back(len);
    for (int blk = 0; blk * block_size < len; ++blk) b.block_table.push_back(blk);
    b.block_table_start.push_back(static_cast<int32_t>(b.block_table.size()));
  }
  for (int r = 0; r < std::min(b.num_tokens(), kLogitsChunkRows); ++r) b.logits_rows.push_back(r);
  return b;
}

Status check_options(const CudaExecutorOptions& o) {
  if (!(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1))
    return invalid_argument("--gpu-memory-utilization must be in (0, 1], got " +
                            std::to_string(o.gpu_memory_utilization));
  if (o.block_size < 1) return invalid_argument("block size must be >= 1");
  if (o.max_num_batched_tokens < 1 || o.max_num_seqs < 1)
    return invalid_argument("max_num_batched_tokens and max_num_seqs must be >= 1");
  if (o.num_blocks < 0 || o.swap_space_gib < 0)
    return invalid_argument("num_blocks and swap space must be >= 0");
  return Status();
}

}  // namespace

CudaLlamaExecutor::CudaLlamaExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaLlamaExecutor::~CudaLlamaExecutor() {
  if (impl_ && impl_->timer) log_info(impl_->timer->report());
  if (impl_ && impl_->cascade_steps > 0)
    log_info("cuda: cascade attention in " + std::to_string(impl_->cascade_steps) +
             " decode steps, " + std::to_string(impl_->cascade_graph_steps) +
             " of them replaying a CUDA graph");
}

std::string CudaLlamaExecutor::device_name() const {
  return "cuda:" + std::to_string(impl_->options.device) + " (" + impl_->info.name + ")";
}
Result<double> CudaLlamaExecutor::measure_copy_gbps() const {
  return cuda::measure_device_copy_gbps(impl_->options.device);
}
int CudaLlamaExecutor::vocab_size() const { return impl_->config.vocab_size; }
const KvCacheShape& CudaLlamaExecutor::kv_shape() const { return impl_->kv; }
const CudaMemoryReport& CudaLlamaExecutor::memory_report() const { return impl_->report; }

size_t CudaLlamaExecutor::kv_block_bytes(const ModelConfig& c, int block_size,
                                         KvCacheDtype kv_dtype) {
  return 2ull * c.num_layers * block_size * c.kv_size() * (kv_dtype == KvCacheDtype::kFp8E4m3 ? 1 : 2);
}

bool cuda_device_available() {
  auto n = cuda::device_count();
  return n.ok() && *n > 0;
}

Status cuda_device_summary(std::string& name, size_t& total_memory) {
  FOLIO_ASSIGN_OR_RETURN(const cuda::DeviceInfo info, cuda::device_info(0));
  name = info.name;
  total_memory = info.total_memory;
  return Status();
}

Status cuda_model_supported(const ModelConfig& config) {
  Status st = cuda::check_attention_geometry(config.num_heads, config.num_kv_heads, config.head_dim);
  if (st.ok()) return st;
  return Status(st.code(), "this model cannot run on CUDA: " + st.message());
}

Status CudaLlamaExecutor::Impl::reserve_activations(int tokens) {
  if (tokens <= act_tokens) return Status();
  const size_t T = static_cast<size_t>(tokens), e = cuda::dtype_size(dt);
  const size_t H = config.hidden_size, I = config.intermediate_size;
  const size_t qs = config.q_size(), kvs = config.kv_size();
  drop_graphs();  // they point at the buffers about to move
  FOLIO_RETURN_IF_ERROR(ensure_device(x, T * H * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(normed, T * H * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(qkv, T * (qs + 2 * kvs) * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(q, T * qs * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(k, T * kvs * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(v, T * kvs * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(attn, T * qs * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(gate_up, T * 2 * I * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(act, T * I * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(rows, kLogitsChunkRows * H * e));
  FOLIO_RETURN_IF_ERROR(ensure_device(rows_normed, kLogitsChunkRows * H * e));
  FOLIO_RETURN_IF_ERROR(
      ensure_device(logits, kLogitsChunkRows * static_cast<size_t>(config.vocab_size) * 4));
  act_tokens = tokens;
  return Status();
}

namespace {

// Weights, GEMM handles, rope table, activations and the decode workspace for the largest step.
Status load_and_allocate(CudaLlamaExecutor::Impl& m, const Checkpoint* ck, int max_len) {
  const ModelConfig& c = m.config;
  const TpShard* shard = m.tp ? &m.shard : nullptr;  // the loader takes the whole model's config
  if (ck) {
    FOLIO_ASSIGN_OR_RETURN(m.weights, CudaLlamaWeights::load(m.full_config, *ck, m.dt, shard));
  } else {
    FOLIO_ASSIGN_OR_RETURN(m.weights,
                           CudaLlamaWeights::dummy(m.full_config, m.dt, m.options.seed, shard));
  }
  FOLIO_ASSIGN_OR_RETURN(m.gemm, cuda::Gemm::create());
  FOLIO_ASSIGN_OR_RETURN(m.logits_gemm, cuda::LogitsGemm::create());
  const std::vector<double> f64 = rope_inv_freq(c.rope, c.head_dim);
  const std::vector<float> f32(f64.begin(), f64.end());
  FOLIO_RETURN_IF_ERROR(ensure_device(m.inv_freq, f32.size() * sizeof(float)));
  FOLIO_RETURN_IF_ERROR(cuda::copy(m.inv_freq.data(), f32.data(), f32.size() * sizeof(float)));
  const int tokens = std::min(m.options.max_num_batched_tokens, m.options.max_num_seqs * max_len);
  FOLIO_RETURN_IF_ERROR(m.reserve_activations(tokens));
  m.max_model_len = max_len;  // before planning: a sliding window binds only past it
  // Decode workspace for max_num_seqs (and for one) sequences of max_model_len.
  for (int seqs : {m.options.max_num_seqs, 1}) {
    std::vector<int32_t> lens(seqs, max_len);
    FOLIO_ASSIGN_OR_RETURN(auto plan, m.plan_decode(lens));
    FOLIO_RETURN_IF_ERROR(ensure_device(m.attn_workspace, plan.workspace_bytes));
  }
  FOLIO_RETURN_IF_ERROR(m.reserve_step_attention(max_len));
  return m.init_graphs();  // before the profiling forward, so the KV budget sees its buffers
}

Status load_and_reserve(CudaLlamaExecutor::Impl& m, const Checkpoint* ck, int max_len) {
  // With TP the profiling forward is collective: every rank must have got this far.
  FOLIO_RETURN_IF_ERROR(m.tp_barrier(load_and_allocate(m, ck, max_len)));
  const ModelConfig& c = m.config;
  // decode_mlp's grid-barrier counters, one set per layer, zero between launches.
  FOLIO_RETURN_IF_ERROR(
      ensure_device(m.mlp_sync, sizeof(unsigned) * cuda::kDecodeMlpSyncWords * c.num_layers));
  FOLIO_RETURN_IF_ERROR(cuda::memset_async(m.mlp_sync.data(), 0, m.mlp_sync.bytes()));
  // The gate_up -> down flow's counters (cumulative: zeroed once, here).
  FOLIO_RETURN_IF_ERROR(ensure_device(
      m.skinny_flow_counters, sizeof(unsigned long long) * cuda::skinny_flow_words(c.intermediate_size)));
  FOLIO_RETURN_IF_ERROR(
      cuda::skinny_flow_init(m.skinny_flow_counters.as<unsigned long long>(), c.intermediate_size, nullptr));
  const int tokens = std::min(m.options.max_num_batched_tokens, m.options.max_num_seqs * max_len);
  // The profiling forward: the largest prefill step over a zeroed one-layer scratch cache.
  ForwardBatch b = profile_batch(tokens, max_len, m.options.max_num_seqs, m.kv.block_size);
  const int scratch_blocks = (std::min(tokens, max_len) + m.kv.block_size - 1) / m.kv.block_size;
  cuda::DeviceBuffer scratch_k, scratch_v;
  FOLIO_RETURN_IF_ERROR(ensure_device(scratch_k, scratch_blocks * m.layer_block_bytes()));
  FOLIO_RETURN_IF_ERROR(ensure_device(scratch_v, scratch_blocks * m.layer_block_bytes()));
  FOLIO_RETURN_IF_ERROR(cuda::memset_async(scratch_k.data(), 0, scratch_k.bytes()));
  FOLIO_RETURN_IF_ERROR(cuda::memset_async(scratch_v.data(), 0, scratch_v.bytes()));
  CacheView view;
  view.k.assign(c.num_layers, scratch_k.data());
  view.v.assign(c.num_layers, scratch_v.data());
  view.num_slots = static_cast<int64_t>(scratch_blocks) * m.kv.block_size;
  return m.forward(b, view, LogitsRequest{});
}

// Sizes the KV cache from the budget (or takes the explicit size), allocates it and the swap pool.
Status allocate_kv(CudaLlamaExecutor::Impl& m, int max_len) {
  FOLIO_ASSIGN_OR_RETURN(cuda::MemoryInfo mem, cuda::memory_info());
  CudaMemoryReport& r = m.report;
  r.peak_bytes = mem.used_bytes();
  const double budget = m.options.gpu_memory_utilization * static_cast<double>(mem.total_bytes);
  r.kv_budget_bytes = budget > r.peak_bytes ? static_cast<size_t>(budget - r.peak_bytes) : 0;
  r.kv_block_bytes = CudaLlamaExecutor::kv_block_bytes(m.config, m.kv.block_size, m.kv.dtype);
  const int bs = m.kv.block_size;
  Status planned;
  if (m.options.num_blocks > 0) {
    m.kv.num_blocks = m.options.num_blocks;
  } else {
    const size_t n = r.kv_budget_bytes / r.kv_block_bytes;
    if (n * bs < static_cast<size_t>(max_len))
      planned = resource_exhausted(
          "--gpu-memory-utilization " + std::to_string(m.options.gpu_memory_utilization) +
          " leaves " + gib(r.kv_budget_bytes) + " for the KV cache (" + gib(r.peak_bytes) +
          " in use after loading and profiling, of " + gib(mem.total_bytes) + "): room for " +
          std::to_string(n * bs) + " tokens, fewer than one sequence of max_model_len " +
          std::to_string(max_len) + "; raise it or lower --max-model-len");
    m.kv.num_blocks = static_cast<int>(std::min<size_t>(n, 1u << 30));
  }
  if (m.tp) {  // every rank holds every block (of its KV heads): the smallest plan wins
    FOLIO_ASSIGN_OR_RETURN(int64_t agreed, m.tp->agree(planned, m.kv.num_blocks));
    m.kv.num_blocks = static_cast<int>(agreed);
  }
  FOLIO_RETURN_IF_ERROR(planned);
  const size_t layer_bytes = static_cast<size_t>(m.kv.num_blocks) * m.layer_block_bytes();
  auto arena = cuda::DeviceBuffer::allocate(2 * layer_bytes * m.config.num_layers);
  if (!arena.ok())
    return resource_exhausted("KV cache of " + std::to_string(m.kv.num_blocks) + " blocks (" +
                              gib(2.0 * layer_bytes * m.config.num_layers) +
                              ") does not fit: " + arena.status().message());
  m.kv_arena = std::move(*arena);
  // Zeroed once: the attention kernels may load (and mask) rows past a context's end.
  FOLIO_RETURN_IF_ERROR(cuda::memset_async(m.kv_arena.data(), 0, m.kv_arena.bytes()));
  auto* base = static_cast<std::byte*>(m.kv_arena.data());
  std::vector<void*> ptrs;
  for (int l = 0; l < m.config.num_layers; ++l) {
    m.cache.k.push_back(base + (2 * l) * layer_bytes);
    m.cache.v.push_back(base + (2 * l + 1) * layer_bytes);
    ptrs.push_back(m.cache.k.back());
    ptrs.push_back(m.cache.v.back());
  }
  m.cache.num_slots = static_cast<int64_t>(m.kv.num_blocks) * bs;
  FOLIO_RETURN_IF_ERROR(ensure_device(m.cache_ptrs, ptrs.size() * sizeof(void*)));
  FOLIO_RETURN_IF_ERROR(cuda::copy(m.cache_ptrs.data(), ptrs.data(), ptrs.size() * sizeof(void*)));
  m.kv.num_swap_blocks =
      static_cast<int>(m.options.swap_space_gib * (1ull << 30) / r.kv_block_bytes);
  const size_t swap_layer = static_cast<size_t>(m.kv.num_swap_blocks) * m.layer_block_bytes();
  FOLIO_ASSIGN_OR_RETURN(m.swap_arena,
                         cuda::PinnedHostBuffer::allocate(2 * swap_layer * m.config.num_layers));
  // The kernels' view of the (mapped) pool: swap_blocks reads and writes it directly.
  FOLIO_ASSIGN_OR_RETURN(void* mapped, m.swap_arena.device_pointer());
  if (mapped) {
    auto* pool = static_cast<std::byte*>(mapped);
    std::vector<void*> swap_ptrs;  // cache_ptrs' order: layer l's K, then its V
    for (int c = 0; c < 2 * m.config.num_layers; ++c) swap_ptrs.push_back(pool + c * swap_layer);
    FOLIO_RETURN_IF_ERROR(ensure_device(m.swap_ptrs, swap_ptrs.size() * sizeof(void*)));
    FOLIO_RETURN_IF_ERROR(
        cuda::copy(m.swap_ptrs.data(), swap_ptrs.data(), swap_ptrs.size() * sizeof(void*)));
  }
  r.num_blocks = m.kv.num_blocks;
  r.max_len_seqs = static_cast<int>(static_cast<int64_t>(m.kv.num_blocks) * bs / max_len);
  return cuda::synchronize();
}

}  // namespace

Result<std::unique_ptr<CudaLlamaExecutor>> CudaLlamaExecutor::create(
    const ModelConfig& config, const Checkpoint* checkpoint, const CudaExecutorOptions& options) {
  FOLIO_RETURN_IF_ERROR(check_options(options));
  FOLIO_ASSIGN_OR_RETURN(int num_devices, cuda::device_count());
  if (num_devices == 0) return not_found("--device cuda: no CUDA device found");
  if (options.device < 0 || options.device >= num_devices)
    return not_found("CUDA device " + std::to_string(options.device) + " not present (" +
                     std::to_string(num_devices) + " found)");
  FOLIO_RETURN_IF_ERROR(cuda::set_device(options.device));
  auto m = std::make_unique<Impl>();
  m->timer = cuda::StageTimer::from_env();
  if (const char* e = std::getenv("FOLIO_QKV_POST")) m->fused_qkv_post = std::string(e) != "0";
  if (const char* e = std::getenv("FOLIO_FUSED_QKV_ATTN"))
    m->fused_qkv_attn = std::string(e) != "0";
  if (const char* e = std::getenv("FOLIO_FUSED_SILU"))
    m->fused_gate_up_silu = std::string(e) != "0";
  if (const char* e = std::getenv("FOLIO_DECODE_MLP")) m->decode_mlp = std::string(e) == "1";
  if (const char* e = std::getenv("FOLIO_TP_FUSED_NORM")) m->fused_tp_norm = std::string(e) != "0";
  if (const char* e = std::getenv("FOLIO_FUSED_NORM")) {
    const std::string v = e;
    if (v != "0" && v != "qkv" && v != "all")
      return invalid_argument("FOLIO_FUSED_NORM=" + v + " (expected 0, qkv or all)");
    m->fused_norm_qkv = v != "0";
    m->fused_norm_mlp = v == "all";
  }
  FOLIO_RETURN_IF_ERROR(m->configure_tp_overlap());
  m->full_config = m->config = config;
  m->options = options;
  FOLIO_ASSIGN_OR_RETURN(const int warm_up, env_int("FOLIO_GRAPH_WARMUP", 1, 0, 1));
  if (warm_up == 0) m->options.capture_graphs_at_startup = false;
  m->tp = options.tp;
  if (m->tp) {
    m->shard = m->tp->shard;
    m->config = rank_config(config, m->shard);
  } else {
    m->shard = whole_model_shard(config.num_heads, config.num_kv_heads, config.intermediate_size,
                                 config.vocab_size);
  }
  FOLIO_RETURN_IF_ERROR(cuda_model_supported(m->config));
  FOLIO_ASSIGN_OR_RETURN(m->dt, resolve_cuda_dtype(options.dtype, config));
  FOLIO_ASSIGN_OR_RETURN(m->skinny_flow,
                         skinny_flow_enabled(m->config, std::getenv("FOLIO_SKINNY_FLOW")));
  FOLIO_ASSIGN_OR_RETURN(m->info, cuda::device_info(options.device));
  m->kv.num_layers = config.num_layers;
  m->kv.num_kv_heads = m->config.num_kv_heads;
  m->kv.head_dim = config.head_dim;
  m->kv.block_size = options.block_size;
  m->kv.dtype = options.kv_cache_dtype;
  // After the shard (TP changes the default) and the cache's dtype (the threshold, the stages).
  FOLIO_RETURN_IF_ERROR(m->read_cascade_env());
  // copy_blocks moves 16-byte words: an fp8 block of an odd block size can fall short.
  if (m->kv_fp8() && m->layer_block_bytes() % 16 != 0)
    return unimplemented("--kv-cache-dtype fp8 needs block_size x kv_heads x head_dim (" +
                         std::to_string(m->layer_block_bytes()) + ") to be a multiple of 16");
  const int max_len = options.max_model_len > 0 ? options.max_model_len : config.max_context_len();
  FOLIO_ASSIGN_OR_RETURN(cuda::MemoryInfo mem, cuda::memory_info());
  CudaMemoryReport& r = m->report;
  r.device = m->info.name;
  r.total_bytes = mem.total_bytes;
  r.weight_bytes = CudaLlamaWeights::num_bytes(config, m->dt, m->tp ? &m->shard : nullptr);
  const double budget = options.gpu_memory_utilization * static_cast<double>(mem.total_bytes);
  if (static_cast<double>(mem.used_bytes() + r.weight_bytes) > budget)
    return m->tp_barrier(resource_exhausted(
        "the model's weights (" + gib(r.weight_bytes) + " in " + cuda::dtype_name(m->dt) +
        ") plus " + gib(mem.used_bytes()) + " already in use exceed --gpu-memory-utilization " +
        std::to_string(options.gpu_memory_utilization) + " of " + gib(mem.total_bytes) + " on " +
        m->info.name));
  FOLIO_RETURN_IF_ERROR(load_and_reserve(*m, checkpoint, max_len));
  FOLIO_RETURN_IF_ERROR(allocate_kv(*m, max_len));
  if (m->shard.rank == 0)  // one line per group: the ranks' plans agree
    log_info("cuda: " + m->info.name + ", " + cuda::dtype_name(m->dt) + " weights " +
             gib(r.weight_bytes) + ", peak after profiling " + gib(r.peak_bytes) + " of " +
             gib(r.total_bytes) + "; KV cache " + std::to_string(r.num_blocks) + " blocks x " +
             std::to_string(options.block_size) + " = " +
             std::to_string(static_cast<int64_t>(r.num_blocks) * options.block_size) + " tokens, " +
             (m->kv_fp8() ? "fp8_e4m3" : cuda::dtype_name(m->dt)) + " (" +
             gib(static_cast<double>(r.num_blocks) * r.kv_block_bytes) + "), " +
             std::to_string(r.max_len_seqs) + " sequences of " + std::to_string(max_len) +
             " tokens; swap " + std::to_string(m->kv.num_swap_blocks) + " blocks" +
             (m->shard.world > 1 ? "; per rank of tensor-parallel " + std::to_string(m->shard.world)
                                 : std::string()));
  FOLIO_RETURN_IF_ERROR(m->warm_up_graphs());
  return std::unique_ptr<CudaLlamaExecutor>(new CudaLlamaExecutor(std::move(m)));
}

}  // namespace folio
