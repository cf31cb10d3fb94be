// `lkjit prewarm`: compile, with no GPU, every kernel a set of layers needs on a set of target archs
// into the kernel cache, in parallel, so that jobs on those GPUs start with no JIT work. Processes
// sharing a cache directory (the ranks of a job) can all run it at once: each key compiles once.
//
// Usage
//   lkjit prewarm --preset wtconvnext-t --arch sm_80,sm_90            # forward + backward, 3 dtypes
//   lkjit prewarm --shapes 64:96:56:56,64:192:28:28 --k 5,7 --L 2,3 --dtypes f16   # --op wtconv, the default
//   lkjit prewarm --manifest kernels.json --tuning-db tuning.json --all-tiles -j 8
//   lkjit prewarm --preset wtconvnext-b --arch sm_90 --bundle b.lkjit   # then elsewhere:
//   lkjit cache import b.lkjit
// Every layer is planned by its op family (tools/lkjit/op_cli.h) for the forward and the backward pass, on
// every path (WTConv: plane where the planes fit the arch's shared memory, tiled, lane where it applies);
// --all-tiles adds each planned kernel's whole tile space; a tuning database adds its tuned tiles. Jobs are
// unique by kernel name. --shapes and the op's list options are the op's (--op, default wtconv); a preset
// is found in whichever family declares it.
//
// Manifest (JSON; every key optional, command-line --arch/--dtypes/--passes win over the manifest's):
//   {"archs":   ["sm_80", "sm_90"],                 target archs
//    "dtypes":  ["f32", "f16", "bf16"],             activation dtypes
//    "passes":  ["fwd", "bwd"],                     which passes' kernels
//    "presets": ["wtconvnext-t"],                   preset layer sets, as --preset
//    "layers":  [{"op": "wtconv", "B": 64, "C": 96, "H": 56, "W": 56, "k": 5, "L": 5, "stride": 1}],
//                                                   op wtconv and B 1 by default, C, H, W required; the
//                                                   other keys are the op's (wtconv: k 5, L 1, stride 1)
//    "kernels": ["lkjit_wtconv_fold_k5_L3_w256_sm90"],   exact kernels (kept when their arch is a target)
//    "all_tiles": false}
// A manifest kernel name this lkjit does not generate, or one with an invalid spec or tile, is an error
// (exit 2) before anything compiles; so is a key given twice in one object, and a number out of range or not
// an integer (named as the file writes it).
// Tuning database: lkjit's own (cache/tuning_db.h: "records" with "spec" and "tile"), or any JSON with
// {"entries": [{"kernel": "<kernel name>"}, ...]}; an unreadable file or another format is an error
// (exit 2). Its kernel names this lkjit does not generate are noted and left out.
//
// Output: a summary "N kernels ...: C compiled, D already cached, F failed in S s"; a progress bar on
// stderr when it is a terminal. Exit code 0; 2 when every named kernel was left out (nothing to compile) or
// the --bundle file cannot be written; 3 when a kernel failed to compile (each is listed); 5 when the cache is
// unusable, disabled (LKJIT_CACHE_DISABLE=1) or a compiled kernel could not be stored.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/ThreadPool.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <mutex>
#include <random>

#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"
#include "tools/lkjit/prewarm_set.h"
#include "tools/lkjit/progress.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

