// Kernel names from outside (tuning databases, manifests, `cache explain NAME`): parse_kernel_name
// (generator/kernel_names.cpp, numbers through support/parse_int.h) answers nullopt for a name it does not
// generate and never throws. Property: what it accepts, kernel_name() prints back exactly.
#include "fuzz/fuzz_util.h"
#include "lkjit/generator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  const std::string name = fuzz::text(data, size);
  const auto nk = parse_kernel_name(name);  // any exception is a finding
  if (nk) fuzz::require(kernel_name(nk->spec, nk->tile) == name, "an accepted name prints back the same");
  return 0;
}
