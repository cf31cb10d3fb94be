// WTConv forward benchmarks on the GPU, side by side with cuDNN depthwise 5x5 / 7x7 forward and a
// device-to-device copy measured in the same run. CUDA-event timing (UseManualTime), L2 flushed before
// every timed iteration, median of repetitions. Bytes are the 2N floor (read X, write out), so
// GB/s / copy GB/s is the fraction of the achievable floor.
//
//   bench_wtconv --benchmark_out=wtconv.json --benchmark_out_format=json
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "lkjit/wtconv.h"

namespace {

using namespace lkjit::bench;  // NOLINT

#define CKDNN(x)                                                                               \
  do {                                                                                         \
    cudnnStatus_t s_ = (x);                                                                    \
    if (s_ != CUDNN_STATUS_SUCCESS) throw std::runtime_error(fmt::format("{}: {}", #x, cudnnGetErrorString(s_))); \
  } while (0)

struct Row {
  const char* dtype;
  int64_t B, C, H;
  int L;
};
// ../shared anchors: the rows of the H200 anchor table.
const std::vector<Row> kRows = {
    {"f32", 8, 64, 256, 1},  {"f32", 8, 64, 256, 3},  {"f32", 8, 64, 256, 5},  {"f32", 8, 128, 128, 3},
    {"f16", 8, 64, 256, 3},  {"f16", 8, 128, 128, 5}, {"bf16", 8, 64, 256, 3}, {"f32", 64, 96, 56, 5},
    {"f32", 64, 192, 28, 4}, {"f32", 64, 384, 14, 3}, {"f32", 64, 768, 7, 2},  {"f16", 64, 96, 56, 5},
    {"f16", 64, 192, 28, 4}, {"f16", 64, 384, 14, 3}, {"f16", 64, 768, 7, 2},
};

// L2 flush: overwrite a buffer larger than the L2 (60 MB on H200) before each timed iteration.


void BM_Copy(benchmark::State& st) {
  const size_t n = size_t(2) << 30;
  void *x, *y;
  CK(cudaMalloc(&x, n));
  CK(cudaMalloc(&y, n));
  CK(cudaMemset(x, 0, n));
  time_loop(st, [&] { CK(cudaMemcpyAsync(y, x, n, cudaMemcpyDeviceToDevice)); }, 2.0 * n);
  cudaFree(x);
  cudaFree(y);
}

void BM_WTConvFwd(benchmark::State& st, Row r, lkjit::WTConvPath path) {
  using namespace lkjit;
  const DType dt = parse_dtype(r.dtype);
  const Shape sh{r.B, r.C, r.H, r.H, 1};
  WTConv layer({r.C, 5, r.L, dt, true, 1, 0});
  layer.set_path(path);
  try {
    layer.plan(r.B, r.H, r.H);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  const auto params = ref::init_params(int(r.C), 5, r.L, true, 1);
  auto dp = testing::upload_params(params);
  layer.set_weights(dp.weights);
  const size_t n = size_t(sh.numel()), eb = dtype_bytes(dt);
  DeviceBuffer x(n * eb), out(n * eb);
  const auto xb = encode(dt, testing::random_tensor(n, dt, 5));
  x.upload(xb.data(), xb.size());
  layer.prepare(r.B, r.H, r.H);
  std::string kernels;
  for (const auto& pk : layer.plan(r.B, r.H, r.H))
    if (pk.spec.kernel != kWTConvFold) kernels += (kernels.empty() ? "" : " ") + kernel_name(pk.spec, pk.tile);
  st.SetLabel(kernels);
  time_loop(st, [&] { layer.forward(x.data(), out.data(), r.B, r.H, r.H); }, 2.0 * n * eb);
}

// Training step: forward + backward (dX and every parameter gradient). Traffic floor counted: read X,
// write out, read dOut, read X, write dX (5N elements).
void BM_WTConvTrain(benchmark::State& st, Row r, lkjit::WTConvPath path) {
  using namespace lkjit;
  const DType dt = parse_dtype(r.dtype);
  const Shape sh{r.B, r.C, r.H, r.H, 1};
  WTConv layer({r.C, 5, r.L, dt, true, 1, 0});
  layer.set_path(path);
  try {
    layer.plan(r.B, r.H, r.H, true);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  const auto params = ref::init_params(int(r.C), 5, r.L, true, 1);
  auto dp = testing::upload_params(params, true);
  layer.set_weights(dp.weights);
  const size_t n = size_t(sh.numel()), eb = dtype_bytes(dt);
  DeviceBuffer x(n * eb), out(n * eb), g(n * eb), dx(n * eb);
  const auto xb = encode(dt, testing::random_tensor(n, dt, 5));
  x.upload(xb.data(), xb.size());
  g.upload(xb.data(), xb.size());
  layer.prepare(r.B, r.H, r.H, true);
  std::string kernels;
  for (const auto& pk : layer.plan(r.B, r.H, r.H, true))
    if (pk.spec.kernel != kWTConvFold) kernels += (kernels.empty() ? "" : " ") + kernel_name(pk.spec, pk.tile);
  st.SetLabel(kernels);
  time_loop(st, [&] {
    layer.forward(x.data(), out.data(), r.B, r.H, r.H);
    layer.backward(x.data(), g.data(), dx.data(), dp.grads, r.B, r.H, r.H);
  }, 5.0 * n * eb);
}

// Backward alone (dX + parameter gradients): read X, read dOut, write dX (3N).
void BM_WTConvBwd(benchmark::State& st, Row r) {
  using namespace lkjit;
  const DType dt = parse_dtype(r.dtype);
  const Shape sh{r.B, r.C, r.H, r.H, 1};
  WTConv layer({r.C, 5, r.L, dt, true, 1, 0});
  const auto params = ref::init_params(int(r.C), 5, r.L, true, 1);
  auto dp = testing::upload_params(params, true);
  layer.set_weights(dp.weights);
  const size_t n = size_t(sh.numel()), eb = dtype_bytes(dt);
  DeviceBuffer x(n * eb), g(n * eb), dx(n * eb);
  const auto xb = encode(dt, testing::random_tensor(n, dt, 5));
  x.upload(xb.data(), xb.size());
  g.upload(xb.data(), xb.size());
  layer.prepare(r.B, r.H, r.H, true);
  time_loop(st, [&] { layer.backward(x.data(), g.data(), dx.data(), dp.grads, r.B, r.H, r.H); }, 3.0 * n * eb);
}

void BM_CudnnDepthwiseFwd(benchmark::State& st, Row r, int k, bool train) {
  const cudnnDataType_t dt = std::string(r.dtype) == "f32" ? CUDNN_DATA_FLOAT
                             : std::string(r.dtype) == "f16" ? CUDNN_DATA_HALF
                                                             : CUDNN_DATA_BFLOAT16;
  const size_t eb = dt == CUDNN_DATA_FLOAT ? 4 : 2;
  static cudnnHandle_t h = nullptr;
  if (!h) CKDNN(cudnnCreate(&h));
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CKDNN(cudnnCreateTensorDescriptor(&xd));
  CKDNN(cudnnCreateTensorDescriptor(&yd));
  CKDNN(cudnnCreateFilterDescriptor(&wd));
  CKDNN(cudnnCreateConvolutionDescriptor(&cd));
  const int B = int(r.B), C = int(r.C), H = int(r.H);
  CKDNN(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, dt, B, C, H, H));
  CKDNN(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, dt, B, C, H, H));
  CKDNN(cudnnSetFilter4dDescriptor(wd, dt, CUDNN_TENSOR_NCHW, C, 1, k, k));
  CKDNN(cudnnSetConvolution2dDescriptor(cd, k / 2, k / 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CKDNN(cudnnSetConvolutionGroupCount(cd, C));
  if (dt != CUDNN_DATA_FLOAT) CKDNN(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH));
  const size_t n = size_t(B) * C * H * H;
  void *x, *y, *w, *ws = nullptr;
  CK(cudaMalloc(&x, n * eb));
  CK(cudaMalloc(&y, n * eb));
  CK(cudaMalloc(&w, size_t(C) * k * k * eb));
  CK(cudaMemset(x, 0, n * eb));
  CK(cudaMemset(w, 0, size_t(C) * k * k * eb));
  // Like cudnn.benchmark=True: time every algorithm, keep the fastest.
  void *dx = nullptr, *dw = nullptr;
  CK(cudaMalloc(&dx, n * eb));
  CK(cudaMalloc(&dw, size_t(C) * k * k * eb));
  int got = 0;
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  size_t ws_size = size_t(256) << 20;
  CK(cudaMalloc(&ws, ws_size));
  CKDNN(cudnnFindConvolutionForwardAlgorithmEx(h, xd, x, wd, w, cd, yd, y, 8, &got, perf, ws, ws_size));
  int best = -1;
  for (int i = 0; i < got; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) {
      best = i;
      break;
    }
  cudnnConvolutionBwdDataAlgoPerf_t dperf[8];
  cudnnConvolutionBwdFilterAlgoPerf_t fperf[8];
  int dbest = -1, fbest = -1;
  if (train) {
    int gd = 0, gf = 0;
    CKDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, w, yd, y, cd, xd, dx, 8, &gd, dperf, ws, ws_size));
    CKDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, x, yd, y, cd, wd, dw, 8, &gf, fperf, ws, ws_size));
    for (int i = 0; i < gd && dbest < 0; ++i)
      if (dperf[i].status == CUDNN_STATUS_SUCCESS) dbest = i;
    for (int i = 0; i < gf && fbest < 0; ++i)
      if (fperf[i].status == CUDNN_STATUS_SUCCESS) fbest = i;
  }
  if (best < 0 || (train && (dbest < 0 || fbest < 0))) {
    st.SkipWithError("no cuDNN algorithm");
  } else {
    const float one = 1.f, zero = 0.f;
    st.SetLabel(fmt::format("cudnn algo {}", int(perf[best].algo)));
    time_loop(st, [&] {
      CKDNN(cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, perf[best].algo, ws, ws_size, &zero, yd, y));
      if (train) {
        CKDNN(cudnnConvolutionBackwardData(h, &one, wd, w, yd, y, cd, dperf[dbest].algo, ws, ws_size, &zero, xd, dx));
        CKDNN(cudnnConvolutionBackwardFilter(h, &one, xd, x, yd, y, cd, fperf[fbest].algo, ws, ws_size, &zero, wd, dw));
      }
    }, (train ? 5.0 : 2.0) * n * eb);
  }
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(x);
  cudaFree(y);
  cudaFree(w);
  cudaFree(ws);
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
}

