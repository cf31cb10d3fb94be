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
