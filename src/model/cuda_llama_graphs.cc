// CUDA graphs for decode steps. A decode step launches about 12 kernels per layer (~390 for a
// 32-layer model); replaying them as one graph removes the per-launch host cost and the gaps
// it leaves on the GPU. A step of S sequences runs as the graph of the smallest bucket B >= S:
// the batch is padded with sequences of context 0 whose token writes no KV (slot -1) and whose
// rows nobody reads. The graph covers the embedding and the layers; the lm_head, sampling and
// copies stay eager (their row count varies).
//
// What a graph bakes in, and why it stays valid: kernel arguments are pointers and sizes. Sizes
// depend only on B; pointers are the weights, the KV cache, the activations (sized once at
// creation; if they ever grow, every graph is dropped), graph_in (the step arrays, at offsets
// fixed per B, with the attention's partition size for the step under DecodePlan::step_split:
// such a bucket has a second graph, of the plan without it, for steps that do not split; a
// third replays cascade steps, their kernels' grids bounded per bucket: cuda_llama_cascade.cc)
// and graph_workspace (sized for the bounded attention plan of every bucket). The
// attention plan is bounded by max_model_len, so it does not depend on the step's lengths
// (decode_attention.h), and the GEMM plans for m = B exist from the bucket's first, eager step.
// By default every bucket's graphs but the cascade one are captured when the executor is created
// (warm_up_graphs), so no step of a run pays a capture or runs eagerly for want of one.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "backend/cuda/memory_info.h"
#include "base/log.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {
namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

// Offsets of the step arrays of a graph step of B sequences in graph_in (and graph_host), whose
// block tables hold up to max_model_len tokens per sequence (table_capacity entries in all).
struct GraphLayout {
  size_t token_ids, positions, slot_mapping, query_start, context_lens, block_table_start,
      logits_rows, step_partition, block_table, total;
  int64_t table_capacity;
  GraphLayout(int B, int max_model_len, int block_size)
      : table_capacity((max_model_len + block_size - 1) / block_size * int64_t{B}) {
    size_t o = 0;
    auto take = [&](size_t bytes) {
      const size_t at = o;
      o += align16(bytes);
      return at;
    };
    token_ids = take(4 * B);
    positions = take(4 * B);
    slot_mapping = take(8 * B);
    query_start = take(4 * (B + 1));
    context_lens = take(4 * B);
    block_table_start = take(4 * (B + 1));
    logits_rows = take(4 * B);
    step_partition = take(4);
    block_table = take(4 * table_capacity);
    total = o;
  }
  // The arrays as kernels read them, in graph_in (`base`).
  StepArrays arrays(const void* base) const {
    const auto* b = static_cast<const std::byte*>(base);
    auto i32 = [&](size_t off) { return reinterpret_cast<const int32_t*>(b + off); };
    StepArrays d;
    d.token_ids = i32(token_ids);
    d.positions = i32(positions);
    d.slot_mapping = reinterpret_cast<const int64_t*>(b + slot_mapping);
    d.query_start = i32(query_start);
    d.context_lens = i32(context_lens);
    d.block_table_start = i32(block_table_start);
    d.block_table = i32(block_table);
    d.logits_rows = i32(logits_rows);
    d.step_partition = i32(step_partition);
    return d;
  }
};

// 1, 2, 4, 8, then every 8 to 64, every 16 to 256, every 32 to 512, every 64 beyond.
std::vector<int> buckets_up_to(int max_batch) {
  std::vector<int> out;
  for (int b = 1; b <= max_batch;) {
    out.push_back(b);
    b = b < 8 ? 2 * b : b < 64 ? b + 8 : b < 256 ? b + 16 : b < 512 ? b + 32 : b + 64;
  }
  if (out.empty() || out.back() != max_batch) out.push_back(max_batch);
  return out;
}

}  // namespace

int CudaLlamaExecutor::graph_steps() const { return impl_->graph_steps; }
int CudaLlamaExecutor::eager_decode_steps() const {
  return impl_->eager_decode_steps;
}
int CudaLlamaExecutor::graph_captures() const {
  return impl_->graph_captures;
}

Status CudaLlamaExecutor::Impl::init_graphs() {
  graphs_enabled = options.cuda_graphs;
  if (!graphs_enabled) return Status();
  const int max_batch = std::min(options.max_num_seqs, act_tokens);
  graph_buckets = buckets_up_to(max_batch);
  graphs.clear();
  graphs.resize(kGraphsPerBucket * graph_buckets.size());
  graph_warm.assign(graph_buckets.size(), 0);
  cascade_graph_bounds.assign(graph_buckets.size(), {});
  const GraphLayout largest(graph_buckets.back(), max_model_len, options.block_size);
  FOLIO_RETURN_IF_ERROR(ensure_device(graph_in, largest.total));
  for (auto& staged : graph_host) {
    FOLIO_ASSIGN_OR_RETURN(staged, cuda::PinnedHostBuffer::allocate(largest.total));
  }
  size_t workspace = 16;
  for (int B : graph_buckets) {
    FOLIO_ASSIGN_OR_RETURN(auto plan, plan_decode_bounded(B));
    workspace = std::max(workspace, plan.workspace_bytes);
  }
  return ensure_device(graph_workspace, workspace);
}

