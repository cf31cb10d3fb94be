// The op families of the lkjit CLI (tools/lkjit/op_cli.h), in order; the first is the default op of every
// subcommand (--op). Adding a family: its tools/lkjit/ops/<family>.cpp and its line here (and declaration). An explicit list,
// because static linking drops self-registering objects.
#include "tools/lkjit/op_cli.h"

namespace lkjit::tool {

OpCli& wtconv_cli();  // ops/wtconv.cpp
OpCli& scale_cli();   // ops/scale.cpp

const std::vector<OpCli*>& op_clis() {
  static const std::vector<OpCli*> all = {
      &wtconv_cli(),
      &scale_cli(),
  };
  return all;
}

}  // namespace lkjit::tool
