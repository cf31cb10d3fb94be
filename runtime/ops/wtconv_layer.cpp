// The WTConv op layer: validates shapes, plans each shape (wtconv_plan), fills each kernel's params once
// per shape, owns the folded weights, and launches without host syncs or per-call allocations (graph
// friendly). Tile choice, compiling, loading, the per-shape cache and scratch are the plan runner's
// (runtime/plan_runner.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <tuple>

#include "abi/wtconv_params.h"
#include "lkjit/error.h"
#include "lkjit/wtconv.h"
#include "lkjit/wtconv_tune.h"
#include "runtime/env.h"
#include "runtime/ops/wtconv_internal.h"
#include "runtime/plan_runner.h"

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
  rt::PreparedKernel k;
  WTConvParams q;
  ScratchRefs refs;
  // The plane and lane kernels read the fold only after pdl_wait() (templates/common/pdl.cuh), so right
  // after a fold they may start early and load their activations while it runs.
  bool waits_for_fold = false;
};

// The layout a call's activations are in, for the plan: NHWC when x's channels are adjacent.
Layout act_layout(const WTConvStrides& st, int64_t C) { return C > 1 && st.x[1] == 1 ? Layout::kNHWC : Layout::kNCHW; }
// The layer's options as the planner sees a call in layout act.
WTConvOptions with_layout(WTConvOptions o, Layout act) {
  o.layout = act;
  return o;
}

using ListKey = std::tuple<int64_t, int64_t, int64_t, int, bool, Layout>;

}  // namespace

struct WTConv::LaunchList {
  std::vector<PlannedLaunch> launches;
  size_t scratch_floats = 0;
  int64_t partial_off = 0;  // float offset of the partial-gradient area in scratch
  bool tiled = false;
  std::string origin = "memory";
};

struct WTConv::Impl {
  rt::TilePolicy policy{"wtconv"};
  rt::PlanCache<ListKey, LaunchList> lists;
  bool have_device = false;
  DeviceInfo dev;
  DeviceBuffer wfold;
  rt::Scratch scratch;
  WTConvWeights raw;
  bool have_weights = false;
  // The fold kernel, loaded once: set_weights runs after every optimizer step.
  const LoadedKernel* fold = nullptr;
  LaunchGeometry fold_geometry;
  bool early_launch = false;  // LKJIT_EARLY_LAUNCH on an sm_90+ device (run_list)
};

WTConv::WTConv(const WTConvOptions& options) : opt_(options), impl_(std::make_unique<Impl>()) {
  detail::validate_options(opt_);
}
WTConv::~WTConv() = default;

Shape WTConv::shape_of(int64_t B, int64_t H, int64_t W) const {
  const Shape sh{B, opt_.C, H, W, opt_.stride};
  detail::validate_shape(opt_, sh);
  return sh;
}

size_t WTConv::workspace_bytes() const { return impl_->wfold.bytes() + impl_->scratch.bytes(); }

void WTConv::ensure_device() {
  if (!impl_->have_device) {
    impl_->dev = device_info(opt_.device);
    impl_->early_launch = impl_->dev.arch >= 90 && rt::env("LKJIT_EARLY_LAUNCH") != "0";
    impl_->have_device = true;
  }
}

std::vector<PlannedKernel> WTConv::plan(int64_t B, int64_t H, int64_t W, bool backward) const {
  const Shape sh = shape_of(B, H, W);
  return choose_tiles(sh, impl_->have_device ? impl_->dev : device_info(opt_.device), backward, opt_.layout);
}

// ---- tile choice ----------------------------------------------------------------------------------
// The plan's path (plane vs tiled) is decided by wtconv_plan with default tiles; only the tiles of its
// entries change here, so a tuned tile never moves a shape to the other path.
std::vector<PlannedKernel> WTConv::choose_tiles(const Shape& sh, const DeviceInfo& dev, bool backward,
                                                Layout act) const {
  auto pl = wtconv_plan(with_layout(opt_, act), sh, dev.limits, backward, path_);
  impl_->policy.choose(pl, dev);
  return pl;
}

bool WTConv::runs_lane(int64_t B, int64_t H, int64_t W, bool backward) const {
  const auto pl = wtconv_plan(with_layout(opt_, Layout::kNHWC), shape_of(B, H, W),
                              impl_->have_device ? impl_->dev.limits : device_info(opt_.device).limits, backward, path_);
  return std::any_of(pl.begin(), pl.end(), [](const PlannedKernel& pk) {
    return pk.spec.kernel == kWTConvFwdLane || pk.spec.kernel == kWTConvBwdLane;
  });
}

void WTConv::set_tune_options(const TuneOptions& o) {
  impl_->policy.set_tune_options(o);
  impl_->lists.clear();
}

void WTConv::set_tune_mode(TuneMode m) {
  impl_->policy.set_tune_mode(m);
  impl_->lists.clear();
}

