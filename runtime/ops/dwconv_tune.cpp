// The depthwise family's pass harness (its PassHarness, for the tuner and tune-on-miss): a DepthwiseConv with
// its path pinned, on rotating buffers, timing a forward or a whole backward (dgrad, wgrad, reduce).
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>

#include "dwconv/geometry.cuh"
#include "lkjit/dwconv.h"
#include "lkjit/error.h"
#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "runtime/op_registry.h"
#include "runtime/pass_timer.h"
#include "runtime/strides.h"

namespace lkjit {
namespace {

size_t dense_bytes(const rt::Dims4& n, DType t) {
  return (size_t(n[0] * n[1] * n[2] * n[3]) * dtype_bytes(t) + 3) / 4 * 4;
}

class DWConvHarness : public PassHarness {
 public:
  DWConvHarness(const DWConvOptions& o, int64_t B, int64_t H, int64_t W, bool backward, DWConvPath path)
      : opt_(o), B_(B), H_(H), W_(W), backward_(backward), dev_(device_info(o.device)), layer_(o), timer_(dev_) {
    const DWConvGeometry g = dwconv_geometry(o, B, H, W);
    info_.op = "dwconv";
    info_.backward = backward;
    info_.dtype = o.dtype;
    info_.B = B, info_.C = o.C, info_.H = H, info_.W = W;
    info_.params = {{"kh", o.kh}, {"kw", o.kw}, {"stride", o.stride}, {"dil", o.dil},
                    {"pad_h", g.pad_top}, {"pad_w", g.pad_left}};
    info_.flags = {{"bias", o.bias}, {"same", o.same}};
    info_.text = fmt::format("{} {} {} {}x{}x{}x{} k={}x{} s={} d={} pad={}x{} {}", backward ? "bwd" : "fwd",
                             to_string(o.dtype), to_string(o.layout), B, o.C, H, W, o.kh, o.kw, o.stride, o.dil,
                             g.pad_top, g.pad_left, to_string(path));
    layer_.set_path(path);
    TuneOptions off;
    off.mode = TuneMode::kOff;
    layer_.set_tune_options(off);
    plan_ = dwconv_plan(o, B, H, W, dev_.limits, backward, o.layout, path);
    const rt::Dims4 n_in{B, o.C, H, W}, n_out{B, o.C, g.Ho, g.Wo};
    const size_t in = dense_bytes(n_in, o.dtype), out = dense_bytes(n_out, o.dtype);
    sets_ = rt::PassTimer::sets_for(dev_, 2 * (in + out));
    for (size_t i = 0; i < sets_; ++i) {
      x_.emplace_back(in, o.device);
      x_.back().fill_u32(0x3c003c00u);  // ones in f16 (about 0.0078 in f32, 2^-7 in bf16): timing ignores values
      g_.emplace_back(backward ? out : in, o.device);
      g_.back().fill_u32(0x3c003c00u);
      y_.emplace_back(backward ? in : out, o.device);
    }
    w_ = DeviceBuffer(size_t(o.C) * o.kh * o.kw * 4, o.device);
    w_.fill_u32(0x3c000000u);
    b_ = DeviceBuffer(size_t(o.C) * 4, o.device);
    b_.fill_u32(0);
    dw_ = DeviceBuffer(size_t(o.C) * o.kh * o.kw * 4, o.device);
    db_ = DeviceBuffer(size_t(o.C) * 4, o.device);
    layer_.set_weights(static_cast<const float*>(w_.data()), o.bias ? static_cast<const float*>(b_.data()) : nullptr);
    synchronize();
  }
  const PassInfo& info() const override { return info_; }
  const DeviceInfo& device() const override { return dev_; }
  const std::vector<PlannedKernel>& plan() const override { return plan_; }
  void set_tile(const KernelSelector& e, const Tile& t) override { layer_.set_tile_override(e.kernel, t); }
  void set_tiles(const std::vector<PlannedKernel>& plan) override {
    for (const auto& pk : plan) layer_.set_tile_override(pk.spec.kernel, pk.tile);
  }
  void prepare() override {
    run(0);
    synchronize();
  }
  std::vector<double> time(int warmup, int reps) override {
    return timer_.time(warmup, reps, sets_, [&](size_t s) { run(s); });
  }
  double traffic_bytes() const override {
    double b = 0;
    for (const auto& pk : plan_) b += pk.bytes;
    return b;
  }
  // Both plans' outputs on one set of random inputs (weights of unit-scale outputs, a bias), each written into
  // NaN-poisoned, guarded buffers: y, or dx, dw and dbias.
  std::optional<std::string> check_outputs(const std::vector<PlannedKernel>& reference,
                                           const std::vector<PlannedKernel>& candidate) override {
    const testing::PassOutputs want = outputs(reference);
    const testing::PassOutputs got = outputs(candidate);
    return testing::compare_outputs(want, got, opt_.dtype);
  }
  // Another path's pass of the same problem: the same seeds give both harnesses the same inputs, and the same
  // options the same memory layout of what they write.
  std::optional<std::string> check_against(PassHarness& reference, const std::vector<PlannedKernel>& reference_tiles,
                                           const std::vector<PlannedKernel>& tiles) override {
    auto* r = dynamic_cast<DWConvHarness*>(&reference);
    if (!r || r->info_.params != info_.params || r->info_.flags != info_.flags || r->B_ != B_ || r->H_ != H_ ||
        r->W_ != W_ || r->backward_ != backward_ || r->opt_.C != opt_.C || r->opt_.dtype != opt_.dtype ||
        r->opt_.layout != opt_.layout)
      throw SpecError(fmt::format("lkjit: error: tune: {} and {} are not passes of one problem",
                                  reference.info().text, info_.text));
    const testing::PassOutputs want = r->outputs(reference_tiles);
    const testing::PassOutputs got = outputs(tiles);
    return testing::compare_outputs(want, got, opt_.dtype);
  }

