// The WTConv op layer: validates shapes, plans kernels, owns the folded weights and scratch, launches.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "abi/wtconv_params.h"
#include "lkjit/error.h"
#include "lkjit/wtconv.h"

namespace lkjit {

static_assert(sizeof(WTConvParams) % 8 == 0, "WTConvParams must keep 8-byte alignment on both sides");
static_assert(kMaxLevels == kWTConvMaxLevels, "public and ABI level limits differ");

namespace {

std::vector<int64_t> level_sizes(int64_t n, int L) {
  std::vector<int64_t> v{n};
  for (int l = 1; l <= L; ++l) v.push_back((v.back() + 1) / 2);
  return v;
}

void validate_options(const WTConvOptions& o) {
  std::vector<std::string> e;
  if (o.C < 1 || o.C > (int64_t(1) << 24)) e.push_back(fmt::format("C={} is out of range; supported: [1, 2^24]", o.C));
  if (o.k < 1 || o.k > 31 || o.k % 2 == 0) e.push_back(fmt::format("k={} is out of range; supported: odd k in [1, 31]", o.k));
  if (o.L < 0 || o.L > kMaxLevels) e.push_back(fmt::format("L={} is out of range; supported: L in [0, {}]", o.L, kMaxLevels));
  if (o.stride < 1 || o.stride > 64) e.push_back(fmt::format("stride={} is out of range; supported: [1, 64]", o.stride));
  if (o.device < 0) e.push_back(fmt::format("device={} is out of range; supported: >= 0", o.device));
  if (e.empty()) return;
  std::string msg = "lkjit: error: wtconv: ";
  for (size_t i = 0; i < e.size(); ++i) msg += (i ? "; " : "") + e[i];
  throw SpecError(msg);
}

bool plane_fits(const OpSpec& spec, const Shape& sh, const DeviceLimits& lim, Tile* tile) {
  *tile = default_tile(spec, sh, lim);
  // Plane-resident kernels need at least two resident blocks per SM to hide their phases' barriers.
  const auto g = launch_geometry(spec, *tile, sh);
  return !reject_reason(spec, *tile, lim, &sh) && g.smem_bytes <= static_cast<unsigned>(lim.max_smem_per_block / 2);
}

}  // namespace

std::vector<PlannedKernel> wtconv_plan(const WTConvOptions& o, const Shape& sh, const DeviceLimits& lim,
                                       bool backward, WTConvPath path) {
  validate_options(o);
  std::vector<PlannedKernel> plan;
  OpSpec fold{Kernel::kWTConvFold, DType::kF32, o.k, o.L, true, lim.arch};
  plan.push_back({fold, default_tile(fold, sh, lim), sh});
  if (backward) throw SpecError("lkjit: error: wtconv backward is not available in this build");
  OpSpec plane{Kernel::kWTConvFwdPlane, o.dtype, o.k, o.L, true, lim.arch};
  Tile pt;
  const bool fits = plane_fits(plane, sh, lim, &pt);
  if (path == WTConvPath::kPlane && !fits)
    throw SpecError(fmt::format("lkjit: error: wtconv: {} planes do not fit in shared memory for the plane path",
                                sh.to_string()));
  if (path == WTConvPath::kPlane || (path == WTConvPath::kAuto && fits)) {
    plan.push_back({plane, pt, sh});
    return plan;
  }
  const auto lh = level_sizes(sh.H, o.L), lw = level_sizes(sh.W, o.L);
  for (int l = 1; l <= o.L; ++l) {
    OpSpec lv{Kernel::kWTConvFwdLevel, l == 1 ? o.dtype : DType::kF32, o.k, 0, l == 1, lim.arch};
    Shape ls{sh.B, sh.C, lh[l - 1], lw[l - 1], 1};
    plan.push_back({lv, default_tile(lv, ls, lim), ls, l});
  }
  OpSpec syn{Kernel::kWTConvFwdSynth, o.dtype, o.k, o.L, true, lim.arch};
  plan.push_back({syn, default_tile(syn, sh, lim), sh});
  return plan;
}

namespace {

// One launch of a forward plan, with scratch pointers stored as offsets (the scratch may move).
struct FwdLaunch {
  const LoadedKernel* k = nullptr;
  LaunchGeometry g;
  WTConvParams q;
  int64_t low_in = -1, low_out = -1;  // float offsets into scratch, -1 = none
};

}  // namespace

struct WTConvFwdPlan {
  std::vector<FwdLaunch> launches;
  size_t scratch_bytes = 0;
  std::string origin;
};

struct WTConv::Impl {
  DeviceInfo dev;
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, WTConvFwdPlan> fwd_plans;
  DeviceBuffer wfold;
  DeviceBuffer scratch;  // z levels + two low bands
  WTConvWeights raw;
  bool have_weights = false;
};

WTConv::WTConv(const WTConvOptions& options) : opt_(options) { validate_options(opt_); }
WTConv::~WTConv() { delete impl_; }

Shape WTConv::shape_of(int64_t B, int64_t H, int64_t W) const {
  std::vector<std::string> e;
  if (B < 1 || B > (int64_t(1) << 31) - 1) e.push_back(fmt::format("B={} is out of range; supported: [1, 2^31-1]", B));
  if (H < 1 || H > (int64_t(1) << 30)) e.push_back(fmt::format("H={} is out of range; supported: [1, 2^30]", H));
  if (W < 1 || W > (int64_t(1) << 30)) e.push_back(fmt::format("W={} is out of range; supported: [1, 2^30]", W));
  if (e.empty() && B * opt_.C * H * W > (int64_t(1) << 40))
    e.push_back(fmt::format("B*C*H*W={} exceeds the supported 2^40 elements", B * opt_.C * H * W));
  if (!e.empty()) {
    std::string msg = "lkjit: error: wtconv: ";
    for (size_t i = 0; i < e.size(); ++i) msg += (i ? "; " : "") + e[i];
    throw SpecError(msg);
  }
  return Shape{B, opt_.C, H, W, opt_.stride};
}

std::vector<PlannedKernel> WTConv::plan(int64_t B, int64_t H, int64_t W, bool backward) const {
  const Shape sh = shape_of(B, H, W);
  DeviceLimits lim = impl_ ? impl_->dev.limits : device_info(opt_.device).limits;
  return wtconv_plan(opt_, sh, lim, backward, path_);
}

namespace {

const char* worse(const std::string& a, const std::string& b) {
  auto rank = [](const std::string& s) { return s == "compiled" ? 2 : s == "disk" ? 1 : 0; };
  return rank(a) >= rank(b) ? a.c_str() : b.c_str();
}

struct Ready {
  const LoadedKernel* k;
  LaunchGeometry g;
  PlannedKernel p;
};

}  // namespace

void WTConv::prepare(int64_t B, int64_t H, int64_t W, bool backward) {
  if (!impl_) {
    impl_ = new Impl;
    impl_->dev = device_info(opt_.device);
  }
  std::string origin = "memory";
  for (const auto& pk : plan(B, H, W, backward)) {
    const auto ck = compile_kernel(pk.spec, pk.tile);
    origin = worse(origin, ck.origin);
    load_kernel(ck, opt_.device);
  }
  last_origin_ = origin;
}

void WTConv::set_weights(const WTConvWeights& w, Stream s) {
  if (!w.base_w || !w.base_s) throw SpecError("lkjit: error: wtconv: base_w and base_s must be non-null device pointers");
  if (opt_.bias && !w.base_b) throw SpecError("lkjit: error: wtconv: bias=true but base_b is null");
  for (int l = 0; l < opt_.L; ++l)
    if (!w.level_w[l] || !w.level_s[l])
      throw SpecError(fmt::format("lkjit: error: wtconv: level_w[{}] / level_s[{}] must be non-null for L={}", l, l, opt_.L));
  if (!impl_) {
    impl_ = new Impl;
    impl_->dev = device_info(opt_.device);
  }
  const int64_t n = opt_.C * opt_.k * opt_.k * (1 + 4 * int64_t(opt_.L)) + opt_.C;
  if (impl_->wfold.bytes() < size_t(n) * 4) impl_->wfold = DeviceBuffer(size_t(n) * 4, opt_.device);
  impl_->raw = w;
  if (!opt_.bias) impl_->raw.base_b = nullptr;
  impl_->have_weights = true;

  OpSpec fold{Kernel::kWTConvFold, DType::kF32, opt_.k, opt_.L, true, impl_->dev.arch};
  const Shape sh{1, opt_.C, 1, 1, 1};
  const Tile t = default_tile(fold, sh, impl_->dev.limits);
  const auto& k = load_kernel(compile_kernel(fold, t), opt_.device);
  WTConvParams p;
  std::memset(&p, 0, sizeof(p));
  p.wfold = static_cast<const float*>(impl_->wfold.data());
  p.base_w = w.base_w;
  p.base_b = impl_->raw.base_b;
  p.base_s = w.base_s;
  for (int l = 0; l < opt_.L; ++l) {
    p.level_w[l] = w.level_w[l];
    p.level_s[l] = w.level_s[l];
  }
  p.C = static_cast<int>(opt_.C);
  launch(k, launch_geometry(fold, t, sh), &p, sizeof(p), s);
}

void WTConv::forward(const void* x, void* out, int64_t B, int64_t H, int64_t W, Stream s) {
  if (!x || !out) throw SpecError("lkjit: error: wtconv forward: x and out must be non-null device pointers");
  if (!impl_ || !impl_->have_weights) throw SpecError("lkjit: error: wtconv forward: call set_weights() first");
  const auto key = std::make_tuple(B, H, W, static_cast<int>(path_));
  auto it = impl_->fwd_plans.find(key);
  if (it == impl_->fwd_plans.end()) it = impl_->fwd_plans.emplace(key, build_forward(B, H, W)).first;
  const WTConvFwdPlan& fp = it->second;
  if (impl_->scratch.bytes() < fp.scratch_bytes) impl_->scratch = DeviceBuffer(fp.scratch_bytes, opt_.device);
  float* scratch = static_cast<float*>(impl_->scratch.data());
  for (const auto& l : fp.launches) {
    WTConvParams q = l.q;
    q.x = x;
    q.out = out;
    q.wfold = static_cast<const float*>(impl_->wfold.data());
    q.z = scratch;
    q.low_in = l.low_in >= 0 ? scratch + l.low_in : nullptr;
    q.low_out = l.low_out >= 0 ? scratch + l.low_out : nullptr;
    launch(*l.k, l.g, &q, sizeof(q), s);
  }
  last_origin_ = fp.origin;
}

WTConvFwdPlan WTConv::build_forward(int64_t B, int64_t H, int64_t W) {
  const Shape sh = shape_of(B, H, W);
  const auto pl = wtconv_plan(opt_, sh, impl_->dev.limits, false, path_);
  const auto lh = level_sizes(H, kMaxLevels), lw = level_sizes(W, kMaxLevels);
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
  for (int l = 0; l <= kMaxLevels; ++l) {
    p.lh[l] = static_cast<int>(std::min<int64_t>(lh[l], INT32_MAX));
    p.lw[l] = static_cast<int>(std::min<int64_t>(lw[l], INT32_MAX));
  }
  const int64_t BC = B * opt_.C;
  // Scratch (tiled path): every level's Z_l, then two low bands (odd levels write A, even B).
  int64_t off = 0;
  for (int l = 1; l <= opt_.L; ++l) {
    p.z_off[l - 1] = off;
    off += 4 * BC * lh[l] * lw[l];
  }
  const int64_t lowA = off, lowB = lowA + (opt_.L >= 2 ? BC * lh[1] * lw[1] : 0);
  const int64_t end = lowB + (opt_.L >= 3 ? BC * lh[2] * lw[2] : 0);

  WTConvFwdPlan fp;
  fp.origin = "memory";
  bool tiled = false;
  for (const auto& pk : pl) {
    if (pk.spec.kernel == Kernel::kWTConvFold) continue;
    const auto ck = compile_kernel(pk.spec, pk.tile);
    fp.origin = worse(fp.origin, ck.origin);
    FwdLaunch l;
    l.k = &load_kernel(ck, opt_.device);
    l.g = launch_geometry(pk.spec, pk.tile, pk.shape);
    l.q = p;
    if (pk.spec.kernel == Kernel::kWTConvFwdLevel) {
      tiled = true;
      const int lv = pk.level;
      l.q.level = lv;
      l.q.h_in = p.lh[lv - 1];
      l.q.w_in = p.lw[lv - 1];
      l.q.tiles_h = (p.lh[lv] + pk.tile.tile_h - 1) / pk.tile.tile_h;
      l.q.tiles_w = (p.lw[lv] + pk.tile.tile_w - 1) / pk.tile.tile_w;
      l.low_in = lv == 1 ? -1 : ((lv & 1) ? lowB : lowA);
      l.low_out = lv == opt_.L ? -1 : ((lv & 1) ? lowA : lowB);
    } else if (pk.spec.kernel == Kernel::kWTConvFwdSynth) {
      tiled = true;
      l.q.tiles_h = static_cast<int>((sh.H_out() + pk.tile.tile_h - 1) / pk.tile.tile_h);
      l.q.tiles_w = static_cast<int>((sh.W_out() + pk.tile.tile_w - 1) / pk.tile.tile_w);
    }
    fp.launches.push_back(l);
  }
  fp.scratch_bytes = tiled ? size_t(end) * 4 + 256 : 0;
  return fp;
}

void WTConv::backward(const void*, const void*, void*, const WTConvGradients&, int64_t, int64_t, int64_t, Stream) {
  throw SpecError("lkjit: error: wtconv backward is not available in this build");
}

}  // namespace lkjit