// Per-kernel time and achieved bandwidth (traffic model / time) of one forward and one backward.
void print_kernel_profiles() {
  using namespace lkjit;
  std::printf("\n### Per-kernel profile (one call each, CUDA events; GB/s from each kernel's traffic model)\n\n");
  std::printf("| problem | pass | kernel | ms | GB/s | %%copy |\n|---|---|---|---|---|---|\n");
  for (const auto& r : kRows) {
    if (!(r.H == 256 && r.L == 3) && !(r.B == 64 && std::string(r.dtype) == "f32") && !(r.B == 64 && r.H == 7)) continue;
    const DType dt = parse_dtype(r.dtype);
    WTConv layer({r.C, 5, r.L, dt, true, 1, 0});
    const auto params = ref::init_params(int(r.C), 5, r.L, true, 1);
    auto dp = testing::upload_params(params, true);
    layer.set_weights(dp.weights);
    const size_t n = size_t(r.B * r.C * r.H * r.H), eb = dtype_bytes(dt);
    DeviceBuffer x(n * eb), g(n * eb), out(n * eb);
    x.fill_u32(0);
    g.fill_u32(0);
    for (int pass = 0; pass < 2; ++pass) {
      const void* dout = pass ? g.data() : nullptr;
      const WTConvGradients* gr = pass ? &dp.grads : nullptr;
      for (int i = 0; i < 3; ++i) layer.profile(x.data(), dout, out.data(), gr, r.B, r.H, r.H);  // warm
      for (const auto& k : layer.profile(x.data(), dout, out.data(), gr, r.B, r.H, r.H)) {
        const double gbs = k.bytes / (k.ms * 1e-3) / 1e9;
        std::printf("| %s %s/L%d | %s | %s | %.4f | %.0f | %.0f%% |\n", r.dtype,
                    fmt::format("{}x{}x{}x{}", r.B, r.C, r.H, r.H).c_str(), r.L, pass ? "bwd" : "fwd",
                    k.kernel_name.c_str(), k.ms, k.bytes ? gbs : 0.0, k.bytes ? gbs / g_copy_gbs * 100 : 0.0);
      }
    }
  }
}

