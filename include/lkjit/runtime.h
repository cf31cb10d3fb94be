// JIT runtime: compile a spec through the kernel cache (no GPU needed), and the small device API the
// op layers, tests and CLI use (devices, buffers, streams, timing). No CUDA types: a stream is the
// CUstream / cudaStream_t value as a void* (nullptr = the legacy default stream).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lkjit/generator.h"
#include "lkjit/spec.h"

namespace lkjit {

using Stream = void*;

// ---- compile (CPU only) ------------------------------------------------------------------------
struct CompiledKernel {
  std::string kernel_name;
  std::string key;     // content key (hex SHA-256)
  std::string cubin;
  std::string origin;  // "memory" | "disk" | "remote" | "compiled" (| "deferred": see CompileOptions)
  double seconds = 0;  // time spent in this call (generate + lookup + compile)
  int arch = 0;
  OpSpec spec;  // what it was compiled from (load_kernel rebuilds a rejected image from these)
  Tile tile;
  // Why the compiled cubin could not be stored in the on-disk cache (path and OS message, no
  // "lkjit: error:" prefix); empty when it was stored or came from a cache. The cubin is still good.
  std::string store_error;
};

// Generates the source, then returns the cubin from the in-process cache, the on-disk cache
// (LKJIT_CACHE_DIR) or NVRTC, storing what it compiled. Processes sharing the directory compile each
// key once (a node-local lock per key). Throws SpecError / CompileError / CacheError; a failed store
// is not thrown (the kernel still runs) but reported in store_error.
CompiledKernel compile_kernel(const OpSpec& spec, const Tile& tile);
// With LKJIT_REMOTE_CACHE set, a cluster tier sits between the disk and NVRTC: a verified remote entry is
// stored on disk and returned (origin "remote"); a miss takes the key's lease (one compile per key across
// nodes) or waits boundedly for the holder's entry.
// compile_kernel_unless_busy: the same, but when another process holds the key's lock or lease it returns
// at once with origin "deferred" and no cubin (prewarm --remote compiles other keys first, then asks again).
CompiledKernel compile_kernel_unless_busy(const OpSpec& spec, const Tile& tile);
// Waits (at most a few seconds) until this process's queued remote cache writes are done: tools call it
// before they exit. A no-op without LKJIT_REMOTE_CACHE.
void flush_remote_cache();
// Drops a kernel from the in-process and on-disk caches (the driver rejected its image), so that the
// next compile_kernel rebuilds it.
void evict_compiled(const CompiledKernel& k);

std::string nvrtc_version();            // e.g. "13.0"
// The libnvrtc this process loaded (found as README's "Environment" says), or "" with *why naming every place
// looked when none loads.
std::string nvrtc_library(std::string* why = nullptr);
std::vector<int> nvrtc_archs();          // archs the loaded NVRTC can target
std::string cache_dir();                 // the on-disk cache in use
bool disk_cache_enabled();               // false when LKJIT_CACHE_DISABLE=1 (in-memory cache only)

// ---- devices -----------------------------------------------------------------------------------
// True when libcuda.so.1 loads and reports a device; otherwise *why says which is missing.
bool gpu_available(std::string* why = nullptr);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int arch = 0;  // 90 for sm_90
  DeviceLimits limits;
  size_t total_bytes = 0;
  int driver_version = 0;  // e.g. 13000
  double clock_mhz = 0, mem_clock_mhz = 0;
  int mem_bus_bits = 0;
  size_t l2_bytes = 0;  // L2 cache size (timing harnesses flush twice this before each timed run)
};
DeviceInfo device_info(int ordinal = 0);  // DriverError without a GPU
// Makes the device's primary context current on this thread (what every call on a layer of that device
// needs first). DriverError without a GPU or for an ordinal out of range.
void set_current_device(int ordinal);

// Device memory owned by this object (cuMemAlloc on the current primary context).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes, int device = 0);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;
  void fill_u32(uint32_t value, Stream s = nullptr);  // bytes must be a multiple of 4

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

void synchronize(Stream s = nullptr);
// Whether s is capturing into a CUDA graph (cuStreamIsCapturing), or is the legacy stream while another
// stream captures in global mode (where work would break that capture); false if the driver cannot say.
bool stream_capturing(Stream s);
void copy_async(void* dst, const void* src, size_t bytes, Stream s = nullptr);

// CUDA-event timer on a stream.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  void start(Stream s = nullptr);
  float stop_ms(Stream s = nullptr);  // waits for the stop event

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// ---- loaded kernels ----------------------------------------------------------------------------
// A compiled kernel loaded on a device (module cached per key and device).
struct LoadedKernel {
  void* function = nullptr;  // CUfunction
  std::string kernel_name;
  int regs = 0, spill_bytes = 0, static_smem = 0;
};
const LoadedKernel& load_kernel(const CompiledKernel& k, int device = 0);

// Launches with a by-value params struct (the template's ABI struct). Throws DriverError.
// early: programmatic dependent launch (sm_90+ only; the caller checks the arch). The kernel may start
// before the previous kernel in the stream completes, once that kernel lets it (pdl_launch_dependents in
// templates/common/pdl.cuh); it must call pdl_wait() before reading anything that kernel writes.
void launch(const LoadedKernel& k, const LaunchGeometry& g, const void* params, size_t params_bytes,
            Stream s = nullptr, bool early = false);

}  // namespace lkjit
