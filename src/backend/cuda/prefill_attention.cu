// Prefill attention: the plan, parameter checks and the choice of kernel variant (the kernels
// are in prefill_attention_v1.cu, prefill_attention_v2.cu, prefill_attention_v3.cu,
// prefill_attention_v3n128.cu, prefill_attention_v3pw.cu, prefill_attention_v3pwpp.cu,
// prefill_attention_v3tma.cu, prefill_attention_v3tmap.cu, prefill_attention_v3tmapp.cu and
// prefill_attention_v3tmaq.cu).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/prefill_attention_kernels.h"

namespace folio::cuda {

const char* prefill_kernel_name(PrefillKernel k) {
  switch (k) {
    case PrefillKernel::kV1:
      return "v1";
    case PrefillKernel::kV2:
      return "v2";
    case PrefillKernel::kV2x2:
      return "v2x2";
    case PrefillKernel::kV3:
      return "v3";
    case PrefillKernel::kV3p:
      return "v3p";
    case PrefillKernel::kV3pq:
      return "v3pq";
    case PrefillKernel::kV3n128:
      return "v3n128";
    case PrefillKernel::kV3pw:
      return "v3pw";
    case PrefillKernel::kV3pwpp:
      return "v3pwpp";
    case PrefillKernel::kV3tma:
      return "v3tma";
    case PrefillKernel::kV3tmap:
      return "v3tmap";
    case PrefillKernel::kV3tmapp:
      return "v3tmapp";
    case PrefillKernel::kV3tmaq:
      return "v3tmaq";
  }
  return "?";
}

std::optional<PrefillKernel> prefill_kernel_override() {
  static const std::optional<PrefillKernel> k = []() -> std::optional<PrefillKernel> {
    const char* e = std::getenv("FOLIO_PREFILL_KERNEL");
    const std::string v = e ? e : "";
    if (v == "v1") return PrefillKernel::kV1;
    if (v == "v2") return PrefillKernel::kV2;
    if (v == "v3") return PrefillKernel::kV3;
    if (v == "v3p") return PrefillKernel::kV3p;
    if (v == "v3pq") return PrefillKernel::kV3pq;
    if (v == "v3n128") return PrefillKernel::kV3n128;
    if (v == "v3pw") return PrefillKernel::kV3pw;
    if (v == "v3pwpp") return PrefillKernel::kV3pwpp;
    if (v == "v3tma") return PrefillKernel::kV3tma;
    if (v == "v3tmap") return PrefillKernel::kV3tmap;
    if (v == "v3tmapp") return PrefillKernel::kV3tmapp;
    if (v == "v3tmaq") return PrefillKernel::kV3tmaq;
    if (v == "v2x2") return PrefillKernel::kV2x2;
    return std::nullopt;
  }();
  return k;
}

Result<PrefillPlan> plan_prefill_attention(std::span<const int32_t> query_start, int num_heads,
                                           int num_kv_heads) {
  if (num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0)
    return invalid_argument("prefill plan: bad head counts");
  PrefillPlan plan;
  // v3tmaq by default: on the H100 (2026-11-27, session 15, NOTES.md) it is the fastest on every
  // K2 shape since its Q moved into registers (TFLOP/s at 64 x 128 / 8 x 1024 / 4 x 2048 /
  // 2 x 4096 / 1 x 8192: 88 / 352 / 438 / 503 / 538; v3tma 74 / 321 / 408 / 472 / 511). Group
  // sizes that do not divide 64 run v3tmaq as v3tma; where the ring does not fit (head_dim other
  // than 128, block sizes not a power of two in 8..128) both run v3, and v3 runs v2x2 for head
  // dims other than 64 and 128.
  plan.kernel = prefill_kernel_override().value_or(PrefillKernel::kV3tmaq);
  plan.num_seqs = query_start.empty() ? 0 : static_cast<int>(query_start.size()) - 1;
  const int64_t group = num_heads / num_kv_heads;
  int64_t max_rows = 0;
  for (int s = 0; s < plan.num_seqs; ++s) {
    const int64_t rows = static_cast<int64_t>(query_start[s + 1] - query_start[s]) * group;
    if (rows < 0) return invalid_argument("prefill plan: query_start is not non-decreasing");
    max_rows = std::max(max_rows, rows);
    plan.live_row_tiles_128 += (rows + 127) / 128;
  }
  if (max_rows > 0x7fffffff) return invalid_argument("prefill plan: too many rows");
  plan.num_tokens = plan.num_seqs > 0 ? query_start[plan.num_seqs] : 0;
  plan.max_rows = static_cast<int>(max_rows);
  plan.max_row_tiles = static_cast<int>((max_rows + 63) / 64);
  return plan;
}

// The checks of check_attention_params, with the head_dim range of the v2 kernel (multiples of
// 8 in [8, 256]); v1 narrows it further to 64 and 128.
static Status check_prefill_params(const PagedAttentionParams& p) {
  if (p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0)
    return invalid_argument("attention: num_heads " + std::to_string(p.num_heads) +
                            " is not a positive multiple of num_kv_heads " +
                            std::to_string(p.num_kv_heads));
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0)
    return unimplemented("prefill_attention: head_dim " + std::to_string(p.head_dim) +
                         " (the kernel supports multiples of 8 from 8 to 256)");
  if (p.block_size <= 0)
    return invalid_argument("attention: block_size " + std::to_string(p.block_size));
  if (p.kv_dtype != KvCacheDtype::kAuto)
    return unimplemented("prefill_attention reads a 16-bit cache: dequantize fp8 blocks into one "
                         "first (kv_dequant.h)");
  return Status();
}