std::string op_help() {
  return "op family of --shapes and of the op's options: " + op_names(" | ") + " (default: " + default_op().name() + ")";
}
std::string shapes_help() {
  std::string forms;
  for (const OpCli* f : op_clis()) forms += (forms.empty() ? "" : "; ") + std::string(f->name()) + ": " + f->shape_form(Cmd::kPrewarm);
  return "layers of the op separated by commas, as " + forms;
}
std::string preset_help() {
  std::string s;
  for (const OpCli* f : op_clis())
    for (const auto& p : f->presets()) s += (s.empty() ? "" : ", ") + p.name + " (" + f->name() + ": " + p.doc + ")";
  return s + "; comma-separate several";
}
// The layer keys of each op, with their defaults: "wtconv: k 5, L 1, stride 1".
std::string layer_keys() {
  std::string s;
  for (const OpCli* f : op_clis()) {
    std::string keys;
    for (const auto& p : f->layer_params())
      keys += fmt::format("{}{} {}", keys.empty() ? "" : ", ", p.name, p.def_from.empty() ? std::to_string(p.def) : p.def_from);
    s += fmt::format("{}{}: {}", s.empty() ? "" : "; ", f->name(), keys);
  }
  return s;
}
std::string manifest_help() {
  std::string s =
      "what to compile, as JSON (every key optional; command-line --arch/--dtypes/--passes win):\n"
      "    {\"archs\":   [\"sm_80\", \"sm_90\"],\n"
      "     \"dtypes\":  [\"f32\", \"f16\", \"bf16\"],\n"
      "     \"passes\":  [\"fwd\", \"bwd\"],\n"
      "     \"presets\": [\"wtconvnext-t\"],\n"
      "     \"layers\":  [{\"op\": \"wtconv\", \"B\": 64, \"C\": 96, \"H\": 56, \"W\": 56, \"k\": 5, \"L\": 5, \"stride\": 1}],\n"
      "     \"kernels\": [\"lkjit_wtconv_fold_k5_L3_w256_sm90\"],\n"
      "     \"all_tiles\": false}\n";
  s += fmt::format("  layers: op {} and B 1 by default, C, H, W required, the other keys the op's\n"
                   "  ({} by default). kernels: names as\n", default_op().name(), layer_keys());
  return s + "  `lkjit compile` prints them (kept when their arch is a target; an unknown or invalid\n"
             "  name is an error)";
}

