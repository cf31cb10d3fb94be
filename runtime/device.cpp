// Devices, buffers, events, module loading and launch: the public device API over runtime/driver.
#include <fmt/format.h>

#include <map>
#include <mutex>

#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "runtime/driver.h"

namespace lkjit {

bool gpu_available(std::string* why) { return rt::driver_available(why); }

void set_current_device(int ordinal) { rt::make_current(ordinal); }

DeviceInfo device_info(int ordinal) {
  rt::make_current(ordinal);
  const auto& d = rt::driver();
  CUdevice dev;
  LKJIT_CU(cuDeviceGet(&dev, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  LKJIT_CU(cuDeviceGetName(name, sizeof(name), dev));
  info.name = name;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    rt::check(d.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
    return v;
  };
  info.arch = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10 + attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.limits.arch = info.arch;
  info.limits.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.limits.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  info.limits.max_smem_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.limits.smem_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info.limits.regs_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  info.clock_mhz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000.0;
  info.mem_clock_mhz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) / 1000.0;
  info.mem_bus_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  info.l2_bytes = static_cast<size_t>(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
  LKJIT_CU(cuDeviceTotalMem(&info.total_bytes, dev));
  LKJIT_CU(cuDriverGetVersion(&info.driver_version));
  return info;
}

DeviceBuffer::DeviceBuffer(size_t bytes, int device) : bytes_(bytes) {
  rt::make_current(device);
  CUdeviceptr p = 0;
  if (bytes) rt::check(rt::driver().cuMemAlloc(&p, bytes), "cuMemAlloc", fmt::format("{} bytes", bytes));
  ptr_ = reinterpret_cast<void*>(p);
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) rt::driver().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr_));
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) rt::driver().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr_));
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_)
    throw SpecError(fmt::format("lkjit: error: upload of {} bytes at {} exceeds the buffer's {}", bytes, offset, bytes_));
  LKJIT_CU(cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(ptr_) + offset, host, bytes));
}
void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_)
    throw SpecError(fmt::format("lkjit: error: download of {} bytes at {} exceeds the buffer's {}", bytes, offset, bytes_));
  LKJIT_CU(cuMemcpyDtoH(host, reinterpret_cast<CUdeviceptr>(ptr_) + offset, bytes));
}
void DeviceBuffer::fill_u32(uint32_t value, Stream s) {
  LKJIT_CU(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(ptr_), value, bytes_ / 4, static_cast<CUstream>(s)));
}

void synchronize(Stream s) {
  if (s) LKJIT_CU(cuStreamSynchronize(static_cast<CUstream>(s)));
  else LKJIT_CU(cuCtxSynchronize());
}

bool stream_capturing(Stream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = rt::driver().cuStreamIsCapturing(static_cast<CUstream>(s), &st);
  // The legacy stream while another stream captures in global mode: work there would break that capture.
  if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) return true;
  return r == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void copy_async(void* dst, const void* src, size_t bytes, Stream s) {
  LKJIT_CU(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes,
                             static_cast<CUstream>(s)));
}

EventTimer::EventTimer() {
  CUevent a, b;
  LKJIT_CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
  LKJIT_CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
  start_ = a;
  stop_ = b;
}
EventTimer::~EventTimer() {
  rt::driver().cuEventDestroy(static_cast<CUevent>(start_));
  rt::driver().cuEventDestroy(static_cast<CUevent>(stop_));
}
void EventTimer::start(Stream s) { LKJIT_CU(cuEventRecord(static_cast<CUevent>(start_), static_cast<CUstream>(s))); }
float EventTimer::stop_ms(Stream s) {
  LKJIT_CU(cuEventRecord(static_cast<CUevent>(stop_), static_cast<CUstream>(s)));
  LKJIT_CU(cuEventSynchronize(static_cast<CUevent>(stop_)));
  float ms = 0;
  LKJIT_CU(cuEventElapsedTime(&ms, static_cast<CUevent>(start_), static_cast<CUevent>(stop_)));
  return ms;
}

const LoadedKernel& load_kernel(const CompiledKernel& k, int device) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, LoadedKernel> loaded;
  rt::make_current(device);
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(k.key, device);
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  const auto& d = rt::driver();
  CUmodule mod;
  CUresult r = d.cuModuleLoadData(&mod, k.cubin.data());
  if ((r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_NO_BINARY_FOR_GPU) && k.tile != Tile{}) {
    // A verified entry the driver still rejects (a foreign or stale image): drop it from both
    // caches and rebuild once; a second rejection is a real error (e.g. the wrong arch).
    evict_compiled(k);
    const CompiledKernel fresh = compile_kernel(k.spec, k.tile);
    r = d.cuModuleLoadData(&mod, fresh.cubin.data());
  }
  rt::check(r, "cuModuleLoadData", k.kernel_name);
  CUfunction fn;
  rt::check(d.cuModuleGetFunction(&fn, mod, k.kernel_name.c_str()), "cuModuleGetFunction", k.kernel_name);
  LoadedKernel lk;
  lk.function = fn;
  lk.kernel_name = k.kernel_name;
  d.cuFuncGetAttribute(&lk.regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
  d.cuFuncGetAttribute(&lk.spill_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn);
  d.cuFuncGetAttribute(&lk.static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
  // Opt in to the device's maximum dynamic shared memory once; launches then pass what they need.
  CUdevice dev;
  LKJIT_CU(cuCtxGetDevice(&dev));
  int optin = 0;
  d.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
  rt::check(d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin - lk.static_smem),
            "cuFuncSetAttribute", k.kernel_name);
  return loaded.emplace(key, lk).first->second;
}

void launch(const LoadedKernel& k, const LaunchGeometry& g, const void* params, size_t, Stream s, bool early) {
  void* args[] = {const_cast<void*>(params)};
  if (early) {
    CUlaunchAttribute a{};
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig c{};
    c.gridDimX = g.grid[0], c.gridDimY = g.grid[1], c.gridDimZ = g.grid[2];
    c.blockDimX = g.block[0], c.blockDimY = g.block[1], c.blockDimZ = g.block[2];
    c.sharedMemBytes = g.smem_bytes;
    c.hStream = static_cast<CUstream>(s);
    c.attrs = &a;
    c.numAttrs = 1;
    rt::check(rt::driver().cuLaunchKernelEx(&c, static_cast<CUfunction>(k.function), args, nullptr),
              "cuLaunchKernelEx", k.kernel_name);
    return;
  }
  rt::check(rt::driver().cuLaunchKernel(static_cast<CUfunction>(k.function), g.grid[0], g.grid[1], g.grid[2],
                                        g.block[0], g.block[1], g.block[2], g.smem_bytes,
                                        static_cast<CUstream>(s), args, nullptr),
            "cuLaunchKernel", k.kernel_name);
}

}  // namespace lkjit
