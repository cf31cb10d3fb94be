// The lkjit CLI's registry for its tests (tests/cli_test.cpp, CliOps): WTConv and "toy", a second op family
// that exists only here, for what needs two families: an option of one op given for the other, `lkjit run`
// running every op's demo, presets and manifest layers found by op, each op's help category, the shared -k.
// The toy op has no kernels of its own: it plans WTConv's fold kernel (k from -k, L=1), which is all the
// core needs to list, compile and prewarm it. Options: the shared -k (run, prewarm) and its own --window.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/wtconv_kernels.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"

namespace lkjit::tool {

OpCli& wtconv_cli();  // tools/lkjit/ops/wtconv.cpp

namespace {

namespace cl = llvm::cl;

LayerProblem toy_layer(int64_t B, int64_t C, int64_t H, int64_t W, int k, int window) {
  LayerProblem p;
  p.op = "toy";
  p.B = B, p.C = C, p.H = H, p.W = W;
  p.params.set("k", k);
  p.params.set("window", window);
  return p;
}

class ToyCli final : public OpCli {
 public:
  const char* name() const override { return "toy"; }
  cl::OptionCategory& category() override { return cat_; }
  bool in_default_run() const override { return true; }
  std::vector<Preset> presets() const override { return {{"toynet", "one toy layer", {toy_layer(2, 8, 8, 8, 3, 2)}}}; }
  std::vector<LayerParam> layer_params() const override { return {{"k", 1, 31, 3, true}, {"window", 1, 16, 7, false}}; }
  std::string shape_form(Cmd) const override { return "B:C:H:W"; }
  std::string demo_doc() const override { return "one 2x8x8x8 toy layer"; }

  std::vector<LayerProblem> problems(Cmd c, const std::optional<std::string>& shapes) const override {
    const int window = c == Cmd::kRun ? int(run_window_) : c == Cmd::kTune ? int(tune_window_) : int(prewarm_window_);
    std::vector<int> ks = {3};
    if (c == Cmd::kRun) ks = {option_int(run_k_, 1, 31, true, 3)};
    if (c == Cmd::kPrewarm && prewarm_k_.getNumOccurrences()) ks = parse_int_list(prewarm_k_, "--k", 1, 31, true);
    if (!shapes) return c == Cmd::kRun ? std::vector<LayerProblem>{toy_layer(2, 8, 8, 8, ks[0], window)} : std::vector<LayerProblem>{};
    std::vector<LayerProblem> out;
    const char* what = c == Cmd::kTune ? "--shape" : "--shapes";
    for (const auto& item : split_list(*shapes, what)) {
      const auto v = parse_dims(item, what, "B:C:H:W");
      require_positive_bchw(v, what, item);
      for (int k : ks) out.push_back(toy_layer(v[0], v[1], v[2], v[3], k, window));
    }
    return out;
  }

  std::string describe(const LayerProblem& p, DType dtype, bool backward) const override {
    return fmt::format("toy {} {} {} k={} window={}", backward ? "bwd" : "fwd", lkjit::to_string(dtype),
                       Shape{p.B, p.C, p.H, p.W, 1}.to_string(), p.params.get("k", 3), p.params.get("window", 7));
  }

  std::vector<PlannedKernel> plan(const LayerProblem& p, DType, bool, const DeviceLimits& lim, PlanScope,
                                  std::set<std::string>*) const override {
    PlannedKernel pk;
    pk.spec = make_spec(kWTConvFold, DType::kF32, lim.arch, {{"k", p.params.get("k", 3)}, {"L", 1}});
    pk.shape = Shape{p.B, p.C, p.H, p.W, 1};
    pk.tile = default_tile(pk.spec, pk.shape, lim);
    validate(pk.spec, pk.tile, lim);
    return {pk};
  }

  Kernel default_kernel() const override { return kWTConvFold; }
  NamedInts compile_fields(const Kernel&) const override { return {{"k", 3}, {"L", 1}}; }
  Shape compile_shape() const override { return Shape{2, 8, 8, 8, 1}; }
  size_t positional_tile_axes() const override { return 5; }
  void warn_ignored_compile_options(const OpSpec&, const Tile&, bool) const override {}

  KernelSelector main_kernel(const std::vector<PlannedKernel>& plan) const override {
    return {plan.front().spec.kernel, 0};
  }
  std::unique_ptr<PassHarness> harness(const LayerProblem&, DType, bool) const override {
    throw SpecError("lkjit: error: toy: a test op has no pass to time");
  }
  std::string reproduce(const LayerProblem& p, const std::string& shape, const std::string& dtype,
                        const std::string& pass) const override {
    return fmt::format("--shape {} --dtype {} --pass {} --window {}", shape, dtype, pass, p.params.get("window"));
  }

  void print_run_header(std::ostream& os, const RunSettings&) const override { os << "toy: nothing to time\n"; }
  bool run(std::ostream& os, const LayerProblem& p, DType dtype, const RunSettings&, std::mt19937_64&) const override {
    os << describe(p, dtype, false) << "\n";
    return true;
  }
  void print_run_footer(std::ostream&) const override {}

 private:
  cl::OptionCategory cat_{"toy options", "a test op"};
  const cl::opt<std::string>& run_k_ = shared_value(Cmd::kRun, "k", "toy", cat_, "odd, 1..31; default 3");
  IntOption<1, 16> run_window_{"window", cl::desc("window, 1..16"), cl::init(7), cl::sub(subcommand(Cmd::kRun)), cl::cat(cat_)};
  IntOption<1, 16> compile_window_{"window", cl::desc("window, 1..16"), cl::init(7), cl::sub(subcommand(Cmd::kCompile)),
                                   cl::cat(cat_)};
  IntOption<1, 16> tune_window_{"window", cl::desc("window, 1..16"), cl::init(7), cl::sub(subcommand(Cmd::kTune)), cl::cat(cat_)};
  const cl::opt<std::string>& prewarm_k_ = shared_value(Cmd::kPrewarm, "k", "toy", cat_, "odd; default 3");
  IntOption<1, 16> prewarm_window_{"window", cl::desc("window, 1..16"), cl::init(7), cl::sub(subcommand(Cmd::kPrewarm)),
                                   cl::cat(cat_)};
};

OpCli& toy_cli() {
  static ToyCli cli;
  return cli;
}

}  // namespace

const std::vector<OpCli*>& op_clis() {
  static const std::vector<OpCli*> all = {&wtconv_cli(), &toy_cli()};
  return all;
}

}  // namespace lkjit::tool
