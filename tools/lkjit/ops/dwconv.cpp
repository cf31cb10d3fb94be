// The depthwise convolution (lkjit/dwconv.h) in the lkjit CLI (tools/lkjit/op_cli.h): shape items B:C:H:W[:k],
// presets convnext-t (ConvNeXt-T's 18 7x7 layers) and replknet-31b (its four large-kernel stages), batch 64; the
// direct and NHWC plans; the pass harness for `tune`; and a `run` that checks a forward and a backward against
// the float64 reference on NaN-poisoned outputs and times both. Layer parameters: kh, kw, stride, dil, pad
// (-1: 'same' at stride 1, d(k-1)/2 each side at stride 2), bias, nhwc.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <algorithm>
#include <cmath>

#include "lkjit/dwconv.h"
#include "lkjit/dwconv_reference.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/numeric.h"
#include "lkjit/runtime.h"
#include "lkjit/testing.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

constexpr int kMaxK = 63;

LayerProblem dw_layer(int64_t B, int64_t C, int64_t H, int64_t W, int kh, int kw) {
  LayerProblem p;
  p.op = "dwconv";
  p.B = B, p.C = C, p.H = H, p.W = W;
  p.params.set("kh", kh);
  p.params.set("kw", kw);
  return p;
}

std::vector<LayerProblem> convnext_t() {  // depths 3, 3, 9, 3 at 56, 28, 14, 7 (224x224 input)
  std::vector<LayerProblem> v;
  const int depth[] = {3, 3, 9, 3};
  const int64_t C[] = {96, 192, 384, 768}, HW[] = {56, 28, 14, 7};
  for (int s = 0; s < 4; ++s)
    for (int i = 0; i < depth[s]; ++i) v.push_back(dw_layer(64, C[s], HW[s], HW[s], 7, 7));
  return v;
}
std::vector<LayerProblem> replknet_31b() {
  return {dw_layer(64, 128, 56, 56, 31, 31), dw_layer(64, 256, 28, 28, 29, 29), dw_layer(64, 512, 14, 14, 27, 27),
          dw_layer(64, 1024, 7, 7, 13, 13)};
}

DWConvOptions options_of(const LayerProblem& p, DType dtype) {
  DWConvOptions o;
  o.C = p.C, o.kh = p.params.get("kh", 7), o.kw = p.params.get("kw", o.kh);
  o.stride = p.params.get("stride", 1), o.dil = p.params.get("dil", 1);
  const int pad = p.params.get("pad", -1);
  if (pad >= 0) {
    o.pad_h = o.pad_w = pad;
  } else if (o.stride == 1) {
    o.same = true;
  } else {
    o.pad_h = o.dil * (o.kh - 1) / 2, o.pad_w = o.dil * (o.kw - 1) / 2;
  }
  o.dtype = dtype, o.bias = p.params.get("bias", 1) != 0;
  o.layout = p.params.get("nhwc") ? Layout::kNHWC : Layout::kNCHW;
  return o;
}

std::string field_range(const std::string& f) {
  if (f == "B" || f == "C" || f == "H" || f == "W") return "[1, 2^24]";
  if (f == "k") return "[1, 63]";
  return "";
}

class DWConvCli final : public OpCli {
 public:
  const char* name() const override { return "dwconv"; }
  cl::OptionCategory& category() override { return cat_; }
  bool in_default_run() const override { return true; }
  std::vector<Preset> presets() const override {
    return {{"convnext-t", "ConvNeXt-T's 18 7x7 depthwise layers at 224x224, batch 64", convnext_t()},
            {"replknet-31b", "RepLKNet-31B's depthwise stages (k = 31/29/27/13) at 224x224, batch 64", replknet_31b()}};
  }
  std::vector<LayerParam> layer_params() const override {
    return {{"kh", 1, kMaxK, 7, false}, {"kw", 1, kMaxK, 7, false, "kh"}, {"stride", 1, 2, 1, false},
            {"dil", 1, 4, 1, false},    {"pad", -1, 1000, -1, false}};
  }
  std::string shape_form(Cmd c) const override {
    if (c == Cmd::kTune) return "B:C:H:W";
    if (c == Cmd::kPrewarm) return "B:C:H:W or B:C:H:W:k (k: a square filter; -k's otherwise), crossed with --stride";
    return "B:C:H:W or B:C:H:W:k (k: a square filter; -k otherwise)";
  }
  std::string demo_doc() const override { return "ConvNeXt-T's four 7x7 stage layers and RepLKNet-31B's, batch 64"; }

