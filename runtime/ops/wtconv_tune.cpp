// Layer-level tuning of the WTConv kernels (see lkjit/wtconv_tune.h for why the whole pass is timed):
// the measurement harness and the per-kernel searches.
#include "lkjit/wtconv_tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "lkjit/error.h"
#include "lkjit/reference.h"
#include "lkjit/testing.h"
#include "runtime/tune_search.h"
#include "runtime/tuner_internal.h"

namespace lkjit {
namespace {

constexpr size_t kMinFlushBytes = size_t(64) << 20;

// One of dtype's 1.0 in every element of a 32-bit word (timing does not depend on values).
uint32_t one_pattern(DType t) {
  switch (t) {
    case DType::kF32: return 0x3f800000u;
    case DType::kF16: return 0x3c003c00u;
    case DType::kBF16: return 0x3f803f80u;
  }
  return 0;
}

size_t round4(size_t b) { return (b + 3) / 4 * 4; }

std::string entry_label(const PlannedKernel& pk) {
  return pk.level > 0 ? fmt::format("{} l={}", to_string(pk.spec.kernel), pk.level) : to_string(pk.spec.kernel);
}

bool matches(const KernelSelector& s, const PlannedKernel& pk) {
  return s.kernel == pk.spec.kernel && (s.level < 0 || s.level == pk.level);
}

}  // namespace

std::string WTConvTuneProblem::to_string() const {
  return fmt::format("{} {} {} k={} L={}{}", backward ? "bwd" : "fwd", lkjit::to_string(options.dtype),
                     shape().to_string(), options.k, options.L, options.bias ? "" : " no-bias");
}

std::vector<PlannedKernel> wtconv_tunable(const WTConvTuneProblem& p, const DeviceLimits& limits) {
  std::vector<PlannedKernel> out;
  for (const auto& pk : wtconv_plan(p.options, p.shape(), limits, p.backward, p.path))
    if (pk.spec.kernel != Kernel::kWTConvFold && detail::candidate_order(pk.spec, pk.shape, limits).size() > 1)
      out.push_back(pk);
  return out;
}

KernelSelector wtconv_main_kernel(const std::vector<PlannedKernel>& plan) {
  for (const auto& pk : plan)
    if (pk.spec.kernel == Kernel::kWTConvFwdPlane || pk.spec.kernel == Kernel::kWTConvBwdPlane ||
        pk.spec.kernel == Kernel::kWTConvFwdLane || pk.spec.kernel == Kernel::kWTConvBwdLane)
      return {pk.spec.kernel, 0};
  for (const auto& pk : plan)
    if (pk.spec.kernel == Kernel::kWTConvFwdSynth || pk.spec.kernel == Kernel::kWTConvBwdSynth) return {pk.spec.kernel, 0};
  return {plan.empty() ? Kernel::kWTConvFold : plan.back().spec.kernel, 0};
}

// ---- harness ----------------------------------------------------------------------------------------
struct WTConvHarness::Impl {
  WTConvTuneProblem p;
  DeviceInfo dev;
  std::vector<PlannedKernel> plan;
  std::unique_ptr<WTConv> layer;
  testing::DeviceParams params;
  std::vector<DeviceBuffer> x, out, dout;  // rotating sets; out is dX for a backward
  DeviceBuffer flush;
  size_t next = 0;
  uint32_t flush_value = 0;
  double bytes = 0;

  void run(size_t set) {
    if (p.backward)
      layer->backward(x[set].data(), dout[set].data(), out[set].data(), params.grads, p.B, p.H, p.W);
    else
      layer->forward(x[set].data(), out[set].data(), p.B, p.H, p.W);
  }
};

WTConvHarness::WTConvHarness(const WTConvTuneProblem& p) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.p = p;
  m.dev = device_info(p.options.device);
  const Shape sh = p.shape();
  m.plan = wtconv_plan(p.options, sh, m.dev.limits, p.backward, p.path);
  // Pin the path and every tile: the layer never consults the database or the mode.
  auto has = [&](Kernel a, Kernel b) {
    return std::any_of(m.plan.begin(), m.plan.end(),
                       [&](const PlannedKernel& pk) { return pk.spec.kernel == a || pk.spec.kernel == b; });
  };
  m.layer = std::make_unique<WTConv>(p.options);
  m.layer->set_path(has(Kernel::kWTConvFwdLane, Kernel::kWTConvBwdLane)     ? WTConvPath::kLane
                    : has(Kernel::kWTConvFwdPlane, Kernel::kWTConvBwdPlane) ? WTConvPath::kPlane
                                                                            : WTConvPath::kTiled);
  m.layer->set_tune_mode(TuneMode::kOff);
  set_tiles(m.plan);
  for (const auto& pk : m.plan)
    if (pk.spec.kernel != Kernel::kWTConvFold) m.bytes += pk.bytes;

