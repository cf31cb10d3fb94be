// WTConv in the lkjit CLI (tools/lkjit/op_cli.h): its options, presets (WTConvNeXt), demo layers, shape
// items (run: B:C:H:W:L; prewarm: B:C:H:W crossed with --k, --L and --stride; tune: B:C:H:W), plans
// (lkjit/wtconv.h: wtconv_plan), tuning pass (lkjit/wtconv_tune.h) and the forward that `run` times and checks
// against the float64 reference (lkjit/reference.h).
//
// A problem's params: k, L, stride (shapes, presets, manifests), bias (0: --no-bias), path (WTConvPath) and
// nhwc (tune: NHWC activations, from --nhwc or --path lane).
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <algorithm>
#include <iostream>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/numeric.h"
#include "lkjit/reference.h"
#include "lkjit/runtime.h"
#include "lkjit/testing.h"
#include "lkjit/wtconv.h"
#include "lkjit/wtconv_tune.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

constexpr int kMaxK = 31;

WTConvPath parse_path(const std::string& s) {
  if (s == "auto") return WTConvPath::kAuto;
  if (s == "plane") return WTConvPath::kPlane;
  if (s == "tiled") return WTConvPath::kTiled;
  if (s == "lane") return WTConvPath::kLane;
  throw SpecError(fmt::format("lkjit: error: --path '{}' is unknown; supported: auto, plane, tiled, lane", s));
}

const char* path_name(WTConvPath p) {
  switch (p) {
    case WTConvPath::kAuto: return "auto";
    case WTConvPath::kPlane: return "plane";
    case WTConvPath::kTiled: return "tiled";
    case WTConvPath::kLane: return "lane";
  }
  return "auto";
}

std::string field_range(const std::string& field) { return wtconv_field_range(field); }

WTConvPath path_of(const LayerProblem& p) { return static_cast<WTConvPath>(p.params.get("path", 0)); }

WTConvOptions options_of(const LayerProblem& p, DType dtype) {
  WTConvOptions o{p.C, p.params.get("k", 5), p.params.get("L", 1), dtype, p.params.get("bias", 1) != 0,
                  p.params.get("stride", 1), 0};
  if (p.params.get("nhwc")) o.layout = Layout::kNHWC;
  return o;
}

Shape shape_of(const LayerProblem& p) { return Shape{p.B, p.C, p.H, p.W, p.params.get("stride", 1)}; }

WTConvTuneProblem tune_problem(const LayerProblem& p, DType dtype, bool backward) {
  WTConvTuneProblem t;
  t.options = options_of(p, dtype);
  t.B = p.B, t.H = p.H, t.W = p.W;
  t.backward = backward;
  t.path = path_of(p);
  return t;
}

LayerProblem layer(int64_t B, int64_t C, int64_t H, int64_t W, int k, int L, int stride) {
  LayerProblem p;
  p.op = "wtconv";
  p.B = B, p.C = C, p.H = H, p.W = W;
  p.params.set("k", k);
  p.params.set("L", L);
  p.params.set("stride", stride);
  return p;
}

// WTConvNeXt stage layers at 224x224, batch 64, k=5, levels 5/4/3/2 by stage (stem stride 4, then 2x
// downsampling per stage: 56, 28, 14, 7).
std::vector<LayerProblem> wtconvnext(const std::vector<int64_t>& channels) {
  const int64_t hw[] = {56, 28, 14, 7};
  const int levels[] = {5, 4, 3, 2};
  std::vector<LayerProblem> out;
  for (int s = 0; s < 4; ++s) out.push_back(layer(64, channels[s], hw[s], hw[s], 5, levels[s], 1));
  return out;
}

class WTConvCli final : public OpCli {
 public:
  const char* name() const override { return "wtconv"; }
  cl::OptionCategory& category() override { return cat_; }
  bool in_default_run() const override { return true; }

  std::vector<Preset> presets() const override {
    return {{"wtconvnext-t", "WTConvNeXt-T stage layers at 224x224, batch 64", wtconvnext({96, 192, 384, 768})},
            // -s: more blocks than -t, the same layer shapes
            {"wtconvnext-s", "WTConvNeXt-S stage layers at 224x224, batch 64", wtconvnext({96, 192, 384, 768})},
            {"wtconvnext-b", "WTConvNeXt-B stage layers at 224x224, batch 64", wtconvnext({128, 256, 512, 1024})}};
  }

  std::vector<LayerParam> layer_params() const override {
    return {{"k", 1, kMaxK, 5, true}, {"L", 0, kMaxLevels, 1, false}, {"stride", 1, 64, 1, false}};
  }

