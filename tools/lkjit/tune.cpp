// `lkjit tune`: placeholder until its issue lands.
#include <llvm/Support/CommandLine.h>

#include "tools/lkjit/common.h"

namespace lkjit::tool {
namespace {
llvm::cl::SubCommand kCmd("tune", "Explore tile configurations of a kernel on the GPU");
}  // namespace
bool tune_cmd() { return static_cast<bool>(kCmd); }
int tune_main() { throw Error(ErrorCode::kUsage, "lkjit: error: `lkjit tune` is not built yet"); }
}  // namespace lkjit::tool
