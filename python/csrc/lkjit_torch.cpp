#include "lkjit_torch.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace lkjit_torch {
namespace {

CApi g_capi;
bool g_ready = false;
using StreamFn = AOTITorchError (*)(int32_t, void**);
StreamFn g_stream = nullptr;  // aoti_torch_get_current_cuda_stream, from libtorch_cuda.so when torch has CUDA

std::vector<Family>& families() {
  static std::vector<Family> f;
  return f;
}

std::string& ops_list() {
  static std::string s;
  return s;
}

void copy_error(char* err, size_t n, const std::string& s) {
  if (!err || n == 0) return;
  std::strncpy(err, s.c_str(), n - 1);
  err[n - 1] = '\0';
}

const char* device_type_name(int t) {
  switch (t) {
    case 0: return "cpu";
    case 1: return "cuda";
    case 9: return "meta";  // torch::headeronly::DeviceType::Meta
    default: return "other";
  }
}

}  // namespace

const CApi& capi() {
  if (!g_ready) fail_spec("lkjit: error: the PyTorch binding was loaded without lkjit_torch_init (import lkjit.torch)");
  return g_capi;
}

void check(int rc) {
  if (rc == 0) return;
  const char* m = g_capi.lkjit_last_error ? g_capi.lkjit_last_error() : "";
  throw std::runtime_error("[lkjit:" + std::to_string(rc) + "] " + (m && *m ? m : "lkjit: error: code " + std::to_string(rc)));
}

void fail_check(int rc, bool type_error) {
  const char* m = g_capi.lkjit_last_error();
  throw std::runtime_error(std::string(type_error ? "[lkjit:T] " : "[lkjit:" + std::to_string(rc) + "] ") + m);
}

void fail_spec(const std::string& message) { throw std::runtime_error("[lkjit:2] " + message); }

int dtype_code(const Tensor& t) {
  switch (t.scalar_type()) {
    case torch::headeronly::ScalarType::Float: return LKJIT_DTYPE_F32;
    case torch::headeronly::ScalarType::Half: return LKJIT_DTYPE_F16;
    case torch::headeronly::ScalarType::BFloat16: return LKJIT_DTYPE_BF16;
    default: return -1;
  }
}

namespace {
// Python's str(torch.dtype) for the dtypes a message may name.
std::string dtype_name(const Tensor& t) {
  using S = torch::headeronly::ScalarType;
  switch (t.scalar_type()) {
    case S::Float: return "torch.float32";
    case S::Half: return "torch.float16";
    case S::BFloat16: return "torch.bfloat16";
    case S::Double: return "torch.float64";
    case S::Long: return "torch.int64";
    case S::Int: return "torch.int32";
    case S::Short: return "torch.int16";
    case S::Char: return "torch.int8";
    case S::Byte: return "torch.uint8";
    case S::Bool: return "torch.bool";
    case S::ComplexFloat: return "torch.complex64";
    case S::ComplexDouble: return "torch.complex128";
    default: return "torch.dtype(" + std::to_string(static_cast<int>(t.scalar_type())) + ")";
  }
}
}  // namespace

Desc describe(const Tensor& t) {
  Desc d;
  const auto s = t.sizes();
  d.sizes.assign(s.begin(), s.end());
  d.dtype_name = dtype_name(t);
  const auto dev = t.device();
  const int type = static_cast<int>(dev.type());
  d.device_name = device_type_name(type);
  if (type != 0 && dev.index() >= 0) d.device_name += ":" + std::to_string(dev.index());
  d.dtype = dtype_code(t);
  d.device_type = type == 1 ? LKJIT_DEVICE_CUDA : type == 0 ? LKJIT_DEVICE_CPU : LKJIT_DEVICE_OTHER;
  return d;
}

void* current_stream(int device) {
  if (!g_stream) fail_spec("lkjit: error: this torch has no CUDA (libtorch_cuda.so is not loaded)");
  void* s = nullptr;
  if (g_stream(device, &s) != AOTI_TORCH_SUCCESS) fail_spec("lkjit: error: the current CUDA stream is unknown");
  return s;
}

Layout layout_mode(const char* where) {
  const char* v = std::getenv("LKJIT_TORCH_LAYOUT");
  if (!v || !*v || !std::strcmp(v, "auto")) return Layout::kAuto;
  if (!std::strcmp(v, "strided")) return Layout::kStrided;
  if (!std::strcmp(v, "nchw")) return Layout::kNchw;
  const std::string s(v);
  const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';  // repr()
  throw std::runtime_error(std::string("[lkjit:2] ") + where + ": LKJIT_TORCH_LAYOUT=" + q + s + q +
                           " is not supported; supported: auto, strided, nchw");
}

bool is_contiguous(const Tensor& t) { return t.is_contiguous(); }

bool is_channels_last(const Tensor& t) {
  if (t.dim() != 4) return false;
  const auto n = t.sizes();
  const auto s = t.strides();
  // torch's rule: dims of size 1 may have any stride; the others NHWC-dense.
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (n[d] != 1 && s[d] != expected) return false;
    expected *= n[d];
  }
  return true;
}

