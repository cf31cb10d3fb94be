// The WBMM layer's C ABI (include/lkjit/c_api_wbmm.h): thin entry points over lkjit::WBMM. Every argument is
// checked through WBMM's public checks before the layer's device is made current, so a bad one is a spec
// error with or without a GPU.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "capi/core.h"
#include "lkjit/c_api.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "lkjit/wbmm.h"

struct lkjit_wbmm : lkjit::capi::Handle<lkjit::WBMM> {
  using Handle::Handle;
};

namespace {

using lkjit::SpecError;
using lkjit::capi::copy_strides;
using lkjit::capi::guarded;
using lkjit::capi::require;

constexpr unsigned kFlags = LKJIT_WBMM_IDENTITY | LKJIT_WBMM_BIAS | LKJIT_WBMM_ALLOW_TF32;

lkjit::WBMMMode mode_of(int mode, const char* where) {
  if (mode == LKJIT_WBMM_TABLE) return lkjit::WBMMMode::kTable;
  if (mode == LKJIT_WBMM_DENSE) return lkjit::WBMMMode::kDense;
  throw SpecError(fmt::format("lkjit: error: {}: mode={} is out of range; supported: 0 (LKJIT_WBMM_TABLE), "
                              "1 (LKJIT_WBMM_DENSE)", where, mode));
}

lkjit::WBMMStrides strides_of(const int64_t* x, const int64_t* dout, const int64_t* out) {
  lkjit::WBMMStrides st;
  copy_strides(st.x, x);
  copy_strides(st.dout, dout);
  copy_strides(st.out, out);
  return st;
}

}  // namespace

