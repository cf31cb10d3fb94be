// `lkjit compile`: generate one kernel and compile it for the given archs through the cache (no GPU
// needed). --emit-source prints the generated translation unit instead.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <iostream>

#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "tools/lkjit/common.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

cl::SubCommand kCompile("compile", "Generate and compile one kernel for the given archs (no GPU needed)");
cl::OptionCategory kCat("lkjit compile options");
cl::opt<std::string> kKernel("kernel", cl::desc("wtconv_fwd_plane | wtconv_fwd_level | wtconv_fwd_synth | wtconv_fold"),
                             cl::init("wtconv_fwd_plane"), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kDtype("dtype", cl::desc("f32 | f16 | bf16"), cl::init("f32"), cl::sub(kCompile), cl::cat(kCat));
cl::opt<int> kK("k", cl::desc("odd kernel size, 1..31"), cl::init(5), cl::sub(kCompile), cl::cat(kCat));
cl::opt<int> kL("L", cl::desc("levels, 0..8"), cl::init(3), cl::sub(kCompile), cl::cat(kCat));
cl::opt<bool> kDeeper("deeper", cl::desc("level kernels: the variant reading an fp32 low band"), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kArchs("arch", cl::desc("comma-separated archs, e.g. sm_80,sm_90"), cl::init("sm_90"), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kTile("tile", cl::desc("tile as tile_h,tile_w,planes,vy,threads (default: heuristic for 64x96x56x56)"),
                           cl::init(""), cl::sub(kCompile), cl::cat(kCat));
cl::opt<bool> kEmit("emit-source", cl::desc("print the generated source and exit"), cl::sub(kCompile), cl::cat(kCat));

}  // namespace

bool compile_cmd() { return static_cast<bool>(kCompile); }

int compile_main() {
  for (const auto& a : split(kArchs, ',')) {
    OpSpec s{parse_kernel(kKernel), parse_dtype(kDtype), kK, kL, !kDeeper, parse_arch(a)};
    validate(s);
    Tile t;
    if (kTile.empty()) {
      t = default_tile(s, Shape{64, 96, 56, 56, 1}, DeviceLimits::for_arch(s.arch));
    } else {
      const auto v = parse_ints(kTile, "tile");
      if (v.size() != 5) throw Error(ErrorCode::kUsage, "lkjit: error: --tile needs 5 integers: tile_h,tile_w,planes,vy,threads");
      t = Tile{v[0], v[1], v[2], v[3], v[4]};
    }
    if (kEmit) {
      std::cout << generate(s, t).source;
      return 0;
    }
    const auto ck = compile_kernel(s, t);
    std::cout << fmt::format("{}  {}  {} bytes  {}  {:.3f} s  key {}\n", ck.kernel_name, arch_name(s.arch),
                             ck.cubin.size(), ck.origin, ck.seconds, ck.key.substr(0, 16));
  }
  return 0;
}

}  // namespace lkjit::tool
