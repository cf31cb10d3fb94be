// Kernel name -> (spec, tile): the inverse of lkjit::kernel_name, for names that come from outside
// (a tuning database, `lkjit cache explain NAME`). A parse is accepted only if kernel_name() of the
// result gives the same name back, so this can never disagree with the generator.
#pragma once
#include <optional>
#include <string>

#include "lkjit/spec.h"

namespace lkjit::tool {

struct NamedKernel {
  OpSpec spec;
  Tile tile;
};

std::optional<NamedKernel> parse_kernel_name(const std::string& name);

}  // namespace lkjit::tool
