// CudaLlamaExecutor: cascade decode attention for steps whose rows share prefix blocks.
//
// With prefix caching, requests that began with the same system prompt hold the same physical
// blocks for it, and the per-row decode kernel reads those blocks once per row. On an H200
// (session 45, AttentionBench.K1SharedPrefix) 1024 rows of 2048 shared + 256 own tokens took
// 1.6-2.0 ms per layer that way, where reading each block once would take 0.25-0.38 ms. Each
// decode step therefore asks the host planner (backend/cascade_plan.h) whether its rows share
// enough; if the plan saves at least `cascade_min_saving` of the reads and enough tokens
// (kMinSavedTokensInGraphs where a graph replays it, else kMinSavedTokensEager), the step runs
// cascade_attention in every layer, and qkv_post runs on its own (the fused tc path writes K/V
// inside the decode kernel).
//
// CUDA graphs: the plan's shape changes from step to step, so a graph cannot bake it in. A
// step whose rows fit a graph bucket replays the bucket's cascade graph (cuda_llama_graphs.cc;
// the kernels read the plan's counts on the device, cascade_attention.h): the plan's arrays at
// offsets fixed by capacities (upload_cascade_plan), each kernel over a grid as wide as the
// bucket's bound for it (bound_cascade_graph: the next power of two of the widest plan seen; a
// wider plan recaptures; a kernel with a bound of 0, as the mma.sync kernel where every item is on
// wgmma, is not launched), the merge over the bucket's rows (padding rows have no slots).
//
// The switches (parsed by model/cascade_switches.h, tested on the CPU):
// FOLIO_CASCADE_ATTENTION=0 turns it off; =1 (the default) on; FOLIO_CASCADE_MIN_SAVING=F sets
// the threshold (default 0.3, and 0.6 over an fp8 cache: cascade_default_min_saving; 0 takes
// every step whose rows share a segment, however little);
// FOLIO_CASCADE_WIDE=0 keeps every item off the wgmma kernel (cascade_attention_wg.cuh: the
// wide items of 64 query rows and the packs of the others), for A/B runs;
// FOLIO_CASCADE_PACKS=one-row packs only the one-row items there, leaving items of 2-8 rows to
// the mma.sync kernel as before session 49 (=all, the default: every narrow item packed; an fp8
// cache always packs all, and runs no cascade with FOLIO_CASCADE_WIDE=0);
// FOLIO_CASCADE_STAGES=2|3 (or 4 over an fp8 cache) sets CascadeTuning::wgmma_stages;
// FOLIO_CASCADE_GRAPHS=0 runs every cascade step eagerly (below), for A/B runs.
// Under tensor parallelism every rank plans the same step from the same batch (the plan reads
// only the block tables, which are the same on every rank) and runs it on its own heads (config
// is the rank's: num_heads / world, num_kv_heads / world), so the ranks take the same path and
// their collectives stay in step. That has not run on 2 GPUs yet (session 49 got none; the test
// is CudaCascade.TensorParallelMatchesTheCpuAsThePerRowKernelDoes), so under TP cascade is
// opt-in: FOLIO_CASCADE_ATTENTION=1 turns it on, unset leaves the per-row kernel. A 16-bit cache
// and head_dim 64/128, or an fp8 cache at head_dim 128 and pages of 8-64 tokens
// (cuda::cascade_supported). The kernels' figures are the measured ones (H200,
// session 47, wgmma for wide items and packed own suffixes, two stages): 3.5-4.4x the per-row
// kernel at 1024 rows, 3.6-4.3x at 256, 1.9x at 32 (a 2048-token prefix shared by 16 or all).
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cascade_plan.h"
#include "model/cascade_switches.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {
namespace {

size_t align16(size_t n) {
  return (n + 15) / 16 * 16;
}

// The fewest tokens a plan must save per layer (logical - read). A step that runs eagerly:
// 16k, under ~0.5 ms a step on an 8B model (16k tokens x 4 KiB x 32 layers at ~4 TB/s), about
// what giving up the step's CUDA graph costs. A step that replays a graph: 8k. H200, session 51,
// one 2048-token prefix shared by B rows, cascade in graphs against the per-row kernel: B 2
// (2k saved) -1.5%, B 4 (6k) level, B 8 (14k) +3.6% output tok/s (pages of 16: the wgmma
// kernel). Token mode (the mma.sync kernel), session 52: B 4 forced +0.3%, B 6 (10k) +4.1%, B 8
// +3.5%, so it takes the same threshold.
constexpr int64_t kMinSavedTokensEager = 16384;
constexpr int64_t kMinSavedTokensInGraphs = 8192;

}  // namespace

