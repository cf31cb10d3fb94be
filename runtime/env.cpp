#include "runtime/env.h"

#include <cassert>
#include <cstdlib>
#include <iostream>

#include "support/parse_int.h"

namespace lkjit::rt {

const std::vector<EnvVar>& env_table() {
  static const std::vector<EnvVar> t = {
      {"LKJIT_CACHE_DIR", "", "kernel cache directory (default $XDG_CACHE_HOME/lkjit or ~/.cache/lkjit)"},
      {"LKJIT_CACHE_DISABLE", "0", "1: never read or write the on-disk cache (in-memory only)"},
      {"LKJIT_CACHE_MAX_BYTES", "1G",
       "size cap of the on-disk cache: bytes, or with a K/M/G/T suffix (powers of 1024); 0 = no cap. "
       "Least recently used entries are evicted after each store"},
      {"LKJIT_LOG", "0", "1: log compiles and cache hits/misses to stderr"},
      {"LKJIT_EARLY_LAUNCH", "1",
       "0: launch every kernel in stream order; 1: on sm_90+, a captured layer's main kernel may start while the "
       "fold before it runs (programmatic dependent launch)"},
      {"LKJIT_DUMP_DIR", "", "write each generated source and NVRTC log there (created if missing)"},
      {"LKJIT_TUNE", "",
       "tile choice: off (heuristic only) | cached (tuning-database lookup) | tune (tune on a miss) | "
       "retune (always tune); unset: layers use cached, the Tuner API tunes on a miss"},
      {"LKJIT_TUNING_DB", "", "tuning database file (default <cache dir>/tuning.json)"},
      {"LKJIT_TUNE_BUDGET", "10", "seconds per kernel a random/greedy tuning run may spend when the API gives none"},
  };
  return t;
}

std::string env(const char* name) {
  for (const auto& e : env_table())
    if (std::string(e.name) == name) {
      const char* v = std::getenv(name);
      return (v && *v) ? std::string(v) : std::string(e.default_value);
    }
  assert(false && "unregistered environment variable");
  return {};
}

int64_t env_int(const char* name, int64_t lo, int64_t hi) { return support::parse_int(env(name), name, lo, hi); }

double env_seconds(const char* name, double hi) {
  return support::parse_decimal_number(env(name), name, 0, hi, /*lo_exclusive=*/true);
}

void log_line(const std::string& line) {
  if (env("LKJIT_LOG") == "1") std::cerr << "lkjit: " << line << "\n";
}

}  // namespace lkjit::rt