extern "C" {

int lkjit_wbmm_create(int64_t C, int wh, int ww, int mode, int dtype, unsigned flags, int device, lkjit_wbmm** out) {
  return guarded([&] {
    require(out, "lkjit_wbmm_create", "out");
    *out = nullptr;
    if (flags & ~kFlags)
      throw SpecError(fmt::format("lkjit: error: wbmm: flags={:#x} has unknown bits; supported: LKJIT_WBMM_IDENTITY, "
                                  "LKJIT_WBMM_BIAS, LKJIT_WBMM_ALLOW_TF32 ({:#x})", flags, kFlags));
    lkjit::WBMMOptions o;
    o.C = C;
    o.wh = wh;
    o.ww = ww;
    o.mode = mode_of(mode, "wbmm");
    o.dtype = lkjit::capi::dtype_of(dtype, "wbmm");
    o.identity = (flags & LKJIT_WBMM_IDENTITY) != 0;
    o.bias = (flags & LKJIT_WBMM_BIAS) != 0;
    o.allow_tf32 = (flags & LKJIT_WBMM_ALLOW_TF32) != 0;
    o.device = device;
    *out = new lkjit_wbmm(o);  // the WBMM constructor validates (SpecError)
  });
}

void lkjit_wbmm_destroy(lkjit_wbmm* h) {
  if (!h) return;
  // Frees device buffers on the layer's device; a failure to make it current is not reportable here.
  try {
    lkjit::set_current_device(h->layer.options().device);
  } catch (...) {
  }
  delete h;
}

int lkjit_wbmm_set_weights(lkjit_wbmm* h, const float* R, const float* M, const float* bias) {
  return guarded([&] {
    require(h, "lkjit_wbmm_set_weights", "the layer handle");
    std::lock_guard<std::mutex> lock(h->mu);
    lkjit::WBMMWeights w;
    w.R = R, w.M = M, w.bias = bias;
    lkjit::wbmm_check_weights(h->layer.options(), w);
    h->layer.set_weights(w);  // keeps the pointers; touches no device
  });
}

int lkjit_wbmm_forward(lkjit_wbmm* h, const void* x, const int64_t* x_strides, void* out, const int64_t* out_strides,
                       int64_t B, int64_t H, int64_t W, void* stream) {
  return guarded([&] {
    require(h, "lkjit_wbmm_forward", "the layer handle");
    std::lock_guard<std::mutex> lock(h->mu);
    const auto& o = h->layer.options();
    lkjit::wbmm_check_activations(x, nullptr, out, false);
    const auto st = strides_of(x_strides, nullptr, out_strides);
    lkjit::wbmm_resolve_strides(o, B, H, W, &st, false);  // before the driver
    lkjit::set_current_device(o.device);
    h->layer.forward(x, out, B, H, W, stream, &st);
  });
}

int lkjit_wbmm_backward(lkjit_wbmm* h, const void* x, const int64_t* x_strides, const void* dout,
                        const int64_t* dout_strides, void* dx, const int64_t* dx_strides, float* grad_R, float* grad_M,
                        float* grad_bias, int64_t B, int64_t H, int64_t W, void* stream) {
  return guarded([&] {
    require(h, "lkjit_wbmm_backward", "the layer handle");
    std::lock_guard<std::mutex> lock(h->mu);
    const auto& o = h->layer.options();
    lkjit::wbmm_check_activations(x, dout, dx, true);
    lkjit::WBMMGradients g;
    g.R = grad_R, g.M = grad_M, g.bias = grad_bias;
    lkjit::wbmm_check_gradients(o, g);
    const auto st = strides_of(x_strides, dout_strides, dx_strides);
    lkjit::wbmm_resolve_strides(o, B, H, W, &st, true, dx != nullptr);  // before the driver
    lkjit::set_current_device(o.device);
    h->layer.backward(x, dout, dx, g, B, H, W, stream, &st);
  });
}

int lkjit_wbmm_set_backward_path(lkjit_wbmm* h, int path) {
  return guarded([&] {
    require(h, "lkjit_wbmm_set_backward_path", "the layer handle");
    std::lock_guard<std::mutex> lock(h->mu);
    h->layer.set_backward_path(static_cast<lkjit::WBMMBackward>(path));  // refuses other values by name
  });
}

int lkjit_wbmm_prepare(lkjit_wbmm* h, int64_t B, int64_t H, int64_t W, int backward) {
  return guarded([&] {
    require(h, "lkjit_wbmm_prepare", "the layer handle");
    std::lock_guard<std::mutex> lock(h->mu);
    lkjit::set_current_device(h->layer.options().device);
    h->layer.prepare(B, H, W, backward != 0);
  });
}

int lkjit_wbmm_describe(lkjit_wbmm* h, int64_t B, int64_t H, int64_t W, int backward, int arch, const char** text) {
  return guarded([&] {
    require(h, "lkjit_wbmm_describe", "the layer handle");
    require(text, "lkjit_wbmm_describe", "text");
    std::lock_guard<std::mutex> lock(h->mu);
    const auto& o = h->layer.options();
    // wbmm_plan checks the shape (B, H, W ranges) before it plans; arch 0 plans for the layer's device.
    const auto plan = arch == 0 ? h->layer.plan(B, H, W, backward != 0)
                                : lkjit::wbmm_plan(o, lkjit::Shape{B, o.C, H, W, 1}, lkjit::DeviceLimits::for_arch(arch),
                                                   backward != 0);
    std::string s;
    for (const auto& pk : plan)
      s += fmt::format("{} tile={} shape={}\n", lkjit::kernel_name(pk.spec, pk.tile), pk.tile.to_string(),
                       pk.shape.to_string());
    *text = lkjit::capi::keep_text(std::move(s));
  });
}

int lkjit_wbmm_workspace_bytes(lkjit_wbmm* h, uint64_t* bytes) {
  return guarded([&] {
    require(h, "lkjit_wbmm_workspace_bytes", "the layer handle");
    require(bytes, "lkjit_wbmm_workspace_bytes", "bytes");
    std::lock_guard<std::mutex> lock(h->mu);
    *bytes = h->layer.workspace_bytes();
  });
}

int lkjit_wbmm_check_tensors(const char* where, int64_t C, int wh, int ww, int mode, const lkjit_tensor_desc* x,
                             const lkjit_tensor_desc* grad_out, const lkjit_tensor_desc* params, int n_params,
                             int has_bias, unsigned flags, int* type_error) {
  return lkjit::capi::guarded_check(type_error, [&] {
    if (!where || !x || !params || n_params != 1 + (has_bias != 0))
      throw SpecError(fmt::format("lkjit: error: lkjit_wbmm_check_tensors: where, x and params must be non-null and "
                                  "n_params = 1 + has_bias; got n_params={} has_bias={}", n_params, has_bias));
    if (flags & ~unsigned(LKJIT_CHECK_ALLOW_CPU))
      throw SpecError(fmt::format("lkjit: error: lkjit_wbmm_check_tensors: flags={:#x} has unknown bits", flags));
    for (const auto& [name, v] : {std::pair<const char*, int>{"wh", wh}, {"ww", ww}})
      if (v < 1 || v > 16)
        throw SpecError(fmt::format("lkjit: error: lkjit_wbmm_check_tensors: {}={} is out of range; supported: [1, 16]",
                                    name, v));
    const bool dense = mode_of(mode, "lkjit_wbmm_check_tensors") == lkjit::WBMMMode::kDense;
    const std::string w = where;
    C = lkjit::capi::check_input(w, *x, C, flags);
    if (grad_out) lkjit::capi::check_shape(w, "grad_out", *grad_out, {x->sizes, x->sizes + 4});
    lkjit::capi::check_params_like(w, *x, params, n_params);
    const int64_t d = int64_t(wh) * ww, K = int64_t(2 * wh - 1) * (2 * ww - 1);
    if (dense)
      lkjit::capi::check_shape(w, "M", params[0], {C, d, d});
    else
      lkjit::capi::check_shape(w, "relative_position_bias_table", params[0], {C, K});
    if (has_bias) lkjit::capi::check_shape(w, "bias", params[1], {C});
  });
}

}  // extern "C"