Status CudaLlamaExecutor::Impl::read_cascade_env() {
  FOLIO_ASSIGN_OR_RETURN(const CascadeSwitches sw,
                         read_cascade_switches(shard.world, kv.dtype, [](const char* name) {
                           return static_cast<const char*>(std::getenv(name));
                         }));
  cascade_requested = sw.requested;
  cascade_wide = sw.wide;
  cascade_pack_one_row_only = sw.pack_one_row_only;
  cascade_graphs = sw.graphs;
  if (sw.wgmma_stages) cascade_tuning.wgmma_stages = *sw.wgmma_stages;
  cascade_min_saving = sw.min_saving;
  return Status();
}

Status CudaLlamaExecutor::Impl::plan_cascade_step(const ForwardBatch& b) {
  if (cascade_mode < 0) {  // the first decode step: the geometry is known by now
    // An fp8 cache runs every item on the wgmma kernel: not with FOLIO_CASCADE_WIDE=0.
    cascade_mode = cascade_requested && cuda::cascade_supported(cascade_geometry()) &&
                   (!kv_fp8() || cascade_wide);
  }
  cascade_on = false;
  // The cascade kernels attend over whole prefixes: a binding window keeps the plain kernels.
  if (cascade_mode != 1 || b.num_seqs() < 2 || binding_window()) return Status();
  if (!rows_may_share(b.context_lens, b.block_table_start, b.block_table, kv.block_size))
    return Status();
  const CascadeOptions options = cascade_options();
  const CascadePlan plan =
      plan_cascade(b.context_lens, b.block_table_start, b.block_table, kv.block_size, options);
  if (plan.num_segments == 0) return Status();
  // A graph replays the step where a bucket holds its rows.
  const int bucket = graph_bucket(b.num_seqs());
  cascade_graphable = cascade_graphs && bucket > 0;
  // A threshold of 0 takes every plan with a shared segment (tests force cascade that way).
  const int64_t min_saved = cascade_graphable ? kMinSavedTokensInGraphs : kMinSavedTokensEager;
  const bool pays =
      cascade_min_saving == 0 ||
      (plan.saving() >= cascade_min_saving && plan.logical_tokens - plan.read_tokens >= min_saved);
  if (!pays) return Status();
  // The wgmma kernel's packs of the narrow items (none where it does not run: wide_min_rows 0).
  // (An fp8 cache packs them all: the mma.sync kernel does not read one.)
  std::vector<int32_t> packs;
  if (options.wide_min_rows > 0)
    packs = cuda::cascade_wgmma_packs(plan, config.num_heads, config.num_kv_heads, info.num_sms, 0,
                                      cascade_pack_one_row_only && !kv_fp8());
  // A graph step's padding rows have no slots (the bucket's graph merges B rows).
  FOLIO_RETURN_IF_ERROR(upload_cascade_plan(plan, packs, std::max(b.num_seqs(), bucket)));
  cascade_on = true;
  ++cascade_steps;
  return Status();
}