  std::vector<LayerProblem> problems(Cmd c, const std::optional<std::string>& shapes) const override {
    const auto& k_opt = c == Cmd::kRun ? run_k_ : c == Cmd::kTune ? tune_k_ : prewarm_k_;
    const auto& kw_opt = c == Cmd::kRun ? run_kw_ : c == Cmd::kTune ? tune_kw_ : prewarm_kw_;
    const auto& stride_opt = c == Cmd::kRun ? run_stride_ : c == Cmd::kTune ? tune_stride_ : prewarm_stride_;
    const auto& dil_opt = c == Cmd::kRun ? run_dil_ : c == Cmd::kTune ? tune_dil_ : prewarm_dil_;
    // prewarm's -k and --stride are lists crossed with --shapes, as WTConv's (the shared options' help says so);
    // run's and tune's are one value.
    const bool lists = c == Cmd::kPrewarm;
    const std::vector<int> ks =
        lists ? parse_int_list(k_opt.getNumOccurrences() ? k_opt.getValue() : "7", "--k", 1, kMaxK)
              : std::vector<int>{option_int(k_opt, 1, kMaxK, false, 7)};
    const std::vector<int> strides =
        lists ? parse_int_list(stride_opt.getNumOccurrences() ? stride_opt.getValue() : "1", "--stride", 1, 2)
              : std::vector<int>{option_int(stride_opt, 1, 2, false, 1)};
    std::vector<LayerProblem> out;
    if (!shapes) {
      // Presets and manifests give their own filters: the options would be dropped silently.
      if (c == Cmd::kPrewarm && (k_opt.getNumOccurrences() || kw_opt.getNumOccurrences() ||
                                 stride_opt.getNumOccurrences() || dil_opt.getNumOccurrences()))
        throw Error(ErrorCode::kUsage, "lkjit: error: -k, --kw, --stride and --dil apply to --shapes, which is "
                                       "missing (e.g. --op dwconv --shapes 64:96:56:56)");
      if (c != Cmd::kRun) return {};
      const auto cn = convnext_t();
      out = {cn[0], cn[3], cn[6], cn[15]};  // one layer of each ConvNeXt-T stage, then RepLKNet-31B's
      for (const auto& l : replknet_31b()) out.push_back(l);
    } else {
      const char* what = c == Cmd::kTune ? "--shape" : "--shapes";
      for (const auto& item : split_list(*shapes, what)) {
        const bool with_k = std::count(item.begin(), item.end(), ':') == 4 && c != Cmd::kTune;
        const auto v = parse_dims(item, what, with_k ? "B:C:H:W:k" : "B:C:H:W", field_range);
        require_positive_bchw(v, what, item);
        if (with_k && (v[4] < 1 || v[4] > kMaxK))
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("lkjit: error: {}: k={} in '{}' is out of range; supported: [1, {}]", what, v[4], item,
                                  kMaxK));
        for (int k : with_k ? std::vector<int>{int(v[4])} : ks) out.push_back(dw_layer(v[0], v[1], v[2], v[3], k, k));
      }
    }
    std::vector<LayerProblem> all;
    for (const auto& layer : out)
      for (int stride : strides) {
        LayerProblem p = layer;
        if (kw_opt.getNumOccurrences()) p.params.set("kw", kw_opt);
        p.params.set("stride", stride);
        p.params.set("dil", dil_opt);
        if (c == Cmd::kRun) p.params.set("bias", run_no_bias_ ? 0 : 1), p.params.set("nhwc", run_nhwc_ ? 1 : 0);
        if (c == Cmd::kTune) p.params.set("bias", tune_no_bias_ ? 0 : 1), p.params.set("nhwc", tune_nhwc_ ? 1 : 0);
        dwconv_check_options(options_of(p, DType::kF32));  // bad input (2) naming the value
        all.push_back(p);
      }
    return all;
  }

  std::string describe(const LayerProblem& p, DType dtype, bool backward) const override {
    const DWConvOptions o = options_of(p, dtype);
    return fmt::format("dwconv {} {} {}x{}x{}x{} k={}x{} s={} d={} {}{}", backward ? "bwd" : "fwd", to_string(dtype), p.B,
                       p.C, p.H, p.W, o.kh, o.kw, o.stride, o.dil, o.same ? "same" : fmt::format("pad={}x{}", o.pad_h, o.pad_w),
                       o.layout == Layout::kNHWC ? " nhwc" : "");
  }

  std::vector<PlannedKernel> plan(const LayerProblem& p, DType dtype, bool backward, const DeviceLimits& lim,
                                  PlanScope scope, std::set<std::string>* notes) const override {
    const DWConvOptions o = options_of(p, dtype);
    if (scope == PlanScope::kProblem) return dwconv_plan(o, p.B, p.H, p.W, lim, backward, o.layout);
    // Every path a layer may take in either layout: a tuned path decision can pick any path that runs the call
    // (dwconv_pass_paths), not only the rule's.
    std::vector<PlannedKernel> all;
    bool nhwc = false;
    for (Layout act : {Layout::kNCHW, Layout::kNHWC})
      for (const auto& path : dwconv_pass_paths(o, p.B, p.H, p.W, lim, backward, act).options) {
        const auto a = dwconv_plan(o, p.B, p.H, p.W, lim, backward, act, DWConvPath(path.id));
        all.insert(all.end(), a.begin(), a.end());
        nhwc |= path.id == int(DWConvPath::kNhwc);
      }
    if (!nhwc && notes)
      notes->insert(fmt::format("dwconv NHWC kernels left out for C={} k={}x{} on {}: their filters do not fit", p.C,
                                o.kh, o.kw, arch_name(lim.arch)));
    return all;
  }

  Kernel default_kernel() const override { return kDWConvFwdDirect; }
  NamedInts compile_fields(const Kernel& k) const override {
    if (k == kDWConvWgradReduce) return {};
    const int kh = option_int(compile_k_, 1, kMaxK, false, 7);
    return {{"kh", kh}, {"kw", compile_kw_.getNumOccurrences() ? int(compile_kw_) : kh},
            {"stride", option_int(compile_stride_, 1, 2, false, 1)}, {"dil", compile_dil_}};
  }
  Shape compile_shape() const override { return Shape{64, 96, 56, 56, 1}; }
  size_t positional_tile_axes() const override { return 0; }  // the axes differ by kernel: give them by name
  void warn_ignored_compile_options(const OpSpec& spec, const Tile&, bool) const override {
    if (spec.kernel == kDWConvWgradReduce && (compile_k_.getNumOccurrences() || compile_kw_.getNumOccurrences() ||
                                              compile_dil_.getNumOccurrences()))
      llvm::errs() << "lkjit: warning: dwconv_wgrad_reduce has no kernel-size fields (one binary serves every k); "
                      "-k, --kw and --dil are ignored\n";
  }

  KernelSelector main_kernel(const std::vector<PlannedKernel>& plan) const override {
    const auto it = std::max_element(plan.begin(), plan.end(),
                                     [](const PlannedKernel& a, const PlannedKernel& b) { return a.bytes < b.bytes; });
    return {it->spec.kernel, 0};
  }
  std::unique_ptr<PassHarness> harness(const LayerProblem& p, DType dtype, bool backward) const override {
    const DWConvOptions o = options_of(p, dtype);
    const auto pl = dwconv_plan(o, p.B, p.H, p.W, device_info().limits, backward, o.layout);
    return make_dwconv_harness(o, p.B, p.H, p.W, backward, dwconv_plan_path(pl));
  }
  std::optional<PassPaths> paths(const LayerProblem& p, DType dtype, bool backward, const DeviceLimits& lim) const override {
    const DWConvOptions o = options_of(p, dtype);
    PassPaths pp = dwconv_pass_paths(o, p.B, p.H, p.W, lim, backward, o.layout);
    pp.harness = [o, p, backward](int id) { return make_dwconv_harness(o, p.B, p.H, p.W, backward, DWConvPath(id)); };
    return pp;
  }
  std::string reproduce(const LayerProblem& p, const std::string& shape, const std::string& dtype,
                        const std::string& pass) const override {
    const DWConvOptions o = options_of(p, DType::kF32);
    return fmt::format("--shape {} -k {} --kw {} --stride {} --dil {}{}{} --dtype {} --pass {}", shape, o.kh, o.kw, o.stride,
                       o.dil, o.bias ? "" : " --no-bias", o.layout == Layout::kNHWC ? " --nhwc" : "", dtype, pass);
  }

  void print_run_header(std::ostream& os, const RunSettings& s) const override {
    os << fmt::format("dwconv forward and training step (forward + dx + dw + dbias), median of {}\n\n",
                      counted(s.iters, "run"));
    os << fmt::format("{:<20} {:<7} {:<5} {:<4} {:>9} {:>8} {:>9} {:>9}  {}\n", "B x C x H x W", "k", "dtype", "lay",
                      "fwd ms", "GB/s", "train ms", "check", "forward kernel");
  }

  bool run(std::ostream& os, const LayerProblem& p, DType dt, const RunSettings& s, std::mt19937_64& rng) const override;

  void print_run_footer(std::ostream& os) const override {
    os << "\nGB/s: the forward's 2N floor (read x, write y). Check: float64 reference on sampled planes (y, dx) and "
          "channels (dw, dbias), |err| <= ulp(dtype) |ref| + 4 * 2^-24 * sqrt(taps) * sum |terms|; outputs NaN-poisoned.\n";
  }

 private:
  cl::OptionCategory cat_{"dwconv options", "depthwise k x k convolution (nn.Conv2d with groups = C)"};
  const cl::opt<std::string>& run_k_ = shared_value(Cmd::kRun, "k", "dwconv", cat_, "kernel size 1..63; default 7");
  const cl::opt<std::string>& run_stride_ = shared_value(Cmd::kRun, "stride", "dwconv", cat_, "1 or 2; default 1");
  const cl::opt<bool>& run_no_bias_ = shared_flag(Cmd::kRun, "no-bias", "dwconv", cat_, "");
  const cl::opt<bool>& run_nhwc_ = shared_flag(Cmd::kRun, "nhwc", "dwconv", cat_, "channels_last activations (NHWC kernels)");
  IntOption<1, kMaxK> run_kw_{"kw", cl::desc("filter width, 1..63 (default: k)"), cl::init(7), cl::sub(subcommand(Cmd::kRun)),
                              cl::cat(cat_)};
  IntOption<1, 4> run_dil_{"dil", cl::desc("dilation, 1..4"), cl::init(1), cl::sub(subcommand(Cmd::kRun)), cl::cat(cat_)};
  const cl::opt<std::string>& compile_k_ = shared_value(Cmd::kCompile, "k", "dwconv", cat_, "kh (and kw), 1..63; default 7");
  const cl::opt<std::string>& compile_stride_ = shared_value(Cmd::kCompile, "stride", "dwconv", cat_, "1 or 2; default 1");
  IntOption<1, kMaxK> compile_kw_{"kw", cl::desc("filter width, 1..63 (default: k)"), cl::init(7),
                                  cl::sub(subcommand(Cmd::kCompile)), cl::cat(cat_)};
  IntOption<1, 4> compile_dil_{"dil", cl::desc("dilation, 1..4"), cl::init(1), cl::sub(subcommand(Cmd::kCompile)),
                               cl::cat(cat_)};
  const cl::opt<std::string>& tune_k_ = shared_value(Cmd::kTune, "k", "dwconv", cat_, "kernel size 1..63; default 7");
  const cl::opt<std::string>& tune_stride_ = shared_value(Cmd::kTune, "stride", "dwconv", cat_, "1 or 2; default 1");
  const cl::opt<bool>& tune_no_bias_ = shared_flag(Cmd::kTune, "no-bias", "dwconv", cat_, "");
  const cl::opt<bool>& tune_nhwc_ = shared_flag(Cmd::kTune, "nhwc", "dwconv", cat_, "channels_last activations (NHWC kernels)");
  IntOption<1, kMaxK> tune_kw_{"kw", cl::desc("filter width, 1..63 (default: k)"), cl::init(7),
                               cl::sub(subcommand(Cmd::kTune)), cl::cat(cat_)};
  IntOption<1, 4> tune_dil_{"dil", cl::desc("dilation, 1..4"), cl::init(1), cl::sub(subcommand(Cmd::kTune)), cl::cat(cat_)};
  const cl::opt<std::string>& prewarm_k_ =
      shared_value(Cmd::kPrewarm, "k", "dwconv", cat_, "1..63, e.g. 7,31; default 7");
  const cl::opt<std::string>& prewarm_stride_ =
      shared_value(Cmd::kPrewarm, "stride", "dwconv", cat_, "1 or 2, e.g. 1,2; default 1");
  IntOption<1, kMaxK> prewarm_kw_{"kw", cl::desc("filter width, 1..63 (default: k)"), cl::init(7),
                                  cl::sub(subcommand(Cmd::kPrewarm)), cl::cat(cat_)};
  IntOption<1, 4> prewarm_dil_{"dil", cl::desc("dilation, 1..4"), cl::init(1), cl::sub(subcommand(Cmd::kPrewarm)),
                               cl::cat(cat_)};
};

