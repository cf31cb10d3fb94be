// Fake device calls for the tuner's CPU tests (runtime/tune_pass.h: tune_pass and tune_paths with injected
// device calls): compiles succeed, every candidate reports a few registers, the device stays usable unless
// device_lost; syncs counts the device checks.
#pragma once
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "runtime/tune_pass.h"

namespace lkjit::test {

struct FakeDevice {
  int syncs = 0;
  bool device_lost = false;
  detail::PassDeviceFns fns() {
    detail::PassDeviceFns f;
    f.compile = [](const OpSpec& s, const Tile& t) {
      CompiledKernel k;
      k.kernel_name = kernel_name(s, t);
      return k;
    };
    f.resources = [](const CompiledKernel&, int, CandidateResult* r) {
      r->regs = 64;
      r->spill_bytes = 0;
      r->smem_bytes = 0;
    };
    f.synchronize = [this] {
      ++syncs;
      if (device_lost) throw DriverError("lkjit: error: CUDA_ERROR_ILLEGAL_ADDRESS (sticky)");
    };
    return f;
  }
};

}  // namespace lkjit::test