// Layout of cascade_dev, 16-byte aligned parts at offsets fixed by cascade_cap:
// [counts (cuda::CascadeCounts) | items | rows | row_slot_start | row_slots | pack_start].
Status CudaLlamaExecutor::Impl::upload_cascade_plan(const CascadePlan& plan,
                                                    const std::vector<int32_t>& packs,
                                                    int padded_seqs) {
  const CascadeCapacity need{static_cast<int>(plan.items.size()),
                             static_cast<int>(plan.rows.size()),
                             padded_seqs,
                             static_cast<int>(plan.row_slots.size()),
                             plan.num_slots,
                             static_cast<int>(packs.size())};
  CascadeCapacity& cap = cascade_cap;
  if (need.items > cap.items || need.rows > cap.rows || need.seqs > cap.seqs ||
      need.row_slots > cap.row_slots || need.slots > cap.slots || need.packs > cap.packs) {
    // Twice what this plan needs in every part, so a few growths cover a load's plans.
    cap = {std::max(cap.items, 2 * need.items),
           std::max(cap.rows, 2 * need.rows),
           std::max({cap.seqs, need.seqs, options.max_num_seqs}),
           std::max(cap.row_slots, 2 * need.row_slots),
           std::max(cap.slots, 2 * need.slots),
           std::max(cap.packs, 2 * need.packs + 1)};
    for (size_t g = 2; g < graphs.size(); g += kGraphsPerBucket) graphs[g] = cuda::CudaGraph();
    cascade_dev = cuda::DeviceBuffer();
    cascade_ws = cuda::DeviceBuffer();
  }
  const size_t counts_at = 0, items_at = 16;
  const size_t rows_at = items_at + align16(cap.items * sizeof(CascadeItem));
  const size_t start_at = rows_at + align16(cap.rows * sizeof(int32_t));
  const size_t slots_at = start_at + align16((cap.seqs + 1) * sizeof(int32_t));
  const size_t packs_at = slots_at + align16(cap.row_slots * sizeof(int32_t));
  const size_t total = packs_at + align16(cap.packs * sizeof(int32_t));
  cuda::PinnedHostBuffer& staged = cascade_host[staging];
  FOLIO_RETURN_IF_ERROR(ensure_pinned(staged, total));
  FOLIO_RETURN_IF_ERROR(ensure_device(cascade_dev, total));
  FOLIO_RETURN_IF_ERROR(ensure_device(
      cascade_ws, cuda::cascade_workspace_bytes(cap.slots, config.num_heads, config.head_dim)));
  auto* h = static_cast<std::byte*>(staged.data());
  cascade_step_counts = cuda::cascade_counts(plan, packs);
  static_assert(sizeof(cuda::CascadeCounts) <= 16);
  std::memcpy(h + counts_at, &cascade_step_counts, sizeof(cuda::CascadeCounts));
  std::memcpy(h + items_at, plan.items.data(), plan.items.size() * sizeof(CascadeItem));
  std::memcpy(h + rows_at, plan.rows.data(), plan.rows.size() * sizeof(int32_t));
  auto* start = reinterpret_cast<int32_t*>(h + start_at);
  std::memcpy(start, plan.row_slot_start.data(), plan.row_slot_start.size() * sizeof(int32_t));
  const size_t have = plan.row_slot_start.size();  // rows + 1
  std::fill(start + have, start + padded_seqs + 1, plan.row_slot_start.back());
  std::memcpy(h + slots_at, plan.row_slots.data(), plan.row_slots.size() * sizeof(int32_t));
  std::memcpy(h + packs_at, packs.data(), packs.size() * sizeof(int32_t));
  // The legacy stream orders this copy before the step's kernels (a graph's too); this staging
  // buffer's last user, two steps back, has finished (see Impl::staging).
  FOLIO_RETURN_IF_ERROR(cuda::copy_async(cascade_dev.data(), staged.data(), total, nullptr));
  auto* d = static_cast<std::byte*>(cascade_dev.data());
  cuda::CascadeDevicePlan& v = cascade_plan;
  v = cuda::CascadeDevicePlan();
  v.items = reinterpret_cast<const CascadeItem*>(d + items_at);
  v.pack_start = packs.empty() ? nullptr : reinterpret_cast<const int32_t*>(d + packs_at);
  v.rows = reinterpret_cast<const int32_t*>(d + rows_at);
  v.row_slot_start = reinterpret_cast<const int32_t*>(d + start_at);
  v.row_slots = reinterpret_cast<const int32_t*>(d + slots_at);
  v.num_slots = cap.slots;  // the workspace's layout (the partials' rows for up to cap.slots)
  v.counts = reinterpret_cast<const cuda::CascadeCounts*>(d + counts_at);
  // Grids for exactly this plan (an eager step); bound_cascade_graph widens them for a graph.
  const cuda::CascadeGrids grids = cuda::cascade_exact_grids(cascade_step_counts);
  v.wgmma_blocks = grids.wgmma_blocks;
  v.mma_blocks = grids.mma_blocks;
  return Status();
}

bool CudaLlamaExecutor::Impl::bound_cascade_graph(size_t k) {
  CascadeGraphBounds& g = cascade_graph_bounds[k];
  bool warm = std::exchange(g.warm, true);
  // A wider grid than the graph's recaptures it (blocks past a step's work exit at once); a
  // kernel the graph did not launch yet runs eagerly first.
  auto widen = [&](int need, int& bound) {
    if (need <= bound) return;
    warm = warm && bound > 0;
    bound = static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(need, 16))));
    graphs[kGraphsPerBucket * k + 2] = cuda::CudaGraph();
  };
  const cuda::CascadeCounts& c = cascade_step_counts;
  widen(c.num_wide + c.num_packs, g.wgmma_blocks);
  widen(c.mma_count, g.mma_blocks);
  cascade_plan.wgmma_blocks = g.wgmma_blocks;
  cascade_plan.mma_blocks = g.mma_blocks;
  return warm;
}

CascadeOptions CudaLlamaExecutor::Impl::cascade_options() const {
  CascadeOptions o;
  o.max_rows_per_item = cuda::cascade_max_rows_per_item(config.num_heads, config.num_kv_heads);
  o.min_items = cuda::cascade_min_items(config.num_kv_heads, info.num_sms);
  if (cascade_wide) o.wide_min_rows = cuda::cascade_wide_min_rows(cascade_geometry());
  return o;
}

cuda::PagedAttentionParams CudaLlamaExecutor::Impl::cascade_geometry() const {
  cuda::PagedAttentionParams geometry;
  geometry.dtype = dt;
  geometry.kv_dtype = kv.dtype;
  geometry.num_heads = config.num_heads;
  geometry.num_kv_heads = config.num_kv_heads;
  geometry.head_dim = config.head_dim;
  geometry.block_size = kv.block_size;
  return geometry;
}

int CudaLlamaExecutor::cascade_steps() const {
  return impl_->cascade_steps;
}

int CudaLlamaExecutor::cascade_graph_steps() const {
  return impl_->cascade_graph_steps;
}

}  // namespace folio
