// KvCacheDtype: how the KV cache stores K and V (--kv-cache-dtype, vLLM's names).
//   auto      the model's dtype (bf16/fp16 on the GPU, fp32 on the CPU reference)
//   fp8       FP8 E4M3 (base/fp8.h), one byte per element, scale 1.0 (vLLM's default when a
//             checkpoint carries no k/v scales): half the bytes of a 16-bit cache, so twice the
//             tokens fit and decode attention reads half as much. Each value is rounded from the
//             model dtype to the nearest e4m3 value (saturating at +-448) when it is written, and
//             read back exactly. The CPU reference keeps fp32 storage holding those same values.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace folio {

enum class KvCacheDtype { kAuto, kFp8E4m3 };

inline const char* kv_cache_dtype_name(KvCacheDtype d) {
  return d == KvCacheDtype::kFp8E4m3 ? "fp8_e4m3" : "auto";
}

// "auto", "fp8" and "fp8_e4m3" (the same format); anything else is a clear error.
inline Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view s) {
  if (s == "auto") return KvCacheDtype::kAuto;
  if (s == "fp8" || s == "fp8_e4m3") return KvCacheDtype::kFp8E4m3;
  if (s == "fp8_e5m2")
    return unimplemented("--kv-cache-dtype fp8_e5m2 is not supported (use fp8 / fp8_e4m3)");
  return invalid_argument("--kv-cache-dtype must be auto, fp8 or fp8_e4m3, got '" +
                          std::string(s) + "'");
}

}  // namespace folio