  const auto ref_params = ref::init_params(static_cast<int>(p.options.C), p.options.k, p.options.L, p.options.bias, 42);
  m.params = testing::upload_params(ref_params, p.backward);
  m.layer->set_weights(m.params.weights);

  // Enough rotating sets that one pass's tensors are out of L2 when the set comes round again.
  const size_t eb = dtype_bytes(p.options.dtype);
  const size_t nin = round4(size_t(sh.numel()) * eb), nout = round4(size_t(sh.B * sh.C * sh.H_out() * sh.W_out()) * eb);
  const size_t set_bytes = nin + nout + (p.backward ? nout : 0);
  const size_t l2 = std::max<size_t>(m.dev.l2_bytes, 32u << 20);
  const size_t copies = std::clamp<size_t>((2 * l2 + set_bytes - 1) / set_bytes, 1, 8);
  for (size_t i = 0; i < copies; ++i) {
    m.x.emplace_back(nin, p.options.device);
    m.x.back().fill_u32(one_pattern(p.options.dtype));
    m.out.emplace_back(p.backward ? nin : nout, p.options.device);
    m.out.back().fill_u32(0);
    if (p.backward) {
      m.dout.emplace_back(nout, p.options.device);
      m.dout.back().fill_u32(one_pattern(p.options.dtype));
    }
  }
  m.flush = DeviceBuffer(round4(std::max(2 * l2, kMinFlushBytes)), p.options.device);
  synchronize();
}

WTConvHarness::~WTConvHarness() = default;

const std::vector<PlannedKernel>& WTConvHarness::plan() const { return impl_->plan; }
WTConv& WTConvHarness::layer() { return *impl_->layer; }
const DeviceInfo& WTConvHarness::device() const { return impl_->dev; }
double WTConvHarness::traffic_bytes() const { return impl_->bytes; }

void WTConvHarness::set_tile(const KernelSelector& e, const Tile& t) { impl_->layer->set_tile_override(e.kernel, e.level, t); }

void WTConvHarness::set_tiles(const std::vector<PlannedKernel>& plan) {
  for (const auto& pk : plan)
    if (pk.spec.kernel != Kernel::kWTConvFold) impl_->layer->set_tile_override(pk.spec.kernel, pk.level, pk.tile);
}

void WTConvHarness::prepare() { impl_->layer->prepare(impl_->p.B, impl_->p.H, impl_->p.W, impl_->p.backward); }

std::vector<double> WTConvHarness::time(int warmup, int reps) {
  Impl& m = *impl_;
  for (int i = 0; i < warmup; ++i) m.run(m.next++ % m.x.size());
  synchronize();
  EventTimer timer;
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    m.flush.fill_u32(++m.flush_value);  // evicts the previous pass's lines (nvbench's cold samples)
    const size_t set = m.next++ % m.x.size();
    timer.start();
    m.run(set);
    ms.push_back(timer.stop_ms());
  }
  return ms;
}

