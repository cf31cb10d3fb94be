// The depthwise layer's pure parts (lkjit/dwconv.h): option, shape, pointer and stride checks, the padding
// and output extents of a call, and the planner. No CUDA calls: prewarm and the bindings use them with no GPU.
#include <fmt/format.h>

#include <utility>

#include "dwconv/geometry.cuh"
#include "lkjit/dwconv.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "runtime/strides.h"

namespace lkjit {
namespace {

constexpr int64_t kMaxExtent = int64_t(1) << 24;
constexpr int kMaxPad = 1000;

[[noreturn]] void fail(const std::string& what) { throw SpecError("lkjit: error: dwconv: " + what); }

NamedInts fields(const DWConvOptions& o) {
  return {{"kh", o.kh}, {"kw", o.kw}, {"stride", o.stride}, {"dil", o.dil}};
}

}  // namespace

void dwconv_check_options(const DWConvOptions& o) {
  if (o.C < 1 || o.C > kMaxExtent) fail(fmt::format("C={} is out of range; supported: [1, 2^24]", o.C));
  if (o.kh < 1 || o.kh > dwc::kMaxK) fail(fmt::format("kh={} is out of range; supported: [1, {}]", o.kh, int(dwc::kMaxK)));
  if (o.kw < 1 || o.kw > dwc::kMaxK) fail(fmt::format("kw={} is out of range; supported: [1, {}]", o.kw, int(dwc::kMaxK)));
  if (o.stride < 1 || o.stride > dwc::kMaxStride)
    fail(fmt::format("stride={} is out of range; supported: [1, {}]", o.stride, int(dwc::kMaxStride)));
  if (o.dil < 1 || o.dil > dwc::kMaxDil)
    fail(fmt::format("dilation={} is out of range; supported: [1, {}]", o.dil, int(dwc::kMaxDil)));
  if (o.pad_h < 0 || o.pad_h > kMaxPad) fail(fmt::format("pad_h={} is out of range; supported: [0, {}]", o.pad_h, kMaxPad));
  if (o.pad_w < 0 || o.pad_w > kMaxPad) fail(fmt::format("pad_w={} is out of range; supported: [0, {}]", o.pad_w, kMaxPad));
  if (o.same && o.stride != 1)
    fail(fmt::format("padding='same' with stride={}; supported: stride 1 (PyTorch's rule)", o.stride));
  if (o.same && (o.pad_h || o.pad_w))
    fail(fmt::format("padding='same' with explicit pad_h={} pad_w={}; supported: 0 and 0", o.pad_h, o.pad_w));
  if (o.device < 0) fail(fmt::format("device={} is out of range; supported: >= 0", o.device));
}

DWConvGeometry dwconv_geometry(const DWConvOptions& o, int64_t B, int64_t H, int64_t W) {
  dwconv_check_options(o);
  for (auto [name, v] : {std::pair<const char*, int64_t>{"B", B}, {"H", H}, {"W", W}})
    if (v < 1 || v > kMaxExtent) fail(fmt::format("{}={} is out of range; supported: [1, 2^24]", name, v));
  if (double(B) * double(o.C) * double(H) * double(W) >= double(int64_t(1) << 40))
    fail(fmt::format("B*C*H*W={} exceeds the supported 2^40 elements", B * o.C * H * W));
  DWConvGeometry g;
  if (o.same) {
    g.pad_top = dwc::same_pad_before(o.kh, o.dil), g.pad_bottom = dwc::same_pad_after(o.kh, o.dil);
    g.pad_left = dwc::same_pad_before(o.kw, o.dil), g.pad_right = dwc::same_pad_after(o.kw, o.dil);
  } else {
    g.pad_top = g.pad_bottom = o.pad_h;
    g.pad_left = g.pad_right = o.pad_w;
  }
  g.Ho = dwc::out_extent(H, o.kh, o.stride, o.dil, g.pad_top, g.pad_bottom);
  g.Wo = dwc::out_extent(W, o.kw, o.stride, o.dil, g.pad_left, g.pad_right);
  if (g.Ho < 1)
    fail(fmt::format("H={} with padding {}+{} is shorter than the dilated filter d*(kh-1)+1={}: no output; supported: "
                     "H + padding >= {}", H, g.pad_top, g.pad_bottom, o.dil * (o.kh - 1) + 1, o.dil * (o.kh - 1) + 1));
  if (g.Wo < 1)
    fail(fmt::format("W={} with padding {}+{} is narrower than the dilated filter d*(kw-1)+1={}: no output; supported: "
                     "W + padding >= {}", W, g.pad_left, g.pad_right, o.dil * (o.kw - 1) + 1, o.dil * (o.kw - 1) + 1));
  return g;
}

std::vector<PlannedKernel> dwconv_plan(const DWConvOptions& o, int64_t B, int64_t H, int64_t W, const DeviceLimits& lim,
                                       bool backward, Layout act, DWConvPath path) {
  const DWConvGeometry g = dwconv_geometry(o, B, H, W);
  const double es = dtype_bytes(o.dtype);
  const double in = double(B) * o.C * H * W * es, out = double(B) * o.C * g.Ho * g.Wo * es;
  const double params = double(o.C) * (int64_t(o.kh) * o.kw + (o.bias ? 1 : 0)) * 4;
  const Shape out_shape{B, o.C, g.Ho, g.Wo, 1}, in_shape{B, o.C, H, W, 1};
  auto entry = [&](const Kernel& k, const Shape& sh, double bytes) {
    PlannedKernel pk;
    // The reduction has no fields and fp32 partials: one binary for every dtype and filter size.
    pk.spec = k == kDWConvWgradReduce ? make_spec(k, DType::kF32, lim.arch) : make_spec(k, o.dtype, lim.arch, fields(o));
    pk.shape = sh;
    pk.tile = default_tile(pk.spec, sh, lim);
    pk.bytes = bytes;
    return pk;
  };
  const std::string no_mma = o.dtype == DType::kF32 ? "dtype=f32; supported: f16 and bf16"
                             : o.stride != 1        ? fmt::format("stride={}; supported: 1", o.stride)
                             : o.dil != 1           ? fmt::format("dilation={}; supported: 1", o.dil)
                             : lim.arch < 80        ? fmt::format("{}; supported: sm_80 and newer", arch_name(lim.arch))
                                                    : "";
  if (path == DWConvPath::kMma && !no_mma.empty()) fail("path=mma (tensor cores) cannot run " + no_mma);
  // kAuto: the tensor-core kernels where they run and the filter is large in both axes on maps of 14
  // and more (H200, bench_dwconv, 2026-12-02: 1.7-3.1x faster forwards at k = 27..31 on 14x14..56x56 maps, in
  // both layouts; at k = 7 no faster, and a 16x16 block tile on a 7x7 map is 81 % idle); else the NHWC kernels for
  // channels_last activations when their default tiles fit the device. kMma: its forward, dgrad and wgrad.
  const bool mma = path == DWConvPath::kMma ||
                   (path == DWConvPath::kAuto && no_mma.empty() && dwconv_mma_pays(o.kh, o.kw, g.Ho, g.Wo));
  bool nhwc = !mma && (path == DWConvPath::kNhwc || (path == DWConvPath::kAuto && act == Layout::kNHWC && o.C > 1));
  std::vector<PlannedKernel> plan;
  for (int attempt = 0; attempt < 2; ++attempt, nhwc = false) {
    plan.clear();
    if (!backward) {
      plan.push_back(entry(mma ? kDWConvFwdMma : nhwc ? kDWConvFwdNhwc : kDWConvFwdDirect, out_shape, in + out + params));
    } else {
      plan.push_back(entry(mma ? kDWConvDgradMma : nhwc ? kDWConvDgradNhwc : kDWConvDgradDirect, in_shape,
                           in + out + params));
      PlannedKernel wg = entry(mma ? kDWConvWgradMma : nhwc ? kDWConvWgradNhwc : kDWConvWgradDirect, out_shape, in + out);
      const double part = double(launch_geometry(wg.spec, wg.tile, wg.shape).value("partial_floats")) * 4;
      wg.bytes += part;
      plan.push_back(wg);
      plan.push_back(entry(kDWConvWgradReduce, Shape{1, o.C, int64_t(o.kh) * o.kw + 1, 1, 1}, part + params));
    }
    std::string why;
    for (const auto& pk : plan)
      if (auto r = reject_reason(pk.spec, pk.tile, lim, &pk.shape)) {
        why = fmt::format("{} for {}: {}", pk.spec.to_string(), pk.shape.to_string(), *r);
        break;
      }
    if (why.empty()) return plan;
    if (!nhwc || path == DWConvPath::kNhwc) fail(fmt::format("no tile of {} runs on {}", why, arch_name(lim.arch)));
  }
  return plan;
}

PassPaths dwconv_pass_paths(const DWConvOptions& o, int64_t B, int64_t H, int64_t W, const DeviceLimits& lim,
                            bool backward, Layout act) {
  const DWConvGeometry g = dwconv_geometry(o, B, H, W);
  PassPaths p;
  // Padding as "p<top>x<left>", or "p<top>-<bottom>x<left>-<right>" where a side differs ('same' with an even k).
  auto pad = [](int a, int b) { return a == b ? std::to_string(a) : fmt::format("{}-{}", a, b); };
  p.key = fmt::format("{}dwconv_{}_{}_{}_k{}x{}_s{}_d{}_p{}x{}{}_sm{}", kPassKeyPrefix, backward ? "bwd" : "fwd",
                      to_string(o.dtype), act == Layout::kNHWC ? "nhwc" : "nchw", o.kh, o.kw, o.stride, o.dil,
                      pad(g.pad_top, g.pad_bottom), pad(g.pad_left, g.pad_right), o.bias ? "_bias" : "", lim.arch);
  p.shape = Shape{B, o.C, H, W, o.stride};
  const DWConvPath first = dwconv_plan_path(dwconv_plan(o, B, H, W, lim, backward, act, DWConvPath::kAuto));
  p.options.push_back({int(first), to_string(first)});
  for (DWConvPath q : {DWConvPath::kDirect, DWConvPath::kNhwc, DWConvPath::kMma}) {
    // The NHWC kernels' vector loads along C are no gain on NCHW activations: not a candidate there.
    if (q == first || (q == DWConvPath::kNhwc && act != Layout::kNHWC)) continue;
    try {
      dwconv_plan(o, B, H, W, lim, backward, act, q);
      p.options.push_back({int(q), to_string(q)});
    } catch (const SpecError&) {  // cannot run here (f32 on tensor cores, NHWC filters beyond shared memory)
    }
  }
  return p;
}

bool dwconv_mma_pays(int kh, int kw, int64_t Ho, int64_t Wo) { return kh >= 13 && kw >= 13 && Ho >= 14 && Wo >= 14; }

DWConvPath dwconv_plan_path(const std::vector<PlannedKernel>& plan) {
  if (plan.empty()) return DWConvPath::kDirect;
  const Kernel& k = plan.front().spec.kernel;
  if (k == kDWConvFwdMma || k == kDWConvDgradMma) return DWConvPath::kMma;
  if (k == kDWConvFwdNhwc || k == kDWConvDgradNhwc) return DWConvPath::kNhwc;
  return DWConvPath::kDirect;
}

const char* to_string(DWConvPath p) {
  switch (p) {
    case DWConvPath::kAuto: return "auto";
    case DWConvPath::kDirect: return "direct";
    case DWConvPath::kNhwc: return "nhwc";
    case DWConvPath::kMma: return "mma";
  }
  return "?";
}

void dwconv_check_weights(const DWConvOptions& o, const float* w, const float* bias) {
  if (!w) fail("w is null; supported: a (C, 1, kh, kw) fp32 device pointer");
  if (o.bias && !bias) fail("bias is null but options.bias is set; supported: a (C) fp32 device pointer");
  if (!o.bias && bias) fail("bias is given but options.bias is not set; supported: null");
}

void dwconv_check_gradients(const DWConvOptions& o, const void* dx, const DWConvGradients& g) {
  if (!dx && !g.dw) fail("backward with neither dx nor dw; supported: at least one of them");
  if (g.dw && o.bias && !g.dbias) fail("dbias is null but options.bias is set; supported: a (C) fp32 device pointer");
  if (!o.bias && g.dbias) fail("dbias is given but options.bias is not set; supported: null");
  if (!g.dw && g.dbias) fail("dbias without dw; supported: both or neither");
}

void dwconv_check_activations(const void* x, const void* dout, const void* out, bool backward) {
  if (!x) fail("x is null; supported: a device pointer");
  if (backward && !dout) fail("dout is null; supported: a device pointer");
  if (!backward && !out) fail("y is null; supported: a device pointer");
}

DWConvStrides dwconv_resolve_strides(const DWConvOptions& o, int64_t B, int64_t H, int64_t W, const DWConvStrides* s,
                                     bool backward) {
  const DWConvGeometry g = dwconv_geometry(o, B, H, W);
  const rt::Dims4 n_in{B, o.C, H, W}, n_out{B, o.C, g.Ho, g.Wo};
  auto pick = [&](const std::array<int64_t, 4>* v, const rt::Dims4& n) {
    return v && *v != rt::Dims4{} ? *v : rt::dense_strides(o.layout, n);
  };
  DWConvStrides r;
  r.x = pick(s ? &s->x : nullptr, n_in);
  rt::check_strides("dwconv", "x", r.x, n_in, false);
  if (backward) {
    r.dout = pick(s ? &s->dout : nullptr, n_out);
    r.out = pick(s ? &s->out : nullptr, n_in);
    rt::check_strides("dwconv", "dout", r.dout, n_out, false);
    rt::check_strides("dwconv", "dx", r.out, n_in, true);
  } else {
    r.out = pick(s ? &s->out : nullptr, n_out);
    rt::check_strides("dwconv", "y", r.out, n_out, true);
  }
  return r;
}

}  // namespace lkjit
