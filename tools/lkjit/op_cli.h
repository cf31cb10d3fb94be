// The op-generic part of the lkjit CLI. `run`, `compile`, `tune` and `prewarm` (run.cpp, compile.cpp,
// tune.cpp, prewarm*.cpp) know no op: they reach an op family only through its OpCli, which the family
// implements in tools/lkjit/ops/<family>.cpp and lists in tools/lkjit/ops/registry.cpp (one line).
//
// Options. llvm::cl options are global per subcommand, so two families cannot both declare `-k` for `run`.
// The vocabulary has three parts:
//  - core options, each subcommand's own (its category, "lkjit run options"): --op, --arch, --dtypes or
//    --dtype, --passes or --pass, --shapes or --shape, --preset, --iters, --tile, --kernel, --manifest, ...;
//  - shared family options, one per name and subcommand whichever families read them, declared through the
//    core (shared_value, shared_flag): -k (kernel size; prewarm: sizes), --stride, --no-bias, --nhwc. The core
//    holds their text; each reading family parses it (option_int) with its own rules and adds a note to
//    the help;
//  - a family's own options (WTConv: -L, --deeper, --path), members of its OpCli attached with
//    cl::sub(subcommand(c)) and cl::cat(category()).
// A family's own options and the shared ones it reads are in its cl::OptionCategory, so each subcommand's
// --help lists them under the family's name, and a family option given for another op than the chosen one
// is a usage error naming the option and the ops it belongs to (check_family_options).
#pragma once
#include <llvm/Support/CommandLine.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "lkjit/plan.h"
#include "lkjit/spec.h"
#include "lkjit/tuning.h"

namespace lkjit::tool {

enum class Cmd { kRun, kCompile, kTune, kPrewarm };
const char* cmd_name(Cmd c);  // "run", "compile", "tune", "prewarm"
// The subcommand's cl::SubCommand, made on first use: options of any file (and of any family) can attach to
// it during static initialization.
llvm::cl::SubCommand& subcommand(Cmd c);

// One layer problem of a family: its input's (B, C, H, W) and the family's layer parameters and settings by
// name (WTConv: k, L, stride from presets, shapes and manifests; bias, path, nhwc from options). A parameter a
// problem lacks takes the family's default. dtype and pass are the command's (--dtypes, --passes, --pass).
struct LayerProblem {
  std::string op;  // OpCli::name()
  int64_t B = 1, C = 1, H = 1, W = 1;
  NamedInts params;
};

// A named set of layers (a network's), e.g. WTConv's "wtconvnext-t". Names are unique across families.
struct Preset {
  std::string name;
  std::string doc;  // "WTConvNeXt-T stages at 224x224, batch 64"
  std::vector<LayerProblem> layers;
};

// A layer parameter as a manifest's "layers" objects write it, besides "op", "B", "C", "H", "W".
struct LayerParam {
  std::string name;  // "k"
  int lo = 0, hi = 0;
  int def = 0;       // when the layer does not give it
  bool odd = false;  // only odd values (kernel sizes)
  std::string def_from = {};  // when set: the default is this earlier parameter's value (dwconv's kw: kh)
};

// Which kernels OpCli::plan returns.
enum class PlanScope {
  kProblem,    // the kernels this problem runs (its path and layout settings): run, tune
  kEveryPath,  // every kernel a layer like it may run on the device, whatever the path: prewarm
};

struct RunSettings {
  int iters = 50;         // timed runs (median reported)
  int check_planes = 16;  // (b,c) planes per problem checked against the float64 reference
};

class OpCli {
 public:
  virtual ~OpCli() = default;

  // --op's value; also the generator's family name (lkjit/generator.h: family()).
  virtual const char* name() const = 0;
  // The family's options (own and shared ones it reads) are in this category: listed under it in --help.
  virtual llvm::cl::OptionCategory& category() = 0;
  // Whether `lkjit run` without --op runs this family's demo.
  virtual bool in_default_run() const = 0;

