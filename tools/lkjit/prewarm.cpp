// `lkjit prewarm`: placeholder until its issue lands.
#include <llvm/Support/CommandLine.h>

#include "tools/lkjit/common.h"

namespace lkjit::tool {
namespace {
llvm::cl::SubCommand kCmd("prewarm", "Compile kernels for target archs into the cache (no GPU needed)");
}  // namespace
bool prewarm_cmd() { return static_cast<bool>(kCmd); }
int prewarm_main() { throw Error(ErrorCode::kUsage, "lkjit: error: `lkjit prewarm` is not built yet"); }
}  // namespace lkjit::tool
