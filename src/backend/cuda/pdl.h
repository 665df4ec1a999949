// Host switch for programmatic dependent launch (pdl.cuh has the mechanism and its contract).
#pragma once

namespace folio::cuda {

bool pdl_enabled();  // FOLIO_PDL (default on; "0" turns it off), read once

}  // namespace folio::cuda