// ---- tuning -----------------------------------------------------------------------------------------
WTConvTuneReport wtconv_tune(const WTConvTuneProblem& p, const std::vector<KernelSelector>& which, const TuneOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  WTConvTuneReport rep;
  rep.problem = p;
  WTConvHarness h(p);
  rep.device = h.device();
  const DeviceLimits& lim = rep.device.limits;
  const std::vector<PlannedKernel> defaults = h.plan();
  std::vector<PlannedKernel> current = defaults;
  rep.traffic_bytes = h.traffic_bytes();

  for (const auto& s : which)
    if (std::none_of(defaults.begin(), defaults.end(), [&](const PlannedKernel& pk) { return matches(s, pk); })) {
      std::string have;
      for (const auto& pk : defaults) have += (have.empty() ? "" : ", ") + entry_label(pk);
      throw SpecError(fmt::format("lkjit: error: tune: {}{} is not in the plan of {}; the plan runs: {}", to_string(s.kernel),
                                  s.level >= 0 ? fmt::format(" level {}", s.level) : "", p.to_string(), have));
    }

  const double budget = detail::resolve_budget(o.budget_s);
  for (size_t i = 0; i < defaults.size(); ++i) {
    const PlannedKernel& pk = defaults[i];
    if (pk.spec.kernel == Kernel::kWTConvFold) continue;
    if (!which.empty() && std::none_of(which.begin(), which.end(), [&](const KernelSelector& s) { return matches(s, pk); }))
      continue;
    const auto cands = detail::candidate_order(pk.spec, pk.shape, lim);
    if (cands.size() < 2) continue;  // nothing to choose

    KernelTuneResult kr;
    kr.spec = pk.spec;
    kr.shape = pk.shape;
    kr.level = pk.level;
    kr.default_tile = pk.tile;
    kr.space_size = cands.size();
    kr.strategy = o.strategy;
    const KernelSelector entry{pk.spec.kernel, pk.level};
    const std::string label = entry_label(pk);

    detail::EvaluateFn eval = [&](const std::vector<Tile>& tiles, int reps) {
      const auto comp = detail::compile_candidates(pk.spec, pk.shape, lim, tiles, o.jobs);
      std::vector<CandidateResult> out(tiles.size());
      for (size_t k = 0; k < tiles.size(); ++k) {
        CandidateResult& r = out[k];
        r.tile = tiles[k];
        r.status = comp[k].status;
        r.reason = comp[k].reason;
        r.compile_s = comp[k].seconds;
        if (r.status != CandidateStatus::kOk) continue;
        try {
          h.set_tile(entry, tiles[k]);
          h.prepare();
          const auto& lk = load_kernel(compile_kernel(pk.spec, tiles[k]), p.options.device);
          r.regs = lk.regs;
          r.spill_bytes = lk.spill_bytes;
          r.smem_bytes = static_cast<int>(launch_geometry(pk.spec, tiles[k], pk.shape).smem_bytes) + lk.static_smem;
          r.samples_ms = h.time(o.warmup, reps);
        } catch (...) {
          std::tie(r.status, r.reason) = detail::classify(std::current_exception());
          r.samples_ms.clear();
          // A launch error (too many resources) leaves the context usable; a fault does not.
          try {
            synchronize();
          } catch (const DriverError& e) {
            throw DriverError(fmt::format("lkjit: error: tune: the device is unusable after {} {} failed ({}); {}",
                                          label, tiles[k].to_string(), r.reason, e.what()));
          }
        }
      }
      h.set_tile(entry, current[i].tile);
      return out;
    };
    detail::SearchConfig cfg;
    cfg.strategy = o.strategy;
    cfg.budget_s = budget;
    cfg.top = o.top;
    cfg.reps = std::max(1, o.reps);
    cfg.final_reps = o.final_reps;
    cfg.min_noise = o.min_noise;
    cfg.seed = o.seed;
    cfg.batch = detail::resolve_jobs(o.jobs);
    cfg.what = label;
    cfg.progress = o.progress;
    const auto ks = std::chrono::steady_clock::now();
    const auto res = detail::run_search(tile_space(pk.spec), cands, cfg, eval, [&] { return since(ks); });
    kr.candidates = res.candidates;
    kr.budget_hit = res.budget_hit;
    kr.seconds = since(ks);
    for (const auto& c : kr.candidates)
      if (c.tile == kr.default_tile && c.status == CandidateStatus::kOk) kr.default_ms = c.summary.median_ms;
    if (res.chosen) {
      kr.chosen = kr.candidates[*res.chosen].tile;
      kr.best_ms = kr.candidates[*res.chosen].summary.median_ms;
      current[i].tile = kr.chosen;
      current[i].tier = LookupTier::kTuned;
      h.set_tile(entry, kr.chosen);
    }
    rep.kernels.push_back(std::move(kr));
  }

  // The whole pass with every default vs every chosen tile, interleaved like the finalists.
  if (!rep.kernels.empty() && o.final_reps > 0) {
    const int per = std::max(1, (o.final_reps + 2) / 3);
    std::vector<double> d, t;
    try {
      for (int r = 0; r < 3; ++r) {
        h.set_tiles(defaults);
        h.prepare();
        const auto a = h.time(o.warmup, per);
        d.insert(d.end(), a.begin(), a.end());
        h.set_tiles(current);
        h.prepare();
        const auto b = h.time(o.warmup, per);
        t.insert(t.end(), b.begin(), b.end());
      }
      rep.default_pass = summarize(d);
      rep.tuned_pass = summarize(t);
    } catch (const DriverError&) {
      synchronize();  // a launch error of a default tile: leave the comparison empty
    } catch (const Error&) {
    }
  }
  rep.plan = current;

  if (o.save && !rep.kernels.empty()) {
    rep.db_path = o.db_path.empty() ? tuning_db_path() : o.db_path;
    try {
      detail::record_decisions(rep.db_path, device_class(rep.device), rep.kernels);
    } catch (const Error& e) {
      rep.save_error = e.what();
    }
  }
  rep.seconds = since(t0);
  return rep;
}

}  // namespace lkjit
