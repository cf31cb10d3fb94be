// Fake device calls for the tuner's CPU tests (runtime/tune_pass.h: tune_pass and tune_paths with injected
// device calls): compiles succeed, every candidate reports a few registers, the device stays usable unless
// device_lost; syncs counts the device checks. And tuning options that measure fake passes quickly.
#pragma once
#include <string>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/tuning.h"
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

// Tuning options that measure quickly and deterministically on fake passes: exhaustive, no warm-up, 3 samples a
// candidate, `final_reps` in the re-measurement rounds, one compile job, decisions saved to `db_path`.
inline TuneOptions quick_tune_options(const std::string& db_path, int final_reps) {
  TuneOptions o;
  o.strategy = TuneStrategy::kExhaustive;
  o.warmup = 0;
  o.reps = 3;
  o.final_reps = final_reps;
  o.jobs = 1;
  o.save = true;
  o.db_path = db_path;
  return o;
}

}  // namespace lkjit::test
