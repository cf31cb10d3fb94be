// A check of JSON text before llvm::json::parse sees it: that parser recurses once per nesting level with no
// limit, so 50 000 '[' overflow the stack (SIGSEGV). This scan is iterative and linear: it counts the depth
// of '[' and '{' outside strings and checks the size, nothing else (the parser still judges the syntax).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "lkjit/error.h"

namespace lkjit::support {

struct JsonLimits {
  size_t max_depth = 32;             // lkjit's own files nest 4 deep at most
  size_t max_bytes = size_t(256) << 20;
};

// nullopt when text is within the limits, else what is wrong: "is nested deeper than 32 levels (at byte
// 1234); supported: at most 32" or "is 300000000 bytes; supported: at most 268435456".
std::optional<std::string> json_limit_problem(std::string_view text, const JsonLimits& limits = {});

// When text is outside the limits, throws the exception of code (support/raise.h) with the message
// "lkjit: error: <origin>: <what> <problem>" (origin: the file's path; what: "tuning database").
void check_json_limits(std::string_view text, const std::string& origin, const std::string& what,
                       ErrorCode code, const JsonLimits& limits = {});

}  // namespace lkjit::support
