// lkjit: the command-line tool. Subcommands dispatch through llvm::cl::SubCommand; each keeps its own
// options. Exit codes come from lkjit::ErrorCode (0 ok, 1 usage, 2 bad input, 3 compile, 4 driver, 5 cache).
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "lkjit/spec.h"
#include "lkjit/tuning.h"
#include "lkjit/version.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"

namespace cl = llvm::cl;

namespace lkjit::tool {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool is_decimal_integer(llvm::StringRef s) {
  if (s.startswith("-") || s.startswith("+")) s = s.drop_front();
  return !s.empty() && s.find_first_not_of("0123456789") == llvm::StringRef::npos;
}

std::vector<int> parse_ints(const std::string& s, const char* what, int lo, int hi, bool odd) {
  std::vector<int> v;
  for (const auto& t : split(s, ',')) {
    if (!is_decimal_integer(t))
      throw Error(ErrorCode::kUsage, "lkjit: error: --" + std::string(what) + ": '" + t + "' is not an integer");
    long long n = 0;
    bool beyond = false;  // even long long's range
    try {
      n = std::stoll(t);
    } catch (const std::out_of_range&) {
      beyond = true;
    }
    if (beyond || n < lo || n > hi || (odd && n % 2 == 0))
      throw SpecError(fmt::format("lkjit: error: --{}: '{}' is out of range; supported: {}[{}, {}]", what, t,
                                  odd ? fmt::format("odd {} in ", what) : "", lo, hi));
    v.push_back(static_cast<int>(n));
  }
  return v;
}

std::vector<std::string>& option_errors() {
  static std::vector<std::string> errors;
  return errors;
}

void note_out_of_range(llvm::StringRef name, llvm::StringRef value, int64_t lo, int64_t hi, bool odd) {
  option_errors().push_back(fmt::format("lkjit: error: {}{}={} is out of range; supported: {}[{}, {}]",
                                        name.size() == 1 ? "-" : "--", name.str(), value.str(),
                                        odd ? fmt::format("odd {} in ", name.str()) : "", lo, hi));
}

std::vector<int64_t> parse_dims(const std::string& item, const char* what, const std::string& form,
                                std::string (*range_of)(const std::string&)) {
  const auto f = split(item, ':'), names = split(form, ':');
  if (f.size() != names.size())
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: {}: '{}' is not {}", what, item, form));
  std::vector<int64_t> v;
  for (size_t i = 0; i < f.size(); ++i) {
    if (!is_decimal_integer(f[i]))
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: {}: '{}' in '{}' is not an integer", what, f[i], item));
    try {
      v.push_back(std::stoll(f[i]));
    } catch (const std::out_of_range&) {  // an integer all the same: bad input (2), as any value out of range
      // The layer's range (it never sees a value beyond int64), else int64's.
      std::string range = range_of ? range_of(names[i]) : "";
      if (range.empty())
        range = fmt::format("[{}, {}]", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
      throw SpecError(fmt::format("lkjit: error: {}: {}={} in '{}' is out of range; supported: {}", what, names[i], f[i],
                                  item, range));
    }
  }
  return v;
}

void require_positive_bchw(const std::vector<int64_t>& v, const char* what, const std::string& item) {
  for (size_t i = 0; i < v.size() && i < 4; ++i)
    if (v[i] < 1)
      throw SpecError(
          fmt::format("lkjit: error: {}: {}={} in '{}' is out of range; supported: >= 1", what, "BCHW"[i], v[i], item));
}

std::vector<std::string> split_list(const std::string& s, const char* what) {
  const std::vector<std::string> all = split(s, ',');
  size_t items = 1;
  for (char c : s) items += c == ',';
  if (all.empty())
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: {}: the list is empty; supported: one or more "
                                               "comma-separated values", what));
  if (all.size() != items)
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: {}: '{}' has an empty item; supported: "
                                               "comma-separated values without empty items", what, s));
  return all;
}

std::string join_archs(const std::vector<int>& archs) {
  std::string s;
  for (int a : archs) s += (s.empty() ? "" : ", ") + arch_name(a);
  return s;
}

void warn_broken_tuning_db(const std::string& path) {
  const std::string why = tuning_db_problem(path);
  if (!why.empty())
    llvm::errs() << fmt::format("lkjit: warning: {}; layers ignore it and take their default tiles\n", why);
}

void check_progress_mode(const std::string& mode) {
  if (mode != "auto" && mode != "always" && mode != "never")
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: --progress '{}' is unknown; supported: auto, always, never", mode));
}

void refuse_empty_paths(std::initializer_list<const llvm::cl::opt<std::string>*> options) {
  for (const auto* o : options)
    if (o->getNumOccurrences() && o->empty())
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --{} is empty; supported: a file path", o->ArgStr.str()));
}

void check_output_file(const std::string& b, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(b, ec);
  const auto dir = fs::absolute(b).parent_path();
  std::string why;
  if (b.back() == '/' || (fs::exists(st) && !fs::is_regular_file(st))) why = "is not a file";
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
  // The op families' options (tools/lkjit/ops/registry.cpp) exist before the command line is read.
  lkjit::tool::op_clis();
  lkjit::tool::describe_options();
  if (!cl::ParseCommandLineOptions(argc, argv, "lkjit: JIT kernels for large-receptive-field convolutions\n",
                                   &llvm::errs()))
    return 1;
  // Integer options out of their range (InRange): bad input, said before anything runs.
  for (const auto& e : lkjit::tool::option_errors()) llvm::errs() << e << "\n";
  if (!lkjit::tool::option_errors().empty()) return static_cast<int>(lkjit::ErrorCode::kInvalidArgument);
  try {
    return lkjit::tool::dispatch();
  } catch (const lkjit::Error& e) {
    llvm::errs() << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    llvm::errs() << "lkjit: error: " << e.what() << "\n";
    return 2;
  }
}
