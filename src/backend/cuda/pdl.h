// Host switch for programmatic dependent launch (pdl.cuh has the mechanism and its contract).
#pragma once

namespace folio::cuda {

bool pdl_enabled();  // FOLIO_PDL (default on; "0" turns it off), read once

// Whether the small decode kernels (qkv_post, decode attention tc and its merge) read what no
// kernel writes (the step's uploaded metadata, the cache's older tokens, weights) before their
// pdl_wait: FOLIO_PDL_EARLY (default on; "0" makes them wait first, as before), read once.
bool pdl_early_reads();

}  // namespace folio::cuda
