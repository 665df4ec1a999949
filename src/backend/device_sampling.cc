#include "backend/device_sampling.h"

#include <cmath>

namespace folio {

bool resolve_placeholder_ops(DeviceSamplingBatch& batch, const std::vector<int32_t>& previous) {
  for (const DeviceSampleRow& r : batch.rows) {
    for (int p : {2, 3}) {
      const int begin = r.phase_end[p - 1], end = r.phase_end[p];
      if (end == begin || batch.ops[end - 1].token >= 0) continue;
      LogitOp& op = batch.ops[end - 1];
      const int j = -1 - op.token;
      if (j >= static_cast<int>(previous.size())) return false;
      const int32_t t = previous[static_cast<size_t>(j)];
      LogitOp* named = nullptr;
      for (int q = begin; q < end - 1; ++q)
        if (batch.ops[q].token == t) named = &batch.ops[q];
      op.token = t;
      if (!named) continue;  // the op on t
      if (p == 3 && op.a != 0.0f)
        named->a = op.a * static_cast<float>(std::rint(named->a / op.a) + 1.0f);
      op.kind = LogitOpKind::kNone;
    }
  }
  return true;
}

}  // namespace folio