std::string row_name(const Row& r) {
  return fmt::format("{}/{}x{}x{}x{}/L{}", r.dtype, r.B, r.C, r.H, r.H, r.L);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::string why;
  if (!lkjit::gpu_available(&why)) {
    std::fprintf(stderr, "bench_wtconv: no GPU (%s)\n", why.c_str());
    return 0;
  }
  const auto dev = lkjit::device_info(0);
  CK(cudaSetDevice(0));
  g_copy_gbs = measure_copy_gbs();  // first: the yardstick of every %copy counter
  benchmark::AddCustomContext("gpu", dev.name);
  benchmark::AddCustomContext("arch", lkjit::arch_name(dev.arch));
  benchmark::AddCustomContext("sm_count", std::to_string(dev.limits.sm_count));
  benchmark::AddCustomContext("driver", std::to_string(dev.driver_version));
  benchmark::AddCustomContext("nvrtc", lkjit::nvrtc_version());
  benchmark::AddCustomContext("cudnn", std::to_string(cudnnGetVersion()));
  benchmark::AddCustomContext("copy_GBps", fmt::format("{:.1f}", g_copy_gbs));

  auto reg = [](const std::string& name, auto fn) {
    return benchmark::RegisterBenchmark(name.c_str(), fn)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinWarmUpTime(0.02)
        ->MinTime(0.1)
        ->Repetitions(3)
        ->ReportAggregatesOnly(true);
  };
  reg("copy/2GiB", BM_Copy);
  for (const auto& r : kRows) {
    reg("wtconv_fwd/" + row_name(r), [r](benchmark::State& st) { BM_WTConvFwd(st, r, lkjit::WTConvPath::kAuto); });
    reg("wtconv_train/" + row_name(r), [r](benchmark::State& st) { BM_WTConvTrain(st, r, lkjit::WTConvPath::kAuto); });
    reg("wtconv_bwd/" + row_name(r), [r](benchmark::State& st) { BM_WTConvBwd(st, r); });
    for (int k : {5, 7})
      for (bool train : {false, true}) {
        Row rr = r;
        reg(fmt::format("cudnn_dw{}_{}/{}/{}x{}x{}x{}", k, train ? "train" : "fwd", r.dtype, r.B, r.C, r.H, r.H),
            [rr, k, train](benchmark::State& st) { BM_CudnnDepthwiseFwd(st, rr, k, train); });
      }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_kernel_profiles();
  return 0;
}
