// Layer-level tuning of the WTConv kernels (see lkjit/wtconv_tune.h for why the whole pass is timed):
// the measurement harness and the per-kernel searches.
#include "lkjit/wtconv_tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "lkjit/error.h"
#include "lkjit/numeric.h"
#include "lkjit/reference.h"
#include "lkjit/testing.h"
#include "runtime/tune_search.h"
#include "runtime/op_registry.h"
#include "runtime/pass_timer.h"
#include "runtime/tuner_internal.h"

namespace lkjit {
namespace {

// Seeds of the harness's weights and of check_outputs' inputs.
constexpr uint64_t kWeightSeed = 42, kCheckSeed = 4242;

}  // namespace

std::string WTConvTuneProblem::to_string() const {
  return fmt::format("{} {} {} k={} L={}{}{}", backward ? "bwd" : "fwd", lkjit::to_string(options.dtype),
                     shape().to_string(), options.k, options.L, options.bias ? "" : " no-bias",
                     options.layout == Layout::kNHWC ? " nhwc" : "");
}

PassInfo WTConvTuneProblem::info() const {
  PassInfo i;
  i.op = "wtconv";
  i.backward = backward;
  i.dtype = options.dtype;
  i.B = B, i.C = options.C, i.H = H, i.W = W;
  i.params = {{"k", options.k}, {"L", options.L}, {"stride", options.stride}};
  i.flags = {{"bias", options.bias}};
  i.text = to_string();
  return i;
}

std::vector<PlannedKernel> wtconv_tunable(const WTConvTuneProblem& p, const DeviceLimits& limits) {
  return tunable(wtconv_plan(p.options, p.shape(), limits, p.backward, p.path), limits);
}

KernelSelector wtconv_main_kernel(const std::vector<PlannedKernel>& plan) {
  for (const auto& pk : plan)
    if (pk.spec.kernel == kWTConvFwdPlane || pk.spec.kernel == kWTConvBwdPlane ||
        pk.spec.kernel == kWTConvFwdLane || pk.spec.kernel == kWTConvBwdLane)
      return {pk.spec.kernel, 0};
  for (const auto& pk : plan)
    if (pk.spec.kernel == kWTConvFwdSynth || pk.spec.kernel == kWTConvBwdSynth) return {pk.spec.kernel, 0};
  return {plan.empty() ? kWTConvFold : plan.back().spec.kernel, 0};
}

// ---- harness ----------------------------------------------------------------------------------------
struct WTConvHarness::Impl {
  WTConvTuneProblem p;
  PassInfo info;
  DeviceInfo dev;
  std::vector<PlannedKernel> plan;
  std::unique_ptr<WTConv> layer;
  ref::WTConvParams ref_params;
  testing::DeviceParams params;
  std::vector<DeviceBuffer> x, out, dout;  // rotating sets; out is dX for a backward
  std::unique_ptr<rt::PassTimer> timer;  // the L2 flush and the timing loop
  double bytes = 0;

  // check_outputs' random inputs and guarded output, made on first use.
  struct Check {
    DeviceBuffer x, dout;
    testing::GuardedBuffer out;
    size_t nout = 0;  // elements of out (dX for a backward)
  };
  std::unique_ptr<Check> check;

  void run_on(const void* xs, const void* douts, void* outs) {
    if (p.backward)
      layer->backward(xs, douts, outs, params.grads, p.B, p.H, p.W);
    else
      layer->forward(xs, outs, p.B, p.H, p.W);
  }
  void run(size_t set) { run_on(x[set].data(), p.backward ? dout[set].data() : nullptr, out[set].data()); }

  Check& check_buffers() {
    if (check) return *check;
    auto c = std::make_unique<Check>();
    const Shape sh = p.shape();
    const DType dt = p.options.dtype;
    const size_t nin = size_t(sh.numel()), ng = size_t(sh.B * sh.C * sh.H_out() * sh.W_out());
    auto upload_random = [&](size_t n, uint64_t seed) {
      const auto bytes = encode(dt, testing::random_tensor(n, dt, seed));
      DeviceBuffer b(rt::round_up_words(bytes.size()), p.options.device);
      b.upload(bytes.data(), bytes.size());
      return b;
    };
    c->x = upload_random(nin, kCheckSeed);
    if (p.backward) c->dout = upload_random(ng, kCheckSeed + 1);
    c->nout = p.backward ? nin : ng;
    c->out = testing::GuardedBuffer(c->nout * dtype_bytes(dt), p.options.device);
    check = std::move(c);
    return *check;
  }