  std::string shape_form(Cmd c) const override {
    if (c == Cmd::kRun) return "B:C:H:W:L";
    if (c == Cmd::kPrewarm) return "B:C:H:W, crossed with --k, --L and --stride";
    return "B:C:H:W";
  }
  std::string demo_doc() const override { return "WTConvNeXt-T at 224x224, batch 64"; }

  std::vector<LayerProblem> problems(Cmd c, const std::optional<std::string>& shapes) const override {
    if (c == Cmd::kRun) return run_problems(shapes);
    if (c == Cmd::kPrewarm) return prewarm_problems(shapes);
    if (c == Cmd::kTune && shapes) return {tune_layer(*shapes)};
    throw std::logic_error(fmt::format("wtconv: no problems for {}", cmd_name(c)));
  }

  std::string describe(const LayerProblem& p, DType dtype, bool backward) const override {
    return tune_problem(p, dtype, backward).to_string();
  }

  std::vector<PlannedKernel> plan(const LayerProblem& p, DType dtype, bool backward, const DeviceLimits& lim,
                                  PlanScope scope, std::set<std::string>* notes) const override {
    if (scope == PlanScope::kProblem) return wtconv_plan(options_of(p, dtype), shape_of(p), lim, backward, path_of(p));
    // Every path a layer may take: plane where the planes fit the arch's shared memory, tiled always, lane
    // where NHWC activations of this shape take it.
    const WTConvOptions o = options_of(p, dtype);
    const Shape sh = shape_of(p);
    std::vector<PlannedKernel> all;
    for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled, WTConvPath::kLane}) {
      std::vector<PlannedKernel> plan;
      if (path != WTConvPath::kTiled) {
        try {
          plan = wtconv_plan(o, sh, lim, backward, path);
        } catch (const SpecError&) {  // plane: the planes do not fit (the runtime takes the tiled path);
          // lane: NHWC activations of this shape take the plane or tiled kernels
          if (path == WTConvPath::kPlane && notes)
            notes->insert(fmt::format("plane path left out for {} L={} k={} on {}: planes do not fit", sh.to_string(),
                                      o.L, o.k, arch_name(lim.arch)));
          continue;
        }
      } else {
        plan = wtconv_plan(o, sh, lim, backward, path);  // invalid options: the user's error, thrown
      }
      all.insert(all.end(), plan.begin(), plan.end());
    }
    return all;
  }

  // ---- compile ----------------------------------------------------------------------------------
  Kernel default_kernel() const override { return kWTConvFwdPlane; }

  NamedInts compile_fields(const Kernel& kernel) const override {
    const NamedInts all{{"k", option_int(compile_k_, 1, kMaxK, true, 5)}, {"L", compile_L_}, {"first", compile_deeper_ ? 0 : 1}};
    NamedInts f;
    for (const auto& name : kernel_fields(kernel)) f.set(name, all.get(name));
    return f;
  }

  Shape compile_shape() const override { return Shape{64, 96, 56, 56, 1}; }
  size_t positional_tile_axes() const override { return 5; }  // tile_h,tile_w,planes,vy,threads[,blocks,cluster]

  // An option given for a kernel whose code it does not change (--deeper for a plane kernel, -L for a level
  // kernel, which serves every level) would be dropped silently: said on stderr, with the kernels it applies
  // to. The kernel name names every field that changes the code, so an option applies where it changes the name.
  void warn_ignored_compile_options(const OpSpec& s, const Tile& t, bool dtype_given) const override {
    struct Option {
      const char* name;
      bool given;
      void (*vary)(OpSpec&);
    };
    const Option options[] = {
        {"--deeper", compile_deeper_, [](OpSpec& o) { o.set("first", !o.get("first")); }},
        {"-L", compile_L_.getNumOccurrences() > 0, [](OpSpec& o) { o.set("L", o.get("L") == 0 ? 1 : 0); }},
        {"-k", compile_k_.getNumOccurrences() > 0, [](OpSpec& o) { o.set("k", o.get("k") == 1 ? 3 : 1); }},
        {"--dtype", dtype_given, [](OpSpec& o) { o.dtype = o.dtype == DType::kF32 ? DType::kF16 : DType::kF32; }},
    };
    auto applies = [](const Option& opt, OpSpec o, const Tile& tile) {
      const std::string name = kernel_name(o, tile);
      opt.vary(o);
      return kernel_name(o, tile) != name;
    };
    // The deeper level kernels read fp32 whatever --dtype: a warning about them says so.
    const bool deeper = compile_deeper_ && applies(options[0], s, t);
    for (const auto& opt : options) {
      if (!opt.given || applies(opt, s, t)) continue;
      std::string to;
      for (const Kernel& k : family(name()).kernels) {
        OpSpec o = s;
        o.kernel = k;
        o.set("first", !deeper);
        if (applies(opt, o, Tile{})) to += (to.empty() ? "" : ", ") + std::string(lkjit::to_string(k));
      }
      std::cerr << fmt::format("lkjit: warning: compile: {} does not apply to {}{} and is ignored; it applies to {}\n",
                               opt.name, lkjit::to_string(s.kernel), deeper ? " with --deeper" : "", to);
    }
  }

  // ---- tune -------------------------------------------------------------------------------------
  KernelSelector main_kernel(const std::vector<PlannedKernel>& plan) const override { return wtconv_main_kernel(plan); }

  std::unique_ptr<PassHarness> harness(const LayerProblem& p, DType dtype, bool backward) const override {
    return std::make_unique<WTConvHarness>(tune_problem(p, dtype, backward));
  }

  std::string reproduce(const LayerProblem& p, const std::string& shape, const std::string& dtype,
                        const std::string& pass) const override {
    std::string s = fmt::format("--shape {} --k {} --L {} --dtype {} --pass {}", shape, p.params.get("k"),
                                p.params.get("L"), dtype, pass);
    if (p.params.get("stride", 1) != 1) s += fmt::format(" --stride {}", p.params.get("stride"));
    if (!p.params.get("bias", 1)) s += " --no-bias";
    if (path_of(p) != WTConvPath::kAuto) s += std::string(" --path ") + path_name(path_of(p));
    if (p.params.get("nhwc") && path_of(p) != WTConvPath::kLane) s += " --nhwc";  // lane implies it
    return s;
  }

  // ---- run --------------------------------------------------------------------------------------
  void print_run_header(std::ostream& os, const RunSettings& s) const override {
    os << fmt::format("WTConv forward, k={}, stride={}, bias={}, median of {}\n\n", run_k(), run_stride(),
                      !run_no_bias_, counted(s.iters, "run"));
    os << fmt::format("{:<18} {:>2} {:<5} {:<6} {:>9} {:>8} {:>10} {:>9}  {}\n", "B x C x H x W", "L", "dtype", "path",
                      "ms", "GB/s", "max err", "check", "kernels");
  }

  bool run(std::ostream& os, const LayerProblem& p, DType dt, const RunSettings& s, std::mt19937_64& rng) const override;

  void print_run_footer(std::ostream& os) const override {
    os << "\nGB/s counts the 2N floor (read X, write out). Check: float64 reference on sampled planes, "
          "|err| <= atol + rtol |ref| per dtype.\n";
  }

 private:
  int run_k() const { return option_int(run_k_, 1, kMaxK, true, 5); }
  int run_stride() const { return option_int(run_stride_, 1, 64, false, 1); }

  // run --shapes B:C:H:W:L, each with -k, --stride, --no-bias and --path; the demo without it.
  std::vector<LayerProblem> run_problems(const std::optional<std::string>& shapes) const {
    const int k = run_k(), stride = run_stride();  // the options first: their errors as when they were typed
    std::vector<LayerProblem> out;
    if (!shapes) {
      out = wtconvnext({96, 192, 384, 768});
    } else {
      for (const auto& item : split_list(*shapes, "--shapes")) {
        const auto v = parse_dims(item, "--shapes", "B:C:H:W:L", field_range);
        if (v[4] < 0 || v[4] > kMaxLevels)
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("lkjit: error: --shapes: L={} in '{}' is out of range; supported: L in [0, {}]", v[4],
                                  item, kMaxLevels));
        out.push_back(layer(v[0], v[1], v[2], v[3], 0, static_cast<int>(v[4]), 1));
      }
      if (out.empty()) throw Error(ErrorCode::kUsage, "lkjit: error: --shapes is empty");
    }
    const WTConvPath path = parse_path(run_path_);
    for (auto& p : out) {
      p.params.set("k", k);
      p.params.set("stride", stride);
      p.params.set("bias", run_no_bias_ ? 0 : 1);
      p.params.set("path", static_cast<int>(path));
    }
    return out;
  }

  // prewarm --shapes B:C:H:W crossed with --k, --L and --stride (as `run` and `tune`: the stride changes which
  // kernels and tiles a layer plans, e.g. the lane path is stride 1's only).
  std::vector<LayerProblem> prewarm_problems(const std::optional<std::string>& shapes) const {
    if (!shapes) {
      if (prewarm_k_.getNumOccurrences() || prewarm_L_.getNumOccurrences() || prewarm_stride_.getNumOccurrences())
        throw Error(ErrorCode::kUsage, "lkjit: error: --k, --L and --stride apply to --shapes, which is missing (e.g. "
                                       "--shapes 64:96:56:56)");
      return {};
    }
    const std::vector<int> ks = parse_int_list(prewarm_k_.getNumOccurrences() ? prewarm_k_.getValue() : "5", "--k", 1,
                                               kMaxK, /*odd=*/true);
    const std::vector<int> Ls = parse_int_list(prewarm_L_, "--L", 0, kMaxLevels);
    const std::vector<int> strides =
        parse_int_list(prewarm_stride_.getNumOccurrences() ? prewarm_stride_.getValue() : "1", "--stride", 1, 64);
    std::vector<LayerProblem> out;
    for (const auto& item : split_list(*shapes, "--shapes")) {
      const auto v = parse_dims(item, "--shapes", "B:C:H:W", field_range);
      // A well-formed value out of range is bad input (2), as in `run --shapes`, not a usage error (1).
      require_positive_bchw(v, "--shapes", item);
      for (int k : ks)
        for (int L : Ls)
          for (int stride : strides) out.push_back(layer(v[0], v[1], v[2], v[3], k, L, stride));
    }
    return out;
  }

  // tune --shape B:C:H:W with -k, --L, --stride, --no-bias, --path and --nhwc.
  LayerProblem tune_layer(const std::string& shape) const {
    const auto v = parse_dims(shape, "--shape", "B:C:H:W", field_range);
    // A well-formed value out of range is bad input (2), as in `run --shapes`, not a usage error (1).
    require_positive_bchw(v, "--shape", shape);
    LayerProblem p = layer(v[0], v[1], v[2], v[3], option_int(tune_k_, 1, kMaxK, true, 5), tune_L_,
                           option_int(tune_stride_, 1, 64, false, 1));
    const WTConvPath path = parse_path(tune_path_);
    p.params.set("bias", tune_no_bias_ ? 0 : 1);
    p.params.set("path", static_cast<int>(path));
    if (tune_nhwc_ || path == WTConvPath::kLane) p.params.set("nhwc", 1);  // the lane kernels' layout
    return p;
  }

  cl::OptionCategory cat_{"wtconv options", "WTConv (Finder et al., ECCV 2024): wavelet convolutions"};
  // run
  const cl::opt<std::string>& run_k_ = shared_value(Cmd::kRun, "k", "wtconv", cat_, "odd, 1..31; default 5");
  const cl::opt<std::string>& run_stride_ = shared_value(Cmd::kRun, "stride", "wtconv", cat_, "1..64; default 1");
  const cl::opt<bool>& run_no_bias_ = shared_flag(Cmd::kRun, "no-bias", "wtconv", cat_, "");
  cl::opt<std::string> run_path_{"path",
                                 cl::desc("auto | plane | tiled | lane (run times NCHW activations, which the lane "
                                          "kernels read uncoalesced)"),
                                 cl::init("auto"), cl::sub(subcommand(Cmd::kRun)), cl::cat(cat_)};
  // compile
  const cl::opt<std::string>& compile_k_ = shared_value(Cmd::kCompile, "k", "wtconv", cat_, "odd, 1..31; default 5");
  IntOption<0, kMaxLevels> compile_L_{"L",
                                      cl::desc("levels, 0..8 (not of the level kernels: one serves every level; see "
                                               "--deeper)"),
                                      cl::init(3), cl::sub(subcommand(Cmd::kCompile)), cl::cat(cat_)};
  cl::opt<bool> compile_deeper_{"deeper", cl::desc("level kernels: the variant reading an fp32 low band"),
                                cl::sub(subcommand(Cmd::kCompile)), cl::cat(cat_)};
  // tune
  const cl::opt<std::string>& tune_k_ = shared_value(Cmd::kTune, "k", "wtconv", cat_, "odd, 1..31; default 5");
  IntOption<0, kMaxLevels> tune_L_{"L", cl::desc("wavelet levels, 0..8"), cl::init(3), cl::sub(subcommand(Cmd::kTune)),
                                   cl::cat(cat_)};
  const cl::opt<std::string>& tune_stride_ = shared_value(Cmd::kTune, "stride", "wtconv", cat_, "1..64; default 1");
  const cl::opt<bool>& tune_no_bias_ = shared_flag(Cmd::kTune, "no-bias", "wtconv", cat_, "");
  cl::opt<std::string> tune_path_{"path", cl::desc("auto | plane | tiled | lane"), cl::init("auto"),
                                  cl::sub(subcommand(Cmd::kTune)), cl::cat(cat_)};
  const cl::opt<bool>& tune_nhwc_ =
      shared_flag(Cmd::kTune, "nhwc", "wtconv",
                  cat_, "as the lane kernels take; --path lane implies it. Plane kernels are specialised by layout (on "
                        "sm_90 their channels_last tiles may cluster); a tiled record tuned on NHWC data serves NCHW "
                        "callers too");
  // prewarm
  const cl::opt<std::string>& prewarm_k_ =
      shared_value(Cmd::kPrewarm, "k", "wtconv", cat_, "odd, e.g. 3,5,7; default 5");
  cl::opt<std::string> prewarm_L_{"L", cl::desc("wavelet levels for --shapes, e.g. 1,2,3"), cl::init("3"),
                                  cl::sub(subcommand(Cmd::kPrewarm)), cl::cat(cat_)};
  const cl::opt<std::string>& prewarm_stride_ =
      shared_value(Cmd::kPrewarm, "stride", "wtconv", cat_, "1..64, e.g. 1,2; default 1");
};

