// What the runtime knows of each op family beyond the generator's data: how to time one of its passes.
// The list is explicit, one line per family (runtime/ops/registry.cpp); the tuner reads it, so it never
// names an op.
#pragma once
#include <memory>
#include <string>
#include <utility>

#include "lkjit/tuning.h"

namespace lkjit::rt {

struct OpRuntime {
  std::string family;  // the generator family's name ("wtconv")
  // A harness whose plan runs `spec` on `shape` (as that kernel sees it) on `device`, and the plan entry to
  // tune in it. SpecError naming why when no pass of the family runs them.
  std::pair<std::unique_ptr<PassHarness>, KernelSelector> (*harness_for)(const OpSpec& spec, const Shape& shape,
                                                                          int device, const DeviceLimits& limits);
};

const OpRuntime& op_runtime(const std::string& family);  // SpecError naming the registered ones

}  // namespace lkjit::rt
