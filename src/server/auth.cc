#include "server/auth.h"

#include <cstddef>

namespace folio {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the longer length always, so timing leaks neither the mismatch position nor, beyond
  // the lengths themselves, anything of the key.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

bool api_key_accepted(std::string_view expected_key, std::string_view authorization,
                      std::string_view x_api_key) {
  if (expected_key.empty()) return true;
  bool ok = false;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() > kBearer.size()) {
    std::string_view scheme = authorization.substr(0, kBearer.size());
    bool is_bearer = true;  // the scheme is case-insensitive (RFC 7235)
    for (size_t i = 0; i < kBearer.size(); ++i) {
      char c = scheme[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      char k = kBearer[i];
      if (k >= 'A' && k <= 'Z') k = static_cast<char>(k - 'A' + 'a');
      if (c != k) is_bearer = false;
    }
    if (is_bearer) ok = constant_time_equal(authorization.substr(kBearer.size()), expected_key);
  }
  if (!x_api_key.empty()) ok = constant_time_equal(x_api_key, expected_key) || ok;
  return ok;
}

}  // namespace folio
