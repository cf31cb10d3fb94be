// `lkjit compile`: generate one kernel and compile it for the given archs through the cache (no GPU
// needed). --kernel is a kernel of an op family (its spec fields from the family's options, its tile from
// --tile or the family's default) or a full kernel name; --emit-source prints the generated translation unit
// instead.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <set>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "support/message.h"
#include "support/parse_int.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

std::string kernel_list() {
  std::string s;
  for (Kernel k : all_kernels()) s += (s.empty() ? "" : " | ") + std::string(to_string(k));
  std::string defaults;
  for (const OpCli* f : op_clis())
    defaults += (defaults.empty() ? "" : ", ") + std::string(f->name()) + ": " + to_string(f->default_kernel());
  return s + " (default: the op's, " + defaults + "), or a full kernel name as compile prints it (lkjit_..._smXY: " +
         "its dtype, fields, tile and arch)";
}

// The positional --tile form of each family: "wtconv: tile_h,tile_w,planes,vy,threads[,blocks]".
std::string positional_form(const FamilyInfo& fam, size_t need) {
  std::string s;
  for (size_t i = 0; i < fam.axes.size(); ++i)
    s += (i == need && i ? "[," : i ? "," : "") + fam.axes[i].name;
  return need < fam.axes.size() && need ? s + "]" : s;
}
std::string tile_help() {
  std::string forms;
  for (OpCli* f : op_clis())
    for (const FamilyInfo& fam : families())  // the op's generator family, where it has one by its name
      if (fam.name == f->name())
        forms += (forms.empty() ? "" : "; ") + fam.name + ": " + positional_form(fam, f->positional_tile_axes());
  return "tile by axis, e.g. threads=256,planes=2,vy=4 (the kernel's tile axes, as `lkjit tune --list` shows them), "
         "or by position in the op's axis order (" + forms + "; 0 on the axes the kernel does not have) (default: "
         "the op's heuristic)";
}

std::string op_help() {
  return "op family: " + op_names(" | ") + " (default: the op of --kernel, else " + default_op().name() + ")";
}

