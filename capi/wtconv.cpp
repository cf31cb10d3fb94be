// The WTConv layer's C ABI (include/lkjit/c_api_wtconv.h): thin entry points over lkjit::WTConv. Every
// argument is checked through WTConv's public checks before the layer's device is made current, so a bad one
// is a spec error with or without a GPU.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "capi/core.h"
#include "lkjit/c_api.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "lkjit/wtconv.h"

struct lkjit_wtconv : lkjit::capi::Handle<lkjit::WTConv> {
  using Handle::Handle;
};

namespace {

using lkjit::capi::copy_strides;
using lkjit::capi::dtype_of;
using lkjit::capi::guarded;
using lkjit::capi::keep_text;

void require_handle(const lkjit_wtconv* h, const char* fn) {
  if (!h) throw lkjit::SpecError(fmt::format("lkjit: error: {}: the layer handle is null", fn));
}

// WTConvWeights or WTConvGradients from the C arrays: L level pointers each (null arrays refused by name).
template <class Set, class P>
Set level_set(int L, P base_w, P base_b, P base_s, P const* level_w, P const* level_s, const char* where,
              const char* names) {
  if (L > 0 && (!level_w || !level_s))
    throw lkjit::SpecError(fmt::format("lkjit: error: {}: {} must hold L={} pointers, got null", where, names, L));
  Set set;
  set.base_w = base_w;
  set.base_b = base_b;
  set.base_s = base_s;
  for (int l = 0; l < L; ++l) {
    set.level_w[l] = level_w[l];
    set.level_s[l] = level_s[l];
  }
  return set;
}

}  // namespace