  // ---- problems ---------------------------------------------------------------------------------
  virtual std::vector<Preset> presets() const = 0;
  // The manifest keys of a layer besides op, B, C, H, W.
  virtual std::vector<LayerParam> layer_params() const = 0;
  // How a --shapes (run, prewarm) or --shape (tune) item is written: "B:C:H:W:L" (help and messages).
  virtual std::string shape_form(Cmd c) const = 0;
  // What `lkjit run` runs without --shapes: "WTConvNeXt-T at 224x224, batch 64" (help).
  virtual std::string demo_doc() const = 0;
  // The --shapes (run, prewarm) or --shape (tune) value with the family's options of subcommand c, as
  // problems (tune: one). nullopt when not given: run's demo layers; prewarm: none (Error when the family's
  // list options were given without it). Usage error (1) for a malformed item, bad input (2) for a value out
  // of range, each naming the option, the value and its range.
  virtual std::vector<LayerProblem> problems(Cmd c, const std::optional<std::string>& shapes) const = 0;
  // The problem as reports word it: "fwd f32 64x96x56x56 k=5 L=5".
  virtual std::string describe(const LayerProblem& p, DType dtype, bool backward) const = 0;

  // ---- plans (pure: DeviceLimits, no GPU) --------------------------------------------------------
  // The kernels of the problem's pass in dtype on `limits` (prewarm, run without a GPU, tune --list).
  // SpecError for an invalid problem; in kEveryPath, a path that cannot run it is left out with a line in
  // *notes (may be null) instead.
  virtual std::vector<PlannedKernel> plan(const LayerProblem& p, DType dtype, bool backward,
                                          const DeviceLimits& limits, PlanScope scope,
                                          std::set<std::string>* notes) const = 0;

  // ---- compile ----------------------------------------------------------------------------------
  virtual Kernel default_kernel() const = 0;  // `lkjit compile` without --kernel
  // The spec fields of kernel k (lkjit/generator.h: kernel_fields) from the family's compile options.
  virtual NamedInts compile_fields(const Kernel& k) const = 0;
  // The shape whose default tile `lkjit compile` takes without --tile.
  virtual Shape compile_shape() const = 0;
  // Positional --tile: how many of the family's axes (FamilyInfo::axes order) must be given; the rest are
  // optional.
  virtual size_t positional_tile_axes() const = 0;
  // Warnings (stderr) for the family's compile options that do not change (spec, tile): they are ignored.
  virtual void warn_ignored_compile_options(const OpSpec& spec, const Tile& tile, bool dtype_given) const = 0;

  // ---- tune -------------------------------------------------------------------------------------
  // The plan entry `--kernel main` selects: the one that moves the most bytes.
  virtual KernelSelector main_kernel(const std::vector<PlannedKernel>& plan) const = 0;
  // The pass to time (needs a GPU: DriverError without one).
  virtual std::unique_ptr<PassHarness> harness(const LayerProblem& p, DType dtype, bool backward) const = 0;
  // The problem's path decision (lkjit/tuning.h, "paths") with its harness set, for `tune --paths`; nullopt
  // for a family whose layers have one path per problem (the default).
  virtual std::optional<PassPaths> paths(const LayerProblem&, DType, bool /*backward*/, const DeviceLimits&) const {
    return std::nullopt;
  }
  // The problem part of tune's `reproduce:` line, e.g. "--shape 64:96:56:56 --k 5 --L 3 --dtype f32 --pass
  // fwd" (shape: --shape as given).
  virtual std::string reproduce(const LayerProblem& p, const std::string& shape, const std::string& dtype,
                                const std::string& pass) const = 0;

