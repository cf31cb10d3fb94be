// Internal to the tuner: tune_pass and tune_paths with their device calls injected (compiles, the resource query of a loaded
// candidate, the device check after a failure), so that its handling of candidates, winners and output
// checks is testable on a CPU with a fake PassHarness (tests/tuner_test.cpp).
#pragma once
#include <functional>
#include <vector>

#include "lkjit/tuning.h"
#include "runtime/tune_search.h"

namespace lkjit::detail {

struct PassDeviceFns {
  CompileFn compile;  // NVRTC through the kernel cache (compile_kernel)
  // Registers, spill bytes and static shared memory of a compiled candidate on `device` (load_kernel).
  std::function<void(const CompiledKernel&, int device, CandidateResult* r)> resources;
  // Waits for the device; throws DriverError if a faulting kernel left it unusable (synchronize).
  std::function<void()> synchronize;
};
PassDeviceFns device_fns();  // the real ones

TuneReport tune_pass(PassHarness& h, const std::vector<KernelSelector>& which, const TuneOptions& o,
                     const PassDeviceFns& fns);
// tune_paths (runtime/tune_paths.cpp) with the same injected device calls.
PathTuneReport tune_paths(const PassPaths& p, const TuneOptions& o, const PassDeviceFns& fns);

}  // namespace lkjit::detail
