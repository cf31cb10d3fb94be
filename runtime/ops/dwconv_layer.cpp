// The depthwise layer (lkjit/dwconv.h) on the plan runner: per (shape, pass, activation layout) a prepared plan
// (tiles chosen by override, tuning database or default; tune-on-miss through the family's harness), the
// wgrad partials in the layer's scratch, and DWConvParams filled per call from the generator's geometry values.
#include <fmt/format.h>

#include <cstring>
#include <tuple>

#include "abi/dwconv_params.h"
#include "lkjit/dwconv.h"
#include "lkjit/error.h"
#include "runtime/plan_runner.h"
#include "runtime/strides.h"

namespace lkjit {

struct DepthwiseConv::Prepared {
  std::vector<rt::PreparedKernel> kernels;  // forward: [fwd]; backward: [dgrad, wgrad, reduce]
  size_t partial_bytes = 0;
  std::string origin;
  PathChoice path;
};

struct DepthwiseConv::Impl {
  rt::TilePolicy policy{"dwconv"};
  rt::PlanCache<std::tuple<int64_t, int64_t, int64_t, bool, int>, Prepared> plans;
  rt::Scratch scratch;
  DWConvPath path = DWConvPath::kAuto;
  const float* w = nullptr;
  const float* bias = nullptr;
  bool have_weights = false;
  bool have_device = false;
  DeviceInfo dev;
};

namespace {

// The activations' layout of a call, which kAuto reads: channels_last when x's channel stride is 1 (C > 1).
Layout act_layout(const DWConvOptions& o, const std::array<int64_t, 4>& x_st) {
  return o.C > 1 && x_st[1] == 1 ? Layout::kNHWC : Layout::kNCHW;
}

void copy4(long long* dst, const std::array<int64_t, 4>& s) {
  for (int i = 0; i < 4; ++i) dst[i] = s[i];
}

}  // namespace

DepthwiseConv::DepthwiseConv(const DWConvOptions& options) : opt_(options), impl_(std::make_unique<Impl>()) {
  dwconv_check_options(opt_);
}
DepthwiseConv::~DepthwiseConv() = default;

void DepthwiseConv::set_weights(const float* w, const float* bias) {
  dwconv_check_weights(opt_, w, bias);
  impl_->w = w, impl_->bias = bias, impl_->have_weights = true;
}

bool DepthwiseConv::has_weights() const { return impl_->have_weights; }

void DepthwiseConv::set_path(DWConvPath p) {
  impl_->path = p;
  impl_->plans.clear();
}
void DepthwiseConv::set_tune_options(const TuneOptions& o) {
  impl_->policy.set_tune_options(o);
  impl_->plans.clear();
}
void DepthwiseConv::set_tune_mode(TuneMode m) {
  impl_->policy.set_tune_mode(m);
  impl_->plans.clear();
}
void DepthwiseConv::set_tile_override(Kernel kernel, const Tile& tile) {
  if (family_of(kernel).name != "dwconv")
    throw SpecError(fmt::format("lkjit: error: dwconv: {} is not a kernel of the dwconv family", to_string(kernel)));
  impl_->policy.set_override(kernel, 0, tile);
  impl_->plans.clear();
}
void DepthwiseConv::clear_tile_overrides() {
  impl_->policy.clear_overrides();
  impl_->plans.clear();
}
size_t DepthwiseConv::workspace_bytes() const { return impl_->scratch.bytes(); }

std::vector<PlannedKernel> DepthwiseConv::plan(int64_t B, int64_t H, int64_t W, bool backward) const {
  const DeviceInfo dev = impl_->have_device ? impl_->dev : device_info(opt_.device);
  DWConvPath path = impl_->path;
  if (path == DWConvPath::kAuto) {  // the tuning database's decision for the call's key, else the rule
    TuneOptions o = impl_->policy.tune_options();
    o.mode = impl_->policy.mode();
    path = DWConvPath(lookup_path(dwconv_pass_paths(opt_, B, H, W, dev.limits, backward, opt_.layout), device_class(dev), o)
                          .path.id);
  }
  auto pl = dwconv_plan(opt_, B, H, W, dev.limits, backward, opt_.layout, path);
  impl_->policy.choose(pl, dev);
  return pl;
}

const DepthwiseConv::Prepared& DepthwiseConv::prepared(int64_t B, int64_t H, int64_t W, bool backward, Layout act,
                                                       std::optional<Stream> call) {
  if (!impl_->have_device) {
    impl_->dev = device_info(opt_.device);
    impl_->have_device = true;
  }
  const auto what = fmt::format("the first {} of B={} H={} W={}", backward ? "backward" : "forward", B, H, W);
  return impl_->plans.get({B, H, W, backward, int(act)}, call, "dwconv", what, [&] {
    DWConvOptions ho = opt_;
    ho.layout = act;
    Prepared p;
    std::vector<PlannedKernel> pl;  // the measured winner's plan, when the path was tuned now
    if (impl_->path == DWConvPath::kAuto) {
      PassPaths paths = dwconv_pass_paths(opt_, B, H, W, impl_->dev.limits, backward, act);
      paths.harness = [&](int id) { return make_dwconv_harness(ho, B, H, W, backward, DWConvPath(id)); };
      p.path = impl_->policy.choose_path(paths, impl_->dev, &pl);
    } else {
      p.path = {{int(impl_->path), to_string(impl_->path)}, LookupTier::kOverride, "set_path"};
    }
    if (pl.empty()) {
      pl = dwconv_plan(opt_, B, H, W, impl_->dev.limits, backward, act, DWConvPath(p.path.path.id));
      impl_->policy.choose(pl, impl_->dev);
      const DWConvPath path = dwconv_plan_path(pl);
      impl_->policy.tune_on_miss(pl, [&] { return make_dwconv_harness(ho, B, H, W, backward, path); });
    }
    p.kernels = rt::prepare_kernels(pl, opt_.device, "dwconv");
    for (const auto& k : p.kernels) {
      p.origin = p.origin.empty() ? k.origin : rt::worse_origin(p.origin, k.origin);
      if (k.geometry.values.count("partial_floats"))
        p.partial_bytes = size_t(k.geometry.value("partial_floats")) * sizeof(float);
    }
    return p;
  });
}

void DepthwiseConv::prepare(int64_t B, int64_t H, int64_t W, bool backward) {
  const Prepared& f = prepared(B, H, W, false, opt_.layout, std::nullopt);
  last_origin_ = f.origin;
  last_path_ = f.path;
  if (backward) {
    const Prepared& b = prepared(B, H, W, true, opt_.layout, std::nullopt);
    last_origin_ = rt::worse_origin(last_origin_, b.origin);
    last_path_ = b.path;
    impl_->scratch.ensure(b.partial_bytes, opt_.device, nullptr, "dwconv");
  }
}

void DepthwiseConv::run(const Prepared& pp, const void* x, const void* g, void* out, const DWConvGradients* grads,
                        const DWConvStrides& st, int64_t B, int64_t H, int64_t W, Stream s,
                        std::vector<KernelTiming>* timings) {
  const DWConvGeometry geo = dwconv_geometry(opt_, B, H, W);
  const bool backward = g != nullptr;
  DWConvParams base;
  std::memset(&base, 0, sizeof(base));
  base.x = x;
  base.w = impl_->w;
  base.bias = impl_->bias;
  base.B = int(B), base.C = int(opt_.C), base.H = int(H), base.W = int(W), base.Ho = int(geo.Ho), base.Wo = int(geo.Wo);
  base.ph = geo.pad_top, base.pw = geo.pad_left, base.taps = opt_.kh * opt_.kw;
  copy4(base.x_st, st.x);
  if (!backward) {
    base.y = out;
    copy4(base.y_st, st.out);
    DWConvParams p = base;
    const auto& k = pp.kernels.at(0);
    p.tiles_h = int(k.geometry.value("tiles_h")), p.tiles_w = int(k.geometry.value("tiles_w"));
    rt::launch_prepared(k, &p, sizeof(p), s, false, timings);
    return;
  }
  base.dy = g;
  base.dx = out;
  copy4(base.dy_st, st.dout);
  copy4(base.dx_st, st.out);
  if (out) {
    DWConvParams p = base;
    const auto& k = pp.kernels.at(0);
    p.tiles_h = int(k.geometry.value("tiles_h")), p.tiles_w = int(k.geometry.value("tiles_w"));
    rt::launch_prepared(k, &p, sizeof(p), s, false, timings);
  }
  if (grads && grads->dw) {
    const auto& wk = pp.kernels.at(1);
    DWConvParams p = base;
    p.partial = static_cast<float*>(impl_->scratch.ensure(pp.partial_bytes, opt_.device, s, "dwconv"));
    p.dw = grads->dw;
    p.dbias = opt_.bias ? grads->dbias : nullptr;
    p.tiles_h = int(wk.geometry.value("tiles_h")), p.tiles_w = int(wk.geometry.value("tiles_w"));
    p.chunks = int(wk.geometry.value("chunks"));
    p.part_st[0] = wk.geometry.value("part_st0");
    p.part_st[1] = wk.geometry.value("part_st1");
    p.part_st[2] = wk.geometry.value("part_st2");
    rt::launch_prepared(wk, &p, sizeof(p), s, false, timings);
    rt::launch_prepared(pp.kernels.at(2), &p, sizeof(p), s, false, timings);  // same chunks and layout
  }
}

void DepthwiseConv::forward(const void* x, void* y, int64_t B, int64_t H, int64_t W, Stream s,
                            const DWConvStrides* strides) {
  dwconv_check_activations(x, nullptr, y, false);
  if (!impl_->have_weights) throw SpecError("lkjit: error: dwconv: forward before set_weights; supported: set_weights first");
  const DWConvStrides st = dwconv_resolve_strides(opt_, B, H, W, strides, false);
  const Prepared& p = prepared(B, H, W, false, act_layout(opt_, st.x), s);
  last_origin_ = p.origin;
  last_path_ = p.path;
  run(p, x, nullptr, y, nullptr, st, B, H, W, s, nullptr);
}

void DepthwiseConv::backward(const void* x, const void* dout, void* dx, const DWConvGradients& grads, int64_t B,
                             int64_t H, int64_t W, Stream s, const DWConvStrides* strides) {
  dwconv_check_activations(x, dout, dx, true);
  dwconv_check_gradients(opt_, dx, grads);
  if (!impl_->have_weights) throw SpecError("lkjit: error: dwconv: backward before set_weights; supported: set_weights first");
  const DWConvStrides st = dwconv_resolve_strides(opt_, B, H, W, strides, true);
  const Prepared& p = prepared(B, H, W, true, act_layout(opt_, st.x), s);
  last_origin_ = p.origin;
  last_path_ = p.path;
  run(p, x, dout, dx, &grads, st, B, H, W, s, nullptr);
}

std::vector<KernelTiming> DepthwiseConv::profile(const void* x, const void* dout, void* out, const DWConvGradients* grads,
                                                 int64_t B, int64_t H, int64_t W, Stream s, const DWConvStrides* strides) {
  const bool backward = dout != nullptr;
  dwconv_check_activations(x, dout, out, backward);
  const DWConvGradients none;
  if (backward) dwconv_check_gradients(opt_, out, grads ? *grads : none);
  if (!impl_->have_weights) throw SpecError("lkjit: error: dwconv: profile before set_weights; supported: set_weights first");
  const DWConvStrides st = dwconv_resolve_strides(opt_, B, H, W, strides, backward);
  const Prepared& p = prepared(B, H, W, backward, act_layout(opt_, st.x), s);
  std::vector<KernelTiming> t;
  run(p, x, dout, out, grads, st, B, H, W, s, &t);
  return t;
}

}  // namespace lkjit
