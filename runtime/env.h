// Every environment variable lkjit reads, in one table (README lists it). Read only through here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lkjit/generator.h"

namespace lkjit::rt {

struct EnvVar {
  const char* name;
  const char* default_value;
  const char* description;
};
const std::vector<EnvVar>& env_table();

// Value of a registered variable, or its default. Asserts the name is registered.
std::string env(const char* name);

// Numbers from registered variables, through support/parse_int.h: decimal only (no octal, hex, sign '+',
// whitespace, exponent), never truncated. SpecError naming the variable, its value and the range.
int64_t env_int(const char* name, int64_t lo, int64_t hi);
// Seconds in (0, hi]: "10", "0.5" (LKJIT_TUNE_BUDGET).
double env_seconds(const char* name, double hi = 1e9);

// LKJIT_LOG=1: one line per compile / cache event on stderr.
void log_line(const std::string& line);

}  // namespace lkjit::rt
