// The depthwise family's C ABI (include/lkjit/c_api_dwconv.h): thin entry points over lkjit::DepthwiseConv.
#include <fmt/format.h>

#include "capi/core.h"
#include "lkjit/c_api.h"
#include "lkjit/dwconv.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"

struct lkjit_dwconv : lkjit::capi::Handle<lkjit::DepthwiseConv> {
  using Handle::Handle;
};

using lkjit::capi::guarded;

namespace {

void require_handle(const lkjit_dwconv* h, const char* fn) { lkjit::capi::require(h, fn, "the layer handle"); }

void require_weights(const lkjit_dwconv* h, const char* what) {
  if (!h->layer.has_weights())
    throw lkjit::SpecError(fmt::format("lkjit: error: dwconv: {} before set_weights; supported: set_weights first", what));
}

lkjit::DWConvStrides strides_of(const int64_t* x, const int64_t* dout, const int64_t* out) {
  lkjit::DWConvStrides s;
  lkjit::capi::copy_strides(s.x, x);
  lkjit::capi::copy_strides(s.dout, dout);
  lkjit::capi::copy_strides(s.out, out);
  return s;
}

}  // namespace

extern "C" {

int lkjit_dwconv_create(int64_t C, int kh, int kw, int stride, int dil, int pad_h, int pad_w, int same, int dtype,
                        int bias, int layout, int device, lkjit_dwconv** out) {
  return guarded([&] {
    lkjit::capi::require(out, "lkjit_dwconv_create", "out");
    *out = nullptr;
    if (layout != LKJIT_LAYOUT_NCHW && layout != LKJIT_LAYOUT_NHWC)
      throw lkjit::SpecError(fmt::format("lkjit: error: dwconv: layout={} is not supported; supported: {} (NCHW), {} (NHWC)",
                                         layout, int(LKJIT_LAYOUT_NCHW), int(LKJIT_LAYOUT_NHWC)));
    lkjit::DWConvOptions o;
    o.C = C, o.kh = kh, o.kw = kw, o.stride = stride, o.dil = dil, o.pad_h = pad_h, o.pad_w = pad_w;
    o.same = same != 0;
    o.dtype = lkjit::capi::dtype_of(dtype, "dwconv");
    o.bias = bias != 0;
    o.layout = layout == LKJIT_LAYOUT_NHWC ? lkjit::Layout::kNHWC : lkjit::Layout::kNCHW;
    o.device = device;
    *out = new lkjit_dwconv(o);
  });
}

void lkjit_dwconv_destroy(lkjit_dwconv* h) { delete h; }

int lkjit_dwconv_set_weights(lkjit_dwconv* h, const float* w, const float* bias) {
  return guarded([&] {
    require_handle(h, "lkjit_dwconv_set_weights");
    std::lock_guard<std::mutex> lock(h->mu);
    h->layer.set_weights(w, bias);
  });
}

int lkjit_dwconv_output_size(lkjit_dwconv* h, int64_t H, int64_t W, int64_t* Ho, int64_t* Wo) {
  return guarded([&] {
    require_handle(h, "lkjit_dwconv_output_size");
    lkjit::capi::require(Ho, "lkjit_dwconv_output_size", "Ho");
    lkjit::capi::require(Wo, "lkjit_dwconv_output_size", "Wo");
    const auto g = lkjit::dwconv_geometry(h->layer.options(), 1, H, W);
    *Ho = g.Ho, *Wo = g.Wo;
  });
}

int lkjit_dwconv_forward(lkjit_dwconv* h, const void* x, const int64_t* x_strides, void* y, const int64_t* y_strides,
                         int64_t B, int64_t H, int64_t W, void* stream) {
  return guarded([&] {
    require_handle(h, "lkjit_dwconv_forward");
    std::lock_guard<std::mutex> lock(h->mu);
    const auto st = strides_of(x_strides, nullptr, y_strides);
    // Every check before the device is touched: a bad call fails the same with no GPU.
    lkjit::dwconv_check_activations(x, nullptr, y, false);
    require_weights(h, "forward");
    lkjit::dwconv_resolve_strides(h->layer.options(), B, H, W, &st, false);
    lkjit::set_current_device(h->layer.options().device);
    h->layer.forward(x, y, B, H, W, stream, &st);
  });
}

int lkjit_dwconv_backward(lkjit_dwconv* h, const void* x, const int64_t* x_strides, const void* dout,
                          const int64_t* dout_strides, void* dx, const int64_t* dx_strides, float* dw, float* dbias,
                          int64_t B, int64_t H, int64_t W, void* stream) {
  return guarded([&] {
    require_handle(h, "lkjit_dwconv_backward");
    std::lock_guard<std::mutex> lock(h->mu);
    const auto st = strides_of(x_strides, dout_strides, dx_strides);
    lkjit::DWConvGradients g;
    g.dw = dw, g.dbias = dbias;
    lkjit::dwconv_check_activations(x, dout, dx, true);
    lkjit::dwconv_check_gradients(h->layer.options(), dx, g);
    require_weights(h, "backward");
    lkjit::dwconv_resolve_strides(h->layer.options(), B, H, W, &st, true);
    lkjit::set_current_device(h->layer.options().device);
    h->layer.backward(x, dout, dx, g, B, H, W, stream, &st);
  });
}

int lkjit_dwconv_prepare(lkjit_dwconv* h, int64_t B, int64_t H, int64_t W, int backward) {
  return guarded([&] {
    require_handle(h, "lkjit_dwconv_prepare");
    std::lock_guard<std::mutex> lock(h->mu);
    lkjit::dwconv_geometry(h->layer.options(), B, H, W);
    lkjit::set_current_device(h->layer.options().device);
    h->layer.prepare(B, H, W, backward != 0);
  });
}

int lkjit_dwconv_describe(lkjit_dwconv* h, int64_t B, int64_t H, int64_t W, int backward, int arch, const char** text) {
  return guarded([&] {
    require_handle(h, "lkjit_dwconv_describe");
    lkjit::capi::require(text, "lkjit_dwconv_describe", "text");
    std::lock_guard<std::mutex> lock(h->mu);
    const auto& o = h->layer.options();
    const auto plan = arch == 0 ? h->layer.plan(B, H, W, backward != 0)
                                : lkjit::dwconv_plan(o, B, H, W, lkjit::DeviceLimits::for_arch(arch), backward != 0,
                                                     o.layout);
    std::string s;
    for (const auto& pk : plan)
      s += fmt::format("{} tile={} shape={}\n", lkjit::kernel_name(pk.spec, pk.tile), pk.tile.to_string(),
                       pk.shape.to_string());
    s += fmt::format("path={}\n", lkjit::to_string(lkjit::dwconv_plan_path(plan)));
    *text = lkjit::capi::keep_text(std::move(s));
  });
}

int lkjit_dwconv_workspace_bytes(lkjit_dwconv* h, uint64_t* bytes) {
  return guarded([&] {
    require_handle(h, "lkjit_dwconv_workspace_bytes");
    lkjit::capi::require(bytes, "lkjit_dwconv_workspace_bytes", "bytes");
    std::lock_guard<std::mutex> lock(h->mu);
    *bytes = h->layer.workspace_bytes();
  });
}

int lkjit_dwconv_check_tensors(const char* where, int64_t C, int kh, int kw, int stride, int dil, int pad_h, int pad_w,
                               int same, const lkjit_tensor_desc* x, const lkjit_tensor_desc* grad_out,
                               const lkjit_tensor_desc* weight, const lkjit_tensor_desc* bias, unsigned flags,
                               int* type_error) {
  return lkjit::capi::guarded_check(type_error, [&] {
    if (!where || !x || !weight)
      throw lkjit::SpecError("lkjit: error: lkjit_dwconv_check_tensors: where, x and weight must be non-null");
    if (flags & ~unsigned(LKJIT_CHECK_ALLOW_CPU))
      throw lkjit::SpecError(fmt::format("lkjit: error: lkjit_dwconv_check_tensors: flags={:#x} has unknown bits", flags));
    const std::string w = where;
    const int64_t c = lkjit::capi::check_input(w, *x, C, flags);
    lkjit::DWConvOptions o;
    o.C = c, o.kh = kh, o.kw = kw, o.stride = stride, o.dil = dil, o.pad_h = pad_h, o.pad_w = pad_w, o.same = same != 0;
    lkjit::DWConvGeometry g;
    try {
      g = lkjit::dwconv_geometry(o, x->sizes[0], x->sizes[2], x->sizes[3]);
    } catch (const lkjit::SpecError& e) {
      std::string m = e.what();
      const std::string prefix = "lkjit: error: dwconv: ";
      if (m.rfind(prefix, 0) == 0) m = m.substr(prefix.size());
      lkjit::capi::fail_check(false, fmt::format("{}: input of shape {}: {}", w,
                                                 lkjit::capi::shape_tuple(x->sizes, x->dim), m));
    }
    if (grad_out) lkjit::capi::check_shape(w, "grad_output", *grad_out, {x->sizes[0], c, g.Ho, g.Wo});
    lkjit::capi::check_params_like(w, *x, weight, 1);
    const std::string for_what = fmt::format("for channels={}, kernel_size=({}, {})", c, kh, kw);
    lkjit::capi::check_param_shape(w, "weight", *weight, {c, 1, kh, kw}, for_what);
    if (bias) {
      lkjit::capi::check_params_like(w, *x, bias, 1);
      lkjit::capi::check_param_shape(w, "bias", *bias, {c}, for_what);
    }
  });
}

}  // extern "C"
