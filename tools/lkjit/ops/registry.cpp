// The op families of the lkjit CLI (tools/lkjit/op_cli.h), in order; the first is the default op of every
// subcommand (--op). Adding a family: its tools/lkjit/ops/<family>.cpp and one line here. An explicit list,
// because static linking drops self-registering objects.
#include "tools/lkjit/op_cli.h"

namespace lkjit::tool {

OpCli& wtconv_cli();  // ops/wtconv.cpp

const std::vector<OpCli*>& op_clis() {
  static const std::vector<OpCli*> all = {
      &wtconv_cli(),
  };
  return all;
}

}  // namespace lkjit::tool
