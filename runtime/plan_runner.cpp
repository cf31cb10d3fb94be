// The plan runner's parts (runtime/plan_runner.h): tile policy, preparing and launching kernels, scratch.
#include "runtime/plan_runner.h"

#include <fmt/format.h>

#include <algorithm>

#include "lkjit/error.h"
#include "runtime/env.h"
#include "runtime/remote_tier.h"
#include "runtime/tuner_internal.h"

namespace lkjit::rt {

// ---- tile policy ----------------------------------------------------------------------------------
void TilePolicy::set_tune_options(const TuneOptions& o) {
  tune_ = o;
  ++generation_;
}

void TilePolicy::set_tune_mode(TuneMode m) {
  tune_.mode = m;
  ++generation_;
}

TuneMode TilePolicy::mode() const { return resolve_tune_mode(tune_.mode, TuneMode::kCached); }

void TilePolicy::set_override(const Kernel& kernel, int level, const Tile& tile) {
  auto ov = std::find_if(overrides_.begin(), overrides_.end(),
                         [&](const Override& o) { return o.kernel == kernel && o.level == level; });
  if (ov != overrides_.end()) ov->tile = tile;
  else overrides_.push_back({kernel, level, tile});
  ++generation_;
}

void TilePolicy::clear_overrides() {
  overrides_.clear();
  ++generation_;
}

void TilePolicy::choose(std::vector<PlannedKernel>& plan, const DeviceInfo& dev) const {
  TuneOptions o = tune_;
  o.mode = mode();
  const Tuner tuner(o);
  const DeviceClass cls = device_class(dev);
  for (auto& pk : plan) {
    if (pk.fixed) continue;
    auto ov = std::find_if(overrides_.begin(), overrides_.end(),
                           [&](const Override& t) { return t.kernel == pk.spec.kernel && t.level == pk.level; });
    if (ov != overrides_.end()) {
      if (auto why = reject_reason(pk.spec, ov->tile, dev.limits, &pk.shape))
        throw SpecError(fmt::format("lkjit: error: {}: tile override {} of {} (level {}) cannot run {}: {}", op_,
                                    ov->tile.to_string(), to_string(pk.spec.kernel), pk.level, pk.shape.to_string(), *why));
      pk.tile = ov->tile;
      pk.tier = LookupTier::kOverride;
      continue;
    }
    const TileChoice c = tuner.lookup(pk.spec, pk.shape, cls, dev.limits);
    pk.tile = c.tile;
    pk.tier = c.tier;
  }
}

void TilePolicy::tune_on_miss(std::vector<PlannedKernel>& plan, const HarnessFactory& make) const {
  const TuneMode m = mode();
  if (m != TuneMode::kTune && m != TuneMode::kRetune) return;
  std::vector<KernelSelector> which;
  for (const auto& pk : plan)
    if (!pk.fixed && pk.tier != LookupTier::kOverride && (m == TuneMode::kRetune || pk.tier != LookupTier::kExact))
      which.push_back({pk.spec.kernel, pk.level});
  if (which.empty()) return;
  TuneOptions o = tune_;
  o.mode = m;
  const auto harness = make();
  const auto rep = tune_pass(*harness, which, o);
  if (!rep.save_error.empty()) log_line("warning: " + rep.save_error);
  for (const auto& kr : rep.kernels) {
    if (!kr.check_failure.empty()) log_line("warning: tune: " + kr.check_failure);
    for (auto& pk : plan)
      if (pk.spec == kr.spec && pk.level == kr.level && kr.chosen != Tile{}) {
        pk.tile = kr.chosen;
        pk.tier = LookupTier::kTuned;
      }
  }
}

PathChoice TilePolicy::choose_path(const PassPaths& p, const DeviceInfo& dev, std::vector<PlannedKernel>* tuned) const {
  TuneOptions o = tune_;
  o.mode = mode();
  PathChoice c = lookup_path(p, device_class(dev), o);
  const bool measure = (*o.mode == TuneMode::kTune && c.tier != LookupTier::kExact) || *o.mode == TuneMode::kRetune;
  if (!measure || p.options.size() < 2 || !overrides_.empty()) return c;
  // One node of a cluster measures each decision: the claim waits for another node's published one, or holds the
  // key's lease while this one measures (a no-op without the cluster tier), as Tuner::get does for tiles.
  rt::TuningClaim claim;
  if (*o.mode == TuneMode::kTune) {
    claim = rt::claim_tuning(detail::query_of(p.key, p.shape, device_class(dev)));
    if (claim.decision)
      if (const PathOption* opt = detail::option_of(p, *claim.decision))
        return {*opt, LookupTier::kExact,
                fmt::format("remote decision of {} (published while this process waited)", claim.decision->device)};
  }
  const PathTuneReport rep = tune_paths(p, o);
  if (!rep.save_error.empty()) log_line("warning: " + rep.save_error);
  if (!rep.check_failure.empty()) log_line("warning: tune: " + rep.check_failure);
  for (const auto& r : rep.paths) {
    if (!r.failure.empty()) log_line(fmt::format("warning: tune: path {} of {} failed: {}", r.path.name, p.key, r.failure));
    if (tuned && rep.chosen.tier == LookupTier::kTuned && r.path.id == rep.chosen.path.id) *tuned = r.tiles.plan;
  }
  return rep.chosen;
}

// ---- prepared kernels -----------------------------------------------------------------------------
const std::string& worse_origin(const std::string& a, const std::string& b) {
  auto rank = [](const std::string& s) { return s == "compiled" ? 2 : s == "disk" ? 1 : 0; };
  return rank(a) >= rank(b) ? a : b;
}

std::vector<PreparedKernel> prepare_kernels(const std::vector<PlannedKernel>& plan, int device, const std::string& op) {
  std::vector<PreparedKernel> out;
  for (const auto& pk : plan) {
    const auto ck = compile_kernel(pk.spec, pk.tile);
    PreparedKernel k;
    k.planned = pk;
    k.geometry = launch_geometry(pk.spec, pk.tile, pk.shape);
    // 1-D grids: the x dimension allows 2^31-1 blocks.
    if (k.geometry.blocks > 2147483647.0)
      throw SpecError(fmt::format("lkjit: error: {}: {} needs {:.0f} blocks for {}, above the grid limit 2^31-1", op,
                                  ck.kernel_name, k.geometry.blocks, pk.shape.to_string()));
    k.loaded = &load_kernel(ck, device);
    k.origin = ck.origin;
    out.push_back(std::move(k));
  }
  return out;
}

void launch_prepared(const PreparedKernel& k, const void* params, size_t params_bytes, Stream s, bool early,
                     std::vector<KernelTiming>* timings) {
  if (!timings) {
    launch(*k.loaded, k.geometry, params, params_bytes, s, early);
    return;
  }
  EventTimer timer;
  timer.start(s);
  launch(*k.loaded, k.geometry, params, params_bytes, s);
  timings->push_back({k.loaded->kernel_name, timer.stop_ms(s), k.planned.bytes});
}

// ---- scratch --------------------------------------------------------------------------------------
void* Scratch::ensure(size_t bytes, int device, Stream s, const std::string& op) {
  const bool capturing = stream_capturing(s);
  captured_ = captured_ || capturing;
  if (buf_.bytes() < bytes) {
    if (capturing) refuse_under_capture(op, "a call of a larger shape");
    if (captured_ && buf_.data()) retired_.push_back(std::move(buf_));
    buf_ = DeviceBuffer(bytes + 256, device);
  }
  return buf_.data();
}

size_t Scratch::bytes() const {
  size_t n = buf_.bytes();
  for (const auto& b : retired_) n += b.bytes();
  return n;
}

void refuse_under_capture(const std::string& op, const std::string& what) {
  throw SpecError(fmt::format("lkjit: error: {}: {} runs under CUDA graph capture, but it compiles kernels or "
                              "allocates device memory, which capture does not allow: run it once before capturing "
                              "(warm-up)", op, what));
}

}  // namespace lkjit::rt
