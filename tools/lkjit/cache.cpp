// `lkjit cache`: placeholder until its issue lands.
#include <llvm/Support/CommandLine.h>

#include "tools/lkjit/common.h"

namespace lkjit::tool {
namespace {
llvm::cl::SubCommand kCmd("cache", "Inspect and maintain the kernel cache");
}  // namespace
bool cache_cmd() { return static_cast<bool>(kCmd); }
int cache_main() { throw Error(ErrorCode::kUsage, "lkjit: error: `lkjit cache` is not built yet"); }
}  // namespace lkjit::tool
