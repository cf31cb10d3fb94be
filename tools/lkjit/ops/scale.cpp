// The scale family (lkjit/scale.h, y = a[c] * x) in the lkjit CLI (tools/lkjit/op_cli.h): shape items
// B:C:H:W, its one kernel's plan, its pass harness for `tune`, and a forward that `run` checks against a
// float64 reference. It has no options, no presets and no backward, and `lkjit run` without --op leaves it
// out: it is the smallest family, there to show what a family adds to the CLI (this file and a registry line).
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <algorithm>
#include <cmath>

#include "lkjit/error.h"
#include "lkjit/numeric.h"
#include "lkjit/runtime.h"
#include "lkjit/scale.h"
#include "lkjit/testing.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

LayerProblem scale_layer(const std::vector<int64_t>& v) {
  LayerProblem p;
  p.op = "scale";
  p.B = v[0], p.C = v[1], p.H = v[2], p.W = v[3];
  return p;
}

Shape shape_of(const LayerProblem& p) { return Shape{p.B, p.C, p.H, p.W, 1}; }

class ScaleCli final : public OpCli {
 public:
  const char* name() const override { return "scale"; }
  cl::OptionCategory& category() override { return cat_; }
  bool in_default_run() const override { return false; }
  std::vector<Preset> presets() const override { return {}; }
  std::vector<LayerParam> layer_params() const override { return {}; }
  std::string shape_form(Cmd) const override { return "B:C:H:W"; }
  std::string demo_doc() const override { return "one 8x64x56x56 layer"; }

  std::vector<LayerProblem> problems(Cmd c, const std::optional<std::string>& shapes) const override {
    if (!shapes) return c == Cmd::kRun ? std::vector<LayerProblem>{scale_layer({8, 64, 56, 56})} : std::vector<LayerProblem>{};
    const char* what = c == Cmd::kTune ? "--shape" : "--shapes";
    std::vector<LayerProblem> out;
    for (const auto& item : split_list(*shapes, what)) {
      const auto v = parse_dims(item, what, "B:C:H:W");
      require_positive_bchw(v, what, item);
      out.push_back(scale_layer(v));
    }
    return out;
  }

  std::string describe(const LayerProblem& p, DType dtype, bool backward) const override {
    return fmt::format("scale {} {} {}", backward ? "bwd" : "fwd", lkjit::to_string(dtype), shape_of(p).to_string());
  }

  std::vector<PlannedKernel> plan(const LayerProblem& p, DType dtype, bool backward, const DeviceLimits& lim,
                                  PlanScope scope, std::set<std::string>*) const override {
    if (backward) {
      if (scope == PlanScope::kEveryPath) return {};  // prewarm --passes fwd,bwd: nothing more to compile
      throw SpecError("lkjit: error: scale: there is no backward pass; supported: fwd");
    }
    return scale_plan(ScaleOptions{p.C, dtype, 0}, shape_of(p), lim);
  }

  Kernel default_kernel() const override { return kScaleCopy; }
  NamedInts compile_fields(const Kernel&) const override { return {}; }
  Shape compile_shape() const override { return Shape{8, 64, 56, 56, 1}; }
  size_t positional_tile_axes() const override { return 1; }  // threads
  void warn_ignored_compile_options(const OpSpec&, const Tile&, bool) const override {}

  KernelSelector main_kernel(const std::vector<PlannedKernel>&) const override { return {kScaleCopy, 0}; }
  std::unique_ptr<PassHarness> harness(const LayerProblem& p, DType dtype, bool backward) const override {
    if (backward) throw SpecError("lkjit: error: scale: there is no backward pass; supported: fwd");
    return make_scale_harness(ScaleOptions{p.C, dtype, 0}, shape_of(p));
  }
  std::string reproduce(const LayerProblem&, const std::string& shape, const std::string& dtype,
                        const std::string& pass) const override {
    return fmt::format("--shape {} --dtype {} --pass {}", shape, dtype, pass);
  }

  void print_run_header(std::ostream& os, const RunSettings& s) const override {
    os << fmt::format("scale forward (y = a[c] * x), median of {}\n\n", counted(s.iters, "run"));
    os << fmt::format("{:<18} {:<5} {:>9} {:>8} {:>10} {:>9}  {}\n", "B x C x H x W", "dtype", "ms", "GB/s", "max err",
                      "check", "kernel");
  }

  bool run(std::ostream& os, const LayerProblem& p, DType dt, const RunSettings& s, std::mt19937_64& rng) const override {
    const Shape sh = shape_of(p);
    ScaledCopy layer(ScaleOptions{p.C, dt, 0});
    const size_t n = static_cast<size_t>(sh.numel()), eb = dtype_bytes(dt);
    const auto xr = testing::random_tensor(n, dt, rng());
    const auto ar = testing::random_tensor(static_cast<size_t>(p.C), DType::kF32, rng());
    DeviceBuffer x(n * eb), y(n * eb + 4), a(ar.size() * 4);
    const auto xbytes = encode(dt, xr);
    x.upload(xbytes.data(), xbytes.size());
    a.upload(ar.data(), ar.size() * 4);
    y.fill_u32(0xffffffffu);  // NaN poison: every output must be written
    const auto* ap = static_cast<const float*>(a.data());
    layer.forward(x.data(), ap, y.data(), p.B, p.H, p.W);
    synchronize();
    std::vector<uint8_t> raw(n * eb);
    y.download(raw.data(), raw.size());
    // Sampled planes (always the first and the last) against y = a[c] * x in float64.
    const int64_t planes = sh.B * sh.C, hw = sh.H * sh.W;
    const int checks = static_cast<int>(std::min<int64_t>(s.check_planes, planes));
    bool ok = true;
    double max_err = 0;
    for (int i = 0; i < checks; ++i) {
      const int64_t pl = i == 0 ? 0 : (i == checks - 1 ? planes - 1 : int64_t(rng() % planes));
      std::vector<double> want(hw);
      std::vector<float> got(hw);
      for (int64_t j = 0; j < hw; ++j) {
        want[j] = double(ar[pl % sh.C]) * double(xr[pl * hw + j]);
        got[j] = decode_one(dt, raw.data(), static_cast<size_t>(pl * hw + j));
      }
      const auto cmp = testing::compare(got, want, testing::tolerance(dt));
      ok = ok && cmp.ok;
      max_err = std::max(max_err, cmp.max_abs_err);
    }
    const double med = median_ms(s.iters, [&] { layer.forward(x.data(), ap, y.data(), p.B, p.H, p.W); });
    const auto plan = layer.plan(p.B, p.H, p.W);
    os << fmt::format("{:<18} {:<5} {:>9.4f} {:>8.0f} {:>10.2e} {:>9}  {}\n", sh.to_string(), lkjit::to_string(dt), med,
                      2.0 * n * eb / (med * 1e-3) / 1e9, max_err, ok ? "ok" : "FAIL",
                      kernel_name(plan.at(0).spec, plan.at(0).tile));
    return ok;
  }

  void print_run_footer(std::ostream& os) const override {
    os << "\nGB/s counts the 2N floor (read x, write y). Check: float64 reference on sampled planes, "
          "|err| <= atol + rtol |ref| per dtype.\n";
  }

 private:
  cl::OptionCategory cat_{"scale options", "scale (y = a[c] * x): the smallest op family; it has no options"};
};

}  // namespace

OpCli& scale_cli() {
  static ScaleCli cli;
  return cli;
}

}  // namespace lkjit::tool
