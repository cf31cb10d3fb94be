// The C ABI (include/lkjit/c_api.h) over lkjit::WTConv: every entry catches, stores the message in a
// thread-local string and returns the ErrorCode; nothing throws across the boundary. Arguments are
// checked before the device is made current, so a bad one is a spec error with or without a GPU.
#include "lkjit/c_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "lkjit/version.h"
#include "lkjit/wtconv.h"
#include "runtime/driver.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_loader.h"
#include "runtime/ops/wtconv_internal.h"

struct lkjit_wtconv {
  explicit lkjit_wtconv(const lkjit::WTConvOptions& o) : layer(o) {}
  lkjit::WTConv layer;
  std::mutex mu;
};

namespace {

thread_local std::string t_error;
thread_local std::string t_text;

template <class F>
int guarded(F&& f) {
  try {
    f();
    t_error.clear();
    return LKJIT_OK;
  } catch (const lkjit::Error& e) {
    t_error = e.what();
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    t_error = "lkjit: error: out of host memory";
    return LKJIT_E_INTERNAL;
  } catch (const std::exception& e) {
    t_error = fmt::format("lkjit: error: internal: {}", e.what());
    return LKJIT_E_INTERNAL;
  } catch (...) {
    t_error = "lkjit: error: internal: unknown exception";
    return LKJIT_E_INTERNAL;
  }
}

void require_handle(const lkjit_wtconv* h, const char* fn) {
  if (!h) throw lkjit::SpecError(fmt::format("lkjit: error: {}: the layer handle is null", fn));
}

lkjit::DType dtype_of(int d) {
  switch (d) {
    case LKJIT_DTYPE_F32: return lkjit::DType::kF32;
    case LKJIT_DTYPE_F16: return lkjit::DType::kF16;
    case LKJIT_DTYPE_BF16: return lkjit::DType::kBF16;
    default:
      throw lkjit::SpecError(fmt::format(
          "lkjit: error: wtconv: dtype={} is out of range; supported: 0 (f32), 1 (f16), 2 (bf16)", d));
  }
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

// WTConvStrides from the C arrays (null = all zero = the layer's default, NCHW contiguous).
void copy_strides(std::array<int64_t, 4>& dst, const int64_t* src) {
  if (src) std::copy(src, src + 4, dst.begin());
}

}  // namespace

extern "C" {

const char* lkjit_version(void) { return LKJIT_VERSION; }
int lkjit_c_api_version(void) { return LKJIT_C_API_VERSION; }
const char* lkjit_last_error(void) { return t_error.c_str(); }

int lkjit_gpu_available(const char** why) {
  bool ok = false;
  std::string reason;
  const int rc = guarded([&] { ok = lkjit::gpu_available(&reason); });
  if (rc != LKJIT_OK) reason = t_error;
  t_text = ok ? std::string() : reason;
  if (why) *why = t_text.c_str();
  return ok ? 1 : 0;
}

int lkjit_wtconv_create(int64_t C, int k, int L, int dtype, int bias, int stride, int device, lkjit_wtconv** out) {
  return guarded([&] {
    if (!out) throw lkjit::SpecError("lkjit: error: lkjit_wtconv_create: out is null");
    *out = nullptr;
    lkjit::WTConvOptions o;
    o.C = C;
    o.k = k;
    o.L = L;
    o.dtype = dtype_of(dtype);
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
    lkjit::rt::make_current(h->layer.options().device);
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
    lkjit::detail::check_weights(o, w);
    lkjit::rt::make_current(o.device);
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
    lkjit::detail::check_activations(x, nullptr, out, false);
    lkjit::WTConvStrides st;
    copy_strides(st.x, x_strides);
    copy_strides(st.out, out_strides);
    lkjit::detail::resolve_strides(o, lkjit::Shape{B, o.C, H, W, o.stride}, &st, false);  // before the driver
    lkjit::rt::make_current(o.device);
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
    lkjit::detail::check_activations(x, dout, dx, true);
    const auto g = level_set<lkjit::WTConvGradients>(o.L, grad_base_w, grad_base_b, grad_base_s, grad_level_w,
                                                     grad_level_s, "wtconv backward", "grad_level_w and grad_level_s");
    lkjit::detail::check_gradients(o, g);
    lkjit::WTConvStrides st;
    copy_strides(st.x, x_strides);
    copy_strides(st.dout, dout_strides);
    copy_strides(st.out, dx_strides);
    lkjit::detail::resolve_strides(o, lkjit::Shape{B, o.C, H, W, o.stride}, &st, true);  // before the driver
    lkjit::rt::make_current(o.device);
    h->layer.backward(x, dout, dx, g, B, H, W, stream, &st, (flags & LKJIT_BACKWARD_REUSE_FORWARD_FOLD) != 0);
  });
}

int lkjit_wtconv_prepare(lkjit_wtconv* h, int64_t B, int64_t H, int64_t W, int backward) {
  return guarded([&] {
    require_handle(h, "lkjit_wtconv_prepare");
    std::lock_guard<std::mutex> lock(h->mu);
    lkjit::rt::make_current(h->layer.options().device);
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
    t_text = std::move(s);
    *text = t_text.c_str();
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
    const lkjit::DType dt = dtype_of(dtype);
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

// ---- lkjit_info and the bindings' tensor checks (C ABI 5) ----
namespace {

// A shape as Python prints a tuple: (4, 8, 8), (8,), ().
std::string py_tuple(const int64_t* s, int64_t n) {
  std::string out = "(";
  for (int64_t i = 0; i < n; ++i) out += fmt::format("{}{}", i ? ", " : "", s[i]);
  return out + (n == 1 ? ",)" : ")");
}

std::string py_tuple(const std::vector<int64_t>& s) { return py_tuple(s.data(), int64_t(s.size())); }

struct CheckFailed {
  std::string message;
  bool type_error;
};

[[noreturn]] void fail(bool type_error, std::string message) { throw CheckFailed{std::move(message), type_error}; }

const char* name_of(const char* s) { return s ? s : "?"; }

void check_wtconv_tensors(const std::string& w, int64_t C, int stride, const lkjit_tensor_desc& x,
                          const lkjit_tensor_desc* g, const lkjit_tensor_desc* params, int n_params, int n_lw,
                          int n_ls, bool bias, unsigned flags) {
  if (n_lw != n_ls) fail(false, fmt::format("{}: level_w has {} tensors and level_s {}; they must match", w, n_lw, n_ls));
  const std::string shape = py_tuple(x.sizes, x.dim);
  if (x.dim != 4) fail(false, fmt::format("{}: input must be 4-D (B, C, H, W); got shape {}", w, shape));
  if (C >= 0 && x.sizes[1] != C)
    fail(false, fmt::format("{}: input has C={} channels (shape {}); this layer has in_channels={}", w, x.sizes[1],
                            shape, C));
  C = x.sizes[1];
  const bool cpu_ok = (flags & LKJIT_CHECK_ALLOW_CPU) != 0;
  if (!(x.device_type == LKJIT_DEVICE_CUDA || (cpu_ok && x.device_type == LKJIT_DEVICE_CPU)))
    fail(false, fmt::format("{}: input is on device '{}'; supported: {}", w, name_of(x.device_name),
                            cpu_ok ? "CUDA tensors (lkjit's kernels) and CPU tensors (a PyTorch implementation)"
                                   : "CUDA tensors only (lkjit runs CUDA kernels; move the module and the input "
                                     "to a GPU with .cuda())"));
  if (x.dtype < LKJIT_DTYPE_F32 || x.dtype > LKJIT_DTYPE_BF16)
    fail(true, fmt::format("{}: input dtype {} is not supported; supported: torch.float32, torch.float16, "
                           "torch.bfloat16", w, name_of(x.dtype_name)));
  const int64_t B = x.sizes[0], H = x.sizes[2], W = x.sizes[3];
  if (g) {
    const std::vector<int64_t> want{B, C, (H + stride - 1) / stride, (W + stride - 1) / stride};
    if (g->dim != 4 || !std::equal(want.begin(), want.end(), g->sizes))
      fail(false, fmt::format("{}: grad_out has shape {}; expected {}", w, py_tuple(g->sizes, g->dim), py_tuple(want)));
  }
  const int L = n_lw;
  if (n_params != 2 + 2 * L + (bias ? 1 : 0))
    fail(false, fmt::format("{}: {} parameter tensors for L={}{}; expected {}", w, n_params, L,
                            bias ? " with bias" : "", 2 + 2 * L + (bias ? 1 : 0)));
  for (int i = 0; i < n_params; ++i) {
    const lkjit_tensor_desc& p = params[i];
    if (p.device_type != x.device_type || std::string(name_of(p.device_name)) != name_of(x.device_name))
      fail(false, fmt::format("{}: parameters are on '{}' but the input is on '{}'; move the module with .to('{}')", w,
                              name_of(p.device_name), name_of(x.device_name), name_of(x.device_name)));
    if (p.dtype != LKJIT_DTYPE_F32)
      fail(true, fmt::format("{}: parameters must be torch.float32 inside the op; got {}", w, name_of(p.dtype_name)));
  }
  const int64_t k = params[0].dim > 0 ? params[0].sizes[params[0].dim - 1] : 0;
  struct Want {
    std::string name;
    int index;
    std::vector<int64_t> shape;
  };
  std::vector<Want> want{{"base_w", 0, {C, 1, k, k}}, {"base_s", 1, {1, C, 1, 1}}};
  if (bias) want.push_back({"base_b", 2 + 2 * L, {C}});
  for (int l = 0; l < L; ++l) {
    want.push_back({fmt::format("level_w[{}]", l), 2 + l, {4 * C, 1, k, k}});
    want.push_back({fmt::format("level_s[{}]", l), 2 + L + l, {1, 4 * C, 1, 1}});
  }
  for (const auto& wt : want) {
    const lkjit_tensor_desc& t = params[wt.index];
    int64_t numel = 1, expect = 1;
    for (int64_t d = 0; d < t.dim; ++d) numel *= t.sizes[d];
    for (int64_t v : wt.shape) expect *= v;
    const bool same = t.dim == 4 && std::equal(wt.shape.begin(), wt.shape.end(), t.sizes);
    if (numel != expect || (t.dim == 4 && !same))
      fail(false, fmt::format("{}: {} has shape {}; expected {} for C={}, k={}", w, wt.name, py_tuple(t.sizes, t.dim),
                              py_tuple(wt.shape), C, k));
  }
}

}  // namespace

extern "C" {

int lkjit_info(const char** text) {
  return guarded([&] {
    if (!text) throw lkjit::SpecError("lkjit: error: lkjit_info: text is null");
    std::string why;
    const std::string nvrtc = lkjit::rt::nvrtc_library(&why);
    std::string gpu;
    const bool ok = lkjit::gpu_available(&gpu);
    std::string s = fmt::format("version: {}\nc_api: {}\n", LKJIT_VERSION, LKJIT_C_API_VERSION);
    if (why.empty()) {
      s += fmt::format("nvrtc: {}\nnvrtc_version: {}\n", nvrtc, lkjit::rt::nvrtc_version());
    } else {
      std::string flat = why;
      std::replace(flat.begin(), flat.end(), '\n', ' ');
      s += fmt::format("nvrtc: not loaded: {}\nnvrtc_version: none\n", flat);
    }
    s += fmt::format("gpu: {}\n", ok ? "available" : "unavailable: " + gpu);
    t_text = std::move(s);
    *text = t_text.c_str();
  });
}

int lkjit_wtconv_check_tensors(const char* where, int64_t C, int stride, const lkjit_tensor_desc* x,
                               const lkjit_tensor_desc* grad_out, const lkjit_tensor_desc* params, int n_params,
                               int n_level_w, int n_level_s, int has_bias, unsigned flags, int* type_error) {
  if (type_error) *type_error = 0;
  return guarded([&] {
    if (!where || !x || (n_params > 0 && !params) || n_params < 1 || stride < 1)
      throw lkjit::SpecError(fmt::format("lkjit: error: lkjit_wtconv_check_tensors: where, x and params must be "
                                         "non-null, n_params >= 1 and stride >= 1; got n_params={} stride={}",
                                         n_params, stride));
    if (flags & ~unsigned(LKJIT_CHECK_ALLOW_CPU))
      throw lkjit::SpecError(fmt::format("lkjit: error: lkjit_wtconv_check_tensors: flags={:#x} has unknown bits", flags));
    try {
      check_wtconv_tensors(where, C, stride, *x, grad_out, params, n_params, n_level_w, n_level_s, has_bias != 0, flags);
    } catch (const CheckFailed& f) {
      if (type_error) *type_error = f.type_error ? 1 : 0;
      throw lkjit::SpecError(f.message);
    }
  });
}

}  // extern "C"
