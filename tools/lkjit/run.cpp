// `lkjit run`: the main job. For each op family (tools/lkjit/op_cli.h) the problems of --shapes (with --op,
// or the default op), else every family's demo layers: generate, compile or load from the cache, run, check
// against the float64 reference, time. Without a GPU: compile the same kernels for --arch into the cache
// and list them.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <iostream>
#include <random>
#include <set>

#include "lkjit/cache.h"
#include "lkjit/runtime.h"
#include "lkjit/tuning.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

std::string op_help() {
  std::string s = "op family: " + op_names(" | ") + " (default: every op's demo; with --shapes or an op's options: " +
                  default_op().name() + ")";
  return s;
}
std::string shapes_help() {
  std::string forms, demos;
  for (const OpCli* f : op_clis()) {
    forms += (forms.empty() ? "" : "; ") + std::string(f->name()) + ": " + f->shape_form(Cmd::kRun);
    demos += (demos.empty() ? "" : "; ") + std::string(f->name()) + ": " + f->demo_doc();
  }
  return fmt::format("layers of the op separated by commas, as {} (default: its demo layers, {})", forms, demos);
}

cl::SubCommand& kRun = subcommand(Cmd::kRun);
cl::OptionCategory kRunCat("lkjit run options");
cl::opt<std::string> kOp("op", help_from(op_help), cl::init(""), cl::sub(kRun), cl::cat(kRunCat));
cl::opt<std::string> kShapes("shapes", help_from(shapes_help), cl::init(""), cl::sub(kRun), cl::cat(kRunCat));
cl::opt<std::string> kDtypes("dtypes", cl::desc("comma-separated: f32,f16,bf16"), cl::init("f32,f16"), cl::sub(kRun), cl::cat(kRunCat));
IntOption<1, kIntMax> kIters("iters", cl::desc("timed iterations (median reported)"), cl::init(50), cl::sub(kRun), cl::cat(kRunCat));
IntOption<1, kIntMax> kCheckPlanes("check-planes", cl::desc("(b,c) planes per layer checked against the float64 reference"), cl::init(16), cl::sub(kRun), cl::cat(kRunCat));
cl::opt<std::string> kArch("arch", cl::desc("target arch when there is no GPU"), cl::init("sm_90"), cl::sub(kRun), cl::cat(kRunCat));

struct Work {
  OpCli* op;
  std::vector<LayerProblem> problems;
};

int run_without_gpu(const std::vector<Work>& work, const std::vector<DType>& dtypes, const std::string& why) {
  const int arch = parse_arch(kArch);
  const std::string into = disk_cache_enabled()
                               ? fmt::format("into {}", cache_dir())
                               : "(the on-disk cache is disabled by LKJIT_CACHE_DISABLE=1: nothing is kept)";
  std::cout << fmt::format("lkjit run: no GPU ({}).\nCompiling the same kernels for {} {} instead.\n\n", why,
                           arch_name(arch), into);
  std::cout << fmt::format("{:<62} {:>9} {:>9}\n", "kernel", "origin", "seconds");
  const DeviceLimits lim = DeviceLimits::for_arch(arch);
  int n = 0;
  std::string store_error;     // as `lkjit compile`: a kernel not stored is reported, and the run fails
  std::set<std::string> seen;  // layers share kernels (e.g. WTConv's fold kernel): list each once
  for (const auto& w : work)
    for (const auto& p : w.problems)
      for (DType dt : dtypes)
        for (const auto& pk : w.op->plan(p, dt, false, lim, PlanScope::kProblem, nullptr)) {
          if (!seen.insert(kernel_name(pk.spec, pk.tile)).second) continue;
          const auto ck = compile_kernel(pk.spec, pk.tile);
          std::cout << fmt::format("{:<62} {:>9} {:>9.3f}{}\n", ck.kernel_name, ck.origin, ck.seconds,
                                   ck.store_error.empty() ? "" : "  (not cached)");
          if (store_error.empty()) store_error = ck.store_error;
          ++n;
        }
  if (!store_error.empty())
    throw CacheError(fmt::format("lkjit: error: {}: the compiled kernels could not be stored in the cache: {}",
                                 cache_dir(), store_error));
  std::cout << fmt::format("\n{} ready for {}; run on a GPU to execute and check {}.\n", counted(n, "kernel"),
                           arch_name(arch), n == 1 ? "it" : "them");
  return 0;
}

}  // namespace

bool run_cmd() { return static_cast<bool>(kRun); }

int run_main() {
  // One op where the command line names problems or options of one (the default without --op), else every
  // op's demo.
  std::vector<OpCli*> ops;
  if (!kOp.empty() || kShapes.getNumOccurrences() || family_option_given(Cmd::kRun)) {
    ops.push_back(&chosen_op(kOp));
  } else {
    for (OpCli* f : op_clis())
      if (f->in_default_run()) ops.push_back(f);
  }
  check_family_options(Cmd::kRun, ops, op_origin(kOp));
  std::vector<Work> work;
  const std::optional<std::string> shapes =
      kShapes.getNumOccurrences() ? std::optional<std::string>(kShapes) : std::nullopt;
  for (OpCli* f : ops) work.push_back({f, f->problems(Cmd::kRun, shapes)});
  std::vector<DType> dtypes;
  for (const auto& d : split_list(kDtypes, "--dtypes")) dtypes.push_back(parse_dtype(d));
  // Every problem is checked (options and sizes) before anything is compiled or run.
  for (const auto& w : work)
    for (const auto& p : w.problems)
      for (DType dt : dtypes) w.op->plan(p, dt, false, DeviceLimits::for_arch(parse_arch(kArch)), PlanScope::kProblem, nullptr);
  // The cache folder is made or refused (unsafe, not a folder) before the first line of output, so that its
  // error comes alone rather than after a header.
  if (disk_cache_enabled()) KernelCache().check();
  // A GPU run's layers would ignore a broken database quietly; without one it is never read.
  if (resolve_tune_mode(std::nullopt, TuneMode::kCached) != TuneMode::kOff) warn_broken_tuning_db(tuning_db_path());
  std::string why;
  if (!gpu_available(&why)) return run_without_gpu(work, dtypes, why);

  const DeviceInfo dev = device_info(0);
  std::cout << fmt::format("lkjit run: {} ({}, {} SMs), NVRTC {}, cache {}\n", dev.name, arch_name(dev.arch),
                           dev.limits.sm_count, nvrtc_version(), cache_dir());
  RunSettings settings;
  settings.iters = kIters;
  settings.check_planes = kCheckPlanes;
  bool all_ok = true;
  for (size_t i = 0; i < work.size(); ++i) {
    if (i) std::cout << "\n";
    OpCli& f = *work[i].op;
    f.print_run_header(std::cout, settings);
    std::mt19937_64 rng(1234);
    for (const auto& p : work[i].problems)
      for (DType dt : dtypes) all_ok = f.run(std::cout, p, dt, settings, rng) && all_ok;
    f.print_run_footer(std::cout);
  }
  return all_ok ? 0 : 2;
}

}  // namespace lkjit::tool
