// How every pass harness times a pass (lkjit/tuning.h, PassHarness::time): warm-up runs, then per sample an
// L2 flush (a memset over at least twice the L2), the next of the harness's rotating input/output sets, and
// a CUDA-event pair around one pass; the samples are the milliseconds per pass.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "lkjit/runtime.h"

namespace lkjit::rt {

// Bytes rounded up to whole 32-bit words (DeviceBuffer::fill_u32 writes words).
inline size_t round_up_words(size_t bytes) { return (bytes + 3) / 4 * 4; }

// The harnesses' timing inputs: dtype's 1.0 in every element of a 32-bit word (timing does not depend on values).
inline uint32_t ones_word(DType t) {
  switch (t) {
    case DType::kF32: return 0x3f800000u;
    case DType::kF16: return 0x3c003c00u;
    case DType::kBF16: return 0x3f803f80u;
  }
  return 0;
}

class PassTimer {
 public:
  // The flush buffer for `dev`'s L2 (at least 64 MiB).
  explicit PassTimer(const DeviceInfo& dev)
      : flush_(round_up_words(std::max<size_t>(2 * std::max<size_t>(dev.l2_bytes, size_t(32) << 20), size_t(64) << 20)),
               dev.ordinal) {}
  // Enough rotating sets of `set_bytes` that a set is out of L2 when it comes round again (1..8).
  static size_t sets_for(const DeviceInfo& dev, size_t set_bytes) {
    const size_t l2 = std::max<size_t>(dev.l2_bytes, size_t(32) << 20);
    return std::clamp<size_t>((2 * l2 + set_bytes - 1) / std::max<size_t>(set_bytes, 1), 1, 8);
  }
  // run(set) launches one pass on the legacy stream.
  std::vector<double> time(int warmup, int reps, size_t sets, const std::function<void(size_t)>& run) {
    for (int i = 0; i < warmup; ++i) run(next_++ % sets);
    synchronize();
    EventTimer timer;
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      flush_.fill_u32(++flush_value_);  // evicts the previous pass's lines (nvbench's cold samples)
      const size_t set = next_++ % sets;
      timer.start();
      run(set);
      ms.push_back(timer.stop_ms());
    }
    return ms;
  }

 private:
  DeviceBuffer flush_;
  uint32_t flush_value_ = 0;
  size_t next_ = 0;
};

}  // namespace lkjit::rt
