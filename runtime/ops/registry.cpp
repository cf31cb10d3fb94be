// The explicit list of op families the runtime can time (runtime/op_registry.h): one line each.
#include <fmt/format.h>

#include <vector>

#include "lkjit/error.h"
#include "runtime/op_registry.h"

namespace lkjit::rt {

OpRuntime wtconv_runtime();  // ops/wtconv_tune.cpp
OpRuntime scale_runtime();   // ops/scale_tune.cpp

const OpRuntime& op_runtime(const std::string& family) {
  static const std::vector<OpRuntime> all = {
      wtconv_runtime(),
      scale_runtime(),
  };
  for (const auto& r : all)
    if (r.family == family) return r;
  std::string names;
  for (const auto& r : all) names += (names.empty() ? "" : ", ") + r.family;
  throw SpecError(fmt::format("lkjit: error: tuner: op family '{}' has no pass to time; registered: {}", family, names));
}

}  // namespace lkjit::rt
