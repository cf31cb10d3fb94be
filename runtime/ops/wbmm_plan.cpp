// Which kernels run a WBMM pass (pure: no CUDA calls), and the checks of options, shapes, pointers and
// strides that every entry point makes before it touches the device.
#include <fmt/format.h>

#include <algorithm>

#include "lkjit/error.h"
#include "lkjit/wbmm.h"
#include "runtime/ops/wbmm_internal.h"
#include "runtime/strides.h"

namespace lkjit {
namespace detail::wbmm {
namespace {

std::string out_of_range(const char* field, int64_t v) {
  return fmt::format("{}={} is out of range; supported: {}", field, v, wbmm_field_range(field));
}

[[noreturn]] void fail(const std::string& subject, const std::vector<std::string>& e) {
  std::string msg = "lkjit: error: " + subject + ": ";
  for (size_t i = 0; i < e.size(); ++i) msg += (i ? "; " : "") + e[i];
  throw SpecError(msg);
}

}  // namespace

void validate_shape(const WBMMOptions& o, const Shape& sh) {
  std::vector<std::string> e;
  if (sh.B < 1 || sh.B > (int64_t(1) << 31) - 1) e.push_back(out_of_range("B", sh.B));
  if (sh.C != o.C) e.push_back(fmt::format("C={} does not match the layer's C={}", sh.C, o.C));
  if (sh.H < 1 || sh.H > (int64_t(1) << 30)) e.push_back(out_of_range("H", sh.H));
  if (sh.W < 1 || sh.W > (int64_t(1) << 30)) e.push_back(out_of_range("W", sh.W));
  if (sh.stride != 1) e.push_back(fmt::format("stride={} is out of range; supported: 1 (WBMM keeps the resolution)", sh.stride));
  if (e.empty() && double(sh.B) * double(sh.C) * double(sh.H) * double(sh.W) > double(int64_t(1) << 40))
    e.push_back(fmt::format("B*C*H*W={:.4g} exceeds the supported 2^40 elements",  // in doubles: int64 overflows
                            double(sh.B) * double(sh.C) * double(sh.H) * double(sh.W)));
  if (!e.empty()) fail("wbmm", e);
}

Layout act_layout(const std::array<int64_t, 4>& x_strides, int64_t C) {
  return C > 1 && x_strides[1] == 1 ? Layout::kNHWC : Layout::kNCHW;
}

WBMMOptions with_layout(WBMMOptions o, Layout act) {
  o.layout = act;
  return o;
}

}  // namespace detail::wbmm

using namespace detail::wbmm;

std::string wbmm_field_range(const std::string& field) {
  if (field == "B") return "[1, 2^31-1]";
  if (field == "C") return "[1, 2^24]";
  if (field == "H" || field == "W") return "[1, 2^30]";
  if (field == "wh" || field == "ww") return "[1, 16]";
  return "";
}

int wbmm_table_size(const WBMMOptions& o) { return (2 * o.wh - 1) * (2 * o.ww - 1); }
int wbmm_positions(const WBMMOptions& o) { return o.wh * o.ww; }

void wbmm_validate_options(const WBMMOptions& o) {
  std::vector<std::string> e;
  if (o.C < 1 || o.C > (int64_t(1) << 24)) e.push_back(out_of_range("C", o.C));
  if (o.wh < 1 || o.wh > 16) e.push_back(out_of_range("wh", o.wh));
  if (o.ww < 1 || o.ww > 16) e.push_back(out_of_range("ww", o.ww));
  if (o.mode != WBMMMode::kTable && o.mode != WBMMMode::kDense)
    e.push_back(fmt::format("mode={} is out of range; supported: table, dense", static_cast<int>(o.mode)));
  if (o.dtype != DType::kF32 && o.dtype != DType::kF16 && o.dtype != DType::kBF16)
    e.push_back(fmt::format("dtype={} is out of range; supported: f32, f16, bf16", static_cast<int>(o.dtype)));
  if (o.device < 0) e.push_back(fmt::format("device={} is out of range; supported: >= 0", o.device));
  if (o.layout != Layout::kNCHW && o.layout != Layout::kNHWC)
    e.push_back(fmt::format("layout={} is out of range; supported: NCHW, NHWC", static_cast<int>(o.layout)));
  if (!e.empty()) fail("wbmm", e);
}

void wbmm_check_weights(const WBMMOptions& o, const WBMMWeights& w) {
  if (o.mode == WBMMMode::kTable && !w.R)
    throw SpecError("lkjit: error: wbmm: R (C, K) must be a non-null device pointer in table mode");
  if (o.mode == WBMMMode::kDense && !w.M)
    throw SpecError("lkjit: error: wbmm: M (C, d, d) must be a non-null device pointer in dense mode");
  if (o.bias && !w.bias) throw SpecError("lkjit: error: wbmm: bias=true but bias is null");
}

void wbmm_check_gradients(const WBMMOptions& o, const WBMMGradients& g) {
  if (o.mode == WBMMMode::kTable && !g.R)
    throw SpecError("lkjit: error: wbmm backward: grads.R (C, K) must be a non-null device pointer in table mode");
  if (o.mode == WBMMMode::kDense && !g.M)
    throw SpecError("lkjit: error: wbmm backward: grads.M (C, d, d) must be a non-null device pointer in dense mode");
  if (o.bias && !g.bias) throw SpecError("lkjit: error: wbmm backward: bias=true but grads.bias is null");
}

void wbmm_check_activations(const void* x, const void* dout, const void* out, bool backward) {
  if (!backward && (!x || !out)) throw SpecError("lkjit: error: wbmm forward: x and out must be non-null device pointers");
  if (backward && (!x || !dout))
    throw SpecError("lkjit: error: wbmm backward: x and dout must be non-null device pointers (dx may be null: no dX)");
}

WBMMStrides wbmm_resolve_strides(const WBMMOptions& o, int64_t B, int64_t H, int64_t W, const WBMMStrides* s,
                                 bool backward, bool need_dx) {
  const Shape sh{B, o.C, H, W, 1};
  validate_shape(o, sh);
  const rt::Dims4 n{B, o.C, H, W};
  auto pick = [&](const rt::Dims4* given) { return given && *given != rt::Dims4{} ? *given : rt::dense_strides(o.layout, n); };
  WBMMStrides r;
  r.x = pick(s ? &s->x : nullptr);
  r.dout = pick(s ? &s->dout : nullptr);
  r.out = pick(s ? &s->out : nullptr);
  rt::check_strides("wbmm", "x", r.x, n, false);
  if (backward) rt::check_strides("wbmm", "dout", r.dout, n, false);
  if (!backward || need_dx) rt::check_strides("wbmm", backward ? "dx" : "out", r.out, n, true);
  return r;
}

namespace {

// 16-bit forward and dgrad kernels on sm_90 compile for sm_90a, whose tile space adds wgmma (engine 2).
OpSpec spec_of(const WBMMOptions& o, const Kernel& k, int arch, bool fuse_dx) {
  const bool tf32 = o.dtype == DType::kF32 && o.allow_tf32;
  OpSpec s = wbmm_spec(k, o.dtype, o.wh, o.ww, o.mode == WBMMMode::kDense ? 1 : 0, tf32 ? 1 : 0, o.identity ? 1 : 0,
                       o.bias ? 1 : 0, o.layout == Layout::kNHWC ? 1 : 0, fuse_dx ? 1 : 0, arch);
  s.arch_specific = arch == 90 && o.dtype != DType::kF32 && (k == kWBMMFwd || k == kWBMMDgrad);
  return s;
}

}  // namespace

std::vector<PlannedKernel> wbmm_plan(const WBMMOptions& o, const Shape& sh, const DeviceLimits& lim, bool backward,
                                     WBMMBackward path, bool need_dx) {
  wbmm_validate_options(o);
  validate_shape(o, sh);
  if (path != WBMMBackward::kAuto && path != WBMMBackward::kFused && path != WBMMBackward::kSplit)
    throw SpecError(fmt::format("lkjit: error: wbmm: backward path {} is out of range; supported: auto, fused, split",
                                static_cast<int>(path)));
  // Device traffic of a launch: what it must read and write of the activations (partials counted below).
  const double act = double(sh.numel()) * dtype_bytes(o.dtype);
  std::vector<PlannedKernel> plan;
  auto add = [&](const OpSpec& s, double bytes) {
    PlannedKernel pk{s, default_tile(s, sh, lim), sh};
    pk.bytes = bytes;
    plan.push_back(pk);
  };
  if (!backward) {
    add(spec_of(o, kWBMMFwd, lim.arch, false), 2 * act);
    return plan;
  }
  // kAuto fuses dX into the wgrad unless the dgrad kernel runs on wgmma (16-bit, sm_90a, d > 64) or the inputs
  // are fp32 with d > 144 on sm_90: there the split path is faster (H200, 64x256x56x56 14x14: bf16 0.847 ms
  // against 1.14 fused; fp32 3xTF32 2.20 against 3.32, TF32 1.58 against 1.79), the fused wgrad's dX product
  // taking registers and shared memory from its dM product. (Other archs and windows: not measured.)
  const OpSpec dgrad = spec_of(o, kWBMMDgrad, lim.arch, false);
  const bool split_wins = default_tile(dgrad, sh, lim).get("engine") == 2 ||
                          (o.dtype == DType::kF32 && lim.arch == 90 && wbmm_positions(o) > 144);
  const bool fused = need_dx && (path == WBMMBackward::kFused || (path == WBMMBackward::kAuto && !split_wins));
  if (need_dx && !fused) add(dgrad, 2 * act);
  add(spec_of(o, kWBMMWgrad, lim.arch, fused), (fused ? 3 : 2) * act);
  const auto g = launch_geometry(plan.back().spec, plan.back().tile, sh);
  const double partials = 4.0 * double(g.value("partial_floats") + g.value("partial_bias_floats"));
  plan.back().bytes += partials;
  const int nv = o.mode == WBMMMode::kTable ? wbmm_table_size(o) : wbmm_positions(o) * wbmm_positions(o);
  add(spec_of(o, kWBMMReduce, lim.arch, false), partials + 4.0 * double(o.C) * (nv + (o.bias ? 1 : 0)));
  return plan;
}

}  // namespace lkjit
