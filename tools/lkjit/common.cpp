// The subcommands' shared helpers of tools/lkjit/common.h that are not parsing (tools/lkjit/args.cpp):
// warnings, output-file checks, sizes, target archs. Apart from main.cpp, so that the fuzz targets can link
// the CLI's objects without its main().
#include <fmt/format.h>
#include <llvm/Support/raw_ostream.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "lkjit/spec.h"
#include "lkjit/tuning.h"
#include "tools/lkjit/common.h"

namespace lkjit::tool {

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
                              "just stored; raise it to keep them\n",
                              what, human_bytes(c.max_bytes()), n, counted(stored, "entry", "entries"));
}

void warn_missing_after_store(const KernelCache& c, const std::vector<std::string>& keys, const char* what) {
  const size_t gone = c.missing(keys), evicted = std::min(gone, c.evicted_by_cap(keys));
  warn_evicted_by_cap(c, evicted, keys.size(), what);
  if (gone > evicted)
    llvm::errs() << fmt::format("lkjit: warning: {}: {} of the {} just stored {} no longer in {}: another "
                                "process removed {} (a `lkjit cache clear`, or its own size cap)\n",
                                what, gone - evicted, counted(keys.size(), "entry", "entries"),
                                gone - evicted == 1 ? "is" : "are", c.dir(), gone - evicted == 1 ? "it" : "them");
}

std::string counted(uint64_t n, std::string_view one, std::string_view many) {
  if (n == 1) return fmt::format("1 {}", one);
  return many.empty() ? fmt::format("{} {}s", n, one) : fmt::format("{} {}", n, many);
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

}  // namespace lkjit::tool