extern "C" {

int lkjit_wtconv_create(int64_t C, int k, int L, int dtype, int bias, int stride, int device, lkjit_wtconv** out) {
  return guarded([&] {
    if (!out) throw lkjit::SpecError("lkjit: error: lkjit_wtconv_create: out is null");
    *out = nullptr;
    lkjit::WTConvOptions o;
    o.C = C;
    o.k = k;
    o.L = L;
    o.dtype = dtype_of(dtype, "wtconv");
    o.bias = bias != 0;
    o.stride = stride;
    o.device = device;
    *out = new lkjit_wtconv(o);  // the WTConv constructor validates (SpecError)
  });
}

void lkjit_wtconv_destroy(lkjit_wtconv* h) {
  if (!h) return;
  // Frees device buffers on the layer's device; a failure to make it current is not reportable here.
  try {
    lkjit::set_current_device(h->layer.options().device);
  } catch (...) {
  }
  delete h;
}

int lkjit_wtconv_set_weights(lkjit_wtconv* h, const float* base_w, const float* base_b, const float* base_s,
                             const float* const* level_w, const float* const* level_s, void* stream) {
  return guarded([&] {
    require_handle(h, "lkjit_wtconv_set_weights");
    std::lock_guard<std::mutex> lock(h->mu);
    const auto& o = h->layer.options();
    const auto w = level_set<lkjit::WTConvWeights>(o.L, base_w, base_b, base_s, level_w, level_s, "wtconv",
                                                   "level_w and level_s");
    lkjit::wtconv_check_weights(o, w);
    lkjit::set_current_device(o.device);
    h->layer.set_weights(w, stream);
  });
}

int lkjit_wtconv_forward(lkjit_wtconv* h, const void* x, void* out, int64_t B, int64_t H, int64_t W, void* stream) {
  return lkjit_wtconv_forward_strided(h, x, nullptr, out, nullptr, B, H, W, stream);
}

int lkjit_wtconv_forward_strided(lkjit_wtconv* h, const void* x, const int64_t* x_strides, void* out,
                                 const int64_t* out_strides, int64_t B, int64_t H, int64_t W, void* stream) {
  return guarded([&] {
    require_handle(h, "lkjit_wtconv_forward");
    std::lock_guard<std::mutex> lock(h->mu);
    const auto& o = h->layer.options();
    lkjit::wtconv_check_activations(x, nullptr, out, false);
    lkjit::WTConvStrides st;
    copy_strides(st.x, x_strides);
    copy_strides(st.out, out_strides);
    lkjit::wtconv_resolve_strides(o, B, H, W, &st, false);  // before the driver
    lkjit::set_current_device(o.device);
    h->layer.forward(x, out, B, H, W, stream, &st);
  });
}

int lkjit_wtconv_backward(lkjit_wtconv* h, const void* x, const void* dout, void* dx, float* grad_base_w,
                          float* grad_base_b, float* grad_base_s, float* const* grad_level_w,
                          float* const* grad_level_s, int64_t B, int64_t H, int64_t W, void* stream) {
  return lkjit_wtconv_backward_strided(h, x, nullptr, dout, nullptr, dx, nullptr, grad_base_w, grad_base_b,
                                       grad_base_s, grad_level_w, grad_level_s, B, H, W, stream);
}

int lkjit_wtconv_backward_strided(lkjit_wtconv* h, const void* x, const int64_t* x_strides, const void* dout,
                                  const int64_t* dout_strides, void* dx, const int64_t* dx_strides,
                                  float* grad_base_w, float* grad_base_b, float* grad_base_s,
                                  float* const* grad_level_w, float* const* grad_level_s, int64_t B, int64_t H,
                                  int64_t W, void* stream) {
  return lkjit_wtconv_backward_flags(h, x, x_strides, dout, dout_strides, dx, dx_strides, grad_base_w, grad_base_b,
                                     grad_base_s, grad_level_w, grad_level_s, B, H, W, 0u, stream);
}

int lkjit_wtconv_backward_flags(lkjit_wtconv* h, const void* x, const int64_t* x_strides, const void* dout,
                                const int64_t* dout_strides, void* dx, const int64_t* dx_strides, float* grad_base_w,
                                float* grad_base_b, float* grad_base_s, float* const* grad_level_w,
                                float* const* grad_level_s, int64_t B, int64_t H, int64_t W, unsigned flags,
                                void* stream) {
  return guarded([&] {
    require_handle(h, "lkjit_wtconv_backward");
    if (flags & ~unsigned(LKJIT_BACKWARD_REUSE_FORWARD_FOLD))
      throw lkjit::SpecError(fmt::format("lkjit: error: wtconv backward: flags={:#x} has unknown bits; supported: "
                                         "0 or LKJIT_BACKWARD_REUSE_FORWARD_FOLD ({:#x})",
                                         flags, unsigned(LKJIT_BACKWARD_REUSE_FORWARD_FOLD)));
    std::lock_guard<std::mutex> lock(h->mu);
    const auto& o = h->layer.options();
    lkjit::wtconv_check_activations(x, dout, dx, true);
    const auto g = level_set<lkjit::WTConvGradients>(o.L, grad_base_w, grad_base_b, grad_base_s, grad_level_w,
                                                     grad_level_s, "wtconv backward", "grad_level_w and grad_level_s");
    lkjit::wtconv_check_gradients(o, g);
    lkjit::WTConvStrides st;
    copy_strides(st.x, x_strides);
    copy_strides(st.dout, dout_strides);
    copy_strides(st.out, dx_strides);
    lkjit::wtconv_resolve_strides(o, B, H, W, &st, true);  // before the driver
    lkjit::set_current_device(o.device);
    h->layer.backward(x, dout, dx, g, B, H, W, stream, &st, (flags & LKJIT_BACKWARD_REUSE_FORWARD_FOLD) != 0);
  });
}

int lkjit_wtconv_prepare(lkjit_wtconv* h, int64_t B, int64_t H, int64_t W, int backward) {
  return guarded([&] {
    require_handle(h, "lkjit_wtconv_prepare");
    std::lock_guard<std::mutex> lock(h->mu);
    lkjit::set_current_device(h->layer.options().device);
    h->layer.prepare(B, H, W, backward != 0);
  });
}

int lkjit_wtconv_runs_lane(lkjit_wtconv* h, int64_t B, int64_t H, int64_t W, int backward, int* lane) {
  return guarded([&] {
    require_handle(h, "lkjit_wtconv_runs_lane");
    if (!lane) throw lkjit::SpecError("lkjit: error: lkjit_wtconv_runs_lane: lane is null");
    std::lock_guard<std::mutex> lock(h->mu);
    *lane = h->layer.runs_lane(B, H, W, backward != 0) ? 1 : 0;
  });
}

int lkjit_wtconv_describe(lkjit_wtconv* h, int64_t B, int64_t H, int64_t W, int backward, int arch,
                          const char** text) {
  return guarded([&] {
    require_handle(h, "lkjit_wtconv_describe");
    if (!text) throw lkjit::SpecError("lkjit: error: lkjit_wtconv_describe: text is null");
    std::lock_guard<std::mutex> lock(h->mu);
    std::vector<lkjit::PlannedKernel> plan;
    if (arch == 0) {
      plan = h->layer.plan(B, H, W, backward != 0);
    } else {
      const auto& o = h->layer.options();
      // The layer's own shape check first, through a plan call that needs no device.
      if (B < 1 || H < 1 || W < 1)
        throw lkjit::SpecError(fmt::format("lkjit: error: wtconv: shape B={} H={} W={} is out of range; supported: >= 1 each", B, H, W));
      plan = lkjit::wtconv_plan(o, lkjit::Shape{B, o.C, H, W, o.stride}, lkjit::DeviceLimits::for_arch(arch),
                                backward != 0);
    }
    std::string s;
    for (const auto& pk : plan) {
      s += fmt::format("{} tile={} shape={}", lkjit::kernel_name(pk.spec, pk.tile), pk.tile.to_string(),
                       pk.shape.to_string());
      if (pk.level > 0) s += fmt::format(" level={}", pk.level);
      s += '\n';
    }
    *text = keep_text(std::move(s));
  });
}

int lkjit_wtconv_workspace_bytes(lkjit_wtconv* h, uint64_t* bytes) {
  return guarded([&] {
    require_handle(h, "lkjit_wtconv_workspace_bytes");
    if (!bytes) throw lkjit::SpecError("lkjit: error: lkjit_wtconv_workspace_bytes: bytes is null");
    std::lock_guard<std::mutex> lock(h->mu);
    *bytes = h->layer.workspace_bytes();
  });
}

int lkjit_wtconv_transpose(const void* src, const int64_t* src_strides, void* dst, const int64_t* dst_strides,
                           int dtype, int64_t B, int64_t C, int64_t H, int64_t W, int device, void* stream) {
  return guarded([&] {
    const lkjit::DType dt = dtype_of(dtype, "wtconv");
    if (!src_strides || !dst_strides)
      throw lkjit::SpecError("lkjit: error: wtconv_transpose: src_strides and dst_strides must hold 4 strides, got null");
    if (device < 0) throw lkjit::SpecError(fmt::format("lkjit: error: wtconv_transpose: device={} is out of range; supported: >= 0", device));
    std::array<int64_t, 4> ss{}, ds{};
    copy_strides(ss, src_strides);
    copy_strides(ds, dst_strides);
    lkjit::wtconv_transpose(src, ss, dst, ds, dt, B, C, H, W, device, stream);  // checks before the driver
  });
}

}  // extern "C"

