// The WTConv op layer: validates shapes, turns a plan into launches once per shape, owns the folded
// weights and scratch, and launches without host syncs or per-call allocations (graph friendly).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <tuple>

#include "abi/wtconv_params.h"
#include "generator/ops/wtconv_common.h"
#include "lkjit/error.h"
#include "lkjit/wtconv.h"
#include "lkjit/wtconv_tune.h"
#include "runtime/env.h"
#include "runtime/ops/wtconv_internal.h"

namespace lkjit {

static_assert(kMaxLevels == kWTConvMaxLevels, "public and ABI level limits differ");
// The params header asserts its size on both sides; the fields the host fills per call, here.
static_assert(offsetof(WTConvParams, x_st) == 24 && offsetof(WTConvParams, g_st) == 56 &&
                  offsetof(WTConvParams, out_st) == 88 && offsetof(WTConvParams, wfold) == 120,
              "WTConvParams layout changed: update the static_asserts with the device side in mind");

namespace {

// Scratch pointers are stored as float offsets (the scratch buffer may be reallocated); -1 = none.
struct ScratchRefs {
  int64_t low_in = -1, low_out = -1, low2_in = -1, low2_out = -1;
};

struct PlannedLaunch {
  const LoadedKernel* k = nullptr;
  double bytes = 0;
  LaunchGeometry g;
  WTConvParams q;
  ScratchRefs refs;
  // The plane and lane kernels read the fold only after pdl_wait() (templates/common/pdl.cuh), so right
  // after a fold they may start early and load their activations while it runs.
  bool waits_for_fold = false;
};

const std::string& worse(const std::string& a, const std::string& b) {
  auto rank = [](const std::string& s) { return s == "compiled" ? 2 : s == "disk" ? 1 : 0; };
  return rank(a) >= rank(b) ? a : b;
}

// The layout a call's activations are in, for the plan: NHWC when x's channels are adjacent.
Layout act_layout(const WTConvStrides& st, int64_t C) { return C > 1 && st.x[1] == 1 ? Layout::kNHWC : Layout::kNCHW; }
// The layer's options as the planner sees a call in layout act.
WTConvOptions with_layout(WTConvOptions o, Layout act) {
  o.layout = act;
  return o;
}

// Blocks a planned kernel launches, computed in floating point so it cannot wrap.
double launch_blocks(const PlannedKernel& pk, const Shape& sh) {
  const double planes = double(sh.B) * double(sh.C);
  const Tile& t = pk.tile;
  switch (pk.spec.kernel) {
    case Kernel::kWTConvFwdPlane:
    case Kernel::kWTConvBwdPlane: return std::ceil(planes / t.planes);
    case Kernel::kWTConvFwdLane:
    case Kernel::kWTConvBwdLane: return std::ceil(planes / (t.planes ? t.planes : t.threads));  // 0: one per thread
    case Kernel::kWTConvFwdLevel:
    case Kernel::kWTConvBwdLevel: {
      const double h = std::ceil(pk.shape.H / 2.0), w = std::ceil(pk.shape.W / 2.0);
      return planes * std::ceil(h / t.tile_h) * std::ceil(w / t.tile_w);
    }
    case Kernel::kWTConvFwdSynth: return planes * std::ceil(double(sh.H_out()) / t.tile_h) * std::ceil(double(sh.W_out()) / t.tile_w);
    case Kernel::kWTConvBwdSynth: return planes * std::ceil(double(sh.H) / t.tile_h) * std::ceil(double(sh.W) / t.tile_w);
    default: return 1;
  }
}

}  // namespace

struct WTConvLaunchList {
  std::vector<PlannedLaunch> launches;
  size_t scratch_floats = 0;
  int64_t partial_off = 0;  // float offset of the partial-gradient area in scratch
  bool tiled = false;
  std::string origin = "memory";
};

struct WTConv::Impl {
  DeviceInfo dev;
  std::map<std::tuple<int64_t, int64_t, int64_t, int, bool, Layout>, WTConvLaunchList> lists;
  DeviceBuffer wfold;
  DeviceBuffer scratch;
  // Scratch buffers outgrown after a launch under CUDA graph capture: a graph may still hold their
  // addresses, so they live as long as the layer.
  std::vector<DeviceBuffer> retired;
  bool captured = false;  // some launch ran under stream capture
  WTConvWeights raw;
  bool have_weights = false;
  // The fold kernel, loaded once: set_weights runs after every optimizer step.
  const LoadedKernel* fold = nullptr;
  LaunchGeometry fold_geometry;
  bool early_launch = false;  // LKJIT_EARLY_LAUNCH on an sm_90+ device (run_list)
};

WTConv::WTConv(const WTConvOptions& options) : opt_(options) { detail::validate_options(opt_); }
WTConv::~WTConv() { delete impl_; }

Shape WTConv::shape_of(int64_t B, int64_t H, int64_t W) const {
  const Shape sh{B, opt_.C, H, W, opt_.stride};
  detail::validate_shape(opt_, sh);
  return sh;
}

size_t WTConv::workspace_bytes() const {
  if (!impl_) return 0;
  size_t n = impl_->wfold.bytes() + impl_->scratch.bytes();
  for (const auto& b : impl_->retired) n += b.bytes();
  return n;
}

void WTConv::ensure_impl() {
  if (!impl_) {
    impl_ = new Impl;
    impl_->dev = device_info(opt_.device);
    impl_->early_launch = impl_->dev.arch >= 90 && rt::env("LKJIT_EARLY_LAUNCH") != "0";
  }
}

std::vector<PlannedKernel> WTConv::plan(int64_t B, int64_t H, int64_t W, bool backward) const {
  const Shape sh = shape_of(B, H, W);
  return choose_tiles(sh, impl_ ? impl_->dev : device_info(opt_.device), backward, opt_.layout);
}

// ---- tile choice ----------------------------------------------------------------------------------
// The plan's path (plane vs tiled) is decided by wtconv_plan with default tiles; only the tiles of its
// entries change here, so a tuned tile never moves a shape to the other path.
std::vector<PlannedKernel> WTConv::choose_tiles(const Shape& sh, const DeviceInfo& dev, bool backward,
                                                Layout act) const {
  auto pl = wtconv_plan(with_layout(opt_, act), sh, dev.limits, backward, path_);
  TuneOptions o = tune_;
  o.mode = resolve_tune_mode(tune_.mode, TuneMode::kCached);
  const Tuner tuner(o);
  const DeviceClass cls = device_class(dev);
  for (auto& pk : pl) {
    if (pk.spec.kernel == Kernel::kWTConvFold) continue;  // one-point space, launched by set_weights
    auto ov = std::find_if(overrides_.begin(), overrides_.end(),
                           [&](const TileOverride& t) { return t.kernel == pk.spec.kernel && t.level == pk.level; });
    if (ov != overrides_.end()) {
      if (auto why = reject_reason(pk.spec, ov->tile, dev.limits, &pk.shape))
        throw SpecError(fmt::format("lkjit: error: wtconv: tile override {} of {} (level {}) cannot run {}: {}",
                                    ov->tile.to_string(), to_string(pk.spec.kernel), pk.level, pk.shape.to_string(), *why));
      pk.tile = ov->tile;
      pk.tier = LookupTier::kOverride;
      continue;
    }
    const TileChoice c = tuner.lookup(pk.spec, pk.shape, cls, dev.limits);
    pk.tile = c.tile;
    pk.tier = c.tier;
  }
  return pl;
}

bool WTConv::runs_lane(int64_t B, int64_t H, int64_t W, bool backward) const {
  const auto pl = wtconv_plan(with_layout(opt_, Layout::kNHWC), shape_of(B, H, W),
                              impl_ ? impl_->dev.limits : device_info(opt_.device).limits, backward, path_);
  return std::any_of(pl.begin(), pl.end(), [](const PlannedKernel& pk) {
    return pk.spec.kernel == Kernel::kWTConvFwdLane || pk.spec.kernel == Kernel::kWTConvBwdLane;
  });
}

void WTConv::invalidate_lists() {
  if (impl_) impl_->lists.clear();
}

void WTConv::set_tune_options(const TuneOptions& o) {
  tune_ = o;
  invalidate_lists();
}

void WTConv::set_tune_mode(TuneMode m) {
  tune_.mode = m;
  invalidate_lists();
}

void WTConv::set_tile_override(Kernel kernel, int level, const Tile& tile) {
  if (level < 0 || level > opt_.L)
    throw SpecError(fmt::format("lkjit: error: wtconv: tile override level={} is out of range; supported: [0, {}]",
                                level, opt_.L));
  auto ov = std::find_if(overrides_.begin(), overrides_.end(),
                         [&](const TileOverride& t) { return t.kernel == kernel && t.level == level; });
  if (ov != overrides_.end()) ov->tile = tile;
  else overrides_.push_back({kernel, level, tile});
  invalidate_lists();
}

void WTConv::clear_tile_overrides() {
  overrides_.clear();
  invalidate_lists();
}

void WTConv::set_claim_for_testing(ClaimForTesting c) {
  claim_ = c;
  invalidate_lists();  // the flags live in each list's kernel arguments
}

void WTConv::prepare(int64_t B, int64_t H, int64_t W, bool backward) {
  ensure_impl();
  last_origin_ = launch_list(B, H, W, false, opt_.layout).origin;
  if (backward) last_origin_ = worse(last_origin_, launch_list(B, H, W, true, opt_.layout).origin);
}

void WTConv::set_weights(const WTConvWeights& w, Stream s) {
  detail::check_weights(opt_, w);
  ensure_impl();
  if (!impl_->fold && stream_capturing(s)) throw_first_call_captured("set_weights");
  // Two copies (WTConvParams::wfold): channel-major for the plane and tiled kernels, value-major for the lane ones.
  const int64_t n = 2 * (opt_.C * opt_.k * opt_.k * (1 + 4 * int64_t(opt_.L)) + opt_.C);
  if (impl_->wfold.bytes() < size_t(n) * 4) impl_->wfold = DeviceBuffer(size_t(n) * 4, opt_.device);
  if (!impl_->fold) {
    const OpSpec fold{Kernel::kWTConvFold, DType::kF32, opt_.k, opt_.L, true, impl_->dev.arch};
    const Shape sh{1, opt_.C, 1, 1, 1};
    const Tile t = default_tile(fold, sh, impl_->dev.limits);
    impl_->fold = &load_kernel(compile_kernel(fold, t), opt_.device);
    impl_->fold_geometry = launch_geometry(fold, t, sh);
  }
  impl_->raw = w;
  if (!opt_.bias) impl_->raw.base_b = nullptr;
  impl_->have_weights = true;
  launch_fold(s);
}

void WTConv::launch_fold(Stream s) {
  WTConvParams p;
  std::memset(&p, 0, sizeof(p));
  p.wfold = static_cast<const float*>(impl_->wfold.data());
  p.base_w = impl_->raw.base_w;
  p.base_b = impl_->raw.base_b;
  p.base_s = impl_->raw.base_s;
  for (int l = 0; l < opt_.L; ++l) {
    p.level_w[l] = impl_->raw.level_w[l];
    p.level_s[l] = impl_->raw.level_s[l];
  }
  p.C = static_cast<int>(opt_.C);
  launch(*impl_->fold, impl_->fold_geometry, &p, sizeof(p), s);
}

const WTConvLaunchList& WTConv::launch_list(int64_t B, int64_t H, int64_t W, bool backward, Layout act,
                                             std::optional<Stream> call) {
  const auto key = std::make_tuple(B, H, W, static_cast<int>(path_), backward, act);
  if (auto it = impl_->lists.find(key); it != impl_->lists.end()) return it->second;
  if (call && stream_capturing(*call))
    throw_first_call_captured(fmt::format("the first {} of B={} H={} W={}", backward ? "backward" : "forward", B, H, W));

  const Shape sh = shape_of(B, H, W);
  auto pl = choose_tiles(sh, impl_->dev, backward, act);
  // Tune on a miss only where the mode says so: the layer's default (cached) never measures here.
  const TuneMode mode = resolve_tune_mode(tune_.mode, TuneMode::kCached);
  if (mode == TuneMode::kTune || mode == TuneMode::kRetune) {
    std::vector<KernelSelector> which;
    for (const auto& pk : pl)
      if (pk.spec.kernel != Kernel::kWTConvFold && pk.tier != LookupTier::kOverride &&
          (mode == TuneMode::kRetune || pk.tier != LookupTier::kExact))
        which.push_back({pk.spec.kernel, pk.level});
    if (!which.empty()) {
      TuneOptions o = tune_;
      o.mode = mode;
      const auto rep = wtconv_tune(WTConvTuneProblem{with_layout(opt_, act), B, H, W, backward, path_}, which, o);
      if (!rep.save_error.empty()) rt::log_line("warning: " + rep.save_error);
      for (const auto& kr : rep.kernels)
        for (auto& pk : pl)
          if (pk.spec == kr.spec && pk.level == kr.level && kr.chosen != Tile{}) {
            pk.tile = kr.chosen;
            pk.tier = LookupTier::kTuned;
          }
    }
  }
  const auto lh = detail::level_sizes(H, kMaxLevels), lw = detail::level_sizes(W, kMaxLevels);
  const int L = opt_.L, KK = opt_.k * opt_.k;
  WTConvParams p;
  std::memset(&p, 0, sizeof(p));
  p.B = static_cast<int>(B);
  p.C = static_cast<int>(opt_.C);
  p.H = static_cast<int>(H);
  p.W = static_cast<int>(W);
  p.stride = opt_.stride;
  p.H_out = static_cast<int>(sh.H_out());
  p.W_out = static_cast<int>(sh.W_out());
  p.has_bias = opt_.bias;
  p.flags = claim_ == ClaimForTesting::kAll ? kWTConvFlagClaimAll
            : claim_ == ClaimForTesting::kNone ? kWTConvFlagClaimNone : 0;
  for (int l = 0; l <= kMaxLevels; ++l) {
    p.lh[l] = static_cast<int>(std::min<int64_t>(lh[l], INT32_MAX));
    p.lw[l] = static_cast<int>(std::min<int64_t>(lw[l], INT32_MAX));
  }
  const int64_t BC = B * opt_.C;
  // Scratch (floats): [Z_l or dY_l per level | X low bands A, B | dR low bands A, B | partials].
  int64_t off = 0;
  for (int l = 1; l <= L; ++l) {
    p.z_off[l - 1] = off;
    off += 4 * BC * lh[l] * lw[l];
  }
  // Low bands handed from level l to level l+1, each chain in two alternating buffers A and B: level f
  // (the chain's first band) writes A, f+1 writes B, and so on. The X chain starts at level 1 in the
  // forward and at level 2 in the backward, whose level 2 reads X itself (block sums): the fp32 level-1
  // X band is never kept there. The backward's dR chain starts at level 1.
  struct Chain {
    int64_t a = -1, b = -1;
    int first = 1;
    int64_t at(int l, int L) const {  // where level l's band lives; -1: none
      if (l < first || l >= L) return -1;
      return ((l - first) % 2 == 0) ? a : b;
    }
  };
  auto band_size = [&](int first, int l) { return l >= first && l < L ? BC * lh[l] * lw[l] : 0; };
  auto chain = [&](int first, int64_t& at) {  // bands shrink with depth: A holds the largest
    Chain c;
    c.first = first;
    c.a = at;
    c.b = at + band_size(first, first);
    at = c.b + band_size(first, first + 1);
    return c;
  };
  int64_t tiled_end = off;
  const Chain xc = chain(backward ? 2 : 1, tiled_end);
  const Chain gc = backward ? chain(1, tiled_end) : Chain{};

  WTConvLaunchList list;
  for (const auto& pk : pl)
    if (pk.spec.kernel == Kernel::kWTConvFwdLevel || pk.spec.kernel == Kernel::kWTConvBwdLevel) list.tiled = true;
  // Partial-gradient layout (backward): group 0 = base, group l = level l; tiles per plane each. The lane
  // backward's partials come in blocks of 32 channels (reduce_lane.cuh): C rounded up to 32.
  int64_t part = 0;
  if (backward) {
    int64_t part_planes = BC;
    for (const auto& pk : pl) {
      if (pk.spec.kernel == Kernel::kWTConvBwdLane) part_planes = B * ((opt_.C + 31) / 32 * 32);
      int tiles = 0, g = -1;
      if (pk.spec.kernel == Kernel::kWTConvBwdPlane || pk.spec.kernel == Kernel::kWTConvBwdLane) {
        for (int l = 0; l <= L; ++l) p.part_tiles[l] = 1;
      } else if (pk.spec.kernel == Kernel::kWTConvBwdLevel) {
        g = pk.level;
        tiles = static_cast<int>(((lh[g] + pk.tile.tile_h - 1) / pk.tile.tile_h) * ((lw[g] + pk.tile.tile_w - 1) / pk.tile.tile_w));
      } else if (pk.spec.kernel == Kernel::kWTConvBwdSynth) {
        g = 0;
        tiles = static_cast<int>(((H + pk.tile.tile_h - 1) / pk.tile.tile_h) * ((W + pk.tile.tile_w - 1) / pk.tile.tile_w));
      }
      if (g >= 0) p.part_tiles[g] = tiles;
    }
    for (int g = 0; g <= L; ++g) {
      p.part_off[g] = part;
      part += part_planes * p.part_tiles[g] * (g == 0 ? KK + 1 : 4 * KK);
    }
  }
  list.partial_off = list.tiled ? tiled_end : 0;
  list.scratch_floats = size_t(list.partial_off + part);

  for (const auto& pk : pl) {
    if (pk.spec.kernel == Kernel::kWTConvFold) continue;
    const auto ck = compile_kernel(pk.spec, pk.tile);
    list.origin = worse(list.origin, ck.origin);
    PlannedLaunch l;
    l.k = &load_kernel(ck, opt_.device);
    l.bytes = pk.bytes;
    l.g = launch_geometry(pk.spec, pk.tile, pk.shape);
    // 1-D grids of planes x tiles: the x dimension allows 2^31-1 blocks.
    const double blocks = launch_blocks(pk, sh);
    if (blocks > 2147483647.0)
      throw SpecError(fmt::format("lkjit: error: wtconv: {} needs {:.0f} blocks for {}, above the grid limit 2^31-1",
                                  ck.kernel_name, blocks, sh.to_string()));
    l.q = p;
    switch (pk.spec.kernel) {
      case Kernel::kWTConvFwdLevel:
      case Kernel::kWTConvBwdLevel: {
        const int lv = pk.level;
        l.q.level = lv;
        l.q.h_in = p.lh[lv - 1];
        l.q.w_in = p.lw[lv - 1];
        l.q.tiles_h = (p.lh[lv] + pk.tile.tile_h - 1) / pk.tile.tile_h;
        l.q.tiles_w = (p.lw[lv] + pk.tile.tile_w - 1) / pk.tile.tile_w;
        l.refs.low_in = xc.at(lv - 1, L);
        l.refs.low_out = xc.at(lv, L);
        if (backward) {
          l.refs.low2_in = gc.at(lv - 1, L);
          l.refs.low2_out = gc.at(lv, L);
        }
        break;
      }
      case Kernel::kWTConvFwdLane:
      case Kernel::kWTConvBwdLane:
        l.waits_for_fold = true;
        break;
      case Kernel::kWTConvFwdPlane:
      case Kernel::kWTConvBwdPlane:
        l.waits_for_fold = true;
        for (int lv = 0; lv <= L; ++lv) {  // the images' pitches, as the generator sized them
          const auto st = gen::wtconv::strip_layout(pk.spec, p.lw[lv], pk.tile.vy);
          l.q.lpitch[lv] = static_cast<int>(st.pitch);
          l.q.lvw[lv] = static_cast<int>(st.vw);
        }
        break;
      case Kernel::kWTConvFwdSynth:
        l.q.tiles_h = static_cast<int>((sh.H_out() + pk.tile.tile_h - 1) / pk.tile.tile_h);
        l.q.tiles_w = static_cast<int>((sh.W_out() + pk.tile.tile_w - 1) / pk.tile.tile_w);
        break;
      case Kernel::kWTConvBwdSynth:
        l.q.tiles_h = static_cast<int>((H + pk.tile.tile_h - 1) / pk.tile.tile_h);
        l.q.tiles_w = static_cast<int>((W + pk.tile.tile_w - 1) / pk.tile.tile_w);
        break;
      default:
        break;
    }
    list.launches.push_back(l);
  }
  return impl_->lists.emplace(key, std::move(list)).first->second;
}

void WTConv::run_list(const WTConvLaunchList& list, const void* x, const void* g, void* out, const WTConvStrides& st,
                      const WTConvGradients* grads, Stream s, std::vector<KernelTiming>* timings, bool reuse_fold) {
  const bool capturing = stream_capturing(s);
  impl_->captured = impl_->captured || capturing;
  if (impl_->scratch.bytes() < list.scratch_floats * 4) {
    if (capturing) throw_first_call_captured("a call of a larger shape");
    if (impl_->captured) impl_->retired.push_back(std::move(impl_->scratch));
    impl_->scratch = DeviceBuffer(list.scratch_floats * 4 + 256, opt_.device);
  }
  // A graph replay may have changed the parameters without the caller knowing (a captured optimizer
  // step), so once the layer has been captured every call folds first, captured calls included; except a
  // backward whose caller vouches that the parameters are those of the forward it follows.
  const bool folded = impl_->captured && !reuse_fold;
  if (folded) launch_fold(s);
  float* scratch = static_cast<float*>(impl_->scratch.data());
  auto ref = [&](int64_t o) { return o >= 0 ? scratch + o : nullptr; };
  for (size_t li = 0; li < list.launches.size(); ++li) {
    const PlannedLaunch& l = list.launches[li];
    WTConvParams q = l.q;
    q.x = x;
    q.g = g;
    q.out = out;
    std::copy(st.x.begin(), st.x.end(), q.x_st);
    std::copy(st.dout.begin(), st.dout.end(), q.g_st);
    std::copy(st.out.begin(), st.out.end(), q.out_st);
    q.wfold = static_cast<const float*>(impl_->wfold.data());
    q.z = scratch;
    q.low_in = ref(l.refs.low_in);
    q.low_out = ref(l.refs.low_out);
    q.low2_in = ref(l.refs.low2_in);
    q.low2_out = ref(l.refs.low2_out);
    q.partial = scratch + list.partial_off;
    q.base_w = impl_->raw.base_w;
    q.base_b = impl_->raw.base_b;
    q.base_s = impl_->raw.base_s;
    for (int i = 0; i < opt_.L; ++i) {
      q.level_w[i] = impl_->raw.level_w[i];
      q.level_s[i] = impl_->raw.level_s[i];
    }
    if (grads) {
      q.grad_base_w = grads->base_w;
      q.grad_base_b = opt_.bias ? grads->base_b : nullptr;
      q.grad_base_s = grads->base_s;
      for (int i = 0; i < opt_.L; ++i) {
        q.grad_level_w[i] = grads->level_w[i];
        q.grad_level_s[i] = grads->level_s[i];
      }
    }
    if (timings) {
      EventTimer timer;
      timer.start(s);
      launch(*l.k, l.g, &q, sizeof(q), s);
      timings->push_back({l.k->kernel_name, timer.stop_ms(s), l.bytes});
    } else {
      // Right after the fold (nothing between them in the stream), a kernel that waits for it may start
      // early (sm_90+), taking the fold and one launch gap off a captured call's critical path (a network
      // step showed no gain beyond its noise: bench/RESULTS.md, session 14).
      const bool early = folded && li == 0 && l.waits_for_fold && impl_->early_launch;
      launch(*l.k, l.g, &q, sizeof(q), s, early);
    }
  }
  last_origin_ = list.origin;
}

// Strides are resolved and checked first: a bad call fails before anything touches the device.
std::vector<KernelTiming> WTConv::profile(const void* x, const void* dout, void* out, const WTConvGradients* grads,
                                          int64_t B, int64_t H, int64_t W, Stream s, const WTConvStrides* strides) {
  const bool backward = dout != nullptr;
  const WTConvStrides st = detail::resolve_strides(opt_, Shape{B, opt_.C, H, W, opt_.stride}, strides, backward);
  if (!impl_ || !impl_->have_weights) throw SpecError("lkjit: error: wtconv profile: call set_weights() first");
  if (dout && !grads) throw SpecError("lkjit: error: wtconv profile: backward needs gradient buffers");
  std::vector<KernelTiming> t;
  run_list(launch_list(B, H, W, backward, act_layout(st, opt_.C)), x, dout, out, st, grads, s, &t);
  return t;
}

// Compiling, loading and allocating are not allowed while a stream captures a CUDA graph.
void WTConv::throw_first_call_captured(const std::string& what) {
  throw SpecError(fmt::format("lkjit: error: wtconv: {} runs under CUDA graph capture, but it compiles kernels or "
                              "allocates device memory, which capture does not allow: run it once before capturing "
                              "(warm-up)", what));
}

void WTConv::forward(const void* x, void* out, int64_t B, int64_t H, int64_t W, Stream s,
                     const WTConvStrides* strides) {
  detail::check_activations(x, nullptr, out, false);
  const WTConvStrides st = detail::resolve_strides(opt_, Shape{B, opt_.C, H, W, opt_.stride}, strides, false);
  if (!impl_ || !impl_->have_weights) throw SpecError("lkjit: error: wtconv forward: call set_weights() first");
  run_list(launch_list(B, H, W, false, act_layout(st, opt_.C), s), x, nullptr, out, st, nullptr, s);
}

void WTConv::backward(const void* x, const void* dout, void* dx, const WTConvGradients& grads, int64_t B,
                      int64_t H, int64_t W, Stream s, const WTConvStrides* strides, bool reuse_forward_fold) {
  detail::check_activations(x, dout, dx, true);
  const WTConvStrides st = detail::resolve_strides(opt_, Shape{B, opt_.C, H, W, opt_.stride}, strides, true);
  if (!impl_ || !impl_->have_weights) throw SpecError("lkjit: error: wtconv backward: call set_weights() first");
  detail::check_gradients(opt_, grads);
  run_list(launch_list(B, H, W, true, act_layout(st, opt_.C), s), x, dout, dx, st, &grads, s, nullptr,
           reuse_forward_fold);
}

}  // namespace lkjit