Status CudaLlamaExecutor::Impl::warm_up_graphs() {
  // Under tensor parallelism the buckets are still captured on their second steps: the ranks
  // are created on their own threads (cuda_tp_executor.cc), so the same dummy steps could run
  // their collectives there, but that has not been run on several GPUs yet.
  if (!graphs_enabled || !options.capture_graphs_at_startup || shard.world > 1) return Status();
  const auto t0 = std::chrono::steady_clock::now();
  FOLIO_ASSIGN_OR_RETURN(const cuda::MemoryInfo mem0, cuda::memory_info());
  // A step of B decode rows at position 0 that writes no KV (slot -1), row s reading slot 0 of
  // its own block s (nothing is cached yet: whatever it holds, the outputs are discarded; no two
  // rows share a block, so no step plans cascade attention) and asking for its logits (the
  // lm_head's plan for m = B too). The first call runs eagerly (creating the GEMM plans), the
  // second captures the graph and replays it, as a bucket's first two steps do.
  const int64_t num_blocks = cache.num_slots / kv.block_size;
  if (num_blocks < 1) return Status();  // no cache to point the rows at: captured lazily
  auto step = [num_blocks](int B) {
    ForwardBatch b;
    b.token_ids.assign(B, 0);
    b.positions.assign(B, 0);
    b.slot_mapping.assign(B, -1);
    b.context_lens.assign(B, 1);
    b.query_start.push_back(0);
    b.block_table_start.push_back(0);
    for (int s = 0; s < B; ++s) {
      b.block_table.push_back(static_cast<int32_t>(s % num_blocks));
      b.query_start.push_back(s + 1);
      b.block_table_start.push_back(s + 1);
      b.logits_rows.push_back(s);
    }
    return b;
  };
  std::unique_ptr<cuda::StageTimer> stage_timer = std::move(timer);  // not a step of the run
  Status st;
  for (size_t k = 0; k < graph_buckets.size() && st.ok(); ++k) {
    const int B = graph_buckets[k];
    const ForwardBatch b = step(B);
    for (int pass = 0; pass < 2 && st.ok(); ++pass) st = forward(b, cache, LogitsRequest{});
    // A bucket whose plan splits by the step's lengths (DecodePlan::step_split) has a second graph
    // for the steps that split; the dummy rows do not, so it is captured here directly (nothing
    // runs during a capture: graph_in's contents do not matter).
    auto plan = plan_decode_bounded(B);
    if (!plan.ok()) st = plan.status();
    if (st.ok() && plan->step_split && !graphs[kGraphsPerBucket * k + 1].valid())
      st = capture_decode_graph(
          kGraphsPerBucket * k + 1, B,
          GraphLayout(B, max_model_len, options.block_size).arrays(graph_in.data()), *plan);
  }
  timer = std::move(stage_timer);
  FOLIO_RETURN_IF_ERROR(st);
  FOLIO_RETURN_IF_ERROR(cuda::synchronize());
  const int captured = graph_captures;
  graph_steps = eager_decode_steps = cascade_steps = cascade_graph_steps = graph_captures = 0;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  // What the graphs (and the GEMM plans the dummy steps created) took from the device, as vLLM
  // reports its capture's: it comes out of --gpu-memory-utilization's headroom.
  FOLIO_ASSIGN_OR_RETURN(const cuda::MemoryInfo mem1, cuda::memory_info());
  const double mib =
      (static_cast<double>(mem0.free_bytes) - static_cast<double>(mem1.free_bytes)) / (1 << 20);
  log_info("cuda: " + std::to_string(captured) + " decode graphs captured for " +
           std::to_string(graph_buckets.size()) + " batch sizes (1.." +
           std::to_string(graph_buckets.back()) + ") in " + std::to_string(ms) + " ms, " +
           std::to_string(static_cast<int64_t>(mib)) + " MiB");
  return Status();
}

void CudaLlamaExecutor::Impl::drop_graphs() {
  for (auto& g : graphs) g = cuda::CudaGraph();
  std::fill(graph_warm.begin(), graph_warm.end(), 0);
}

int CudaLlamaExecutor::Impl::graph_bucket(int num_seqs) const {
  if (!graphs_enabled || graph_buckets.empty() || num_seqs > graph_buckets.back()) return 0;
  return *std::lower_bound(graph_buckets.begin(), graph_buckets.end(), num_seqs);
}

