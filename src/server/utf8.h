// UTF-8 well-formedness (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF) of HTTP
// bodies. In folio::server: the server links only base and core, and tokenizer/utf8.h's
// folio::is_valid_utf8 (the same check) must not meet a second definition of that name at link
// time (one definition rule).
#pragma once

#include <string_view>

namespace folio::server {

bool is_valid_utf8(std::string_view s);

}  // namespace folio::server