cl::SubCommand& kCompile = subcommand(Cmd::kCompile);
cl::OptionCategory kCat("lkjit compile options");
cl::opt<std::string> kOp("op", help_from(op_help), cl::init(""), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kKernel("kernel", help_from(kernel_list), cl::init(""), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kDtype("dtype", cl::desc("f32 | f16 | bf16"), cl::init("f32"), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kArchs("arch", cl::desc("comma-separated archs, e.g. sm_80,sm_90"), cl::init("sm_90"), cl::sub(kCompile), cl::cat(kCat));
cl::opt<std::string> kTile("tile", help_from(tile_help), cl::init(""), cl::sub(kCompile), cl::cat(kCat));
cl::opt<bool> kEmit("emit-source", cl::desc("print the generated source and exit"), cl::sub(kCompile), cl::cat(kCat));

std::string join_axes(const std::vector<TileAxis>& axes) {
  std::string names;
  for (const auto& a : axes) names += (names.empty() ? "" : ", ") + a.name;
  return names;
}

// --tile as axis=value items: each an axis of the kernel's tile space, once, with a decimal value.
Tile parse_named_tile(const OpSpec& s) {
  const auto axes = tile_space(s).axes;
  const std::string names = join_axes(axes), kernel = to_string(s.kernel);
  const std::string supported = fmt::format("supported: axis=value items with the axes of {}: {}", kernel, names);
  Tile t;
  std::set<std::string> seen;
  for (const auto& item : split(kTile, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --tile: '{}' is not axis=value; {}", item, supported));
    const std::string axis = item.substr(0, eq), value = item.substr(eq + 1);
    if (std::none_of(axes.begin(), axes.end(), [&](const TileAxis& a) { return a.name == axis; })) {
      const auto& all = tile_axis_names();
      throw SpecError(std::find(all.begin(), all.end(), axis) != all.end()
                          ? fmt::format("lkjit: error: --tile: {} has no {} axis; supported: its axes {}", kernel, axis, names)
                          : fmt::format("lkjit: error: --tile: '{}' is not a tile axis; {}", axis, supported));
    }
    if (value.empty())
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --tile: {}= has no value; {}", axis, supported));
    if (support::parse_decimal(value).status == support::IntStatus::kMalformed)
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --tile: {}={} is not a decimal integer; {}", axis,
                                                 support::clip(value), supported));
    if (!seen.insert(axis).second)
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --tile: {} is given twice; {}", axis, supported));
    try {
      t.set(axis, parse_ints(value, "tile")[0]);
    } catch (const SpecError&) {  // beyond int
      throw SpecError(fmt::format("lkjit: error: --tile: {}={} is out of range; supported: [{}, {}]", axis, value,
                                  std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
    }
  }
  return t;
}

// The --tile value; a nonzero value on an axis the kernel does not tile is refused (it would change the
// kernel's name and cache key, and with blocks its code, outside the kernel's tile space).
Tile parse_tile(const OpSpec& s, const OpCli& f) {
  split_list(kTile, "--tile");  // no empty items
  if (kTile.find('=') != std::string::npos) return parse_named_tile(s);
  const FamilyInfo& fam = family_of(s.kernel);
  const size_t need = f.positional_tile_axes();
  const std::vector<int> v = parse_ints(kTile, "tile");
  if (v.size() < need || v.size() > fam.axes.size())
    throw Error(ErrorCode::kUsage,
                fmt::format("lkjit: error: --tile has {} integers; supported: {}, {}, or axis=value items (e.g. "
                            "threads=256)", v.size(),
                            need + 1 == fam.axes.size() ? fmt::format("{} or {}", need, fam.axes.size())
                            : need == fam.axes.size()   ? std::to_string(need)
                                                        : fmt::format("{} to {}", need, fam.axes.size()),
                            positional_form(fam, need)));
  Tile t;
  for (size_t i = 0; i < v.size(); ++i) t.set(fam.axes[i].name, v[i]);  // in the family's declared order
  const auto axes = tile_space(s).axes;
  const std::string names = join_axes(axes);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string& name = fam.axes[i].name;
    const bool has = std::any_of(axes.begin(), axes.end(), [&](const TileAxis& a) { return a.name == name; });
    if (!has && v[i] != 0)
      throw SpecError(fmt::format("lkjit: error: --tile: {} has no {} axis ({}={}); supported: axes {}, 0 for the others",
                                  to_string(s.kernel), name, name, v[i], names));
  }
  return t;
}

// A full kernel name gives everything the other options would: one of them beside it is a usage error.
void refuse_options_beside_a_name(const NamedKernel& nk) {
  std::vector<const cl::Option*> given;
  for (const cl::Option* o : {static_cast<const cl::Option*>(&kDtype), static_cast<const cl::Option*>(&kArchs),
                              static_cast<const cl::Option*>(&kTile)})
    if (o->getNumOccurrences()) given.push_back(o);
  for (const cl::Option* o : given_family_options(Cmd::kCompile)) given.push_back(o);
  if (given.empty()) return;
  throw Error(ErrorCode::kUsage,
              fmt::format("lkjit: error: compile: {} does not apply to a full kernel name ({} gives its dtype, fields, "
                          "tile and arch); give the kernel {} instead to set them", option_label(*given.front()),
                          std::string(kKernel), to_string(nk.spec.kernel)));
}

}  // namespace

bool compile_cmd() { return static_cast<bool>(kCompile); }

int compile_main() {
  // --tile '' would silently mean the default tile.
  refuse_empty({&kTile}, "a tile as tile_h,tile_w,planes,vy,threads[,blocks], or no --tile for the default");
  // Everything is checked before the first compile, so a bad item fails fast and compiles nothing.
  std::optional<NamedKernel> named;
  Kernel kernel;
  if (llvm::StringRef(kKernel).startswith("lkjit_")) {
    named = parse_kernel_name(kKernel);
    if (!named)
      throw SpecError(fmt::format("lkjit: error: --kernel '{}' is not a kernel name this lkjit generates; supported: names "
                                  "as `lkjit compile` or `lkjit prewarm --list` prints them (lkjit_<kernel>_..._smXY), "
                                  "or a kernel: {}", std::string(kKernel), kernel_list()));
    kernel = named->spec.kernel;
  } else if (!kKernel.empty()) {
    kernel = parse_kernel(kKernel);
  }
  OpCli& f = kernel.empty() ? chosen_op(kOp) : op_cli(family_of(kernel).name, "--kernel " + kKernel + ": op");
  if (!kOp.empty() && &chosen_op(kOp) != &f)
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: compile: --kernel {} is a kernel of --op {}, not of --op {}",
                                               std::string(kKernel), f.name(), std::string(kOp)));
  check_family_options(Cmd::kCompile, {&f},
                       kernel.empty() ? op_origin(kOp) : kOp.empty() ? " (the op of --kernel " + kKernel + ")" : "");
  std::vector<std::pair<OpSpec, Tile>> jobs;
  std::vector<std::string> items;
  if (named) {
    refuse_options_beside_a_name(*named);
    validate(named->spec, named->tile, DeviceLimits::for_arch(named->spec.arch));
    jobs.emplace_back(named->spec, named->tile);
    items.push_back(arch_name(named->spec.arch));
  } else {
    if (kernel.empty()) kernel = f.default_kernel();
    items = split_list(kArchs, "--arch");
    std::set<int> archs;  // sm_90,sm_90 or sm_90,90: one job
    for (const auto& a : items) {
      OpSpec s = make_spec(kernel, parse_dtype(kDtype), parse_arch(a), f.compile_fields(kernel));
      if (!archs.insert(s.arch).second) continue;
      validate(s);
      const Tile t = kTile.empty() ? default_tile(s, f.compile_shape(), DeviceLimits::for_arch(s.arch)) : parse_tile(s, f);
      try {
        validate(s, t, DeviceLimits::for_arch(s.arch));
      } catch (const SpecError& e) {
        if (!kTile.empty()) throw;
        throw SpecError(fmt::format("{} (the default tile; pass another with --tile: `lkjit tune --list` lists the "
                                    "valid ones, if any)", e.what()));
      }
      jobs.emplace_back(s, t);
    }
    f.warn_ignored_compile_options(jobs.front().first, jobs.front().second, kDtype.getNumOccurrences() > 0);
  }
  if (kEmit) {
    std::cout << generate(jobs.front().first, jobs.front().second).source;
    return 0;
  }
  parse_target_archs(items, named ? "--kernel" : "--arch");  // NVRTC must target all of them
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
