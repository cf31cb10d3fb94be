// Layer-level tuning of the WBMM kernels (lkjit/wbmm_tune.h): the measurement harness and the problem a
// kernel's spec belongs to, registered with the runtime (runtime/ops/registry.cpp) so that the tuner and
// tune-on-miss can time WBMM passes.
#include "lkjit/wbmm_tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "lkjit/error.h"
#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "runtime/op_registry.h"
#include "runtime/pass_timer.h"

namespace lkjit {

std::string WBMMTuneProblem::to_string() const {
  std::string s = fmt::format("{} {} {} {}x{} {}", backward ? "bwd" : "fwd", lkjit::to_string(options.dtype),
                              shape().to_string(), options.wh, options.ww,
                              options.mode == WBMMMode::kTable ? "table" : "dense");
  if (options.dtype == DType::kF32 && options.allow_tf32) s += " tf32";
  if (!options.identity) s += " no-identity";
  if (options.bias) s += " bias";
  if (options.layout == Layout::kNHWC) s += " NHWC";
  if (backward && !need_dx) s += " no-dx";
  if (backward && path == WBMMBackward::kSplit) s += " split";
  return s;
}

PassInfo WBMMTuneProblem::info() const {
  PassInfo i;
  i.op = "wbmm";
  i.backward = backward;
  i.dtype = options.dtype;
  i.B = B, i.C = options.C, i.H = H, i.W = W;
  i.params = {{"wh", options.wh}, {"ww", options.ww}, {"mode", options.mode == WBMMMode::kDense ? 1 : 0}};
  i.flags = {{"identity", options.identity}, {"bias", options.bias}, {"tf32", options.allow_tf32},
             {"nhwc", options.layout == Layout::kNHWC}};
  if (backward) i.flags.push_back({"dx", need_dx});
  i.text = to_string();
  return i;
}

// ---- harness ----------------------------------------------------------------------------------------
struct WBMMHarness::Impl {
  WBMMTuneProblem p;
  PassInfo info;
  DeviceInfo dev;
  std::vector<PlannedKernel> plan;
  std::unique_ptr<WBMM> layer;
  DeviceBuffer weight, bias, gweight, gbias;
  std::vector<DeviceBuffer> x, out, dout;  // rotating sets; out is dX for a backward
  std::unique_ptr<rt::PassTimer> timer;  // the L2 flush and the timing loop
  double bytes = 0;
  WBMMGradients grads;
  // check_outputs' random inputs and weights and its guarded outputs, made on first use.
  DeviceBuffer cx, cdout, cweight, cbias;
  testing::GuardedBuffer cout, cgweight, cgbias;

  void run(size_t set) {
    if (p.backward)
      layer->backward(x[set].data(), dout[set].data(), p.need_dx ? out[set].data() : nullptr, grads, p.B, p.H, p.W);
    else
      layer->forward(x[set].data(), out[set].data(), p.B, p.H, p.W);
  }
};

WBMMHarness::WBMMHarness(const WBMMTuneProblem& p) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.p = p;
  m.info = p.info();
  m.dev = device_info(p.options.device);
  const Shape sh = p.shape();
  m.plan = wbmm_plan(p.options, sh, m.dev.limits, p.backward, p.path, p.need_dx);
  m.layer = std::make_unique<WBMM>(p.options);
  m.layer->set_backward_path(p.path);
  m.layer->set_tune_mode(TuneMode::kOff);
  set_tiles(m.plan);
  for (const auto& pk : m.plan) m.bytes += pk.bytes;

  const WBMMOptions& o = p.options;
  const size_t nw = size_t(o.C) * (o.mode == WBMMMode::kTable ? wbmm_table_size(o) : size_t(wbmm_positions(o)) * wbmm_positions(o));
  m.weight = DeviceBuffer(nw * 4, o.device);
  m.weight.fill_u32(0x3c23d70au);  // 0.01f
  WBMMWeights w;
  (o.mode == WBMMMode::kTable ? w.R : w.M) = static_cast<const float*>(m.weight.data());
  if (o.bias) {
    m.bias = DeviceBuffer(size_t(o.C) * 4, o.device);
    m.bias.fill_u32(0);
    w.bias = static_cast<const float*>(m.bias.data());
  }
  m.layer->set_weights(w);
  if (p.backward) {
    m.gweight = DeviceBuffer(nw * 4, o.device);
    (o.mode == WBMMMode::kTable ? m.grads.R : m.grads.M) = static_cast<float*>(m.gweight.data());
    if (o.bias) {
      m.gbias = DeviceBuffer(size_t(o.C) * 4, o.device);
      m.grads.bias = static_cast<float*>(m.gbias.data());
    }
  }
  // Enough rotating sets that one pass's tensors are out of L2 when the set comes round again.
  const size_t n = rt::round_up_words(size_t(sh.numel()) * dtype_bytes(o.dtype));
  const size_t set_bytes = n * (p.backward ? 3 : 2);
  const size_t copies = rt::PassTimer::sets_for(m.dev, set_bytes);
  for (size_t i = 0; i < copies; ++i) {
    m.x.emplace_back(n, o.device);
    m.x.back().fill_u32(rt::ones_word(o.dtype));
    m.out.emplace_back(n, o.device);
    m.out.back().fill_u32(0);
    if (p.backward) {
      m.dout.emplace_back(n, o.device);
      m.dout.back().fill_u32(rt::ones_word(o.dtype));
    }
  }
  m.timer = std::make_unique<rt::PassTimer>(m.dev);
  synchronize();
}