bool is_dense(const Tensor& t, Layout mode) {
  if (t.is_contiguous()) return true;
  if (mode == Layout::kNchw) return false;
  if (is_channels_last(t)) return true;
  const auto n = t.sizes();
  const auto s = t.strides();
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t i = 0; i < n.size(); ++i) dims.emplace_back(s[i], n[i]);
  std::stable_sort(dims.begin(), dims.end(), [](auto a, auto b) { return a.first < b.first; });
  int64_t expected = 1;
  for (auto [st, size] : dims) {
    if (size == 1) continue;
    if (st != expected) return false;
    expected *= size;
  }
  return true;
}

const int64_t* c_strides(const Tensor& t, std::array<int64_t, 4>& buf) {
  if (t.is_contiguous()) return nullptr;
  const auto s = t.strides();
  for (int i = 0; i < 4; ++i) buf[i] = s[i];
  return buf.data();
}

Tensor alloc(const std::vector<int64_t>& sizes, const Tensor& like, int32_t dtype, bool channels_last) {
  std::vector<int64_t> st(sizes.size());
  if (channels_last && sizes.size() == 4) {
    const int64_t C = sizes[1], H = sizes[2], W = sizes[3];
    st = {H * W * C, 1, W * C, C};
  } else {
    int64_t acc = 1;
    for (size_t i = sizes.size(); i-- > 0;) {
      st[i] = acc;
      acc *= std::max<int64_t>(sizes[i], 1);
    }
  }
  const auto dev = like.device();
  AtenTensorHandle h = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(int64_t(sizes.size()), sizes.data(), st.data(), dtype,
                                                  static_cast<int32_t>(dev.type()), dev.index(), &h));
  return Tensor(h);
}

Tensor alloc_like(const Tensor& t) {
  const auto n = t.sizes();
  const auto s = t.strides();
  const auto dev = t.device();
  int32_t dtype = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(t.get(), &dtype));
  AtenTensorHandle h = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(t.dim(), n.data(), s.data(), dtype, static_cast<int32_t>(dev.type()),
                                                  dev.index(), &h));
  return Tensor(h);
}

Tensor alloc_nchw(const Tensor& t, int32_t dtype) {
  const auto n = t.sizes();
  return alloc(std::vector<int64_t>(n.begin(), n.end()), t, dtype, false);
}

int32_t torch_dtype_float32() { return aoti_torch_dtype_float32(); }

void register_family(const Family& f) {
  families().push_back(f);
  ops_list() += (ops_list().empty() ? "" : ",") + std::string(f.ops);
}

}  // namespace lkjit_torch

// ---- entry points Python calls through ctypes (lkjit/_torch_ops.py) ----
extern "C" {

// Binds to the liblkjit.so at `path`, which must already be loaded in this process (Python loaded it), so
// that one library and its caches serve both paths. 0 on success, else 1 with `err` saying why.
__attribute__((visibility("default"))) int lkjit_torch_init(const char* path, char* err, size_t errlen) {
  using namespace lkjit_torch;
  void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!h) {
    copy_error(err, errlen, std::string("liblkjit.so is not loaded in this process from ") + path);
    return 1;
  }
  CApi c;
#define LKJIT_TORCH_FN(name)                                                                      \
  c.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name));                                  \
  if (!c.name) {                                                                                  \
    copy_error(err, errlen, std::string(path) + " lacks " #name " (a liblkjit.so older than the binding)"); \
    return 1;                                                                                     \
  }
#include "capi_fns.inc"
#undef LKJIT_TORCH_FN
  if (c.lkjit_c_api_version() != LKJIT_C_API_VERSION) {
    copy_error(err, errlen, std::string(path) + ": C ABI version " + std::to_string(c.lkjit_c_api_version()) +
                                ", the binding was built for " + std::to_string(LKJIT_C_API_VERSION) + " (rebuild both)");
    return 1;
  }
  if (void* cuda = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD))
    g_stream = reinterpret_cast<StreamFn>(dlsym(cuda, "aoti_torch_get_current_cuda_stream"));
  g_capi = c;
  g_ready = true;
  return 0;
}

// The ops whose CUDA kernels this binding registers, comma-separated.
__attribute__((visibility("default"))) const char* lkjit_torch_ops(void) { return lkjit_torch::ops_list().c_str(); }

// Releases the lkjit layers of a module (its layer id), as Python's finalizer of the module does.
__attribute__((visibility("default"))) void lkjit_torch_release(int64_t layer_id) {
  for (const auto& f : lkjit_torch::families()) f.release(layer_id);
}

// Device memory the lkjit layers of a layer id own (folded weights + scratch), bytes.
__attribute__((visibility("default"))) uint64_t lkjit_torch_workspace_bytes(int64_t layer_id) {
  uint64_t n = 0;
  for (const auto& f : lkjit_torch::families()) n += f.workspace_bytes(layer_id);
  return n;
}

}  // extern "C"