cl::SubCommand& kCmd = subcommand(Cmd::kPrewarm);
cl::OptionCategory kCat("lkjit prewarm options");
cl::opt<std::string> kOp("op", help_from(op_help), cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kArch("arch", cl::desc("comma-separated target archs"), cl::init("sm_80,sm_86,sm_89,sm_90"),
                           cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kPreset("preset", help_from(preset_help), cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kShapes("shapes", help_from(shapes_help), cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kDtypes("dtypes", cl::desc("comma-separated: f32,f16,bf16"), cl::init("f32,f16,bf16"), cl::sub(kCmd),
                             cl::cat(kCat));
cl::opt<bool> kRemote("remote", cl::desc("share the work with other processes and nodes through the remote cache's "
                                         "leases (LKJIT_REMOTE_CACHE): compile the kernels nobody else is compiling "
                                         "first, then collect the others' results"),
                      cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kPasses("passes", cl::desc("fwd, bwd or fwd,bwd"), cl::init("fwd,bwd"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kManifest("manifest", cl::value_desc("file.json"), help_from(manifest_help), cl::init(""), cl::sub(kCmd),
                               cl::cat(kCat));
cl::opt<std::string> kTuningDb("tuning-db", cl::value_desc("file.json"),
                               cl::desc("also compile the tuned kernels of this tuning database (an unreadable "
                                        "or unknown file is an error)"), cl::init(""),
                               cl::sub(kCmd), cl::cat(kCat));
cl::opt<bool> kAllTiles("all-tiles", cl::desc("every tile candidate of each planned kernel, not just the default"),
                        cl::sub(kCmd), cl::cat(kCat));
UnsignedOption<0, kIntMax> kJobs("j", cl::desc("parallel compiles (default: hardware threads)"), cl::init(0),
                                 cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kBundle("bundle", cl::value_desc("file"),
                             cl::desc("also write the kernels' cache entries to one portable bundle file "
                                      "(load it elsewhere with `lkjit cache import`)"),
                             cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<bool> kList("list", cl::desc("print the kernels that would be compiled, and exit"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kProgress("progress", cl::desc("auto (when stderr is a terminal) | always | never"),
                               cl::init("auto"), cl::sub(kCmd), cl::cat(kCat));

struct Outcome {
  std::string origin;  // "compiled" | "disk" | "memory"; empty on failure
  std::string key, error;
  std::string store_error;  // compiled, but not stored in the cache
};

std::vector<DType> parse_dtypes(const std::string& s) {
  std::vector<DType> v;
  for (const auto& d : split_list(s, "--dtypes")) v.push_back(parse_dtype(d));
  return v;
}

// Everything the command line and the files ask for.
PrewarmSet build_set() {
  PrewarmSet set;
  bool manifest_archs = false, manifest_dtypes = false;
  if (!kManifest.empty()) read_manifest(kManifest, &set, &manifest_archs, &manifest_dtypes);
  if (kArch.getNumOccurrences() || !manifest_archs) {
    set.archs = parse_target_archs(split_list(kArch, "--arch"), "--arch");
  } else {
    std::vector<std::string> names;
    for (int a : set.archs) names.push_back(arch_name(a));
    set.archs_from = kManifest + ": \"archs\"";
    set.archs = parse_target_archs(names, set.archs_from.c_str());
  }
  if (kDtypes.getNumOccurrences() || !manifest_dtypes) set.dtypes = parse_dtypes(kDtypes);
  if (kPasses.getNumOccurrences() || kManifest.empty()) {
    set.forward = set.backward = false;
    for (const auto& p : split_list(kPasses, "--passes")) {
      if (p == "fwd") set.forward = true;
      else if (p == "bwd") set.backward = true;
      else throw SpecError(fmt::format("lkjit: error: --passes: '{}' is unknown; supported: fwd, bwd", p));
    }
  }
  if (kPreset.getNumOccurrences())
    for (const auto& p : split_list(kPreset, "--preset"))
      for (const auto& ly : preset_layers(p, "--preset")) set.layers.push_back(ly);
  // --shapes with the options of the op (without them, a family may refuse its options: WTConv's --k, --L).
  const std::optional<std::string> shapes =
      kShapes.getNumOccurrences() ? std::optional<std::string>(kShapes) : std::nullopt;
  for (const auto& ly : chosen_op(kOp).problems(Cmd::kPrewarm, shapes)) set.layers.push_back(ly);
  if (kTuningDb.getNumOccurrences()) read_tuning_db(kTuningDb, &set.kernel_names);
  set.all_tiles = set.all_tiles || kAllTiles;
  // Empty command-line lists are refused by split_list; these can only come from the manifest.
  if (set.archs.empty())
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: {}: \"archs\" is empty; supported: one or more archs", std::string(kManifest)));
  if (set.dtypes.empty())
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: {}: \"dtypes\" is empty; supported: f32, f16, bf16", std::string(kManifest)));
  return set;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

bool prewarm_cmd() { return static_cast<bool>(kCmd); }

int prewarm_main() {
  check_family_options(Cmd::kPrewarm, {&chosen_op(kOp)}, op_origin(kOp));
  check_progress_mode(kProgress);
  // An empty path names no file: --manifest '' would be dropped silently, --tuning-db '' read as "".
  refuse_empty_paths({&kManifest, &kTuningDb, &kBundle});
  // The bundle's path is checked before anything compiles, not after minutes of compiling: a regular file
  // (replaced) or a new name, in a folder this process can write.
  if (kBundle.getNumOccurrences()) check_output_file(kBundle, "--bundle");
  // Without the disk cache every compile would be thrown away at exit.
  if (!kList && !disk_cache_enabled())
    throw CacheError(fmt::format("lkjit: error: prewarm: the on-disk cache is disabled by LKJIT_CACHE_DISABLE=1, so "
                                 "nothing compiled would be kept; unset it to prewarm {}", cache_dir()));
  const PrewarmSet set = build_set();
  if (set.layers.empty() && set.kernel_names.empty()) {
    if (kTuningDb.getNumOccurrences())
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: nothing to prewarm: --tuning-db {} has no tuned kernels; "
                                                 "give also --preset, --shapes or --manifest", std::string(kTuningDb)));
    if (!kManifest.empty())
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: nothing to prewarm: {} names no \"layers\", "
                                                 "\"presets\" or \"kernels\"", std::string(kManifest)));
    throw Error(ErrorCode::kUsage, "lkjit: error: nothing to prewarm: give --preset, --shapes, --manifest or --tuning-db");
  }
  const PrewarmPlan plan = expand(set);
  // A layer always plans its tiled path, so only named kernels can all be left out: compiling nothing
  // is no success.
  if (plan.jobs.empty()) {
    for (const auto& n : plan.notes) std::cerr << "prewarm: note: " << n << "\n";
    throw SpecError(fmt::format("lkjit: error: nothing to prewarm: every named kernel was left out ({}; see the notes "
                                "above); supported: kernels this lkjit generates for {} ({})",
                                counted(set.kernel_names.size(), "kernel"), set.archs_from, join_archs(set.archs)));
  }
  if (kList) {
    for (const auto& n : plan.notes) std::cerr << "prewarm: note: " << n << "\n";
    if (!kBundle.empty())
      std::cerr << fmt::format("prewarm: note: --list compiles nothing, so --bundle {} is not written\n", std::string(kBundle));
    for (const auto& j : plan.jobs)
      std::cout << fmt::format("{}  {}  {}\n", j.kernel_name, j.spec.to_string(), j.tile.to_string());
    std::cout << counted(plan.jobs.size(), "kernel") << "\n";
    return 0;
  }
  const KernelCache cache;
  cache.check();  // an unsafe directory fails here once, not once per kernel

  // Ranks sharing a cache start at different points, so they mostly compile different keys.
  std::vector<size_t> order(plan.jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(::getpid())));

  const bool tty = ::isatty(2);
  Progress progress(plan.jobs.size(), kProgress == "always" || (kProgress == "auto" && tty));
  std::vector<Outcome> out(plan.jobs.size());
  const auto t0 = std::chrono::steady_clock::now();
  llvm::ThreadPool pool(llvm::hardware_concurrency(kJobs));
  // --remote: a first pass skips the kernels another process holds (origin "deferred"); a second pass
  // collects them, waiting for their holders (or compiling them, if a holder died).
  std::vector<size_t> deferred;
  std::mutex deferred_mu;
  auto run_jobs = [&](const std::vector<size_t>& jobs, bool first_pass) {
  for (size_t i : jobs)
    pool.async([&, i, first_pass] {
      // Nothing may escape a ThreadPool task: LLVM 14 would terminate the process.
      Outcome& o = out[i];
      try {
        const CompiledKernel ck = kRemote && first_pass ? compile_kernel_unless_busy(plan.jobs[i].spec, plan.jobs[i].tile)
                                                        : compile_kernel(plan.jobs[i].spec, plan.jobs[i].tile);
        if (ck.origin == "deferred") {
          std::lock_guard<std::mutex> lock(deferred_mu);
          deferred.push_back(i);
          return;
        }
        o.origin = ck.origin;
        o.key = ck.key;
        o.store_error = ck.store_error;
      } catch (const std::exception& e) {
        o.error = e.what();
      } catch (...) {
        o.error = "unknown exception";
      }
      progress.tick(plan.jobs[i].kernel_name);
    });
  pool.wait();
  };
  run_jobs(order, true);
  if (!deferred.empty()) run_jobs(std::vector<size_t>(deferred), false);
  flush_remote_cache();  // what this process compiled reaches the remote cache before it exits
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  size_t compiled = 0, cached = 0, failed = 0, not_stored = 0;
  std::string store_error;
  std::vector<std::string> keys;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].error.empty()) {
      ++failed;
      std::cerr << fmt::format("prewarm: failed: {}: {}\n", plan.jobs[i].kernel_name, first_line(out[i].error));
      continue;
    }
    if (!out[i].store_error.empty()) {  // compiled for nothing: reported once below, not per kernel
      ++failed;
      if (!not_stored++) store_error = out[i].store_error;
      continue;
    }
    (out[i].origin == "compiled" ? compiled : cached) += 1;
    keys.push_back(out[i].key);
  }
  if (not_stored)
    std::cerr << fmt::format("lkjit: error: {}: {} could not be stored in the cache: {}\n", cache.dir(),
                             counted(not_stored, "compiled kernel"), store_error);
  for (const auto& n : plan.notes) std::cout << "prewarm: note: " << n << "\n";
  std::string dts;
  for (DType d : set.dtypes) dts += (dts.empty() ? "" : ", ") + std::string(to_string(d));
  std::cout << fmt::format("prewarm: {} for {} ({}) into {}: {} compiled, {} already cached, {} failed "
                           "in {:.1f} s (-j {})\n",
                           counted(plan.jobs.size(), "kernel"), join_archs(set.archs), dts, cache.dir(), compiled, cached,
                           failed, seconds, pool.getThreadCount());
  warn_missing_after_store(cache, keys, "prewarm");
  if (!kBundle.empty()) {
    const auto b = cache.export_bundle(kBundle, keys);
    for (const auto& s : b.skipped) std::cerr << "prewarm: bundle: left out " << s << "\n";
    std::cout << fmt::format("prewarm: bundle {}: {}, {}\n", std::string(kBundle), counted(b.entries, "entry", "entries"),
                             human_bytes(b.bytes));
    if (!b.skipped.empty() && !failed) return static_cast<int>(ErrorCode::kCache);
  }
  if (not_stored) return static_cast<int>(ErrorCode::kCache);
  return failed ? static_cast<int>(ErrorCode::kCompile) : 0;
}

}  // namespace lkjit::tool
