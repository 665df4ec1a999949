// The second half of a decoder layer at batch 1, in one persistent launch:
//
//   x += o_proj(attn);  act = silu(gate(rms_norm(x))) * up(rms_norm(x));  x += down(act)
//
// bit for bit what the separate launches compute (skinny_gemm accumulate, rms_norm,
// skinny_gemm_silu, skinny_gemm accumulate: the same per-row summation order and rounding points).
//
// Why one launch: at batch 1 each of these products is a stream over its weights, and what the
// step loses is at their boundaries. A kernel boundary costs about 2.7 us on the H100 (the
// predecessor's tail, its completion, the next grid's start), three or four per layer (NOTES.md,
// "B3, session 10"). Here one block per SM streams its share of all three matrices, each warp
// through its own ring of shared memory (cp.async). The weights depend on nothing, so the rings
// run ahead across the phase boundaries: while the warps wait for every block's part of x (a
// grid-wide counter, not a kernel boundary), they fill with the next matrix's rows.
//
// Measured on the H100 it is slower than the launches it replaces (one layer 144 against 138 us,
// B3 6.0 against 5.7 ms; NOTES.md, "B3, session 11"): the executor uses it only when
// FOLIO_DECODE_MLP=1.
//
// Contract: the grid is one block per SM and all blocks must be resident at once (the counters
// are a grid barrier); decode_mlp sizes it so and the step's other kernels never hold an SM
// against it (they are earlier on the stream, or later and started only once every block of
// this one is running). `sync` is kDecodeMlpSyncWords zeroed words, private to one launch at a
// time (one set per layer), left zeroed by the launch.
#pragma once

#include <cstddef>

#include "backend/cuda/device_memory.h"
#include "backend/cuda/dtype.h"
#include "base/status.h"

namespace folio::cuda {

struct DecodeMlpParams {
  DType dtype = DType::kBF16;
  int hidden = 0;        // H: x's width, o_proj's and down's rows
  int inter = 0;         // I: the MLP's width (gate and up rows each, down's depth)
  int attn_width = 0;    // o_proj's depth (num_heads * head_dim)
  const void* attn = nullptr;       // [attn_width]
  const void* w_o = nullptr;        // [H, attn_width]
  const void* post_norm = nullptr;  // [H]
  float eps = 0.f;
  const void* w_gate_up = nullptr;  // [2 I, H]: gate rows, then up rows
  const void* w_down = nullptr;     // [H, I]
  void* x = nullptr;                // [H], the residual stream: read, and updated twice in place
  void* act = nullptr;              // [I], scratch: silu(gate) * up
  unsigned* sync = nullptr;         // kDecodeMlpSyncWords words, zero
};

inline constexpr int kDecodeMlpSyncWords = 4;

// True when decode_mlp takes these shapes: H, I and attn_width multiples of 8;
// H in the fused norm's range (rms_norm's block kernel: 512 < H <= 8192); every pointer 16-byte
// aligned; the widest input vector fits beside the ring in shared memory.
bool decode_mlp_supported(const DecodeMlpParams& p);

// One launch on the current device, described by `device` (device_info: its SM count sizes the
// grid; programmatic dependent launch: the rings start filling before the wait for the kernel
// that writes attn). An error, and nothing launched, for shapes decode_mlp_supported rejects, a
// null pointer, or a device whose shared memory cannot hold the ring.
Status decode_mlp(const DecodeMlpParams& p, const DeviceInfo& device, void* stream);

}  // namespace folio::cuda