  // One run of the pass on the check's inputs with the layer's current tiles: what it wrote.
  testing::PassOutputs check_run() {
    Check& c = check_buffers();
    const DType dt = p.options.dtype;
    c.out.poison();
    if (p.backward) params.poison_grads();
    run_on(c.x.data(), p.backward ? c.dout.data() : nullptr, c.out.data());
    synchronize();
    testing::PassOutputs o;
    std::vector<uint8_t> raw(c.nout * dtype_bytes(dt));
    c.out.buffer().download(raw.data(), raw.size());
    std::vector<float> v(c.nout);
    for (size_t i = 0; i < c.nout; ++i) v[i] = decode_one(dt, raw.data(), i);
    o.tensors.push_back({p.backward ? "dX" : "out", false, std::move(v)});
    if (const int64_t n = c.out.guard_bytes_changed()) o.guard_damage = fmt::format("{}: {} guard bytes changed", o.tensors[0].name, n);
    if (p.backward) {
      const ref::WTConvGrads g = testing::download_grads(params, ref_params);
      auto add = [&](std::string name, const std::vector<double>& d) {
        o.tensors.push_back({std::move(name), true, std::vector<float>(d.begin(), d.end())});
      };
      add("base_w", g.base_w);
      if (p.options.bias) add("base_b", g.base_b);
      add("base_s", g.base_s);
      for (int l = 0; l < p.options.L; ++l) {
        add(fmt::format("level_w[{}]", l), g.level_w[l]);
        add(fmt::format("level_s[{}]", l), g.level_s[l]);
      }
      const std::string grads = params.grad_guards_changed();
      if (!grads.empty()) o.guard_damage += (o.guard_damage.empty() ? "" : ", ") + grads;
    }
    return o;
  }
};

WTConvHarness::WTConvHarness(const WTConvTuneProblem& p) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.p = p;
  m.info = p.info();
  m.dev = device_info(p.options.device);
  const Shape sh = p.shape();
  m.plan = wtconv_plan(p.options, sh, m.dev.limits, p.backward, p.path);
  // Pin the path and every tile: the layer never consults the database or the mode.
  auto has = [&](Kernel a, Kernel b) {
    return std::any_of(m.plan.begin(), m.plan.end(),
                       [&](const PlannedKernel& pk) { return pk.spec.kernel == a || pk.spec.kernel == b; });
  };
  m.layer = std::make_unique<WTConv>(p.options);
  m.layer->set_path(has(kWTConvFwdLane, kWTConvBwdLane)     ? WTConvPath::kLane
                    : has(kWTConvFwdPlane, kWTConvBwdPlane) ? WTConvPath::kPlane
                                                                            : WTConvPath::kTiled);
  m.layer->set_tune_mode(TuneMode::kOff);
  set_tiles(m.plan);
  for (const auto& pk : m.plan)
    if (!pk.fixed) m.bytes += pk.bytes;

  m.ref_params = testing::random_params(static_cast<int>(p.options.C), p.options.k, p.options.L, p.options.bias, kWeightSeed);
  m.params = testing::upload_params(m.ref_params, p.backward);
  m.layer->set_weights(m.params.weights);

  // Enough rotating sets that one pass's tensors are out of L2 when the set comes round again.
  const size_t eb = dtype_bytes(p.options.dtype);
  const size_t nin = rt::round_up_words(size_t(sh.numel()) * eb), nout = rt::round_up_words(size_t(sh.B * sh.C * sh.H_out() * sh.W_out()) * eb);
  const size_t set_bytes = nin + nout + (p.backward ? nout : 0);
  const size_t copies = rt::PassTimer::sets_for(m.dev, set_bytes);
  for (size_t i = 0; i < copies; ++i) {
    m.x.emplace_back(nin, p.options.device);
    m.x.back().fill_u32(rt::ones_word(p.options.dtype));
    m.out.emplace_back(p.backward ? nin : nout, p.options.device);
    m.out.back().fill_u32(0);
    if (p.backward) {
      m.dout.emplace_back(nout, p.options.device);
      m.dout.back().fill_u32(rt::ones_word(p.options.dtype));
    }
  }
  m.timer = std::make_unique<rt::PassTimer>(m.dev);
  synchronize();
}

WTConvHarness::~WTConvHarness() = default;

const PassInfo& WTConvHarness::info() const { return impl_->info; }
const std::vector<PlannedKernel>& WTConvHarness::plan() const { return impl_->plan; }
WTConv& WTConvHarness::layer() { return *impl_->layer; }
const DeviceInfo& WTConvHarness::device() const { return impl_->dev; }
double WTConvHarness::traffic_bytes() const { return impl_->bytes; }

void WTConvHarness::set_tile(const KernelSelector& e, const Tile& t) { impl_->layer->set_tile_override(e.kernel, e.level, t); }

void WTConvHarness::set_tiles(const std::vector<PlannedKernel>& plan) {
  for (const auto& pk : plan)
    if (!pk.fixed) impl_->layer->set_tile_override(pk.spec.kernel, pk.level, pk.tile);
}

