// `lkjit compile`: generate one kernel and compile it for the given archs through the cache (no GPU
// needed). --emit-source prints the generated translation unit instead.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <algorithm>
#include <iostream>
#include <set>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "lkjit/wtconv.h"
#include "tools/lkjit/common.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

std::string kernel_list() {
  std::string s;
  for (Kernel k : all_kernels()) s += (s.empty() ? "" : " | ") + std::string(to_string(k));
  return s;
}

const std::string kKernelHelp = kernel_list();  // before kKernel: cl::desc keeps a reference
cl::SubCommand kCompile("compile", "Generate and compile one kernel for the given archs (no GPU needed)");
cl::OptionCategory kCat("lkjit compile options");
cl::opt<std::string> kKernel("kernel", cl::desc(kKernelHelp), cl::init("wtconv_fwd_plane"), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kDtype("dtype", cl::desc("f32 | f16 | bf16"), cl::init("f32"), cl::sub(kCompile), cl::cat(kCat));
OddIntOption<1, 31> kK("k", cl::desc("odd kernel size, 1..31"), cl::init(5), cl::sub(kCompile), cl::cat(kCat));
IntOption<0, kMaxLevels> kL("L", cl::desc("levels, 0..8 (not of the level kernels: one serves every level; see --deeper)"),
                            cl::init(3), cl::sub(kCompile), cl::cat(kCat));
cl::opt<bool> kDeeper("deeper", cl::desc("level kernels: the variant reading an fp32 low band"), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kArchs("arch", cl::desc("comma-separated archs, e.g. sm_80,sm_90"), cl::init("sm_90"), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kTile("tile", cl::desc("tile as tile_h,tile_w,planes,vy,threads[,blocks]; 0 on the axes the kernel does "
                                            "not have (default: heuristic for 64x96x56x56)"),
                           cl::init(""), cl::sub(kCompile), cl::cat(kCat));
cl::opt<bool> kEmit("emit-source", cl::desc("print the generated source and exit"), cl::sub(kCompile), cl::cat(kCat));

// The --tile value; a nonzero value on an axis the kernel does not tile is refused (it would change the
// kernel's name and cache key, and with blocks its code, outside the kernel's tile space).
Tile parse_tile(const OpSpec& s) {
  split_list(kTile, "--tile");  // no empty items
  const std::vector<int> v = parse_ints(kTile, "tile");
  if (v.size() != 5 && v.size() != 6)
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --tile has {} integers; supported: 5 or 6, "
                                               "tile_h,tile_w,planes,vy,threads[,blocks]", v.size()));
  Tile t;
  for (size_t i = 0; i < v.size(); ++i) set_tile_axis(t, tile_axis_names()[i], v[i]);  // in the fields' order
  const auto axes = tile_space(s).axes;
  std::string names;
  for (const auto& a : axes) names += (names.empty() ? "" : ", ") + a.name;
  for (const auto& name : tile_axis_names()) {
    const int value = tile_axis(t, name);
    const bool has = std::any_of(axes.begin(), axes.end(), [&](const TileAxis& a) { return a.name == name; });
    if (!has && value != 0)
      throw SpecError(fmt::format("lkjit: error: --tile: {} has no {} axis ({}={}); supported: axes {}, 0 for the others",
                                  to_string(s.kernel), name, name, value, names));
  }
  return t;
}

// An option given for a kernel whose code it does not change (--deeper for a plane kernel, -L for a level
// kernel, which serves every level) would be dropped silently: said on stderr, with the kernels it applies
// to. The kernel name names every field that changes the code, so an option applies where it changes the name.
void warn_ignored_options(const OpSpec& s, const Tile& t) {
  struct Option {
    const char* name;
    bool given;
    void (*vary)(OpSpec&);
  };
  const Option options[] = {
      {"--deeper", kDeeper, [](OpSpec& o) { o.first = !o.first; }},
      {"-L", kL.getNumOccurrences() > 0, [](OpSpec& o) { o.L = o.L == 0 ? 1 : 0; }},
      {"-k", kK.getNumOccurrences() > 0, [](OpSpec& o) { o.k = o.k == 1 ? 3 : 1; }},
      {"--dtype", kDtype.getNumOccurrences() > 0,
       [](OpSpec& o) { o.dtype = o.dtype == DType::kF32 ? DType::kF16 : DType::kF32; }},
  };
  auto applies = [](const Option& opt, OpSpec o, const Tile& tile) {
    const std::string name = kernel_name(o, tile);
    opt.vary(o);
    return kernel_name(o, tile) != name;
  };
  // The deeper level kernels read fp32 whatever --dtype: a warning about them says so.
  const bool deeper = kDeeper && applies(options[0], s, t);
  for (const auto& opt : options) {
    if (!opt.given || applies(opt, s, t)) continue;
    std::string to;
    for (Kernel k : all_kernels()) {
      OpSpec o = s;
      o.kernel = k;
      o.first = !deeper;
      if (applies(opt, o, Tile{})) to += (to.empty() ? "" : ", ") + std::string(to_string(k));
    }
    std::cerr << fmt::format("lkjit: warning: compile: {} does not apply to {}{} and is ignored; it applies to {}\n",
                             opt.name, to_string(s.kernel), deeper ? " with --deeper" : "", to);
  }
}

}  // namespace

bool compile_cmd() { return static_cast<bool>(kCompile); }

int compile_main() {
  // --tile '' would silently mean the default tile.
  refuse_empty({&kTile}, "a tile as tile_h,tile_w,planes,vy,threads[,blocks], or no --tile for the default");
  // Everything is checked before the first compile, so a bad item fails fast and compiles nothing.
  const std::vector<std::string> items = split_list(kArchs, "--arch");
  std::vector<std::pair<OpSpec, Tile>> jobs;
  std::set<int> archs;  // sm_90,sm_90 or sm_90,90: one job
  for (const auto& a : items) {
    OpSpec s{parse_kernel(kKernel), parse_dtype(kDtype), kK, kL, !kDeeper, parse_arch(a)};
    if (!archs.insert(s.arch).second) continue;
    validate(s);
    const Tile t = kTile.empty() ? default_tile(s, Shape{64, 96, 56, 56, 1}, DeviceLimits::for_arch(s.arch)) : parse_tile(s);
    try {
      validate(s, t, DeviceLimits::for_arch(s.arch));
    } catch (const SpecError& e) {
      if (!kTile.empty()) throw;
      throw SpecError(fmt::format("{} (the default tile; pass another with --tile: `lkjit tune --list` lists the "
                                  "valid ones, if any)", e.what()));
    }
    jobs.emplace_back(s, t);
  }
  warn_ignored_options(jobs.front().first, jobs.front().second);
  if (kEmit) {
    std::cout << generate(jobs.front().first, jobs.front().second).source;
    return 0;
  }
  parse_target_archs(items, "--arch");  // NVRTC must target all of them
  std::string store_error;
  for (const auto& [s, t] : jobs) {
    const auto ck = compile_kernel(s, t);
    std::cout << fmt::format("{}  {}  {} bytes  {}{}  {:.3f} s  key {}\n", ck.kernel_name, arch_name(s.arch),
                             ck.cubin.size(), ck.origin, ck.store_error.empty() ? "" : " (not cached)", ck.seconds,
                             ck.key.substr(0, 16));
    if (store_error.empty()) store_error = ck.store_error;
  }
  if (!store_error.empty())
    throw CacheError(fmt::format("lkjit: error: {}: compiled kernels could not be stored in the cache: {}", cache_dir(),
                                 store_error));
  return 0;
}

}  // namespace lkjit::tool
