// Which kernels run a WTConv shape (pure: no CUDA calls), for the layer, prewarm and reports.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

#include "lkjit/error.h"
#include "lkjit/wtconv.h"
#include "runtime/ops/wtconv_internal.h"
#include "runtime/strides.h"

namespace lkjit {
namespace detail {

std::vector<int64_t> level_sizes(int64_t n, int L) {
  std::vector<int64_t> v{n};
  for (int l = 1; l <= L; ++l) v.push_back((v.back() + 1) / 2);
  return v;
}

std::string field_range(const std::string& field) {
  if (field == "B") return "[1, 2^31-1]";
  if (field == "C") return "[1, 2^24]";
  if (field == "H" || field == "W") return "[1, 2^30]";
  if (field == "k") return "odd k in [1, 31]";
  if (field == "L") return fmt::format("L in [0, {}]", kMaxLevels);
  if (field == "stride") return "[1, 64]";
  return "";
}

namespace {
std::string out_of_range(const char* field, int64_t v) {
  return fmt::format("{}={} is out of range; supported: {}", field, v, field_range(field));
}
}  // namespace

void validate_options(const WTConvOptions& o) {
  std::vector<std::string> e;
  auto bad = [&](const char* f, int64_t v) { e.push_back(out_of_range(f, v)); };
  if (o.C < 1 || o.C > (int64_t(1) << 24)) bad("C", o.C);
  if (o.k < 1 || o.k > 31 || o.k % 2 == 0) bad("k", o.k);
  if (o.L < 0 || o.L > kMaxLevels) bad("L", o.L);
  if (o.stride < 1 || o.stride > 64) bad("stride", o.stride);
  if (o.device < 0) e.push_back(fmt::format("device={} is out of range; supported: >= 0", o.device));
  if (o.layout != Layout::kNCHW && o.layout != Layout::kNHWC)
    e.push_back(fmt::format("layout={} is out of range; supported: NCHW, NHWC", static_cast<int>(o.layout)));
  if (e.empty()) return;
  std::string msg = "lkjit: error: wtconv: ";
  for (size_t i = 0; i < e.size(); ++i) msg += (i ? "; " : "") + e[i];
  throw SpecError(msg);
}

void validate_shape(const WTConvOptions& o, const Shape& sh) {
  std::vector<std::string> e;
  auto bad = [&](const char* f, int64_t v) { e.push_back(out_of_range(f, v)); };
  if (sh.B < 1 || sh.B > (int64_t(1) << 31) - 1) bad("B", sh.B);
  if (sh.C != o.C) e.push_back(fmt::format("C={} does not match the layer's C={}", sh.C, o.C));
  if (sh.H < 1 || sh.H > (int64_t(1) << 30)) bad("H", sh.H);
  if (sh.W < 1 || sh.W > (int64_t(1) << 30)) bad("W", sh.W);
  if (sh.stride != o.stride) e.push_back(fmt::format("stride={} does not match the layer's stride={}", sh.stride, o.stride));
  if (e.empty() && double(sh.B) * double(sh.C) * double(sh.H) * double(sh.W) > double(int64_t(1) << 40))
    e.push_back(fmt::format("B*C*H*W={:.4g} exceeds the supported 2^40 elements",  // in doubles: int64 overflows
                            double(sh.B) * double(sh.C) * double(sh.H) * double(sh.W)));
  if (e.empty()) return;
  std::string msg = "lkjit: error: wtconv: ";
  for (size_t i = 0; i < e.size(); ++i) msg += (i ? "; " : "") + e[i];
  throw SpecError(msg);
}

namespace {

using Dims4 = std::array<int64_t, 4>;  // (B, C, H, W) order

}  // namespace

void check_strides(const char* name, const std::array<int64_t, 4>& st, const std::array<int64_t, 4>& n, bool written) {
  rt::check_strides("wtconv", name, st, n, written);
}

WTConvStrides resolve_strides(const WTConvOptions& o, const Shape& sh, const WTConvStrides* s, bool backward) {
  validate_shape(o, sh);
  const Dims4 full{sh.B, sh.C, sh.H, sh.W}, out{sh.B, sh.C, sh.H_out(), sh.W_out()};
  auto pick = [&](const Dims4* given, const Dims4& n) {
    return given && *given != Dims4{} ? *given : rt::dense_strides(o.layout, n);
  };
  WTConvStrides r;
  r.x = pick(s ? &s->x : nullptr, full);
  r.dout = pick(s ? &s->dout : nullptr, out);
  r.out = pick(s ? &s->out : nullptr, backward ? full : out);
  check_strides("x", r.x, full, false);
  if (backward) check_strides("dout", r.dout, out, false);
  check_strides(backward ? "dx" : "out", r.out, backward ? full : out, true);
  return r;
}

void check_activations(const void* x, const void* dout, const void* out, bool backward) {
  if (!backward && (!x || !out))
    throw SpecError("lkjit: error: wtconv forward: x and out must be non-null device pointers");
  if (backward && (!x || !dout || !out))
    throw SpecError("lkjit: error: wtconv backward: x, dout and dx must be non-null device pointers");
}

namespace {

// The pointers of a WTConvWeights or WTConvGradients set: base_w, base_s, base_b with bias, and L level
// pairs. Messages read "lkjit: error: <subject>: <prefix>base_w and <prefix>base_s must be non-null<tail>".
template <class Set>
void check_pointer_set(const WTConvOptions& o, const Set& s, const char* subject, const char* prefix, const char* tail) {
  if (!s.base_w || !s.base_s)
    throw SpecError(fmt::format("lkjit: error: {}: {}base_w and {}base_s must be non-null{}", subject, prefix, prefix, tail));
  if (o.bias && !s.base_b) throw SpecError(fmt::format("lkjit: error: {}: bias=true but {}base_b is null", subject, prefix));
  for (int l = 0; l < o.L; ++l)
    if (!s.level_w[l] || !s.level_s[l])
      throw SpecError(fmt::format("lkjit: error: {}: {}level_w[{}] and {}level_s[{}] must be non-null for L={}", subject,
                                  prefix, l, prefix, l, o.L));
}

}  // namespace

void check_weights(const WTConvOptions& o, const WTConvWeights& w) {
  check_pointer_set(o, w, "wtconv", "", " device pointers");
}

void check_gradients(const WTConvOptions& o, const WTConvGradients& g) {
  check_pointer_set(o, g, "wtconv backward", "grads.", "");
}

}  // namespace detail

void wtconv_check_weights(const WTConvOptions& o, const WTConvWeights& w) { detail::check_weights(o, w); }
void wtconv_check_gradients(const WTConvOptions& o, const WTConvGradients& g) { detail::check_gradients(o, g); }
void wtconv_check_activations(const void* x, const void* dout, const void* out, bool backward) {
  detail::check_activations(x, dout, out, backward);
}
WTConvStrides wtconv_resolve_strides(const WTConvOptions& o, int64_t B, int64_t H, int64_t W, const WTConvStrides* s,
                                     bool backward) {
  return detail::resolve_strides(o, Shape{B, o.C, H, W, o.stride}, s, backward);
}
std::string wtconv_field_range(const std::string& field) { return detail::field_range(field); }

namespace {

// Device traffic of one launch: what it must read and write (halo re-reads and partials ignored).
double traffic_bytes(const PlannedKernel& pk, const WTConvOptions& o, const Shape& sh) {
  const double eb = dtype_bytes(o.dtype), BC = double(sh.B * sh.C);
  const auto lh = detail::level_sizes(sh.H, o.L), lw = detail::level_sizes(sh.W, o.L);
  auto n = [&](int l) { return BC * double(lh[l]) * double(lw[l]); };
  const double nout = BC * double(sh.H_out() * sh.W_out());
  double zsum = 0;
  for (int l = 1; l <= o.L; ++l) zsum += 4 * n(l) * 4;
  const int l = pk.level;
  const Kernel& k = pk.spec.kernel;
  if (k == kWTConvFwdPlane || k == kWTConvFwdLane) return n(0) * eb + nout * eb;
  if (k == kWTConvBwdPlane || k == kWTConvBwdLane) return 2 * n(0) * eb + nout * eb;
  if (k == kWTConvFwdLevel) return n(l - 1) * (l == 1 ? eb : 4) + 4 * n(l) * 4 + (l < o.L ? n(l) * 4 : 0);
  if (k == kWTConvBwdLevel)
    return (l == 1 ? n(0) * eb + nout * eb : l == 2 ? n(0) * eb + n(1) * 4 : 2 * n(l - 1) * 4) + 4 * n(l) * 4 +
           (l < o.L ? (l == 1 ? 1 : 2) * n(l) * 4 : 0);
  if (k == kWTConvFwdSynth) return n(0) * eb + zsum + nout * eb;
  if (k == kWTConvBwdSynth) return 2 * n(0) * eb + zsum;
  return 0;
}

// Plane-resident kernels need at least two resident blocks per SM to overlap their phases.
bool plane_fits(const OpSpec& spec, const Shape& sh, const DeviceLimits& lim, Tile* tile) {
  *tile = default_tile(spec, sh, lim);
  const auto g = launch_geometry(spec, *tile, sh);
  return !reject_reason(spec, *tile, lim, &sh) && g.smem_bytes <= static_cast<unsigned>(lim.max_smem_per_block / 2);
}

}  // namespace

std::vector<PlannedKernel> wtconv_plan(const WTConvOptions& o, const Shape& sh, const DeviceLimits& lim,
                                       bool backward, WTConvPath path) {
  detail::validate_options(o);
  detail::validate_shape(o, sh);
  std::vector<PlannedKernel> plan;
  const OpSpec fold = wtconv_spec(kWTConvFold, DType::kF32, o.k, o.L, true, lim.arch);
  PlannedKernel fk{fold, default_tile(fold, sh, lim), sh};
  fk.fixed = true;  // set_weights launches it
  plan.push_back(fk);
  const OpSpec lane = wtconv_spec(backward ? kWTConvBwdLane : kWTConvFwdLane, o.dtype, o.k, o.L, true, lim.arch);
  const Tile lt = default_tile(lane, sh, lim);
  const auto lane_why = reject_reason(lane, lt, lim, &sh);
  if (path == WTConvPath::kLane && lane_why)
    throw SpecError(fmt::format("lkjit: error: wtconv: the lane path cannot run {} with k={} L={}: {}", sh.to_string(),
                                o.k, o.L, *lane_why));
  // The channels_last plane kernels only where a cluster tile can run (sm_90, L >= 1, stride 1, C a multiple of
  // the smallest cluster's 4 channels): elsewhere their code is the NCHW kernel's, so the NCHW spec (its cached
  // binaries, prewarm entries and tuning records) serves.
  const bool nhwc_plane = o.layout == Layout::kNHWC && lim.arch >= 90 && o.L >= 1 && o.stride == 1 && o.C % 4 == 0;
  const OpSpec plane = wtconv_spec(backward ? kWTConvBwdPlane : kWTConvFwdPlane, o.dtype, o.k, o.L, true, lim.arch,
                                   nhwc_plane ? Layout::kNHWC : Layout::kNCHW);
  Tile pt;
  const bool fits = plane_fits(plane, sh, lim, &pt);
  if (path == WTConvPath::kPlane && !fits) {
    // The rule is the default tile's: on planes that pass it, a tuned tile may use up to a whole block.
    const auto why = reject_reason(plane, pt, lim, &sh);
    throw SpecError(fmt::format(
        "lkjit: error: wtconv: {} planes do not fit in shared memory for the plane path: {}; supported: planes whose "
        "default tile's block takes at most half of {}'s {} B of shared memory per block, so that two blocks share an "
        "SM (only the default tile's rule: on planes that pass it, tuned tiles may take more; the tiled path takes "
        "any size)",
        sh.to_string(),
        why ? *why : fmt::format("one block of the default tile {} takes {} B", pt.to_string(),
                                 launch_geometry(plane, pt, sh).smem_bytes),
        arch_name(lim.arch), lim.max_smem_per_block));
  }
  // kAuto runs the lane kernels on NHWC activations, forward and backward (bf16 k=5 on an H200: the lane
  // backward 198 us at 64x384x14x14 L=3 against the plane kernel's 204 plus 26 of transposes; 93 at
  // 64x768x7x7 L=2 against 165). It also wants at least 4 of its blocks per SM (tall planes can need a
  // whole SM's shared memory for one warp), and C > 1 (the layer's NHWC test, act_layout).
  const bool lane_auto = o.layout == Layout::kNHWC && o.C > 1 && !lane_why &&
                         launch_geometry(lane, lt, sh).smem_bytes <= static_cast<unsigned>(lim.smem_per_sm / 4);
  if (path == WTConvPath::kLane || (path == WTConvPath::kAuto && lane_auto)) {
    plan.push_back({lane, lt, sh});
  } else if (path == WTConvPath::kPlane || (path == WTConvPath::kAuto && fits)) {
    plan.push_back({plane, pt, sh});
  } else {
    const auto lh = detail::level_sizes(sh.H, o.L), lw = detail::level_sizes(sh.W, o.L);
    const Kernel lk = backward ? kWTConvBwdLevel : kWTConvFwdLevel;
    for (int l = 1; l <= o.L; ++l) {
      // The backward's level 2 also reads X (block sums) instead of an fp32 level-1 X band: an N/4
      // band less scratch for a 4x larger (mostly cached) read. Its dR still comes from a band.
      const bool first = l == 1 || (backward && l == 2);
      const OpSpec lv = wtconv_spec(lk, first ? o.dtype : DType::kF32, o.k, 0, first, lim.arch);
      const Shape ls{sh.B, sh.C, lh[l - 1], lw[l - 1], first ? sh.stride : 1};
      plan.push_back({lv, default_tile(lv, ls, lim), ls, l});
    }
    const OpSpec syn = wtconv_spec(backward ? kWTConvBwdSynth : kWTConvFwdSynth, o.dtype, o.k, o.L, true, lim.arch);
    plan.push_back({syn, default_tile(syn, sh, lim), sh});
  }
  for (auto& pk : plan) pk.bytes = traffic_bytes(pk, o, sh);
  if (backward) {  // the lane backward writes its partials channel-innermost (reduce_lane.cuh)
    const bool lane_bwd = std::any_of(plan.begin(), plan.end(),
                                      [](const PlannedKernel& pk) { return pk.spec.kernel == kWTConvBwdLane; });
    const OpSpec red = wtconv_spec(lane_bwd ? kWTConvReduceLane : kWTConvReduce, DType::kF32, o.k, o.L, true, lim.arch);
    plan.push_back({red, default_tile(red, sh, lim), sh});
  }
  return plan;
}

}  // namespace lkjit