void WTConv::set_tile_override(Kernel kernel, int level, const Tile& tile) {
  if (level < 0 || level > opt_.L)
    throw SpecError(fmt::format("lkjit: error: wtconv: tile override level={} is out of range; supported: [0, {}]",
                                level, opt_.L));
  impl_->policy.set_override(kernel, level, tile);
  impl_->lists.clear();
}

void WTConv::clear_tile_overrides() {
  impl_->policy.clear_overrides();
  impl_->lists.clear();
}

void WTConv::set_claim_for_testing(ClaimForTesting c) {
  claim_ = c;
  impl_->lists.clear();  // the flags live in each list's kernel arguments
}

void WTConv::prepare(int64_t B, int64_t H, int64_t W, bool backward) {
  ensure_device();
  last_origin_ = launch_list(B, H, W, false, opt_.layout).origin;
  if (backward) last_origin_ = rt::worse_origin(last_origin_, launch_list(B, H, W, true, opt_.layout).origin);
}

void WTConv::set_weights(const WTConvWeights& w, Stream s) {
  detail::check_weights(opt_, w);
  ensure_device();
  if (!impl_->fold && stream_capturing(s)) rt::refuse_under_capture("wtconv", "set_weights");
  // Two copies (WTConvParams::wfold): channel-major for the plane and tiled kernels, value-major for the lane ones.
  const int64_t n = 2 * (opt_.C * opt_.k * opt_.k * (1 + 4 * int64_t(opt_.L)) + opt_.C);
  if (impl_->wfold.bytes() < size_t(n) * 4) impl_->wfold = DeviceBuffer(size_t(n) * 4, opt_.device);
  if (!impl_->fold) {
    const OpSpec fold = wtconv_spec(kWTConvFold, DType::kF32, opt_.k, opt_.L, true, impl_->dev.arch);
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

const WTConv::LaunchList& WTConv::launch_list(int64_t B, int64_t H, int64_t W, bool backward, Layout act,
                                              std::optional<Stream> call) {
  const ListKey key{B, H, W, static_cast<int>(path_), backward, act};
  return impl_->lists.get(key, call, "wtconv",
                          fmt::format("the first {} of B={} H={} W={}", backward ? "backward" : "forward", B, H, W),
                          [&] { return build_list(B, H, W, backward, act); });
}

WTConv::LaunchList WTConv::build_list(int64_t B, int64_t H, int64_t W, bool backward, Layout act) {
  const Shape sh = shape_of(B, H, W);
  auto pl = choose_tiles(sh, impl_->dev, backward, act);
  // Tune on a miss only where the mode says so: the layer's default (cached) never measures here.
  impl_->policy.tune_on_miss(pl, [&]() -> std::unique_ptr<PassHarness> {
    return std::make_unique<WTConvHarness>(WTConvTuneProblem{with_layout(opt_, act), B, H, W, backward, path_});
  });
  std::vector<PlannedKernel> run;  // the fold is set_weights'
  for (const auto& pk : pl)
    if (!pk.fixed) run.push_back(pk);
  const auto prepared = rt::prepare_kernels(run, opt_.device, "wtconv");

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

  LaunchList list;
  for (const auto& pk : run)
    if (pk.spec.kernel == kWTConvFwdLevel || pk.spec.kernel == kWTConvBwdLevel) list.tiled = true;
  // Partial-gradient layout (backward): group 0 = base, group l = level l; tiles per plane each (the tiled
  // kernels' tile counts come from the generator's geometry). The lane backward's partials come in blocks of
  // 32 channels (reduce_lane.cuh): C rounded up to 32.
  int64_t part = 0;
  if (backward) {
    int64_t part_planes = BC;
    for (const auto& k : prepared) {
      const PlannedKernel& pk = k.planned;
      if (pk.spec.kernel == kWTConvBwdLane) part_planes = B * ((opt_.C + 31) / 32 * 32);
      int tiles = 0, g = -1;
      if (pk.spec.kernel == kWTConvBwdPlane || pk.spec.kernel == kWTConvBwdLane) {
        for (int l = 0; l <= L; ++l) p.part_tiles[l] = 1;
      } else if (pk.spec.kernel == kWTConvBwdLevel || pk.spec.kernel == kWTConvBwdSynth) {
        g = pk.spec.kernel == kWTConvBwdLevel ? pk.level : 0;
        tiles = static_cast<int>(k.geometry.value("tiles_h") * k.geometry.value("tiles_w"));
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

  for (const auto& k : prepared) {
    const PlannedKernel& pk = k.planned;
    list.origin = rt::worse_origin(list.origin, k.origin);
    PlannedLaunch l;
    l.k = k;
    l.q = p;
    const Kernel& kn = pk.spec.kernel;
    if (kn == kWTConvFwdLevel || kn == kWTConvBwdLevel) {
      const int lv = pk.level;
      l.q.level = lv;
      l.q.h_in = p.lh[lv - 1];
      l.q.w_in = p.lw[lv - 1];
      l.q.tiles_h = static_cast<int>(k.geometry.value("tiles_h"));
      l.q.tiles_w = static_cast<int>(k.geometry.value("tiles_w"));
      l.refs.low_in = xc.at(lv - 1, L);
      l.refs.low_out = xc.at(lv, L);
      if (backward) {
        l.refs.low2_in = gc.at(lv - 1, L);
        l.refs.low2_out = gc.at(lv, L);
      }
    } else if (kn == kWTConvFwdLane || kn == kWTConvBwdLane) {
      l.waits_for_fold = true;
    } else if (kn == kWTConvFwdPlane || kn == kWTConvBwdPlane) {
      l.waits_for_fold = true;
      for (int lv = 0; lv <= L; ++lv) {  // the images' pitches, as the generator sized them
        l.q.lpitch[lv] = static_cast<int>(k.geometry.value("lpitch" + std::to_string(lv)));
        l.q.lvw[lv] = static_cast<int>(k.geometry.value("lvw" + std::to_string(lv)));
      }
    } else if (kn == kWTConvFwdSynth || kn == kWTConvBwdSynth) {
      l.q.tiles_h = static_cast<int>(k.geometry.value("tiles_h"));
      l.q.tiles_w = static_cast<int>(k.geometry.value("tiles_w"));
    }
    list.launches.push_back(l);
  }
  return list;
}

void WTConv::run_list(const LaunchList& list, const void* x, const void* g, void* out, const WTConvStrides& st,
                      const WTConvGradients* grads, Stream s, std::vector<KernelTiming>* timings, bool reuse_fold) {
  float* scratch = static_cast<float*>(impl_->scratch.ensure(list.scratch_floats * 4, opt_.device, s, "wtconv"));
  // A graph replay may have changed the parameters without the caller knowing (a captured optimizer
  // step), so once the layer has been captured every call folds first, captured calls included; except a
  // backward whose caller vouches that the parameters are those of the forward it follows.
  const bool folded = impl_->scratch.captured() && !reuse_fold;
  if (folded) launch_fold(s);
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
    q.partial = scratch ? scratch + list.partial_off : nullptr;
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
    // Right after the fold (nothing between them in the stream), a kernel that waits for it may start
    // early (sm_90+), taking the fold and one launch gap off a captured call's critical path (a network
    // step showed no gain beyond its noise: bench/RESULTS.md, session 14).
    const bool early = !timings && folded && li == 0 && l.waits_for_fold && impl_->early_launch;
    rt::launch_prepared(l.k, &q, sizeof(q), s, early, timings);
  }
  last_origin_ = list.origin;
}

// Strides are resolved and checked first: a bad call fails before anything touches the device.
std::vector<KernelTiming> WTConv::profile(const void* x, const void* dout, void* out, const WTConvGradients* grads,
                                          int64_t B, int64_t H, int64_t W, Stream s, const WTConvStrides* strides) {
  const bool backward = dout != nullptr;
  const WTConvStrides st = detail::resolve_strides(opt_, Shape{B, opt_.C, H, W, opt_.stride}, strides, backward);
  if (!impl_->have_weights) throw SpecError("lkjit: error: wtconv profile: call set_weights() first");
  if (dout && !grads) throw SpecError("lkjit: error: wtconv profile: backward needs gradient buffers");
  std::vector<KernelTiming> t;
  run_list(launch_list(B, H, W, backward, act_layout(st, opt_.C)), x, dout, out, st, grads, s, &t);
  return t;
}

void WTConv::forward(const void* x, void* out, int64_t B, int64_t H, int64_t W, Stream s,
                     const WTConvStrides* strides) {
  detail::check_activations(x, nullptr, out, false);
  const WTConvStrides st = detail::resolve_strides(opt_, Shape{B, opt_.C, H, W, opt_.stride}, strides, false);
  if (!impl_->have_weights) throw SpecError("lkjit: error: wtconv forward: call set_weights() first");
  run_list(launch_list(B, H, W, false, act_layout(st, opt_.C), s), x, nullptr, out, st, nullptr, s);
}

void WTConv::backward(const void* x, const void* dout, void* dx, const WTConvGradients& grads, int64_t B,
                      int64_t H, int64_t W, Stream s, const WTConvStrides* strides, bool reuse_forward_fold) {
  detail::check_activations(x, dout, dx, true);
  const WTConvStrides st = detail::resolve_strides(opt_, Shape{B, opt_.C, H, W, opt_.stride}, strides, true);
  if (!impl_->have_weights) throw SpecError("lkjit: error: wtconv backward: call set_weights() first");
  detail::check_gradients(opt_, grads);
  run_list(launch_list(B, H, W, true, act_layout(st, opt_.C), s), x, dout, dx, st, &grads, s, nullptr,
           reuse_forward_fold);
}

}  // namespace lkjit
