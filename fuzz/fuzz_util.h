// Shared by the libFuzzer targets: the input as a string, and the one exception type a parser of outside
// input may throw (lkjit::Error, a refusal with a message). Anything else escaping a target (std::out_of_range
// from a stoi, a bad_alloc from an unbounded size, a crash) is a finding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "lkjit/error.h"

namespace lkjit::fuzz {

inline std::string text(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// Runs f; an lkjit::Error is an expected refusal, but its message must say something.
template <class F>
void refusal_ok(F f) {
  try {
    f();
  } catch (const lkjit::Error& e) {
    if (std::string(e.what()).rfind("lkjit: error: ", 0) != 0) {
      std::fprintf(stderr, "message without the lkjit: error: prefix: %s\n", e.what());
      std::abort();
    }
  }
}

// A property that must hold: aborts (a finding, with the input saved by libFuzzer) when it does not.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "property failed: %s\n", what);
    std::abort();
  }
}

}  // namespace lkjit::fuzz
