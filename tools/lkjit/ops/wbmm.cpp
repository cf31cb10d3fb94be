// The WBMM family (lkjit/wbmm.h, windowed batch matrix multiplication, Song et al., ICML 2026) in the lkjit CLI
// (tools/lkjit/op_cli.h): shape items B:C:H:W[:w[:ww]] (window w x w, or wh x ww; default 7x7), the wbmm-t
// preset (WBMM-T's layers at 224x224, batch 128), the layer's plans for both passes, its pass harness for
// `tune`, and a forward that `run` checks against the float64 reference on sampled (b, c) planes, with its
// backward timed. Table mode with the identity, NCHW activations.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <algorithm>
#include <cmath>

#include "lkjit/error.h"
#include "lkjit/numeric.h"
#include "lkjit/runtime.h"
#include "lkjit/testing.h"
#include "lkjit/wbmm.h"
#include "lkjit/wbmm_reference.h"
#include "lkjit/wbmm_tune.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

LayerProblem wbmm_layer(int64_t B, int64_t C, int64_t H, int64_t W, int wh, int ww) {
  LayerProblem p;
  p.op = "wbmm";
  p.B = B, p.C = C, p.H = H, p.W = W;
  p.params = NamedInts{{"wh", wh}, {"ww", ww}};
  return p;
}

int wh_of(const LayerProblem& p) { return p.params.get("wh", 7); }
int ww_of(const LayerProblem& p) { return p.params.get("ww", 7); }

WBMMOptions options_of(const LayerProblem& p, DType dt) {
  WBMMOptions o;
  o.C = p.C, o.wh = wh_of(p), o.ww = ww_of(p), o.dtype = dt;
  return o;
}

Shape shape_of(const LayerProblem& p) { return Shape{p.B, p.C, p.H, p.W, 1}; }

class WBMMCli final : public OpCli {
 public:
  const char* name() const override { return "wbmm"; }
  cl::OptionCategory& category() override { return cat_; }
  bool in_default_run() const override { return true; }

  std::vector<Preset> presets() const override {
    Preset t{"wbmm-t", "WBMM-T's layers at 224x224, batch 128, 7x7 windows", {}};
    for (auto [C, HW] : std::vector<std::pair<int64_t, int64_t>>{{80, 56}, {160, 28}, {320, 14}, {640, 7}})
      t.layers.push_back(wbmm_layer(128, C, HW, HW, 7, 7));
    return {t};
  }
  std::vector<LayerParam> layer_params() const override { return {{"wh", 1, 16, 7, false}, {"ww", 1, 16, 7, false, "wh"}}; }
  std::string shape_form(Cmd) const override { return "B:C:H:W[:w[:ww]]"; }
  std::string demo_doc() const override { return "the wbmm-t preset (WBMM-T at 224x224, batch 128)"; }

  std::vector<LayerProblem> problems(Cmd c, const std::optional<std::string>& shapes) const override {
    if (!shapes) return c == Cmd::kRun ? presets()[0].layers : std::vector<LayerProblem>{};
    const char* what = c == Cmd::kTune ? "--shape" : "--shapes";
    std::vector<LayerProblem> out;
    for (const auto& item : split_list(*shapes, what)) {
      const size_t parts = size_t(std::count(item.begin(), item.end(), ':')) + 1;
      const std::string form = parts <= 4 ? "B:C:H:W" : parts == 5 ? "B:C:H:W:w" : "B:C:H:W:wh:ww";
      const auto v = parse_dims(item, what, form);
      require_positive_bchw(v, what, item);
      const int64_t wh = v.size() > 4 ? v[4] : 7, ww = v.size() > 5 ? v[5] : wh;
      for (auto [n, w] : {std::pair<const char*, int64_t>{"wh", wh}, {"ww", ww}})
        if (w < 1 || w > 16)
          throw SpecError(fmt::format("lkjit: error: {} item '{}': {}={} is out of range; supported: [1, 16]", what, item, n, w));
      out.push_back(wbmm_layer(v[0], v[1], v[2], v[3], int(wh), int(ww)));
    }
    return out;
  }

  std::string describe(const LayerProblem& p, DType dtype, bool backward) const override {
    return fmt::format("wbmm {} {} {} window={}x{}", backward ? "bwd" : "fwd", lkjit::to_string(dtype),
                       shape_of(p).to_string(), wh_of(p), ww_of(p));
  }

  std::vector<PlannedKernel> plan(const LayerProblem& p, DType dtype, bool backward, const DeviceLimits& lim,
                                  PlanScope scope, std::set<std::string>*) const override {
    const WBMMOptions o = options_of(p, dtype);
    if (!backward || scope == PlanScope::kProblem) return wbmm_plan(o, shape_of(p), lim, backward);
    // prewarm: both backward paths (fused dX, and split with a dgrad).
    auto v = wbmm_plan(o, shape_of(p), lim, true, WBMMBackward::kFused);
    for (auto& pk : wbmm_plan(o, shape_of(p), lim, true, WBMMBackward::kSplit))
      if (std::none_of(v.begin(), v.end(), [&](const PlannedKernel& q) { return q.spec == pk.spec && q.tile == pk.tile; }))
        v.push_back(pk);
    return v;
  }

  Kernel default_kernel() const override { return kWBMMFwd; }
  NamedInts compile_fields(const Kernel&) const override { return NamedInts{{"wh", 7}, {"ww", 7}}; }
  Shape compile_shape() const override { return Shape{64, 256, 56, 56, 1}; }
  size_t positional_tile_axes() const override { return 0; }  // by axis name only: the spaces differ per kernel
  void warn_ignored_compile_options(const OpSpec&, const Tile&, bool) const override {}