void WTConvHarness::prepare() { impl_->layer->prepare(impl_->p.B, impl_->p.H, impl_->p.W, impl_->p.backward); }

std::vector<double> WTConvHarness::time(int warmup, int reps) {
  Impl& m = *impl_;
  return m.timer->time(warmup, reps, m.x.size(), [&](size_t set) { m.run(set); });
}

std::optional<std::string> WTConvHarness::check_outputs(const std::vector<PlannedKernel>& reference,
                                                        const std::vector<PlannedKernel>& candidate) {
  set_tiles(reference);
  prepare();
  const testing::PassOutputs want = impl_->check_run();
  set_tiles(candidate);
  prepare();
  const testing::PassOutputs got = impl_->check_run();
  return testing::compare_outputs(want, got, impl_->p.options.dtype);
}

// ---- tuning -----------------------------------------------------------------------------------------
WTConvTuneReport wtconv_tune(const WTConvTuneProblem& p, const std::vector<KernelSelector>& which, const TuneOptions& o) {
  WTConvHarness h(p);
  return tune_pass(h, which, o);
}

namespace {

bool same_shape(const Shape& a, const Shape& b) {
  return a.B == b.B && a.C == b.C && a.H == b.H && a.W == b.W && a.stride == b.stride;
}

}  // namespace

std::pair<WTConvTuneProblem, KernelSelector> wtconv_problem_for(const OpSpec& spec, const Shape& shape, int device,
                                                         const DeviceLimits& limits) {
  WTConvTuneProblem p;
  const int k = spec.get("k"), L = spec.get("L");
  const bool first = spec.get("first") != 0;
  p.options = WTConvOptions{shape.C, k, L, spec.dtype, true, shape.stride, device};
  p.B = shape.B, p.H = shape.H, p.W = shape.W;
  KernelSelector sel{spec.kernel, 0};
  const Kernel& kn = spec.kernel;
  if (kn == kWTConvFwdPlane || kn == kWTConvBwdPlane) {  // measured on the layout its spec names
    p.path = WTConvPath::kPlane;
    p.backward = kn == kWTConvBwdPlane;
    if (spec.get("layout")) p.options.layout = Layout::kNHWC;
  } else if (kn == kWTConvFwdLane || kn == kWTConvBwdLane) {  // measured on the layout it is for
    p.path = WTConvPath::kLane;
    p.options.layout = Layout::kNHWC;
    p.backward = kn == kWTConvBwdLane;
  } else if (kn == kWTConvFwdSynth || kn == kWTConvBwdSynth) {
    p.path = WTConvPath::kTiled;
    p.backward = kn == kWTConvBwdSynth;
  } else if (kn == kWTConvFwdLevel || kn == kWTConvBwdLevel) {
    // Level 1 of a one-level layer reads X; a deeper level on 2^(level-1) times the extent reads an
    // fp32 low band of exactly `shape`. (The backward's level 2 also runs the X-reading variant, with
    // its level-1 extent as shape; it is tuned as level 1 of a layer of that extent.)
    p.path = WTConvPath::kTiled;
    p.backward = kn == kWTConvBwdLevel;
    // The backward's first deeper level is 3 (its level 2 reads X), on four times the extent.
    sel.level = first ? 1 : (p.backward ? 3 : 2);
    p.options.L = sel.level;
    if (!first) {
      const int64_t scale = int64_t(1) << (sel.level - 1);
      p.options.dtype = DType::kF32;
      p.H = scale * shape.H;
      p.W = scale * shape.W;
    }
  } else if (kn == kWTConvReduce) {
    p.backward = true;
    p.options.dtype = DType::kF32;
  } else if (kn == kWTConvReduceLane) {  // after the lane backward, on its layout
    p.backward = true;
    p.path = WTConvPath::kLane;
    p.options.layout = Layout::kNHWC;
    p.options.dtype = DType::kF32;
  }
  const auto plan = wtconv_plan(p.options, p.shape(), limits, p.backward, p.path);
  for (const auto& pk : plan)
    if (pk.spec == spec && pk.level == sel.level && same_shape(pk.shape, shape)) return {p, sel};
  throw SpecError(fmt::format(
      "lkjit: error: tuner: {} on {} is not a kernel of a WTConv layer (level kernels: L=0 and, for a deeper "
      "level, f32 with stride 1; others: L as the layer's)", spec.to_string(), shape.to_string()));
}

namespace {

std::pair<std::unique_ptr<PassHarness>, KernelSelector> harness_for(const OpSpec& spec, const Shape& shape, int device,
                                                                    const DeviceLimits& limits) {
  auto [p, sel] = wtconv_problem_for(spec, shape, device, limits);
  return {std::make_unique<WTConvHarness>(p), sel};
}

}  // namespace

namespace rt {
OpRuntime wtconv_runtime() { return {"wtconv", harness_for}; }
}  // namespace rt

}  // namespace lkjit
