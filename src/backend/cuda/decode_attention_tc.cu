// Decode kernel "tc" (decode_attention_tc.cuh) over a 16-bit or an fp8 e4m3 cache, head_dim 128;
// a split sequence's partitions merge in decode v2's merge kernel (same workspace layout).
#include <cstdlib>
#include <optional>
#include <string>

#include "backend/cuda/decode_attention_tc.cuh"
#include "backend/cuda/decode_tc_l2_ahead.h"
#include "backend/cuda/decode_tc_ring.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/smem_opt_in.h"

namespace folio::cuda::detail {
namespace {

// An integer environment variable; nullopt when unset (callers keep it in a static: read once).
std::optional<int> env_int(const char* name) {
  const char* e = std::getenv(name);
  if (e == nullptr) return std::nullopt;
  return std::atoi(e);
}

// FOLIO_TC_RING (0, 2, 3 or 4) when set, else -1. Read once. (0: the register form, the default
// before session 31 for a 16-bit cache.)
int ring_from_env() {
  static const int stages = [] {
    const int v = env_int("FOLIO_TC_RING").value_or(-1);
    return v == 0 || (v >= 2 && v <= 4) ? v : -1;
  }();
  return stages;
}

// The residency decode_tc_ring.h's policy (and the planner's wave arithmetic) assumes.
static_assert(tc::blocks_per_sm<__nv_bfloat16, __nv_bfloat16, 0, kTcFillCpAsync>() ==
              kTcRegisterBlocksPerSm);
static_assert(
    tc::blocks_per_sm<__nv_bfloat16, __nv_bfloat16, kTcFragRingStages, kTcFillBulkFrags>() ==
    kTcFragRingBlocksPerSm);
static_assert(
    tc::blocks_per_sm<__nv_bfloat16, __nv_bfloat16, kTcFragWaveRingStages, kTcFillBulkFrags>() ==
    kTcFragWaveRingBlocksPerSm);

// A launch's form: DecodePlan::tc_ring_stages and tc_ring_bulk resolved, each the plan's, else
// the environment's (FOLIO_TC_RING: 0, 2, 3 or 4; FOLIO_TC_RING_BULK: 0, 1 or 2; read once), else
// decode_tc_ring.h's default for this cache (pages of `block_size` tokens), plan (`partitions` per
// sequence at most), grid (`grid_blocks`) and GPU (DRAM peak `peak_gbps`, its SMs; under
// FOLIO_TC_FRAG_GRID=0 the policy is given 0 SMs, as if unknown).
struct TcForm {
  int stages, fill;
};
TcForm resolve_form(const DecodePlan& plan, int partitions, bool fp8, int block_size,
                    double peak_gbps, int64_t grid_blocks) {
  static const int fill_env = [] {
    const int v = env_int("FOLIO_TC_RING_BULK").value_or(-1);
    return v >= 0 && v <= 2 ? v : -1;
  }();
  TcForm f{plan.tc_ring_stages, plan.tc_ring_bulk};
  if (f.stages < 0) f.stages = ring_from_env();
  if (f.fill < 0) f.fill = fill_env;
  if (f.stages < 0 || f.fill < 0) {
    const int num_sms = tc_frag_grid_enabled() ? current_device_num_sms() : 0;
    if (f.stages < 0)
      f.stages = tc_ring_default(fp8, partitions, block_size, peak_gbps, grid_blocks, num_sms);
    if (f.fill < 0)
      f.fill = tc_ring_fill_default(fp8, partitions, block_size, peak_gbps, grid_blocks, num_sms);
  }
  return f;
}

// V2Args::l2_ahead and l2_lines: decode_tc_l2_ahead.h's default for this grid and this GPU (DRAM
// peak `peak_gbps`; measured on the H100 and the H200), unless FOLIO_TC_L2_AHEAD=k (2..6 on every
// launch, 0 never) or FOLIO_TC_L2_LINES (1 the line form, 0 the bulk form) say otherwise (read
// once).
TcL2Prefetch l2_prefetch_for(int64_t grid_blocks, double peak_gbps) {
  static const std::optional<int> steps_env = [] {  // set but outside 2..6: never
    const std::optional<int> v = env_int("FOLIO_TC_L2_AHEAD");
    return v && (*v < 2 || *v > 6) ? std::optional<int>(0) : v;
  }();
  static const std::optional<int> lines_env = env_int("FOLIO_TC_L2_LINES");
  TcL2Prefetch p = tc_l2_prefetch_default(grid_blocks, peak_gbps);
  if (steps_env) p.steps = *steps_env;
  if (lines_env == 0 || lines_env == 1) p.lines = lines_env == 1;
  return p;
}

template <typename T, typename C, int kRing, int kFill = kTcFillCpAsync>
Status launch_form(const V2Args<T>& a, const dim3& grid, void* stream) {
  const auto kernel = decode_tc_kernel<T, C, kRing, kFill>;
  constexpr int smem = kRing == 0 ? 0 : tc::ring_smem_bytes<T, C, kRing, kFill>();
  // The kernel's static shared memory (the fused prologue's rope table) counts against the
  // default 48 KiB too: opt in from a little below it.
  if constexpr (smem > 47 * 1024)
    FOLIO_RETURN_IF_ERROR(opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), smem));
  return launch_pdl(kernel, grid, dim3(kThreads), smem, stream, "decode_tc_kernel", a);
}

