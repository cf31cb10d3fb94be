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
      {"LKJIT_NVRTC_LIBRARY", "", "the libnvrtc to load (then the only one tried; runtime/nvrtc_loader.h gives the search)"},
      {"CUDA_ROOT", "", "the CUDA toolkit NVRTC is first looked for in ($CUDA_ROOT/lib64; unset: the build's toolkit)"},
      {"LKJIT_CACHE_SIGNING_KEY", "",
       "PEM Ed25519 private key file (readable only by its owner) that signs bundles and remote cache entries"},
      {"LKJIT_CACHE_TRUSTED_KEYS", "",
       "PEM public key files (one, or a list separated by ':' or ','): bundles and remote entries must be signed "
       "by one of them"},
      {"LKJIT_REMOTE_CACHE", "",
       "the cluster tier: redis://[user:password@]host:port/db or unix:///path/redis.sock (unset: off)"},
      {"LKJIT_REMOTE_CACHE_WRITE", "all", "all | kernels | none: what this process writes to the remote cache"},
      {"LKJIT_REMOTE_CACHE_TTL", "2592000", "remote entry lifetime in seconds, refreshed on every hit; 0: no expiry"},
      {"LKJIT_REMOTE_CACHE_TIMEOUT_MS", "500", "remote cache connect and command timeout, in milliseconds"},
      {"LKJIT_REMOTE_CACHE_RETRY_S", "30", "after a remote cache failure, seconds of local-only work before a retry"},
      {"LKJIT_REMOTE_CACHE_LEASE_MS", "10000", "compile lease lifetime, renewed every third of it while compiling"},
      {"LKJIT_REMOTE_CACHE_WAIT_S", "120", "longest wait for another process's compile before compiling here"},
      {"LKJIT_RECORD_MANIFEST", "", "record every kernel this process uses in this prewarm manifest file"},
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