Status CudaLlamaExecutor::Impl::capture_decode_graph(size_t g_index, int B, const StepArrays& d,
                                                     const cuda::DecodePlan& plan) {
  const StepShape shape{B, B};
  auto g = cuda::CudaGraph::capture([&](void* s) {
    stream = s;
    Status st = run_layers(shape, d, cache, &plan, nullptr, graph_workspace.data());
    stream = nullptr;
    return st;
  });
  if (!g.ok())
    return Status(g.status().code(), "capturing the decode graph of batch " + std::to_string(B) +
                                         ": " + g.status().message());
  graphs[g_index] = std::move(*g);
  ++graph_captures;
  return Status();
}

Status CudaLlamaExecutor::Impl::forward_graph(const ForwardBatch& b, const LogitsRequest& req,
                                              int B) {
  const int S = b.num_seqs();
  const GraphLayout L(B, max_model_len, options.block_size);
  if (static_cast<int64_t>(b.block_table.size()) > L.table_capacity)
    return internal_error("decode step: block tables longer than max_model_len allows");
  // Pad to B sequences of one token: token 0, position 0, no KV write, context 0, no blocks.
  auto* h = static_cast<std::byte*>(graph_host[staging].data());
  auto put = [&](size_t off, const auto& v, size_t n_pad, auto pad) {
    using T = std::decay_t<decltype(pad)>;
    auto* dst = reinterpret_cast<T*>(h + off);
    std::memcpy(dst, v.data(), v.size() * sizeof(T));
    std::fill(dst + v.size(), dst + v.size() + n_pad, pad);
  };
  put(L.token_ids, b.token_ids, B - S, int32_t{0});
  put(L.positions, b.positions, B - S, int32_t{0});
  put(L.slot_mapping, b.slot_mapping, B - S, int64_t{-1});
  auto* qs = reinterpret_cast<int32_t*>(h + L.query_start);
  for (int i = 0; i <= B; ++i) qs[i] = i;
  put(L.context_lens, b.context_lens, B - S, int32_t{0});
  put(L.block_table_start, b.block_table_start, B - S, b.block_table_start.back());
  put(L.logits_rows, b.logits_rows, 0, int32_t{0});
  put(L.block_table, b.block_table, 0, int32_t{0});
  // The attention's split for this step's lengths where the bucket's plan leaves it to the step
  // (DecodePlan::step_split; the sequences of the padding are not counted). A step that does not
  // split runs the bucket's other graph, captured from the plan without the split, so it pays
  // neither the merge launch nor the second partitions' idle blocks.
  // (A cascade step runs cascade_attention instead: its plan is in cascade_dev.)
  FOLIO_ASSIGN_OR_RETURN(auto plan, plan_decode_bounded(B));
  std::vector<int32_t> scratch;
  const int32_t step_partition =
      cascade_on ? 0
                 : cuda::decode_step_partition(plan, attended_lens(b.context_lens, scratch),
                                               info.num_sms, decode_cache_format());
  if (step_partition == 0) plan = cuda::without_step_split(plan);
  std::memcpy(h + L.step_partition, &step_partition, 4);
  const size_t bytes = L.block_table + b.block_table.size() * 4;
  FOLIO_RETURN_IF_ERROR(
      cuda::copy_async(graph_in.data(), graph_host[staging].data(), bytes, nullptr));
  FOLIO_RETURN_IF_ERROR(resolve_placeholders(
      b, reinterpret_cast<int32_t*>(static_cast<std::byte*>(graph_in.data()) + L.token_ids)));
  const StepArrays d = L.arrays(graph_in.data());
  const size_t k = static_cast<size_t>(
      std::lower_bound(graph_buckets.begin(), graph_buckets.end(), B) - graph_buckets.begin());
  const size_t g_index = kGraphsPerBucket * k + (cascade_on ? 2 : plan.step_split ? 1 : 0);
  // A cascade step: the bucket's bounds as its grids; the bucket's first runs eagerly (the kernels'
  // first launches, outside a capture).
  const bool cascade_warm = !cascade_on || bound_cascade_graph(k);
  const StepShape shape{B, B};
  if (timer) timer->begin_step(nullptr);
  if (!graph_warm[k] || !cascade_warm) {
    // First step of this bucket: eager (creates the GEMM plans for m = B).
    FOLIO_RETURN_IF_ERROR(run_layers(shape, d, cache, &plan, nullptr, graph_workspace.data()));
    graph_warm[k] = 1;
    ++eager_decode_steps;
  } else {
    if (!graphs[g_index].valid()) FOLIO_RETURN_IF_ERROR(capture_decode_graph(g_index, B, d, plan));
    FOLIO_RETURN_IF_ERROR(graphs[g_index].launch(nullptr));
    mark(cascade_on ? "cascade_graph" : "decode_graph");
    ++graph_steps;
    if (cascade_on) ++cascade_graph_steps;
  }
  return shard.world > 1 ? compute_logits_tp(b, d, req) : compute_logits(b, d, req);
}

}  // namespace folio