  // ---- run (GPU) --------------------------------------------------------------------------------
  // The family's lines before its table (its pass and parameters) and the table's header.
  virtual void print_run_header(std::ostream& os, const RunSettings& s) const = 0;
  // One problem: forward (and backward where the family checks it) on NaN-poisoned outputs, sampled planes
  // checked against the float64 reference, timed (median of s.iters); prints its row. False when the check
  // failed.
  virtual bool run(std::ostream& os, const LayerProblem& p, DType dtype, const RunSettings& s,
                   std::mt19937_64& rng) const = 0;
  virtual void print_run_footer(std::ostream& os) const = 0;
};

// ---- registry (ops/registry.cpp) ------------------------------------------------------------------
// Every family, in registry order; the first is the default op of every subcommand. Safe during static
// initialization (the families' options are members, made on first use).
const std::vector<OpCli*>& op_clis();
OpCli& default_op();
// The family named `name`; SpecError naming `what` ("--op", a manifest's place) and the known ops.
OpCli& op_cli(const std::string& name, const std::string& what);
std::string op_names(const char* sep = ", ");  // "wtconv"

// ---- options --------------------------------------------------------------------------------------
// Help that lists what is registered (ops, kernels, presets) is made in main, once the registries exist
// (describe_options, before the command line is read), not during static initialization, when another
// file's data may not be yet: cl::opt<std::string> kOp("op", help_from(op_help), ...).
struct HelpFrom {
  std::string (*make)();
  void apply(llvm::cl::Option& o) const;
};
inline HelpFrom help_from(std::string (*make)()) { return HelpFrom{make}; }
void describe_options();

// The shared family option `name` of subcommand c (see above), made by its first reader, which family
// `family` joins: the option enters its category and its help gains "(family: note)".
const llvm::cl::opt<std::string>& shared_value(Cmd c, const std::string& name, const char* family,
                                               llvm::cl::OptionCategory& category, const std::string& note);
const llvm::cl::opt<bool>& shared_flag(Cmd c, const std::string& name, const char* family,
                                       llvm::cl::OptionCategory& category, const std::string& note);
// "-k" or "--stride": how messages name an option.
std::string option_label(const llvm::cl::Option& o);
// A shared value option as one integer, parsed as the typed options are (common.h: InRange): `fallback` when
// not given; usage error (1) when not an integer; bad input (2) naming the option, the value and the range
// ("-k=33 is out of range; supported: odd k in [1, 31]") otherwise.
int option_int(const llvm::cl::opt<std::string>& o, int64_t lo, int64_t hi, bool odd, int fallback);
// A comma-separated list of integers in [lo, hi] (what: "--k"): usage error for an empty list or item.
std::vector<int> parse_int_list(const std::string& s, const char* what, int lo, int hi, bool odd = false);

// The families' options (own or shared) of subcommand c on the command line, in command-line order.
std::vector<const llvm::cl::Option*> given_family_options(Cmd c);
bool family_option_given(Cmd c);
// The usage error for the first family option on the command line that none of `ops` reads, naming it and
// the ops it belongs to; chosen_by says how the ops were chosen ("" for --op, " (the default without --op)").
void check_family_options(Cmd c, const std::vector<OpCli*>& ops, const std::string& chosen_by);
// How check_family_options words the op's origin when --op (opt's value) may be empty.
std::string op_origin(const std::string& op);
// --op's value: the family, or the default op when empty.
OpCli& chosen_op(const std::string& op);

// ---- run --------------------------------------------------------------------------------------------
// `pass` run 3 times to warm up, then `iters` times between CUDA events on the default stream: the median in ms
// (what every family's run() reports).
double median_ms(int iters, const std::function<void()>& pass);

// ---- presets --------------------------------------------------------------------------------------
// The layers of preset `name` of whichever family owns it. Error (invalid argument) starting with `where`
// ("--preset", or a manifest's place) and listing every preset otherwise.
std::vector<LayerProblem> preset_layers(const std::string& name, const std::string& where);
std::string preset_names();  // "wtconvnext-t, wtconvnext-s, wtconvnext-b" (every family's)

}  // namespace lkjit::tool
