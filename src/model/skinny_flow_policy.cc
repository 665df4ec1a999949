#include "model/skinny_flow_policy.h"

#include <string>

namespace folio {

Result<bool> skinny_flow_enabled(const ModelConfig& rank, const char* env) {
  if (env != nullptr) {
    const std::string v = env;
    if (v == "0") return false;
    if (v == "1" || v == "tp") return true;
    return invalid_argument("FOLIO_SKINNY_FLOW=" + v + " (expected 0, 1 or tp)");
  }
  const double gate_up_bytes =
      2.0 * rank.intermediate_size * static_cast<double>(rank.hidden_size) * 2;  // 16-bit
  return gate_up_bytes <= kSkinnyFlowMaxGateUpBytes;
}

}  // namespace folio
