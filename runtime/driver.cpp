#include "runtime/driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdio>
#include <mutex>

#include "lkjit/error.h"
#include "runtime/driver_errors.h"
#include "runtime/nvrtc_compiler.h"

namespace lkjit::rt {
namespace {

#define LKJIT_STR2(x) #x
#define LKJIT_STR(x) LKJIT_STR2(x)  // expands cuda.h's versioning macros first

struct Loaded {
  Driver d;
  std::string error;  // empty when usable
};

Loaded load() {
  Loaded l;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // not libcuda.so: a dev-only symlink
  if (!h) {
    l.error = fmt::format("no CUDA driver: libcuda.so.1 could not be loaded ({})", dlerror());
    return l;
  }
#define LKJIT_DRIVER_FN(name)                                                          \
  l.d.name = reinterpret_cast<decltype(&::name)>(dlsym(h, LKJIT_STR(name)));          \
  if (!l.d.name) {                                                                     \
    l.error = fmt::format("CUDA driver too old: symbol {} is missing", LKJIT_STR(name)); \
    return l;                                                                          \
  }
#include "runtime/driver_fns.inc"
#undef LKJIT_DRIVER_FN
  CUresult r = l.d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* n = nullptr;
    l.d.cuGetErrorName(r, &n);
    l.error = fmt::format("no GPU: cuInit failed with {}", n ? n : "?");
    return l;
  }
  int count = 0;
  l.d.cuDeviceGetCount(&count);
  if (count == 0) l.error = "no GPU: the CUDA driver reports 0 devices";
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Driver& driver() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw DriverError("lkjit: error: " + l.error);
  return l.d;
}

bool driver_available(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.error;
  return l.error.empty();
}

std::string driver_error_hint(int r, int driver_version, const std::string& nvrtc) {
  if (r != CUDA_ERROR_UNSUPPORTED_PTX_VERSION && r != CUDA_ERROR_NO_BINARY_FOR_GPU && r != CUDA_ERROR_INVALID_IMAGE)
    return "";
  int major = 0, minor = 0;
  if (std::sscanf(nvrtc.c_str(), "%d.%d", &major, &minor) != 2) return "";
  const int built_by = major * 1000 + minor * 10;  // cuDriverGetVersion's encoding
  const std::string driver = driver_version > 0
                                 ? fmt::format("CUDA {}.{}", driver_version / 1000, driver_version % 1000 / 10)
                                 : std::string("version unknown");
  if (driver_version > 0 && driver_version >= built_by)
    return r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION
               ? ""
               : fmt::format("the driver ({}) is new enough for NVRTC {}: the cubin is damaged or for another GPU", driver,
                             nvrtc);
  return fmt::format("the CUDA driver ({}) is too old for this cubin, built by NVRTC {}: update the driver to one for "
                     "CUDA {}.{} or newer, or prewarm with an NVRTC no newer than the driver", driver, nvrtc, major, minor);
}

void check(CUresult r, const char* call, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* desc = nullptr;
  driver().cuGetErrorName(r, &name);
  driver().cuGetErrorString(r, &desc);
  int version = 0;
  if (driver().cuDriverGetVersion(&version) != CUDA_SUCCESS) version = 0;
  const std::string hint = driver_error_hint(r, version, nvrtc_version());
  throw DriverError(fmt::format("lkjit: error: {}{}{} failed: {} ({}){}", what, what.empty() ? "" : ": ", call,
                                name ? name : "?", desc ? desc : "", hint.empty() ? "" : "; " + hint));
}

void make_current(int ordinal) {
  static std::mutex mu;
  static CUcontext ctx[64] = {};
  const Driver& d = driver();
  CUcontext cur = nullptr;
  d.cuCtxGetCurrent(&cur);
  std::lock_guard<std::mutex> lock(mu);
  if (ordinal < 0 || ordinal >= 64) throw DriverError(fmt::format("lkjit: error: device ordinal {} is out of range", ordinal));
  if (!ctx[ordinal]) {
    int count = 0;
    LKJIT_CU(cuDeviceGetCount(&count));
    if (ordinal >= count)
      throw DriverError(fmt::format("lkjit: error: device {} does not exist; devices: 0..{}", ordinal, count - 1));
    CUdevice dev;
    LKJIT_CU(cuDeviceGet(&dev, ordinal));
    LKJIT_CU(cuDevicePrimaryCtxRetain(&ctx[ordinal], dev));
  }
  if (cur != ctx[ordinal]) LKJIT_CU(cuCtxSetCurrent(ctx[ordinal]));
}

}  // namespace lkjit::rt
