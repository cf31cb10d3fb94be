// `lkjit prewarm`: compile, with no GPU, every kernel a set of layers needs on a set of target archs
// into the kernel cache, in parallel, so that jobs on those GPUs start with no JIT work. Processes
// sharing a cache directory (the ranks of a job) can all run it at once: each key compiles once.
//
// Usage
//   lkjit prewarm --preset wtconvnext-t --arch sm_80,sm_90            # forward + backward, 3 dtypes
//   lkjit prewarm --shapes 64:96:56:56,64:192:28:28 --k 5,7 --L 2,3 --dtypes f16
//   lkjit prewarm --manifest kernels.json --tuning-db tuning.json --all-tiles -j 8
//   lkjit prewarm --preset wtconvnext-b --arch sm_90 --bundle b.lkjit   # then elsewhere:
//   lkjit cache import b.lkjit
// Every layer is planned with wtconv_plan() for the forward and the backward pass, on the plane path
// (where the planes fit the arch's shared memory) and on the tiled path; --all-tiles adds each planned
// kernel's whole tile space; a tuning database adds its tuned tiles. Jobs are unique by kernel name.
//
// Manifest (JSON; every key optional, command-line --arch/--dtypes/--passes win over the manifest's):
//   {"archs":   ["sm_80", "sm_90"],                 target archs
//    "dtypes":  ["f32", "f16", "bf16"],             activation dtypes
//    "passes":  ["fwd", "bwd"],                     which passes' kernels
//    "presets": ["wtconvnext-t"],                   preset layer sets, as --preset
//    "layers":  [{"B": 64, "C": 96, "H": 56, "W": 56, "k": 5, "L": 5, "stride": 1}],
//                                                   C, H, W required; B 1, k 5, L 1, stride 1 default
//    "kernels": ["lkjit_wtconv_fold_k5_L3_w256_sm90"],   exact kernels (kept when their arch is a target)
//    "all_tiles": false}
// Tuning database: lkjit's own (cache/tuning_db.h: "records" with "spec" and "tile"), or any JSON with
// {"entries": [{"kernel": "<kernel name>"}, ...]}; another format is reported and skipped.
//
// Output: a summary "N kernels ...: C compiled, D already cached, F failed in S s"; a progress bar on
// stderr when it is a terminal. Exit code 0, or 3 when any kernel failed (each is listed).
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/ThreadPool.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>

#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/prewarm_set.h"
#include "tools/lkjit/progress.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

