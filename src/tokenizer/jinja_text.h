// UTF-8 and Python str helpers for the Jinja interpreter.
//
// Python strings index by code point, so len/slicing/iteration here count code points. Invalid
// UTF-8 never aborts: each invalid byte counts as one unit and passes through unchanged, so a
// valid input always gives valid output. Whitespace and case follow Python's str methods.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace folio::jinja {

bool is_valid_utf8(std::string_view s);
// Byte offsets of each code point's start, plus s.size() at the end.
std::vector<size_t> codepoint_offsets(std::string_view s);
size_t codepoint_count(std::string_view s);
// Decodes s; an invalid byte b becomes 0xDC00 + b (a lone surrogate, as Python's
// surrogateescape) so encode_utf8 restores it.
std::vector<char32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(const std::vector<char32_t>& cps);

// Python's str.isspace for one code point.
bool is_py_space(char32_t cp);
// Python's str.strip/lstrip/rstrip: whitespace when chars is nullopt, else any of chars.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
// Python's str.capitalize (first upper, rest lower) and str.title.
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);
// Python's str.split(sep, maxsplit): whitespace runs when sep is nullopt.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::string py_replace(std::string_view s, std::string_view from, std::string_view to,
                       int64_t count);
// Non-overlapping occurrences, as str.count.
int64_t py_count(std::string_view s, std::string_view sub);
// Python's repr(float) / str(float): shortest round-trip digits, 1e+16 style exponents.
std::string py_float_repr(double d);
// Python's repr(str): single quotes unless the text has ' and no ", with escapes.
std::string py_string_repr(std::string_view s);

}  // namespace folio::jinja
