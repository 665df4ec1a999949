// Device copies of a CascadePlan for the cascade kernel's tests and benchmarks.
#pragma once

#include <utility>

#include "attention_test_util.h"
#include "backend/cascade_plan.h"
#include "backend/cuda/cascade_attention.h"
#include "backend/cuda/device_memory.h"

namespace folio::cuda::testing {

// The plan's arrays uploaded one buffer each, the partials' workspace, and the view the kernel
// takes. The engine packs the same arrays into one upload (model/cuda_llama_cascade.cc).
struct CascadeDeviceCopy {
  DeviceBuffer items, rows, row_slot_start, row_slots, workspace;
  CascadeDevicePlan view;
  CascadeDeviceCopy(const CascadePlan& plan, int num_heads, int num_kv_heads, int head_dim) {
    items = upload_raw(plan.items);
    rows = upload_raw(plan.rows);
    row_slot_start = upload_raw(plan.row_slot_start);
    row_slots = upload_raw(plan.row_slots);
    workspace = std::move(
        DeviceBuffer::allocate(cascade_workspace_bytes(plan.num_slots, num_heads, head_dim))
            .value());
    view.items = static_cast<const CascadeItem*>(items.data());
    view.num_items = static_cast<int>(plan.items.size());
    view.num_wide_items = plan.num_wide_items;
    view.num_single_row_items = plan.num_single_row_items;
    view.single_row_pack =
        cascade_single_row_pack(plan, num_heads, num_kv_heads, current_device_num_sms());
    view.rows = rows.as<int32_t>();
    view.row_slot_start = row_slot_start.as<int32_t>();
    view.row_slots = row_slots.as<int32_t>();
    view.num_slots = plan.num_slots;
  }
};

}  // namespace folio::cuda::testing