WBMMHarness::~WBMMHarness() = default;

const PassInfo& WBMMHarness::info() const { return impl_->info; }
const std::vector<PlannedKernel>& WBMMHarness::plan() const { return impl_->plan; }
WBMM& WBMMHarness::layer() { return *impl_->layer; }
const DeviceInfo& WBMMHarness::device() const { return impl_->dev; }
double WBMMHarness::traffic_bytes() const { return impl_->bytes; }

void WBMMHarness::set_tile(const KernelSelector& e, const Tile& t) { impl_->layer->set_tile_override(e.kernel, t); }

void WBMMHarness::set_tiles(const std::vector<PlannedKernel>& plan) {
  for (const auto& pk : plan) impl_->layer->set_tile_override(pk.spec.kernel, pk.tile);
}

void WBMMHarness::prepare() {
  Impl& m = *impl_;
  if (!m.p.backward) {
    m.layer->prepare(m.p.B, m.p.H, m.p.W, false);
    return;
  }
  // A backward's plan (with or without dX) is built by its first call: one untimed pass.
  m.run(0);
  synchronize();
}

std::vector<double> WBMMHarness::time(int warmup, int reps) {
  Impl& m = *impl_;
  return m.timer->time(warmup, reps, m.x.size(), [&](size_t set) { m.run(set); });
}

// Both plans' outputs on one random x (and dOut), with random weights of scale 1/sqrt(d) and bias (so that each
// term shows), each written into NaN-poisoned, guarded buffers: out, or dX and the weight gradients.
std::optional<std::string> WBMMHarness::check_outputs(const std::vector<PlannedKernel>& reference,
                                                      const std::vector<PlannedKernel>& candidate) {
  Impl& m = *impl_;
  const WBMMOptions& o = m.p.options;
  const Shape sh = m.p.shape();
  const size_t n = size_t(sh.numel()), eb = dtype_bytes(o.dtype);
  const bool table = o.mode == WBMMMode::kTable;
  const size_t nw = size_t(o.C) * (table ? wbmm_table_size(o) : size_t(wbmm_positions(o)) * wbmm_positions(o));
  if (!m.cx.data()) {
    auto upload = [&](DeviceBuffer& b, const std::vector<uint8_t>& bytes) {
      b = DeviceBuffer(rt::round_up_words(bytes.size()), o.device);
      b.upload(bytes.data(), bytes.size());
    };
    upload(m.cx, encode(o.dtype, testing::random_tensor(n, o.dtype, 0xb33f)));
    if (m.p.backward) upload(m.cdout, encode(o.dtype, testing::random_tensor(n, o.dtype, 0xb340)));
    std::vector<float> w = testing::random_tensor(nw, DType::kF32, 0xb341);
    for (float& v : w) v /= std::sqrt(float(wbmm_positions(o)));
    upload(m.cweight, encode(DType::kF32, w));
    if (o.bias) upload(m.cbias, encode(DType::kF32, testing::random_tensor(size_t(o.C), DType::kF32, 0xb342)));
    m.cout = testing::GuardedBuffer(rt::round_up_words(n * eb), o.device);
    if (m.p.backward) {
      m.cgweight = testing::GuardedBuffer(nw * 4, o.device);
      if (o.bias) m.cgbias = testing::GuardedBuffer(size_t(o.C) * 4, o.device);
    }
  }
  WBMMWeights w;
  (table ? w.R : w.M) = static_cast<const float*>(m.cweight.data());
  if (o.bias) w.bias = static_cast<const float*>(m.cbias.data());
  auto run_with = [&](const std::vector<PlannedKernel>& tiles) {
    set_tiles(tiles);
    m.layer->set_weights(w);
    testing::PassOutputs r;
    auto fetch = [&](const char* name, bool gradient, const testing::GuardedBuffer& b, size_t count, DType dt) {
      std::vector<uint8_t> raw(count * dtype_bytes(dt));
      b.buffer().download(raw.data(), raw.size());
      testing::PassOutputs::Tensor t{name, gradient, std::vector<float>(count)};
      for (size_t i = 0; i < count; ++i) t.v[i] = decode_one(dt, raw.data(), i);
      r.tensors.push_back(std::move(t));
      if (const int64_t bad = b.guard_bytes_changed())
        r.guard_damage += fmt::format("{}{}: {} guard bytes changed", r.guard_damage.empty() ? "" : "; ", name, bad);
    };
    m.cout.poison();
    if (!m.p.backward) {
      m.layer->forward(m.cx.data(), m.cout.data(), m.p.B, m.p.H, m.p.W);
      synchronize();
      fetch("out", false, m.cout, n, o.dtype);
    } else {
      m.cgweight.poison();
      if (o.bias) m.cgbias.poison();
      WBMMGradients g;
      (table ? g.R : g.M) = static_cast<float*>(m.cgweight.data());
      if (o.bias) g.bias = static_cast<float*>(m.cgbias.data());
      m.layer->backward(m.cx.data(), m.cdout.data(), m.p.need_dx ? m.cout.data() : nullptr, g, m.p.B, m.p.H, m.p.W);
      synchronize();
      if (m.p.need_dx) fetch("dX", false, m.cout, n, o.dtype);
      fetch(table ? "dR" : "dM", true, m.cgweight, nw, DType::kF32);
      if (o.bias) fetch("dbias", true, m.cgbias, size_t(o.C), DType::kF32);
    }
    return r;
  };
  const testing::PassOutputs want = run_with(reference);
  const testing::PassOutputs got = run_with(candidate);
  // The timing weights again (constants: timing does not depend on values).
  WBMMWeights tw;
  (table ? tw.R : tw.M) = static_cast<const float*>(m.weight.data());
  if (o.bias) tw.bias = static_cast<const float*>(m.bias.data());
  m.layer->set_weights(tw);
  return testing::compare_outputs(want, got, o.dtype);
}

