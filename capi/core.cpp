// The C ABI's shared entry points (version, errors, GPU and library information) and helpers (capi/core.h).
#include "capi/core.h"

#include <fmt/format.h>

#include <algorithm>

#include "lkjit/runtime.h"
#include "lkjit/version.h"

namespace lkjit::capi {
namespace {
thread_local std::string t_error;
thread_local std::string t_text;
}  // namespace

void set_error(std::string message) { t_error = std::move(message); }
void clear_error() { t_error.clear(); }

const char* keep_text(std::string s) {
  t_text = std::move(s);
  return t_text.c_str();
}

DType dtype_of(int code, const char* op) {
  switch (code) {
    case LKJIT_DTYPE_F32: return DType::kF32;
    case LKJIT_DTYPE_F16: return DType::kF16;
    case LKJIT_DTYPE_BF16: return DType::kBF16;
    default:
      throw SpecError(fmt::format("lkjit: error: {}: dtype={} is out of range; supported: 0 (f32), 1 (f16), 2 (bf16)",
                                  op, code));
  }
}

void require(const void* p, const char* fn, const char* what) {
  if (!p) throw SpecError(fmt::format("lkjit: error: {}: {} is null", fn, what));
}

// ---- tensor checks ----------------------------------------------------------------------------------------
namespace {
const char* name_of(const char* s) { return s ? s : "?"; }
}  // namespace

std::string shape_tuple(const int64_t* s, int64_t n) {
  std::string out = "(";
  for (int64_t i = 0; i < n; ++i) out += fmt::format("{}{}", i ? ", " : "", s[i]);
  return out + (n == 1 ? ",)" : ")");
}

std::string shape_tuple(const std::vector<int64_t>& s) { return shape_tuple(s.data(), int64_t(s.size())); }

void fail_check(bool type_error, std::string message) { throw TensorCheckFailed{std::move(message), type_error}; }

int guarded_check(int* type_error, const std::function<void()>& checks) {
  if (type_error) *type_error = 0;
  return guarded([&] {
    try {
      checks();
    } catch (const TensorCheckFailed& f) {
      if (type_error) *type_error = f.type_error ? 1 : 0;
      throw SpecError(f.message);
    }
  });
}

int64_t check_input(const std::string& w, const lkjit_tensor_desc& x, int64_t C, unsigned flags) {
  const std::string shape = shape_tuple(x.sizes, x.dim);
  if (x.dim != 4) fail_check(false, fmt::format("{}: input must be 4-D (B, C, H, W); got shape {}", w, shape));
  if (C >= 0 && x.sizes[1] != C)
    fail_check(false, fmt::format("{}: input has C={} channels (shape {}); this layer has in_channels={}", w,
                                  x.sizes[1], shape, C));
  const bool cpu_ok = (flags & LKJIT_CHECK_ALLOW_CPU) != 0;
  if (!(x.device_type == LKJIT_DEVICE_CUDA || (cpu_ok && x.device_type == LKJIT_DEVICE_CPU)))
    fail_check(false, fmt::format("{}: input is on device '{}'; supported: {}", w, name_of(x.device_name),
                                  cpu_ok ? "CUDA tensors (lkjit's kernels) and CPU tensors (a PyTorch implementation)"
                                         : "CUDA tensors only (lkjit runs CUDA kernels; move the module and the input "
                                           "to a GPU with .cuda())"));
  if (x.dtype < LKJIT_DTYPE_F32 || x.dtype > LKJIT_DTYPE_BF16)
    fail_check(true, fmt::format("{}: input dtype {} is not supported; supported: torch.float32, torch.float16, "
                                 "torch.bfloat16", w, name_of(x.dtype_name)));
  return x.sizes[1];
}

void check_shape(const std::string& w, const char* name, const lkjit_tensor_desc& t, const std::vector<int64_t>& want) {
  if (t.dim != int64_t(want.size()) || !std::equal(want.begin(), want.end(), t.sizes))
    fail_check(false, fmt::format("{}: {} has shape {}; expected {}", w, name, shape_tuple(t.sizes, t.dim),
                                  shape_tuple(want)));
}

void check_params_like(const std::string& w, const lkjit_tensor_desc& x, const lkjit_tensor_desc* params, int n) {
  for (int i = 0; i < n; ++i) {
    const lkjit_tensor_desc& p = params[i];
    if (p.device_type != x.device_type || std::string(name_of(p.device_name)) != name_of(x.device_name))
      fail_check(false, fmt::format("{}: parameters are on '{}' but the input is on '{}'; move the module with .to('{}')",
                                    w, name_of(p.device_name), name_of(x.device_name), name_of(x.device_name)));
    if (p.dtype != LKJIT_DTYPE_F32)
      fail_check(true, fmt::format("{}: parameters must be torch.float32 inside the op; got {}", w, name_of(p.dtype_name)));
  }
}

void check_param_shape(const std::string& w, const std::string& name, const lkjit_tensor_desc& t,
                       const std::vector<int64_t>& want, const std::string& for_what) {
  int64_t numel = 1, expect = 1;
  for (int64_t d = 0; d < t.dim; ++d) numel *= t.sizes[d];
  for (int64_t v : want) expect *= v;
  const bool same = t.dim == 4 && std::equal(want.begin(), want.end(), t.sizes);
  if (numel != expect || (t.dim == 4 && !same))
    fail_check(false, fmt::format("{}: {} has shape {}; expected {} {}", w, name, shape_tuple(t.sizes, t.dim),
                                  shape_tuple(want), for_what));
}

}  // namespace lkjit::capi

using namespace lkjit::capi;  // NOLINT: the entry points below are all C

extern "C" {

const char* lkjit_version(void) { return LKJIT_VERSION; }
int lkjit_c_api_version(void) { return LKJIT_C_API_VERSION; }
const char* lkjit_last_error(void) { return t_error.c_str(); }

int lkjit_gpu_available(const char** why) {
  bool ok = false;
  std::string reason;
  const int rc = guarded([&] { ok = lkjit::gpu_available(&reason); });
  if (rc != LKJIT_OK) reason = t_error;
  const char* text = keep_text(ok ? std::string() : reason);
  if (why) *why = text;
  return ok ? 1 : 0;
}

int lkjit_info(const char** text) {
  return guarded([&] {
    require(text, "lkjit_info", "text");
    std::string why;
    const std::string nvrtc = lkjit::nvrtc_library(&why);
    std::string gpu;
    const bool ok = lkjit::gpu_available(&gpu);
    std::string s = fmt::format("version: {}\nc_api: {}\n", LKJIT_VERSION, LKJIT_C_API_VERSION);
    if (why.empty()) {
      s += fmt::format("nvrtc: {}\nnvrtc_version: {}\n", nvrtc, lkjit::nvrtc_version());
    } else {
      std::replace(why.begin(), why.end(), '\n', ' ');
      s += fmt::format("nvrtc: not loaded: {}\nnvrtc_version: none\n", why);
    }
    s += fmt::format("gpu: {}\n", ok ? "available" : "unavailable: " + gpu);
    *text = keep_text(std::move(s));
  });
}

}  // extern "C"