// |got - want| <= ulp(dtype) |want| + 4 * 2^-24 * sqrt(terms) * scale; NaN fails. Returns the max |err|.
bool within(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& scale, DType t,
            double terms, double& max_err) {
  const double ulp = t == DType::kF32 ? 0.0 : t == DType::kF16 ? 1.01 / 2048 : 1.01 / 256;
  const double acc = 4.0 * std::ldexp(1.0, -24) * std::sqrt(std::max(1.0, terms));
  bool ok = true;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::fabs(double(got[i]) - want[i]);
    ok = ok && e <= ulp * std::fabs(want[i]) + acc * scale[i] + 1e-30;
    max_err = std::max(max_err, std::isnan(e) ? INFINITY : e);
  }
  return ok;
}
std::vector<double> dbl(const std::vector<float>& v, bool abs = false) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = abs ? std::fabs(v[i]) : v[i];
  return r;
}

bool DWConvCli::run(std::ostream& os, const LayerProblem& p, DType dt, const RunSettings& s, std::mt19937_64& rng) const {
  const DWConvOptions o = options_of(p, dt);
  const DWConvGeometry g = dwconv_geometry(o, p.B, p.H, p.W);
  DepthwiseConv layer(o);
  const int64_t C = p.C, HW = p.H * p.W, HoWo = g.Ho * g.Wo, KK = int64_t(o.kh) * o.kw;
  const size_t n_in = size_t(p.B * C * HW), n_out = size_t(p.B * C * HoWo), eb = dtype_bytes(dt);
  // NCHW host data; NHWC runs upload a permuted copy and pass its strides.
  const auto x = testing::random_tensor(n_in, dt, rng()), dy = testing::random_tensor(n_out, dt, rng());
  auto w = testing::random_tensor(size_t(C * KK), DType::kF32, rng());
  for (float& e : w) e /= std::sqrt(float(KK));
  const auto bias = testing::random_tensor(size_t(C), DType::kF32, rng());
  const bool nhwc = o.layout == Layout::kNHWC;
  auto to_layout = [&](const std::vector<float>& v, int64_t hw) {
    if (!nhwc) return v;
    std::vector<float> r(v.size());
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < hw; ++i) r[size_t((b * hw + i) * C + c)] = v[size_t((b * C + c) * hw + i)];
    return r;
  };
  auto from_layout = [&](const std::vector<uint8_t>& raw, int64_t b, int64_t c, int64_t hw) {
    std::vector<float> r(static_cast<size_t>(hw));
    for (int64_t i = 0; i < hw; ++i)
      r[size_t(i)] = decode_one(dt, raw.data(), size_t(nhwc ? (b * hw + i) * C + c : (b * C + c) * hw + i));
    return r;
  };
  DeviceBuffer xd(n_in * eb + 4), dyd(n_out * eb + 4), yd(n_out * eb + 4), dxd(n_in * eb + 4), wd(w.size() * 4),
      bd(bias.size() * 4), dwd(w.size() * 4), dbd(bias.size() * 4);
  const auto xb = encode(dt, to_layout(x, HW)), gb = encode(dt, to_layout(dy, HoWo));
  xd.upload(xb.data(), xb.size());
  dyd.upload(gb.data(), gb.size());
  wd.upload(w.data(), w.size() * 4);
  bd.upload(bias.data(), bias.size() * 4);
  for (DeviceBuffer* b : {&yd, &dxd, &dwd, &dbd}) b->fill_u32(0xffffffffu);  // NaN poison
  layer.set_weights(static_cast<const float*>(wd.data()), o.bias ? static_cast<const float*>(bd.data()) : nullptr);
  DWConvGradients gr;
  gr.dw = static_cast<float*>(dwd.data()), gr.dbias = o.bias ? static_cast<float*>(dbd.data()) : nullptr;
  layer.forward(xd.data(), yd.data(), p.B, p.H, p.W);
  layer.backward(xd.data(), dyd.data(), dxd.data(), gr, p.B, p.H, p.W);
  synchronize();
  std::vector<uint8_t> yraw(n_out * eb), dxraw(n_in * eb);
  yd.download(yraw.data(), yraw.size());
  dxd.download(dxraw.data(), dxraw.size());
  std::vector<float> dwv(w.size()), dbv(bias.size());
  dwd.download(dwv.data(), dwv.size() * 4);
  dbd.download(dbv.data(), dbv.size() * 4);
  ref::DWConvArgs a;
  a.kh = o.kh, a.kw = o.kw, a.stride = o.stride, a.dil = o.dil;
  a.pad_top = g.pad_top, a.pad_bottom = g.pad_bottom, a.pad_left = g.pad_left, a.pad_right = g.pad_right;
  bool ok = true;
  double err = 0;
  const int64_t planes = p.B * C;
  const int checks = int(std::min<int64_t>(s.check_planes, planes));
  for (int i = 0; i < checks; ++i) {
    const int64_t pl = i == 0 ? 0 : i == checks - 1 ? planes - 1 : int64_t(rng() % uint64_t(planes));
    const int64_t b = pl / C, c = pl % C;
    const std::vector<float> xp(x.begin() + pl * HW, x.begin() + (pl + 1) * HW);
    const std::vector<float> gp(dy.begin() + pl * HoWo, dy.begin() + (pl + 1) * HoWo);
    const std::vector<float> wc(w.begin() + c * KK, w.begin() + (c + 1) * KK);
    const std::vector<float> bc = o.bias ? std::vector<float>{bias[size_t(c)]} : std::vector<float>{};
    const ref::DWConvShape one{1, 1, p.H, p.W};
    ok = within(from_layout(yraw, b, c, HoWo), ref::dwconv_forward(dbl(xp), one, dbl(wc), dbl(bc), a),
                ref::dwconv_forward(dbl(xp, true), one, dbl(wc, true), dbl(bc, true), a), dt, double(KK), err) && ok;
    ok = within(from_layout(dxraw, b, c, HW), ref::dwconv_dgrad(dbl(gp), one, dbl(wc), a),
                ref::dwconv_dgrad(dbl(gp, true), one, dbl(wc, true), a), dt, double(KK), err) && ok;
  }
  for (int64_t c : {int64_t(0), C - 1}) {  // dw and dbias of the first and the last channel
    std::vector<float> xs, gs;
    for (int64_t b = 0; b < p.B; ++b) {
      xs.insert(xs.end(), x.begin() + (b * C + c) * HW, x.begin() + (b * C + c + 1) * HW);
      gs.insert(gs.end(), dy.begin() + (b * C + c) * HoWo, dy.begin() + (b * C + c + 1) * HoWo);
    }
    const ref::DWConvShape sh{p.B, 1, p.H, p.W};
    const std::vector<float> got(dwv.begin() + c * KK, dwv.begin() + (c + 1) * KK);
    const double terms = double(p.B) * HoWo;
    ok = within(got, ref::dwconv_wgrad(dbl(xs), sh, dbl(gs), a), ref::dwconv_wgrad(dbl(xs, true), sh, dbl(gs, true), a),
                DType::kF32, terms, err) && ok;
    if (o.bias)
      ok = within({dbv[size_t(c)]}, ref::dwconv_dbias(dbl(gs), sh, a), ref::dwconv_dbias(dbl(gs, true), sh, a), DType::kF32,
                  terms, err) && ok;
  }
  const double fwd = median_ms(s.iters, [&] { layer.forward(xd.data(), yd.data(), p.B, p.H, p.W); });
  const double train = median_ms(s.iters, [&] {
    layer.forward(xd.data(), yd.data(), p.B, p.H, p.W);
    layer.backward(xd.data(), dyd.data(), dxd.data(), gr, p.B, p.H, p.W);
  });
  const auto pl = layer.plan(p.B, p.H, p.W);
  os << fmt::format("{:<20} {:<7} {:<5} {:<4} {:>9.4f} {:>8.0f} {:>9.4f} {:>9}  {}\n",
                    fmt::format("{}x{}x{}x{}", p.B, C, p.H, p.W), fmt::format("{}x{}", o.kh, o.kw), to_string(dt),
                    nhwc ? "nhwc" : "nchw", fwd, double(n_in + n_out) * eb / (fwd * 1e-3) / 1e9, train,
                    ok ? "ok" : "FAIL", kernel_name(pl.at(0).spec, pl.at(0).tile));
  if (!ok) os << fmt::format("  max |err| {:.3e}\n", err);
  return ok;
}

}  // namespace

OpCli& dwconv_cli() {
  static DWConvCli cli;
  return cli;
}

}  // namespace lkjit::tool
