#include "runtime/driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

#include "lkjit/error.h"

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

void check(CUresult r, const char* call, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* desc = nullptr;
  driver().cuGetErrorName(r, &name);
  driver().cuGetErrorString(r, &desc);
  throw DriverError(fmt::format("lkjit: error: {}{}{} failed: {} ({})", what, what.empty() ? "" : ": ", call,
                                name ? name : "?", desc ? desc : ""));
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
