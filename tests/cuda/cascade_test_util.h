// Device copies of a CascadePlan for the cascade kernel's tests and benchmarks.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "attention_test_util.h"
#include "backend/cascade_plan.h"
#include "backend/cuda/cascade_attention.h"
#include "backend/cuda/device_memory.h"

namespace folio::cuda::testing {

// The plan's arrays uploaded one buffer each, the wgmma kernel's packs (cascade_wgmma_packs:
// as the engine forms them by default; max_pack_items > 0: at most that many items to a pack;
// -1: none, every item past the wide ones on the mma.sync kernel; one_row_only: only the one-row
// items packed), the counts the kernels read on the device, the partials' workspace, and the view
// the kernel takes, its grids exactly the plan's (an eager step's). The engine packs the same
// arrays into one upload (model/cuda_llama_cascade.cc).
struct CascadeDeviceCopy {
  DeviceBuffer items, rows, row_slot_start, row_slots, pack_start, workspace, counts;
  std::vector<int32_t> packs;  // the host copy of pack_start
  CascadeCounts host_counts;   // the host copy of counts
  CascadeDevicePlan view;
  CascadeDeviceCopy(const CascadePlan& plan, int num_heads, int num_kv_heads, int head_dim,
                    int max_pack_items = 0, bool one_row_only = false) {
    items = upload_raw(plan.items);
    rows = upload_raw(plan.rows);
    row_slot_start = upload_raw(plan.row_slot_start);
    row_slots = upload_raw(plan.row_slots);
    workspace = std::move(
        DeviceBuffer::allocate(cascade_workspace_bytes(plan.num_slots, num_heads, head_dim))
            .value());
    view.items = static_cast<const CascadeItem*>(items.data());
    if (max_pack_items >= 0) {
      packs = cascade_wgmma_packs(plan, num_heads, num_kv_heads, current_device_num_sms(),
                                  max_pack_items, one_row_only);
      pack_start = upload_raw(packs);
      view.pack_start = pack_start.as<int32_t>();
    }
    view.rows = rows.as<int32_t>();
    view.row_slot_start = row_slot_start.as<int32_t>();
    view.row_slots = row_slots.as<int32_t>();
    view.num_slots = plan.num_slots;
    host_counts = cascade_counts(plan, packs);
    counts = upload_raw(std::vector<CascadeCounts>{host_counts});
    view.counts = counts.as<CascadeCounts>();
    const CascadeGrids grids = cascade_exact_grids(host_counts);
    view.wgmma_blocks = grids.wgmma_blocks;
    view.mma_blocks = grids.mma_blocks;
  }
  // Items the wgmma kernel does not take (the mma.sync kernel's).
  int mma_items() const { return host_counts.mma_count; }
  // As a CUDA graph replays a plan: grids `extra_blocks` wider than the work (the wgmma
  // kernel's where it takes items; the mma.sync kernel's where mma_grid, also when it has no
  // items, as a graph whose plans once had some launches it) and a workspace laid out for
  // `extra_slots` more slots than the plan's, as the engine's capacities leave them.
  void make_bounded(int extra_blocks, int extra_slots, int num_heads, int head_dim, bool mma_grid) {
    if (view.wgmma_blocks > 0 || view.pack_start) view.wgmma_blocks += extra_blocks;
    view.mma_blocks = mma_grid ? host_counts.mma_count + extra_blocks : 0;
    view.num_slots += extra_slots;
    workspace = std::move(
        DeviceBuffer::allocate(cascade_workspace_bytes(view.num_slots, num_heads, head_dim))
            .value());
  }
  // Items to a pack, as "N" or "N-M" (the packs' sizes).
  std::string pack_sizes() const {
    int lo = 1 << 30, hi = 0;
    for (size_t b = 0; b + 1 < packs.size(); ++b) {
      lo = std::min(lo, packs[b + 1] - packs[b]);
      hi = std::max(hi, packs[b + 1] - packs[b]);
    }
    if (hi == 0) return "none";
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
  }
};

}  // namespace folio::cuda::testing
