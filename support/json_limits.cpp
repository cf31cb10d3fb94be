#include "support/json_limits.h"

#include <fmt/format.h>

#include "support/message.h"
#include "support/raise.h"

namespace lkjit::support {

std::optional<std::string> json_limit_problem(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    return fmt::format("is {} bytes; supported: at most {}", text.size(), limits.max_bytes);
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits.max_depth)
        return fmt::format("is nested deeper than {} levels (at byte {}); supported: at most {}", limits.max_depth, i,
                           limits.max_depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;  // unbalanced closers are the parser's to report
    }
  }
  return std::nullopt;
}

void check_json_limits(std::string_view text, const std::string& origin, const std::string& what, ErrorCode code,
                       const JsonLimits& limits) {
  if (auto problem = json_limit_problem(text, limits))
    raise(code, fmt::format("lkjit: error: {}: {} {}", clip(origin, kClipPathBytes), what, *problem));
}

}  // namespace lkjit::support