  KernelSelector main_kernel(const std::vector<PlannedKernel>& plan) const override {
    size_t best = 0;
    for (size_t i = 1; i < plan.size(); ++i)
      if (plan[i].bytes > plan[best].bytes) best = i;
    return {plan.at(best).spec.kernel, 0};
  }
  std::unique_ptr<PassHarness> harness(const LayerProblem& p, DType dtype, bool backward) const override {
    WBMMTuneProblem t;
    t.options = options_of(p, dtype);
    t.B = p.B, t.H = p.H, t.W = p.W, t.backward = backward;
    return std::make_unique<WBMMHarness>(t);
  }
  std::string reproduce(const LayerProblem&, const std::string& shape, const std::string& dtype,
                        const std::string& pass) const override {
    return fmt::format("--op wbmm --shape {} --dtype {} --pass {}", shape, dtype, pass);
  }

  void print_run_header(std::ostream& os, const RunSettings& s) const override {
    os << fmt::format("wbmm (Y = T M + T per window, table mode), median of {}\n\n", counted(s.iters, "run"));
    os << fmt::format("{:<20} {:<6} {:<5} {:>9} {:>9} {:>8} {:>10} {:>6}  {}\n", "B x C x H x W", "window", "dtype",
                      "fwd ms", "bwd ms", "fwd GB/s", "max err", "check", "kernels");
  }

  bool run(std::ostream& os, const LayerProblem& p, DType dt, const RunSettings& s, std::mt19937_64& rng) const override {
    const Shape sh = shape_of(p);
    const WBMMOptions o = options_of(p, dt);
    WBMM layer(o);
    const size_t n = static_cast<size_t>(sh.numel()), eb = dtype_bytes(dt);
    const int K = wbmm_table_size(o);
    const auto xr = testing::random_tensor(n, dt, rng());
    // R of scale 1/sqrt(d): the product moves the output as much as the identity does.
    auto Rr = testing::random_tensor(size_t(p.C) * K, DType::kF32, rng());
    for (auto& v : Rr) v = float(v / std::sqrt(double(wbmm_positions(o))));
    DeviceBuffer x(n * eb), y(n * eb + 4), g(n * eb), dx(n * eb), R(Rr.size() * 4), dR(Rr.size() * 4);
    const auto xbytes = encode(dt, xr);
    x.upload(xbytes.data(), xbytes.size());
    g.upload(xbytes.data(), xbytes.size());
    R.upload(Rr.data(), Rr.size() * 4);
    y.fill_u32(0xffffffffu);  // NaN poison: every output must be written
    layer.set_weights({static_cast<const float*>(R.data()), nullptr, nullptr});
    layer.forward(x.data(), y.data(), p.B, p.H, p.W);
    synchronize();
    std::vector<uint8_t> raw(n * eb);
    y.download(raw.data(), raw.size());
    // Sampled (b, c) planes (always the first and the last): each is its own WBMM of one channel.
    const int64_t planes = sh.B * sh.C, hw = sh.H * sh.W;
    const int checks = static_cast<int>(std::min<int64_t>(s.check_planes, planes));
    bool ok = true;
    double max_err = 0;
    for (int i = 0; i < checks; ++i) {
      const int64_t pl = i == 0 ? 0 : (i == checks - 1 ? planes - 1 : int64_t(rng() % planes));
      const int64_t c = pl % sh.C;
      ref::WBMMWeights w;
      w.C = 1, w.wh = o.wh, w.ww = o.ww;
      w.R.assign(Rr.begin() + c * K, Rr.begin() + (c + 1) * K);
      std::vector<double> xp(hw);
      for (int64_t j = 0; j < hw; ++j) xp[j] = xr[pl * hw + j];
      const auto want = ref::wbmm_forward(xp, {1, 1, sh.H, sh.W}, w, ref::WBMMForm::kDirect);
      std::vector<float> got(hw);
      for (int64_t j = 0; j < hw; ++j) got[j] = decode_one(dt, raw.data(), static_cast<size_t>(pl * hw + j));
      const auto cmp = testing::compare(got, want, testing::tolerance(dt));
      ok = ok && cmp.ok;
      max_err = std::max(max_err, cmp.max_abs_err);
    }
    const WBMMGradients grads{static_cast<float*>(dR.data()), nullptr, nullptr};
    const double fwd = median_ms(s.iters, [&] { layer.forward(x.data(), y.data(), p.B, p.H, p.W); });
    const double bwd = median_ms(s.iters, [&] { layer.backward(x.data(), g.data(), dx.data(), grads, p.B, p.H, p.W); });
    std::string kernels;
    for (bool b : {false, true})
      for (const auto& pk : layer.plan(p.B, p.H, p.W, b)) kernels += (kernels.empty() ? "" : " ") + kernel_name(pk.spec, pk.tile);
    os << fmt::format("{:<20} {:<6} {:<5} {:>9.4f} {:>9.4f} {:>8.0f} {:>10.2e} {:>6}  {}\n", sh.to_string(),
                      fmt::format("{}x{}", o.wh, o.ww), lkjit::to_string(dt), fwd, bwd, 2.0 * n * eb / (fwd * 1e-3) / 1e9,
                      max_err, ok ? "ok" : "FAIL", kernels);
    return ok;
  }

  void print_run_footer(std::ostream& os) const override {
    os << "\nfwd GB/s counts the 2N floor (read x, write out); bwd: dX and dR (fused). Check: the forward against "
          "the float64 reference on sampled (b, c) planes, |err| <= atol + rtol |ref| per dtype.\n";
  }

 private:
  cl::OptionCategory cat_{"wbmm options", "wbmm (windowed batch matmul): the window is part of each shape item"};
};

}  // namespace

OpCli& wbmm_cli() {
  static WBMMCli cli;
  return cli;
}

}  // namespace lkjit::tool
