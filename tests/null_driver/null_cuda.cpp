// A CUDA driver that runs nothing: libcuda.so.1 for measuring lkjit's host time per call on a machine with no
// GPU (bench/bench_host.cpp). It reports one H200-like sm_90 device; memory is host memory, copies and memsets
// are memcpy/memset, modules load any image, launches return at once, events time 1 us, streams never capture.
// Never for correctness: no kernel runs. The symbols are cuda.h's (its macros pick the versioned names lkjit's
// dlsym asks for).
#include <cuda.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" {

namespace {
int g_ctx, g_module, g_function, g_event;
CUresult ok() { return CUDA_SUCCESS; }
}  // namespace

CUresult CUDAAPI cuInit(unsigned int) { return ok(); }
// NVRTC loads libcuda.so.1 too and asks it for export tables: none here, so it compiles without them.
CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid*) { return *table = nullptr, CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuDriverGetVersion(int* v) { return *v = CUDA_VERSION, ok(); }
CUresult CUDAAPI cuGetErrorName(CUresult, const char** s) { return *s = "CUDA_ERROR_NULL_DRIVER", ok(); }
CUresult CUDAAPI cuGetErrorString(CUresult, const char** s) { return *s = "the null driver runs no kernel", ok(); }
CUresult CUDAAPI cuDeviceGetCount(int* n) { return *n = 1, ok(); }
CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) { return ordinal == 0 ? (*d = 0, ok()) : CUDA_ERROR_INVALID_DEVICE; }
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::strncpy(name, "null driver (sm_90, 132 SMs)", size_t(len));
  if (len > 0) name[len - 1] = 0;
  return ok();
}
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 3201000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 6144; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 60 << 20; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    default: *v = 0;
  }
  return ok();
}
CUresult CUDAAPI cuDeviceTotalMem(size_t* b, CUdevice) { return *b = size_t(141) << 30, ok(); }
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) { return *c = reinterpret_cast<CUcontext>(&g_ctx), ok(); }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return ok(); }
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* c) { return *c = reinterpret_cast<CUcontext>(&g_ctx), ok(); }
CUresult CUDAAPI cuCtxGetDevice(CUdevice* d) { return *d = 0, ok(); }
CUresult CUDAAPI cuCtxSynchronize() { return ok(); }
CUresult CUDAAPI cuModuleLoadData(CUmodule* m, const void*) { return *m = reinterpret_cast<CUmodule>(&g_module), ok(); }
CUresult CUDAAPI cuModuleUnload(CUmodule) { return ok(); }
CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule, const char*) {
  return *f = reinterpret_cast<CUfunction>(&g_function), ok();
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return ok(); }
CUresult CUDAAPI cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  return *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 64 : 0, ok();
}
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void**, void**) {
  return ok();
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void**, void**) { return ok(); }
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t n) {
  void* h = std::malloc(n ? n : 1);
  if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = reinterpret_cast<CUdeviceptr>(h);
  return ok();
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) { return std::free(reinterpret_cast<void*>(p)), ok(); }
CUresult CUDAAPI cuMemGetInfo(size_t* free_b, size_t* total) { return *free_b = *total = size_t(141) << 30, ok(); }
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void* s, size_t n) {
  return std::memcpy(reinterpret_cast<void*>(d), s, n), ok();
}
CUresult CUDAAPI cuMemcpyDtoH(void* d, CUdeviceptr s, size_t n) {
  return std::memcpy(d, reinterpret_cast<const void*>(s), n), ok();
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  return std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), n), ok();
}
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream) {
  return std::memset(reinterpret_cast<void*>(d), v, n), ok();
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream) {
  auto* p = reinterpret_cast<unsigned int*>(d);
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return ok();
}
CUresult CUDAAPI cuStreamSynchronize(CUstream) { return ok(); }
CUresult CUDAAPI cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* s) { return *s = CU_STREAM_CAPTURE_STATUS_NONE, ok(); }
CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) { return *e = reinterpret_cast<CUevent>(&g_event), ok(); }
CUresult CUDAAPI cuEventDestroy(CUevent) { return ok(); }
CUresult CUDAAPI cuEventRecord(CUevent, CUstream) { return ok(); }
CUresult CUDAAPI cuEventSynchronize(CUevent) { return ok(); }
CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent, CUevent) { return *ms = 0.001f, ok(); }

}  // extern "C"
