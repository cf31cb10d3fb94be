// Outside text inside lkjit's messages: control bytes escaped (a value cannot write terminal control
// sequences) and long values clipped (a 100 kB argument is not echoed whole).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace lkjit::support {

// Printable ASCII as is; with ascii_only false also well-formed UTF-8 characters; every other byte as \xNN.
std::string escape_bytes(std::string_view bytes, bool ascii_only = true);

// The value for a message: escaped (UTF-8 above 0x7f kept), and when longer than max_bytes its first
// max_bytes (cut at a character boundary) followed by "... (N bytes)".
constexpr size_t kClipBytes = 64;
constexpr size_t kClipPathBytes = 512;  // paths: long enough for real ones, short of a 100 kB argument
std::string clip(std::string_view value, size_t max_bytes = kClipBytes);

}  // namespace lkjit::support
