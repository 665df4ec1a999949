#include <cstdlib>
#include <string>

#include "backend/cuda/pdl.h"

namespace folio::cuda {

bool pdl_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FOLIO_PDL");
    return e == nullptr || std::string(e) != "0";
  }();
  return on;
}

bool pdl_early_reads() {
  static const bool on = [] {
    const char* e = std::getenv("FOLIO_PDL_EARLY");
    return e == nullptr || std::string(e) != "0";
  }();
  return on;
}

}  // namespace folio::cuda
