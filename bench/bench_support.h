// What every GPU benchmark of an op family shares (bench/bench_<family>.cpp): error checks, the L2 flush
// before each timed iteration, the device-to-device copy bandwidth measured in the same run (the yardstick
// of every %copy counter), the CUDA-event timing loop with its counters, and JSON under $OUT.
#pragma once
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "lkjit/runtime.h"

#define CK(x)                                                                                               \
  do {                                                                                                      \
    cudaError_t e_ = (x);                                                                                   \
    if (e_ != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", #x, cudaGetErrorString(e_)));     \
  } while (0)

namespace lkjit::bench {

// Peaks of this run, set by main before the benchmarks run: copy GB/s (read + write) and, where a family
// reports it, the FFMA peak in TFLOP/s. 0: that counter is not reported.
inline double g_copy_gbs = 0;
inline double g_ffma_tflops = 0;

// Overwrites a buffer larger than the L2 (60 MB on H200), so every timed iteration starts cold.
inline void flush_l2(cudaStream_t s = nullptr) {
  static void* buf = nullptr;
  static const size_t n = 256u << 20;
  if (!buf) CK(cudaMalloc(&buf, n));
  CK(cudaMemsetAsync(buf, 0, n, s));
}

// Median device-to-device copy bandwidth of 2 GiB (read + write bytes per second / 1e9), 10 timed copies.
inline double measure_copy_gbs() {
  const size_t n = size_t(2) << 30;
  void *x, *y;
  CK(cudaMalloc(&x, n));
  CK(cudaMalloc(&y, n));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    CK(cudaEventRecord(a));
    CK(cudaMemcpyAsync(y, x, n, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    if (i >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  cudaFree(x);
  cudaFree(y);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 2.0 * n / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

// Times f() with CUDA events, the L2 flushed before each iteration, after 3 warm-up calls (JIT, library
// heuristics, clocks). Counters: GB/s of `bytes` per call, % of the copy bandwidth, and with flops > 0
// TFLOP/s (and % of the FFMA peak when g_ffma_tflops is set).
template <class F>
void time_loop(benchmark::State& st, F&& f, double bytes, double flops = 0) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  CK(cudaDeviceSynchronize());
  for (auto _ : st) {
    flush_l2();
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    st.SetIterationTime(ms * 1e-3);
  }
  using C = benchmark::Counter;
  st.counters["GB/s"] = C(bytes, C::kIsIterationInvariantRate);
  if (g_copy_gbs > 0) st.counters["%copy"] = C(bytes / 1e9 / g_copy_gbs * 100, C::kIsIterationInvariantRate);
  if (flops > 0) st.counters["TFLOP/s"] = C(flops / 1e12, C::kIsIterationInvariantRate);
  if (flops > 0 && g_ffma_tflops > 0)
    st.counters["%FFMA"] = C(flops / 1e12 / g_ffma_tflops * 100, C::kIsIterationInvariantRate);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

// argv plus `--benchmark_out=$OUT/<name>.json --benchmark_out_format=json` when $OUT is set (the GPU
// machine's result folder) and the caller names no output of its own. The strings live in `keep`.
inline std::vector<char*> args_with_out_json(int argc, char** argv, const std::string& name,
                                             std::vector<std::string>& keep) {
  std::vector<char*> args(argv, argv + argc);
  const bool named = std::any_of(args.begin() + 1, args.end(),
                                 [](const char* a) { return std::string(a).rfind("--benchmark_out=", 0) == 0; });
  if (const char* out = std::getenv("OUT"); out && *out && !named) {
    keep = {std::string("--benchmark_out=") + out + "/" + name + ".json", "--benchmark_out_format=json"};
    for (auto& s : keep) args.push_back(s.data());
  }
  return args;
}

// The device a family benchmark runs on, or nullopt (having said why on stderr, as "<name>: no GPU (...)")
// without one: device 0, made current; its copy bandwidth measured into g_copy_gbs first (the yardstick of
// every %copy counter); the run's context gpu, arch and copy_GBps (a family adds its own).
inline std::optional<lkjit::DeviceInfo> start_gpu_bench(const char* name) {
  std::string why;
  if (!lkjit::gpu_available(&why)) {
    std::fprintf(stderr, "%s: no GPU (%s)\n", name, why.c_str());
    return std::nullopt;
  }
  const auto dev = lkjit::device_info(0);
  CK(cudaSetDevice(0));
  g_copy_gbs = measure_copy_gbs();
  benchmark::AddCustomContext("gpu", dev.name);
  benchmark::AddCustomContext("arch", lkjit::arch_name(dev.arch));
  benchmark::AddCustomContext("copy_GBps", fmt::format("{:.1f}", g_copy_gbs));
  return dev;
}

// A CUDA-event-timed benchmark (time_loop): ms, 20 ms warm-up, at least 0.1 s, 3 repetitions, aggregates only.
template <class F>
benchmark::internal::Benchmark* register_timed(const std::string& name, F fn) {
  return benchmark::RegisterBenchmark(name.c_str(), fn)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinWarmUpTime(0.02)
      ->MinTime(0.1)
      ->Repetitions(3)
      ->ReportAggregatesOnly(true);
}

}  // namespace lkjit::bench
