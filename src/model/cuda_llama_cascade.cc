// CudaLlamaExecutor: cascade decode attention for steps whose rows share prefix blocks.
//
// With prefix caching, requests that began with the same system prompt hold the same physical
// blocks for it, and the per-row decode kernel reads those blocks once per row. On an H200
// (session 45, AttentionBench.K1SharedPrefix) 1024 rows of 2048 shared + 256 own tokens took
// 1.6-2.0 ms per layer that way, where reading each block once would take 0.25-0.38 ms. Each
// decode step therefore asks the host planner (backend/cascade_plan.h) whether its rows share
// enough; if the plan saves at least `cascade_min_saving` of the reads and kMinSavedTokens
// tokens, the step runs eagerly (no CUDA graph: the plan's shape changes from step to step) with
// cascade_attention in every layer, and qkv_post runs on its own (the fused tc path writes K/V
// inside the decode kernel).
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
// FOLIO_CASCADE_STAGES=2|3 (or 4 over an fp8 cache) sets CascadeTuning::wgmma_stages.
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
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cascade_plan.h"
#include "model/cascade_switches.h"
#include "model/cuda_llama_executor_impl.h"

namespace folio {
namespace {

size_t align16(size_t n) {
  return (n + 15) / 16 * 16;
}

// Fewer saved tokens than this per layer would save under ~0.5 ms a step on an 8B model (16k
// tokens x 4 KiB x 32 layers at ~4 TB/s), about what giving up the step's CUDA graph may cost.
constexpr int64_t kMinSavedTokens = 16384;

}  // namespace

Status CudaLlamaExecutor::Impl::read_cascade_env() {
  FOLIO_ASSIGN_OR_RETURN(const CascadeSwitches sw,
                         read_cascade_switches(shard.world, kv.dtype, [](const char* name) {
                           return static_cast<const char*>(std::getenv(name));
                         }));
  cascade_requested = sw.requested;
  cascade_wide = sw.wide;
  cascade_pack_one_row_only = sw.pack_one_row_only;
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
  if (cascade_mode != 1 || b.num_seqs() < 2) return Status();
  if (!rows_may_share(b.context_lens, b.block_table_start, b.block_table, kv.block_size))
    return Status();
  const CascadeOptions options = cascade_options();
  const CascadePlan plan =
      plan_cascade(b.context_lens, b.block_table_start, b.block_table, kv.block_size, options);
  // A threshold of 0 takes every plan with a shared segment (tests force cascade that way).
  const bool pays =
      cascade_min_saving == 0 || (plan.saving() >= cascade_min_saving &&
                                  plan.logical_tokens - plan.read_tokens >= kMinSavedTokens);
  if (plan.num_segments == 0 || !pays) return Status();

  // The wgmma kernel's packs of the narrow items (none where it does not run: wide_min_rows 0).
  // (An fp8 cache packs them all: the mma.sync kernel does not read one.)
  std::vector<int32_t> packs;
  if (options.wide_min_rows > 0)
    packs = cuda::cascade_wgmma_packs(plan, config.num_heads, config.num_kv_heads, info.num_sms, 0,
                                      cascade_pack_one_row_only && !kv_fp8());
  // One upload: [items | rows | row_slot_start | row_slots | pack_start], each 16-byte aligned.
  const size_t items_b = align16(plan.items.size() * sizeof(CascadeItem));
  const size_t rows_b = align16(plan.rows.size() * sizeof(int32_t));
  const size_t start_b = align16(plan.row_slot_start.size() * sizeof(int32_t));
  const size_t slots_b = align16(plan.row_slots.size() * sizeof(int32_t));
  const size_t packs_b = packs.size() * sizeof(int32_t);
  const size_t total = items_b + rows_b + start_b + slots_b + packs_b;
  cuda::PinnedHostBuffer& staged = cascade_host[staging];
  FOLIO_RETURN_IF_ERROR(ensure_pinned(staged, total));
  FOLIO_RETURN_IF_ERROR(ensure_device(cascade_dev, staged.bytes()));
  FOLIO_RETURN_IF_ERROR(ensure_device(
      cascade_ws,
      cuda::cascade_workspace_bytes(plan.num_slots, config.num_heads, config.head_dim)));
  auto* h = static_cast<std::byte*>(staged.data());
  std::memcpy(h, plan.items.data(), plan.items.size() * sizeof(CascadeItem));
  std::memcpy(h + items_b, plan.rows.data(), plan.rows.size() * sizeof(int32_t));
  std::memcpy(h + items_b + rows_b, plan.row_slot_start.data(),
              plan.row_slot_start.size() * sizeof(int32_t));
  std::memcpy(h + items_b + rows_b + start_b, plan.row_slots.data(),
              plan.row_slots.size() * sizeof(int32_t));
  std::memcpy(h + items_b + rows_b + start_b + slots_b, packs.data(), packs_b);
  // The legacy stream orders this copy before the step's kernels; this staging buffer's last
  // user, two steps back, has finished (see Impl::staging).
  FOLIO_RETURN_IF_ERROR(cuda::copy_async(cascade_dev.data(), staged.data(), total, nullptr));
  auto* d = static_cast<std::byte*>(cascade_dev.data());
  cascade_plan.items = reinterpret_cast<const CascadeItem*>(d);
  cascade_plan.num_items = static_cast<int>(plan.items.size());
  cascade_plan.num_wide_items = plan.num_wide_items;
  cascade_plan.pack_begin = packs.empty() ? cascade_plan.num_items : packs.front();
  cascade_plan.pack_start =
      reinterpret_cast<const int32_t*>(d + items_b + rows_b + start_b + slots_b);
  cascade_plan.num_packs = packs.empty() ? 0 : static_cast<int>(packs.size()) - 1;
  cascade_plan.rows = reinterpret_cast<const int32_t*>(d + items_b);
  cascade_plan.row_slot_start = reinterpret_cast<const int32_t*>(d + items_b + rows_b);
  cascade_plan.row_slots = reinterpret_cast<const int32_t*>(d + items_b + rows_b + start_b);
  cascade_plan.num_slots = plan.num_slots;
  cascade_on = true;
  ++cascade_steps;
  return Status();
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

}  // namespace folio