cl::SubCommand kCmd("prewarm", "Compile kernels for target archs into the cache (no GPU needed)");
cl::OptionCategory kCat("lkjit prewarm options");
cl::opt<std::string> kArch("arch", cl::desc("comma-separated target archs"), cl::init("sm_80,sm_86,sm_89,sm_90"),
                           cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kPreset("preset", cl::desc("wtconvnext-t | wtconvnext-s | wtconvnext-b: the stage layers at "
                                                "224x224, batch 64 (comma-separate several)"),
                             cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kShapes("shapes", cl::desc("layers as B:C:H:W separated by commas, crossed with --k and --L"),
                             cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kK("k", cl::desc("odd kernel sizes for --shapes, e.g. 3,5,7"), cl::init("5"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kL("L", cl::desc("wavelet levels for --shapes, e.g. 1,2,3"), cl::init("3"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kDtypes("dtypes", cl::desc("comma-separated: f32,f16,bf16"), cl::init("f32,f16,bf16"), cl::sub(kCmd),
                             cl::cat(kCat));
cl::opt<std::string> kPasses("passes", cl::desc("fwd, bwd or fwd,bwd"), cl::init("fwd,bwd"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kManifest(
    "manifest", cl::value_desc("file.json"),
    cl::desc("what to compile, as JSON (every key optional; command-line --arch/--dtypes/--passes win):\n"
             "    {\"archs\":   [\"sm_80\", \"sm_90\"],\n"
             "     \"dtypes\":  [\"f32\", \"f16\", \"bf16\"],\n"
             "     \"passes\":  [\"fwd\", \"bwd\"],\n"
             "     \"presets\": [\"wtconvnext-t\"],\n"
             "     \"layers\":  [{\"B\": 64, \"C\": 96, \"H\": 56, \"W\": 56, \"k\": 5, \"L\": 5, \"stride\": 1}],\n"
             "     \"kernels\": [\"lkjit_wtconv_fold_k5_L3_w256_sm90\"],\n"
             "     \"all_tiles\": false}\n"
             "  layers: C, H, W required; B 1, k 5, L 1, stride 1 by default. kernels: names as\n"
             "  `lkjit compile` prints them (kept when their arch is a target)"),
    cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kTuningDb("tuning-db", cl::value_desc("file.json"),
                               cl::desc("also compile the tuned kernels of this tuning database"), cl::init(""),
                               cl::sub(kCmd), cl::cat(kCat));
cl::opt<bool> kAllTiles("all-tiles", cl::desc("every tile candidate of each planned kernel, not just the default"),
                        cl::sub(kCmd), cl::cat(kCat));
cl::opt<unsigned> kJobs("j", cl::desc("parallel compiles (default: hardware threads)"), cl::init(0), cl::sub(kCmd),
                        cl::cat(kCat));
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
};

std::vector<DType> parse_dtypes(const std::string& s) {
  std::vector<DType> v;
  for (const auto& d : split(s, ',')) v.push_back(parse_dtype(d));
  return v;
}

// Everything the command line and the files ask for. Notes collect what was left out.
PrewarmSet build_set(std::vector<std::string>* notes) {
  PrewarmSet set;
  bool manifest_archs = false, manifest_dtypes = false;
  if (!kManifest.empty()) read_manifest(kManifest, &set, &manifest_archs, &manifest_dtypes);
  if (kArch.getNumOccurrences() || !manifest_archs) {
    set.archs.clear();
    for (const auto& a : split(kArch, ',')) set.archs.push_back(parse_arch(a));
  }
  if (kDtypes.getNumOccurrences() || !manifest_dtypes) set.dtypes = parse_dtypes(kDtypes);
  if (kPasses.getNumOccurrences() || kManifest.empty()) {
    set.forward = set.backward = false;
    for (const auto& p : split(kPasses, ',')) {
      if (p == "fwd") set.forward = true;
      else if (p == "bwd") set.backward = true;
      else throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --passes: '{}' is unknown; supported: fwd, bwd", p));
    }
  }
  for (const auto& p : split(kPreset, ','))
    for (const auto& ly : preset_layers(p)) set.layers.push_back(ly);
  if (!kShapes.empty()) {
    for (const auto& ly : parse_shapes(kShapes, parse_ints(kK, "k"), parse_ints(kL, "L"))) set.layers.push_back(ly);
  } else if (kK.getNumOccurrences() || kL.getNumOccurrences()) {
    throw Error(ErrorCode::kUsage, "lkjit: error: --k and --L apply to --shapes, which is missing (e.g. --shapes 64:96:56:56)");
  }
  if (!kTuningDb.empty()) {
    const std::string note = read_tuning_db(kTuningDb, &set.kernel_names);
    if (!note.empty()) notes->push_back(note);
  }
  set.all_tiles = set.all_tiles || kAllTiles;
  if (set.archs.empty()) throw Error(ErrorCode::kUsage, "lkjit: error: --arch is empty");
  if (set.dtypes.empty()) throw Error(ErrorCode::kUsage, "lkjit: error: --dtypes is empty");
  return set;
}

void check_archs(const std::vector<int>& archs) {
  const auto ok = nvrtc_archs();
  for (int a : archs)
    if (std::find(ok.begin(), ok.end(), a) == ok.end()) {
      std::string all;
      for (int x : ok) all += (all.empty() ? "" : ", ") + arch_name(x);
      throw SpecError(fmt::format("lkjit: error: --arch: {} is not supported by NVRTC {}; supported: {}", arch_name(a),
                                  nvrtc_version(), all));
    }
}

std::string join_archs(const std::vector<int>& archs) {
  std::string s;
  for (int a : archs) s += (s.empty() ? "" : ", ") + arch_name(a);
  return s;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

bool prewarm_cmd() { return static_cast<bool>(kCmd); }

int prewarm_main() {
  if (kProgress != "auto" && kProgress != "always" && kProgress != "never")
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --progress '{}' is unknown; supported: auto, always, never",
                                               std::string(kProgress)));
  std::vector<std::string> notes;
  const PrewarmSet set = build_set(&notes);
  if (set.layers.empty() && set.kernel_names.empty())
    throw Error(ErrorCode::kUsage, "lkjit: error: nothing to prewarm: give --preset, --shapes, --manifest or --tuning-db");
  check_archs(set.archs);
  const PrewarmPlan plan = expand(set);
  for (const auto& n : plan.notes) notes.push_back(n);
  if (kList) {
    for (const auto& j : plan.jobs)
      std::cout << fmt::format("{}  {}  {}\n", j.kernel_name, j.spec.to_string(), j.tile.to_string());
    std::cout << fmt::format("{} kernels\n", plan.jobs.size());
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
  for (size_t i : order)
    pool.async([&, i] {
      // Nothing may escape a ThreadPool task: LLVM 14 would terminate the process.
      Outcome& o = out[i];
      try {
        const CompiledKernel ck = compile_kernel(plan.jobs[i].spec, plan.jobs[i].tile);
        o.origin = ck.origin;
        o.key = ck.key;
      } catch (const std::exception& e) {
        o.error = e.what();
      } catch (...) {
        o.error = "unknown exception";
      }
      progress.tick(plan.jobs[i].kernel_name);
    });
  pool.wait();
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  size_t compiled = 0, cached = 0, failed = 0;
  std::vector<std::string> keys;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].error.empty()) {
      ++failed;
      std::cerr << fmt::format("prewarm: failed: {}: {}\n", plan.jobs[i].kernel_name, first_line(out[i].error));
      continue;
    }
    (out[i].origin == "compiled" ? compiled : cached) += 1;
    keys.push_back(out[i].key);
  }
  for (const auto& n : notes) std::cout << "prewarm: note: " << n << "\n";
  std::string dts;
  for (DType d : set.dtypes) dts += (dts.empty() ? "" : ", ") + std::string(to_string(d));
  std::cout << fmt::format("prewarm: {} kernels for {} ({}) into {}: {} compiled, {} already cached, {} failed "
                           "in {:.1f} s (-j {})\n",
                           plan.jobs.size(), join_archs(set.archs), dts, cache.dir(), compiled, cached, failed, seconds,
                           pool.getThreadCount());
  if (!kBundle.empty()) {
    const auto b = cache.export_bundle(kBundle, keys);
    for (const auto& s : b.skipped) std::cerr << "prewarm: bundle: left out " << s << "\n";
    std::cout << fmt::format("prewarm: bundle {}: {} entries, {:.1f} MiB\n", std::string(kBundle), b.entries,
                             b.bytes / 1048576.0);
    if (!b.skipped.empty() && !failed) return static_cast<int>(ErrorCode::kCache);
  }
  return failed ? static_cast<int>(ErrorCode::kCompile) : 0;
}

}  // namespace lkjit::tool