 private:
  // One run with `tiles` on the check inputs (made on first use), outputs NaN-poisoned and guarded first.
  testing::PassOutputs outputs(const std::vector<PlannedKernel>& tiles) {
    const DWConvGeometry g = dwconv_geometry(opt_, B_, H_, W_);
    const size_t n_in = size_t(B_ * opt_.C * H_ * W_), n_out = size_t(B_ * opt_.C * g.Ho * g.Wo);
    const size_t taps = size_t(opt_.C) * opt_.kh * opt_.kw, eb = dtype_bytes(opt_.dtype);
    if (!cx_.data()) {
      auto upload = [&](DeviceBuffer& d, const std::vector<uint8_t>& b) {
        d = DeviceBuffer((b.size() + 3) / 4 * 4, opt_.device);
        d.upload(b.data(), b.size());
      };
      upload(cx_, encode(opt_.dtype, testing::random_tensor(n_in, opt_.dtype, 0xd3c0)));
      upload(cg_, encode(opt_.dtype, testing::random_tensor(n_out, opt_.dtype, 0xd3c1)));
      std::vector<float> w = testing::random_tensor(taps, DType::kF32, 0xd3c2);
      for (float& v : w) v /= std::sqrt(float(opt_.kh * opt_.kw));
      upload(cw_, encode(DType::kF32, w));
      upload(cb_, encode(DType::kF32, testing::random_tensor(size_t(opt_.C), DType::kF32, 0xd3c3)));
      cy_ = testing::GuardedBuffer((backward_ ? n_in : n_out) * eb, opt_.device);
      cdw_ = testing::GuardedBuffer(taps * 4, opt_.device);
      cdb_ = testing::GuardedBuffer(size_t(opt_.C) * 4, opt_.device);
    }
    auto download = [&](const testing::GuardedBuffer& b, size_t n, DType t, const char* name, bool grad) {
      std::vector<uint8_t> raw(n * dtype_bytes(t));
      b.buffer().download(raw.data(), raw.size());
      testing::PassOutputs::Tensor out{name, grad, std::vector<float>(n)};
      for (size_t i = 0; i < n; ++i) out.v[i] = decode_one(t, raw.data(), i);
      return out;
    };
    set_tiles(tiles);
    cy_.poison(), cdw_.poison(), cdb_.poison();
    DepthwiseConv& l = layer_;
    l.set_weights(static_cast<const float*>(cw_.data()), opt_.bias ? static_cast<const float*>(cb_.data()) : nullptr);
    testing::PassOutputs o;
    if (!backward_) {
      l.forward(cx_.data(), cy_.data(), B_, H_, W_);
      synchronize();
      o.tensors.push_back(download(cy_, n_out, opt_.dtype, "y", false));
    } else {
      DWConvGradients gr;
      gr.dw = static_cast<float*>(cdw_.data());
      gr.dbias = opt_.bias ? static_cast<float*>(cdb_.data()) : nullptr;
      l.backward(cx_.data(), cg_.data(), cy_.data(), gr, B_, H_, W_);
      synchronize();
      o.tensors.push_back(download(cy_, n_in, opt_.dtype, "dx", false));
      o.tensors.push_back(download(cdw_, taps, DType::kF32, "dw", true));
      if (opt_.bias) o.tensors.push_back(download(cdb_, size_t(opt_.C), DType::kF32, "dbias", true));
    }
    for (auto [name, b] : {std::pair<const char*, const testing::GuardedBuffer*>{backward_ ? "dx" : "y", &cy_},
                           {"dw", &cdw_}, {"dbias", &cdb_}})
      if (const int64_t bad = b->guard_bytes_changed())
        o.guard_damage += fmt::format("{}{}: {} guard bytes changed", o.guard_damage.empty() ? "" : "; ", name, bad);
    // The timed buffers' weights again (the harness's own, constant ones).
    l.set_weights(static_cast<const float*>(w_.data()), opt_.bias ? static_cast<const float*>(b_.data()) : nullptr);
    return o;
  }