// ---- the bindings' tensor checks ------------------------------------------------------------------------
namespace {

using lkjit::capi::fail_check;

void check_wtconv_tensors(const std::string& w, int64_t C, int stride, const lkjit_tensor_desc& x,
                          const lkjit_tensor_desc* g, const lkjit_tensor_desc* params, int n_params, int n_lw,
                          int n_ls, bool bias, unsigned flags) {
  if (n_lw != n_ls)
    fail_check(false, fmt::format("{}: level_w has {} tensors and level_s {}; they must match", w, n_lw, n_ls));
  C = lkjit::capi::check_input(w, x, C, flags);
  const int64_t B = x.sizes[0], H = x.sizes[2], W = x.sizes[3];
  if (g) lkjit::capi::check_shape(w, "grad_out", *g, {B, C, (H + stride - 1) / stride, (W + stride - 1) / stride});
  const int L = n_lw;
  if (n_params != 2 + 2 * L + (bias ? 1 : 0))
    fail_check(false, fmt::format("{}: {} parameter tensors for L={}{}; expected {}", w, n_params, L,
                                  bias ? " with bias" : "", 2 + 2 * L + (bias ? 1 : 0)));
  lkjit::capi::check_params_like(w, x, params, n_params);
  const int64_t k = params[0].dim > 0 ? params[0].sizes[params[0].dim - 1] : 0;
  const std::string for_what = fmt::format("for C={}, k={}", C, k);
  lkjit::capi::check_param_shape(w, "base_w", params[0], {C, 1, k, k}, for_what);
  lkjit::capi::check_param_shape(w, "base_s", params[1], {1, C, 1, 1}, for_what);
  if (bias) lkjit::capi::check_param_shape(w, "base_b", params[2 + 2 * L], {C}, for_what);
  for (int l = 0; l < L; ++l) {
    lkjit::capi::check_param_shape(w, fmt::format("level_w[{}]", l), params[2 + l], {4 * C, 1, k, k}, for_what);
    lkjit::capi::check_param_shape(w, fmt::format("level_s[{}]", l), params[2 + L + l], {1, 4 * C, 1, 1}, for_what);
  }
}

}  // namespace

extern "C" {

int lkjit_wtconv_check_tensors(const char* where, int64_t C, int stride, const lkjit_tensor_desc* x,
                               const lkjit_tensor_desc* grad_out, const lkjit_tensor_desc* params, int n_params,
                               int n_level_w, int n_level_s, int has_bias, unsigned flags, int* type_error) {
  return lkjit::capi::guarded_check(type_error, [&] {
    if (!where || !x || (n_params > 0 && !params) || n_params < 1 || stride < 1)
      throw lkjit::SpecError(fmt::format("lkjit: error: lkjit_wtconv_check_tensors: where, x and params must be "
                                         "non-null, n_params >= 1 and stride >= 1; got n_params={} stride={}",
                                         n_params, stride));
    if (flags & ~unsigned(LKJIT_CHECK_ALLOW_CPU))
      throw lkjit::SpecError(fmt::format("lkjit: error: lkjit_wtconv_check_tensors: flags={:#x} has unknown bits", flags));
    check_wtconv_tensors(where, C, stride, *x, grad_out, params, n_params, n_level_w, n_level_s, has_bias != 0, flags);
  });
}

}  // extern "C"
