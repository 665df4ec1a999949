// The GPT-2 byte-level alphabet: each of the 256 byte values is shown as one printable Unicode
// character (printable Latin-1 bytes as themselves, the others shifted to U+0100..U+0143).
// Byte-level vocabularies store tokens in this alphabet; folio translates them to raw bytes at
// load time so BPE runs directly on the input bytes. Tables are immutable, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace folio {

// The alphabet character (UTF-8) that stands for byte `b`.
std::string_view byte_level_char(uint8_t b);

// Maps a string in the byte-level alphabet back to raw bytes; nullopt if a character is not in
// the alphabet (e.g. an added token such as "<|im_start|>\n" holding a real newline).
std::optional<std::string> byte_level_to_bytes(std::string_view token);

// Maps raw bytes to the byte-level alphabet.
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace folio
