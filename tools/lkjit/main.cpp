// lkjit: the command-line tool. Subcommands dispatch through llvm::cl::SubCommand; each keeps its own
// options. Exit codes come from lkjit::ErrorCode (0 ok, 1 usage, 2 bad input, 3 compile, 4 driver, 5 cache).
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cache/tuning_db.h"
#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "lkjit/spec.h"
#include "lkjit/tuning.h"
#include "lkjit/version.h"
#include "lkjit/wtconv.h"
#include "runtime/ops/wtconv_internal.h"
#include "tools/lkjit/common.h"

namespace cl = llvm::cl;

namespace lkjit::tool {

void warn_broken_tuning_db(const std::string& path) {
  try {
    cache::TuningDb::load(path);
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.rfind("lkjit: error: ", 0) == 0) why.erase(0, 14);
    llvm::errs() << fmt::format("lkjit: warning: {}; layers ignore it and take their default tiles\n", why);
  }
}

void check_progress_mode(const std::string& mode) {
  if (mode != "auto" && mode != "always" && mode != "never")
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: --progress '{}' is unknown; supported: auto, always, never", mode));
}

void check_output_file(const std::string& b, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(b, ec);
  const auto dir = fs::absolute(b).parent_path();
  std::string why;
  // A name the OS cannot take (ENAMETOOLONG, ELOOP...) is the user's bad input, found before the work.
  if (ec && ec != std::errc::no_such_file_or_directory) why = "cannot be used: " + ec.message();
  else if (b.back() == '/' || (fs::exists(st) && !fs::is_regular_file(st))) why = "is not a file";
  else if (!fs::is_directory(dir, ec)) why = fmt::format("its folder {} does not exist or is not a folder", dir.string());
  else if (::access(dir.c_str(), W_OK | X_OK) != 0) why = fmt::format("its folder {} is not writable", dir.string());
  if (!why.empty())
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: {} {}: {}; supported: a new or regular file in a writable folder", what, b, why));
}

void warn_evicted_by_cap(const KernelCache& c, size_t n, size_t stored, const char* what) {
  if (!n) return;
  llvm::errs() << fmt::format("lkjit: warning: {}: the cache's size cap ({}, LKJIT_CACHE_MAX_BYTES) evicted {} of the {} "
                              "entries just stored; raise it to keep them\n",
                              what, human_bytes(c.max_bytes()), n, stored);
}

void warn_missing_after_store(const KernelCache& c, const std::vector<std::string>& keys, const char* what) {
  const size_t gone = c.missing(keys), evicted = std::min(gone, c.evicted_by_cap(keys));
  warn_evicted_by_cap(c, evicted, keys.size(), what);
  if (gone > evicted)
    llvm::errs() << fmt::format("lkjit: warning: {}: {} of the {} entries just stored are no longer in {}: another "
                                "process removed them (a `lkjit cache clear`, or its own size cap)\n",
                                what, gone - evicted, keys.size(), c.dir());
}

std::string human_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = b / 1024.0;
  int u = 0;
  for (; v >= 1024 && u < 3; ++u) v /= 1024;
  return fmt::format("{:.1f} {}", v, units[u]);
}

std::vector<int> parse_target_archs(const std::vector<std::string>& items, const char* what) {
  const std::vector<int> ok = nvrtc_archs();
  std::vector<int> out;
  for (const auto& item : items) {
    const int a = parse_arch(item);
    DeviceLimits::for_arch(a);  // an arch the generator has no limits for cannot be planned
    if (std::find(ok.begin(), ok.end(), a) == ok.end()) {
      std::string all;
      for (int x : ok) all += (all.empty() ? "" : ", ") + arch_name(x);
      throw SpecError(fmt::format("lkjit: error: {}: {} is not supported by NVRTC {}; supported: {}", what,
                                  arch_name(a), nvrtc_version(), all));
    }
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

int dispatch() {
  // LKJIT_TUNE steers the layers `run` builds and the tuner: a typo is said at once, with or without a
  // GPU, not only once a layer runs on one (SpecError: exit 2).
  if (run_cmd() || tune_cmd()) tune_mode_from_env();
  if (run_cmd()) return run_main();
  if (compile_cmd()) return compile_main();
  if (tune_cmd()) return tune_main();
  if (prewarm_cmd()) return prewarm_main();
  if (cache_cmd()) return cache_main();
  llvm::errs() << "lkjit: error: no subcommand given; see lkjit --help\n";
  return 1;
}

}  // namespace lkjit::tool

int main(int argc, char** argv) {
  cl::SetVersionPrinter([](llvm::raw_ostream& os) {
    os << "lkjit " << LKJIT_VERSION << " (generator v" << lkjit::kGeneratorVersion << ")\n";
  });
  // LLVM Support registers its own options (--stats, --rng-seed, ...) at the top level: kept out of
  // --help-hidden, which then lists only lkjit's and the generic ones (--help, --version).
  static cl::OptionCategory lkjit_top("lkjit options");
  cl::HideUnrelatedOptions(lkjit_top);
  // An option before any subcommand (`lkjit -k 5`): LLVM would answer "Did you mean '-h'?".
  if (argc >= 2 && argv[1][0] == '-') {
    const std::string a = argv[1];
    static const char* generic[] = {"-h", "--help", "-help", "--help-hidden", "--help-list", "--help-list-hidden",
                                    "--version", "-version"};
    if (std::none_of(std::begin(generic), std::end(generic), [&](const char* g) { return a == g; })) {
      llvm::errs() << "lkjit: error: '" << a << "' needs a subcommand first; supported: lkjit run | compile | prewarm "
                   << "| tune | cache [options] (e.g. lkjit run " << a << " ...); lkjit --help lists them\n";
      return static_cast<int>(lkjit::ErrorCode::kUsage);
    }
  }
  if (argc < 2) {
    // The main job: `lkjit` alone behaves as `lkjit run`.
    static const char* run_argv[] = {argv[0], "run", nullptr};
    argc = 2;
    argv = const_cast<char**>(run_argv);
  }
  if (!cl::ParseCommandLineOptions(argc, argv, "lkjit: JIT kernels for large-receptive-field convolutions\n",
                                   &llvm::errs()))
    return 1;
  // Integer options that are no decimal integer (usage, 1) or out of their range (bad input, 2), said before
  // anything runs.
  using lkjit::tool::option_errors;
  using lkjit::tool::option_usage_errors;
  for (const auto& e : option_usage_errors()) llvm::errs() << e << "\n";
  for (const auto& e : option_errors()) llvm::errs() << e << "\n";
  if (!option_usage_errors().empty()) return static_cast<int>(lkjit::ErrorCode::kUsage);
  if (!option_errors().empty()) return static_cast<int>(lkjit::ErrorCode::kInvalidArgument);
  try {
    return lkjit::tool::dispatch();
  } catch (const lkjit::Error& e) {
    llvm::errs() << lkjit::tool::clip_arguments(e.what(), argc, argv) << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    llvm::errs() << "lkjit: error: " << lkjit::tool::clip_arguments(e.what(), argc, argv) << "\n";
    return 2;
  }
}