TuneReport wbmm_tune(const WBMMTuneProblem& p, const std::vector<KernelSelector>& which, const TuneOptions& o) {
  WBMMHarness h(p);
  return tune_pass(h, which, o);
}

std::pair<WBMMTuneProblem, KernelSelector> wbmm_problem_for(const OpSpec& spec, const Shape& shape, int device,
                                                            const DeviceLimits& limits) {
  if (family_of(spec.kernel).name != "wbmm")
    throw SpecError(fmt::format("lkjit: error: tuner: {} is not a WBMM kernel", spec.to_string()));
  WBMMTuneProblem p;
  WBMMOptions& o = p.options;
  o.C = shape.C;
  o.wh = spec.get("wh"), o.ww = spec.get("ww");
  o.mode = spec.get("mode") ? WBMMMode::kDense : WBMMMode::kTable;
  o.bias = spec.get("bias") != 0;
  o.device = device;
  p.B = shape.B, p.H = shape.H, p.W = shape.W;
  const Kernel& k = spec.kernel;
  if (k == kWBMMReduce) {  // after the fused wgrad of a bf16 layer (its partial rows: the wgrad's default tile)
    o.dtype = DType::kBF16;
    p.backward = true;
  } else {
    o.dtype = spec.dtype;
    o.allow_tf32 = spec.get("tf32") != 0;
    o.identity = spec.get("identity") != 0;
    o.layout = spec.get("layout") ? Layout::kNHWC : Layout::kNCHW;
    p.backward = k != kWBMMFwd;
    if (k == kWBMMDgrad || (k == kWBMMWgrad && !spec.get("fuse_dx"))) p.path = WBMMBackward::kSplit;
  }
  const auto plan = wbmm_plan(o, p.shape(), limits, p.backward, p.path, p.need_dx);
  for (const auto& pk : plan)
    if (pk.spec == spec && pk.shape.B == shape.B && pk.shape.C == shape.C && pk.shape.H == shape.H &&
        pk.shape.W == shape.W && shape.stride == 1)
      return {p, KernelSelector{spec.kernel, 0}};
  throw SpecError(fmt::format("lkjit: error: tuner: {} on {} is not a kernel of a WBMM layer pass", spec.to_string(),
                              shape.to_string()));
}

namespace {

std::pair<std::unique_ptr<PassHarness>, KernelSelector> harness_for(const OpSpec& spec, const Shape& shape, int device,
                                                                    const DeviceLimits& limits) {
  auto [p, sel] = wbmm_problem_for(spec, shape, device, limits);
  return {std::make_unique<WBMMHarness>(p), sel};
}

}  // namespace

namespace rt {
OpRuntime wbmm_runtime() { return {"wbmm", harness_for}; }
}  // namespace rt

}  // namespace lkjit
