// API-key authentication. When a key is configured every endpoint but /health requires it, as
// `Authorization: Bearer <key>` or `x-api-key: <key>`. The comparison takes time independent of
// where the strings differ; keys are never logged or echoed.
#pragma once

#include <string_view>

namespace folio {

// Equal contents, in time that depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// `authorization` and `x_api_key` are the raw header values ("" when absent).
bool api_key_accepted(std::string_view expected_key, std::string_view authorization,
                      std::string_view x_api_key);

}  // namespace folio