  void run(size_t s) {
    if (!backward_) {
      layer_.forward(x_[s].data(), y_[s].data(), B_, H_, W_);
      return;
    }
    DWConvGradients gr;
    gr.dw = static_cast<float*>(dw_.data());
    gr.dbias = opt_.bias ? static_cast<float*>(db_.data()) : nullptr;
    layer_.backward(x_[s].data(), g_[s].data(), y_[s].data(), gr, B_, H_, W_);
  }
  DWConvOptions opt_;
  int64_t B_, H_, W_;
  bool backward_;
  DeviceInfo dev_;
  DepthwiseConv layer_;
  rt::PassTimer timer_;
  PassInfo info_;
  std::vector<PlannedKernel> plan_;
  std::vector<DeviceBuffer> x_, g_, y_;
  DeviceBuffer w_, b_, dw_, db_;
  size_t sets_ = 1;
  DeviceBuffer cx_, cg_, cw_, cb_;  // check_outputs' inputs and outputs, made on first use
  testing::GuardedBuffer cy_, cdw_, cdb_;
};

// The input extent whose output is n_out with symmetric padding p (the smallest such; p = floor(d(k-1)/2)).
int64_t input_for(int64_t n_out, int k, int s, int d, int p) {
  for (int64_t n = std::max<int64_t>(1, (n_out - 1) * s + 1 - 2 * p); n <= n_out * s + d * k; ++n)
    if (dwc::out_extent(n, k, s, d, p, p) == n_out) return n;
  return n_out * s;
}

// A pass whose plan runs `spec` on `sh` (the extents that kernel iterates over: generator/ops/dwconv.cpp).
std::pair<std::unique_ptr<PassHarness>, KernelSelector> harness_for(const OpSpec& spec, const Shape& sh, int device,
                                                                    const DeviceLimits&) {
  if (family_of(spec.kernel).name != "dwconv")
    throw SpecError(fmt::format("lkjit: error: tuner: {} is not a kernel of the dwconv family", spec.to_string()));
  DWConvOptions o;
  o.C = sh.C, o.dtype = spec.dtype, o.device = device, o.bias = true;
  const Kernel& k = spec.kernel;
  int64_t B = sh.B, H = sh.H, W = sh.W;
  if (k == kDWConvWgradReduce) {  // (1, C, taps + 1, 1): a filter of taps = kh * kw with kh, kw <= 63
    const int64_t taps = sh.H - 1;
    o.kh = 1;
    for (int a = 63; a >= 1; --a)
      if (taps % a == 0 && taps / a <= 63) {
        o.kh = a;
        break;
      }
    o.kw = int(taps / o.kh);
    o.stride = 1, o.dil = 1, o.same = true;
    B = 1, H = 32, W = 32;
  } else {
    o.kh = spec.get("kh"), o.kw = spec.get("kw"), o.stride = spec.get("stride"), o.dil = spec.get("dil");
    o.pad_h = o.dil * (o.kh - 1) / 2, o.pad_w = o.dil * (o.kw - 1) / 2;
    if (k != kDWConvDgradDirect && k != kDWConvDgradNhwc && k != kDWConvDgradMma) {  // sh: the output; H, W: its input
      H = input_for(sh.H, o.kh, o.stride, o.dil, o.pad_h);
      W = input_for(sh.W, o.kw, o.stride, o.dil, o.pad_w);
    }
  }
  const bool nhwc = k == kDWConvFwdNhwc || k == kDWConvDgradNhwc || k == kDWConvWgradNhwc;
  const bool mma = k == kDWConvFwdMma || k == kDWConvDgradMma || k == kDWConvWgradMma;
  o.layout = nhwc ? Layout::kNHWC : Layout::kNCHW;
  const bool backward = k != kDWConvFwdDirect && k != kDWConvFwdNhwc && k != kDWConvFwdMma;
  const DWConvPath path = mma ? DWConvPath::kMma : nhwc ? DWConvPath::kNhwc : DWConvPath::kDirect;
  auto h = std::make_unique<DWConvHarness>(o, B, H, W, backward, path);
  return {std::move(h), KernelSelector{k, 0}};
}

}  // namespace

std::unique_ptr<PassHarness> make_dwconv_harness(const DWConvOptions& o, int64_t B, int64_t H, int64_t W, bool backward,
                                                 DWConvPath path) {
  return std::make_unique<DWConvHarness>(o, B, H, W, backward, path);
}

namespace rt {
OpRuntime dwconv_runtime() { return {"dwconv", harness_for}; }
}  // namespace rt

}  // namespace lkjit
