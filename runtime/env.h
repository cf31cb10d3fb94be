// Every environment variable lkjit reads, in one table (README lists it). Read only through here.
#pragma once
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

// LKJIT_DUMP_DIR: writes <kernel>.cu and <kernel>.log there when set.
void dump_source(const GeneratedSource& src, const std::string& log);

// LKJIT_LOG=1: one line per compile / cache event on stderr.
void log_line(const std::string& line);

}  // namespace lkjit::rt