Status prefill_attention(const PagedAttentionParams& p, const PrefillPlan& plan, void* stream) {
  FOLIO_RETURN_IF_ERROR(check_prefill_params(p));
  if (plan.num_seqs != p.num_seqs)
    return invalid_argument("prefill_attention: the plan was made for another batch");
  if (p.num_seqs == 0 || plan.max_rows == 0) return Status();
  if (p.num_seqs > 65535 || p.num_kv_heads > 65535)
    return invalid_argument("prefill_attention: more than 65535 sequences or KV heads");
  // Only v2 masks a sliding window (the band's lower edge); the plan is kernel-independent. 32
  // rows per warp (v2x2: the faster form, K2 in NOTES.md) unless the plan asks for v2's 16.
  if (p.sliding_window < 0) return invalid_argument("prefill_attention: negative sliding_window");
  if (p.sliding_window > 0)
    return prefill_detail::launch_v2(p, plan, plan.kernel == PrefillKernel::kV2 ? 16 : 32, stream);
  switch (plan.kernel) {
    case PrefillKernel::kV1:
      return prefill_detail::launch_v1(p, plan, stream);
    case PrefillKernel::kV2:
      return prefill_detail::launch_v2(p, plan, 16, stream);
    case PrefillKernel::kV2x2:
      return prefill_detail::launch_v2(p, plan, 32, stream);
    case PrefillKernel::kV3:
      return prefill_detail::launch_v3(p, plan, prefill_detail::V3Variant::kPlain, stream);
    case PrefillKernel::kV3p:
      return prefill_detail::launch_v3(p, plan, prefill_detail::V3Variant::kPipelined, stream);
    case PrefillKernel::kV3pq:
      return prefill_detail::launch_v3(p, plan, prefill_detail::V3Variant::kPipelinedQRegs, stream);
    case PrefillKernel::kV3n128:
      return prefill_detail::launch_v3n128(p, plan, stream);
    case PrefillKernel::kV3pw:
      return prefill_detail::launch_v3pw(p, plan, stream);
    case PrefillKernel::kV3pwpp:
      return prefill_detail::launch_v3pwpp(p, plan, stream);
    case PrefillKernel::kV3tma:
      return prefill_detail::launch_v3tma(p, plan, stream);
    case PrefillKernel::kV3tmap:
      return prefill_detail::launch_v3tmap(p, plan, stream);
    case PrefillKernel::kV3tmapp:
      return prefill_detail::launch_v3tmapp(p, plan, stream);
    case PrefillKernel::kV3tmaq:
      return prefill_detail::launch_v3tmaq(p, plan, stream);
  }
  return invalid_argument("prefill_attention: unknown kernel variant");
}

}  // namespace folio::cuda