template <typename T, typename C>
Status launch_tc(const V2Args<T>& a, int num_seqs, int stages, int fill, void* stream) {
  const dim3 grid(a.num_kv_heads * a.num_chunks, num_seqs, a.max_partitions);
  // Fragments by ldmatrix take a 16-bit cache; an fp8 cache reads its bulk rows as pieces.
  constexpr int kFrags = sizeof(C) == 2 ? kTcFillBulkFrags : kTcFillBulkRows;
  switch (stages == 0 ? 0 : 10 * fill + stages) {
    case 2: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 2>(a, grid, stream))); break;
    case 3: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 3>(a, grid, stream))); break;
    case 4: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 4>(a, grid, stream))); break;
    case 12: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 2, kTcFillBulkRows>(a, grid, stream))); break;
    case 13: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 3, kTcFillBulkRows>(a, grid, stream))); break;
    case 14: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 4, kTcFillBulkRows>(a, grid, stream))); break;
    case 22: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 2, kFrags>(a, grid, stream))); break;
    case 23: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 3, kFrags>(a, grid, stream))); break;
    case 24: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 4, kFrags>(a, grid, stream))); break;
    default: FOLIO_RETURN_IF_ERROR((launch_form<T, C, 0>(a, grid, stream)));
  }
  if (a.max_partitions > 1) {
    FOLIO_RETURN_IF_ERROR(launch_pdl(decode_v2_merge_kernel<T>, dim3(a.num_heads, num_seqs),
                                     dim3(tc::kD), 0, stream, "decode_v2_merge_kernel", a));
  }
  return Status();
}

}  // namespace

bool tc_registers_forced() {
  return ring_from_env() == 0;
}

bool tc_frag_grid_enabled() {
  static const bool on = env_int("FOLIO_TC_FRAG_GRID").value_or(1) != 0;
  return on;
}

bool set_tc_trace(unsigned long long* words) {
#ifdef FOLIO_KERNEL_TRACE
  static_assert(ktrace::kWords == kTcTraceWords);
  return cudaMemcpyToSymbol(ktrace::g_trace, &words, sizeof(words)) == cudaSuccess;
#else
  (void)words;
  return false;
#endif
}

Status launch_decode_tc(const PagedAttentionParams& p, const DecodePlan& plan,
                        const DecodeWorkspace& ws, void* stream) {
  if (p.head_dim != tc::kD)
    return unimplemented("decode_attention: kernel tc takes head_dim 128, not " +
                         std::to_string(p.head_dim));
  return FOLIO_DISPATCH_DTYPE(p.dtype, T, [&] {
    V2Args<T> a = make_v2_args<T>(p, plan, ws, tc::kHeads);
    const double peak_gbps = current_device_peak_memory_gbps();  // both policies' input
    // Both policies count a step-split graph plan (DecodePlan::step_split) as unsplit: its second
    // partitions run only on steps the wave split picks, and then hold 1024+ tokens each.
    const int partitions = plan.step_split ? 1 : a.max_partitions;
    const int64_t grid_blocks = int64_t{a.num_kv_heads} * a.num_chunks * p.num_seqs * partitions;
    const TcL2Prefetch l2 = l2_prefetch_for(grid_blocks, peak_gbps);
    a.l2_ahead = l2.steps;
    a.l2_lines = l2.lines ? 1 : 0;
    // Over a 16-bit cache the form's policy also counts a split of long partitions as unsplit
    // (session 32: the fragment ring there; FOLIO_TC_FRAG_GRID=0: not so).
    const bool fp8 = p.kv_dtype == KvCacheDtype::kFp8E4m3;
    const int form_partitions =
        !fp8 && tc_frag_grid_enabled() &&
                tc_split_counts_as_whole(plan.partition_size, plan.refine_partitions)
            ? 1
            : partitions;
    const TcForm f =
        resolve_form(plan, form_partitions, fp8, p.block_size, peak_gbps, grid_blocks);
    if (fp8) return launch_tc<T, uint8_t>(a, p.num_seqs, f.stages, f.fill, stream);
    return launch_tc<T, T>(a, p.num_seqs, f.stages, f.fill, stream);
  });
}

}  // namespace folio::cuda::detail
