#include "support/message.h"

#include <fmt/format.h>

namespace lkjit::support {
namespace {

// Length of the well-formed UTF-8 character at s[i] (2 to 4 bytes), or 0. A lone byte above 0x7f could
// be read as a C1 control (0x9b is CSI) by a terminal, so only whole characters pass unescaped, and not the
// C1 controls themselves.
size_t utf8_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (!n || i + n > s.size()) return 0;
  for (size_t j = 1; j < n; ++j)
    if ((static_cast<unsigned char>(s[i + j]) & 0xc0) != 0x80) return 0;
  if (c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) return 0;  // U+0080..U+009F: C1 controls
  return n;
}

}  // namespace

std::string escape_bytes(std::string_view bytes, bool ascii_only) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += bytes[i++];
      continue;
    }
    if (const size_t n = ascii_only ? 0 : utf8_length(bytes, i)) {
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    }
    out += fmt::format("\\x{:02x}", c);
    ++i;
  }
  return out;
}

std::string clip(std::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return escape_bytes(value, /*ascii_only=*/false);
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(value[n]) & 0xc0) == 0x80) --n;  // not inside a UTF-8 character
  return fmt::format("{}... ({} bytes)", escape_bytes(value.substr(0, n), false), value.size());
}

}  // namespace lkjit::support
