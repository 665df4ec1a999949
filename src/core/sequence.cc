#include "core/sequence.h"

namespace folio {

const char* seq_status_name(SeqStatus s) {
  switch (s) {
    case SeqStatus::kWaiting: return "waiting";
    case SeqStatus::kRunning: return "running";
    case SeqStatus::kSwapped: return "swapped";
    case SeqStatus::kFinishedStopped: return "finished_stopped";
    case SeqStatus::kFinishedLength: return "finished_length";
    case SeqStatus::kFinishedAborted: return "finished_aborted";
    case SeqStatus::kFinishedError: return "finished_error";
  }
  return "unknown";
}

}  // namespace folio