bool WTConvCli::run(std::ostream& os, const LayerProblem& p, DType dt, const RunSettings& s,
                    std::mt19937_64& rng) const {
  const WTConvOptions o = options_of(p, dt);
  WTConv layer(o);
  layer.set_path(path_of(p));
  const Shape sh = shape_of(p);
  const auto params = ref::init_params(static_cast<int>(p.C), o.k, o.L, o.bias, 42);
  const auto dparams = testing::upload_params(params);
  layer.set_weights(dparams.weights);
  const size_t n = static_cast<size_t>(sh.numel()), nout = static_cast<size_t>(sh.B * sh.C * sh.H_out() * sh.W_out());
  const auto xr = testing::random_tensor(n, dt, rng());
  const size_t eb = dtype_bytes(dt);
  DeviceBuffer x(n * eb), out(nout * eb + 4);
  const auto xbytes = encode(dt, xr);
  x.upload(xbytes.data(), xbytes.size());
  out.fill_u32(0xffffffffu);  // NaN poison: every output must be written
  layer.prepare(p.B, p.H, p.W);
  const std::string origin = layer.last_origin();
  layer.forward(x.data(), out.data(), p.B, p.H, p.W);
  synchronize();
  std::vector<uint8_t> raw(nout * eb);
  out.download(raw.data(), raw.size());
  // Check a sample of planes (always the first and last) against the float64 reference.
  const auto tol = testing::tolerance(dt);
  double max_err = 0;
  bool ok = true;
  const int64_t planes = sh.B * sh.C, hwo = sh.H_out() * sh.W_out();
  const int checks = static_cast<int>(std::min<int64_t>(s.check_planes, planes));
  for (int i = 0; i < checks; ++i) {
    const int64_t pl = i == 0 ? 0 : (i == checks - 1 ? planes - 1 : int64_t(rng() % planes));
    const int64_t c = pl % sh.C;
    std::vector<double> xp(xr.begin() + pl * sh.H * sh.W, xr.begin() + (pl + 1) * sh.H * sh.W);
    const auto want = ref::wtconv_forward(xp, ref::Shape4{1, 1, sh.H, sh.W}, testing::slice_channel(params, c), o.stride);
    std::vector<float> got(hwo);
    for (int64_t j = 0; j < hwo; ++j) got[j] = decode_one(dt, raw.data(), static_cast<size_t>(pl * hwo + j));
    const auto cmp = testing::compare(got, want, tol);
    ok = ok && cmp.ok;
    max_err = std::max(max_err, cmp.max_abs_err);
  }
  // Timing.
  const double med = median_ms(s.iters, [&] { layer.forward(x.data(), out.data(), p.B, p.H, p.W); });
  const double gbs = double(n + nout) * eb / (med * 1e-3) / 1e9;
  const auto plan = layer.plan(p.B, p.H, p.W);
  const Kernel main = plan.back().spec.kernel;
  const char* path = main == kWTConvFwdPlane ? "plane" : main == kWTConvFwdLane ? "lane" : "tiled";
  os << fmt::format("{:<18} {:>2} {:<5} {:<6} {:>9.4f} {:>8.0f} {:>10.2e} {:>9}  {} ({})\n", sh.to_string(), o.L,
                    lkjit::to_string(dt), path, med, gbs, max_err, ok ? "ok" : "FAIL", plan.size() - 1, origin);
  return ok;
}

}  // namespace

OpCli& wtconv_cli() {
  static WTConvCli cli;
  return cli;
}

}  // namespace lkjit::tool
