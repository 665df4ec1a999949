// UTF-8 well-formedness (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF).
#pragma once

#include <string_view>

namespace folio {

bool is_valid_utf8(std::string_view s);

}  // namespace folio
