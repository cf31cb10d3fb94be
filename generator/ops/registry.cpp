// The explicit list of op families (static libraries drop self-registering objects).
#include <fmt/format.h>

#include "generator/family.h"
#include "lkjit/error.h"

namespace lkjit::gen {

static const std::vector<KernelTraits>& registry() {
  static const std::vector<KernelTraits> all = [] {
    std::vector<KernelTraits> v;
    for (auto& t : wtconv_kernels()) v.push_back(t);
    return v;
  }();
  return all;
}

const KernelTraits& traits(Kernel k) {
  for (const auto& t : registry())
    if (t.kernel == k) return t;
  throw SpecError(fmt::format("lkjit: error: kernel {} has no generator yet", to_string(k)));
}

}  // namespace lkjit::gen
