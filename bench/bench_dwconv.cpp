// Depthwise-convolution benchmarks on the GPU (lkjit::DepthwiseConv against cuDNN called directly, each in NCHW
// and in NHWC, cuDNN with its fastest algorithm of cudnnFind*), forward and training step (forward, dgrad, wgrad
// and dbias), with a device-to-device copy measured in the same run. CUDA-event timing (UseManualTime), L2
// flushed before every timed iteration. Counters: GB/s of the traffic floor (forward: read x, write y; training
// step: 5 activation passes) and %copy of the measured copy bandwidth; TFLOP/s (2 B C Ho Wo kh kw a pass, three
// passes a step) and %FFMA of the FP32 peak (SMs x 128 lanes x 2 x clock). Rows: ConvNeXt-T's 7x7 layers and
// RepLKNet-31B's at batch 64, SLaK's 51x5 / 5x51, and the 51.4 M-element k = 5 / 13 / 27 anchors (fp32).
//
//   bench_dwconv [--benchmark_filter=...]     (with $OUT set: JSON to $OUT/bench_dwconv.json as well)
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "lkjit/dwconv.h"
#include "lkjit/generator.h"
#include "lkjit/numeric.h"
#include "lkjit/runtime.h"
#include "lkjit/testing.h"

namespace {

using namespace lkjit::bench;  // NOLINT

#define CKDNN(x)                                                                                           \
  do {                                                                                                     \
    cudnnStatus_t s_ = (x);                                                                                \
    if (s_ != CUDNN_STATUS_SUCCESS) throw std::runtime_error(fmt::format("{}: {}", #x, cudnnGetErrorString(s_))); \
  } while (0)

struct Row {
  const char* tag;
  const char* dtype;
  int64_t B, C, H;
  int kh, kw;
};
const std::vector<Row> kRows = {
    {"convnext-t", "bf16", 64, 96, 56, 7, 7},     {"convnext-t", "bf16", 64, 192, 28, 7, 7},
    {"convnext-t", "bf16", 64, 384, 14, 7, 7},    {"convnext-t", "bf16", 64, 768, 7, 7, 7},
    {"convnext-t", "f32", 64, 96, 56, 7, 7},      {"replknet-31b", "bf16", 64, 128, 56, 31, 31},
    {"replknet-31b", "bf16", 64, 256, 28, 29, 29}, {"replknet-31b", "bf16", 64, 512, 14, 27, 27},
    {"replknet-31b", "bf16", 64, 1024, 7, 13, 13}, {"replknet-31b", "f32", 64, 128, 56, 31, 31},
    {"slak", "bf16", 64, 96, 56, 51, 5},          {"slak", "bf16", 64, 96, 56, 5, 51},
    {"anchor", "f32", 64, 256, 56, 5, 5},         {"anchor", "f32", 64, 256, 56, 13, 13},
    {"anchor", "f32", 64, 256, 56, 27, 27},
};



lkjit::DWConvOptions options_of(const Row& r) {
  lkjit::DWConvOptions o;
  o.C = r.C, o.kh = r.kh, o.kw = r.kw, o.dtype = lkjit::parse_dtype(r.dtype), o.bias = true, o.same = true;
  return o;
}
double flops_of(const Row& r) { return 2.0 * r.B * r.C * r.H * r.H * r.kh * r.kw; }

void BM_Lkjit(benchmark::State& st, Row r, lkjit::Layout layout, bool train) {
  using namespace lkjit;
  DWConvOptions o = options_of(r);
  o.layout = layout;
  DepthwiseConv layer(o);
  const size_t n = size_t(r.B * r.C * r.H * r.H), eb = dtype_bytes(o.dtype), taps = size_t(r.C) * r.kh * r.kw;
  DeviceBuffer x(n * eb), y(n * eb), g(n * eb), dx(n * eb), w(taps * 4), b(size_t(r.C) * 4), dw(taps * 4),
      db(size_t(r.C) * 4);
  const auto xb = encode(o.dtype, testing::random_tensor(n, o.dtype, 5));
  x.upload(xb.data(), xb.size());
  g.upload(xb.data(), xb.size());
  w.fill_u32(0x3c000000u), b.fill_u32(0);
  layer.set_weights(static_cast<const float*>(w.data()), static_cast<const float*>(b.data()));
  try {
    layer.prepare(r.B, r.H, r.H, train);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  std::string kernels;
  for (const auto& pk : layer.plan(r.B, r.H, r.H, train))
    kernels += (kernels.empty() ? "" : " ") + kernel_name(pk.spec, pk.tile);
  st.SetLabel(kernels);
  DWConvGradients gr;
  gr.dw = static_cast<float*>(dw.data()), gr.dbias = static_cast<float*>(db.data());
  time_loop(st, [&] {
    layer.forward(x.data(), y.data(), r.B, r.H, r.H);
    if (train) layer.backward(x.data(), g.data(), dx.data(), gr, r.B, r.H, r.H);
  }, (train ? 5.0 : 2.0) * n * eb, (train ? 3 : 1) * flops_of(r));
}

void BM_Cudnn(benchmark::State& st, Row r, bool nhwc, bool train) {
  const std::string d = r.dtype;
  const cudnnDataType_t dt = d == "f32" ? CUDNN_DATA_FLOAT : d == "f16" ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  const size_t eb = dt == CUDNN_DATA_FLOAT ? 4 : 2;
  const cudnnTensorFormat_t fmt_ = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
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
  CKDNN(cudnnSetTensor4dDescriptor(xd, fmt_, dt, B, C, H, H));
  CKDNN(cudnnSetTensor4dDescriptor(yd, fmt_, dt, B, C, H, H));
  CKDNN(cudnnSetFilter4dDescriptor(wd, dt, fmt_, C, 1, r.kh, r.kw));
  // Odd k: 'same' is symmetric (every row here is odd, or the k x 5 strips).
  CKDNN(cudnnSetConvolution2dDescriptor(cd, r.kh / 2, r.kw / 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CKDNN(cudnnSetConvolutionGroupCount(cd, C));
  if (dt != CUDNN_DATA_FLOAT) CKDNN(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH));
  const size_t n = size_t(B) * C * H * H, taps = size_t(C) * r.kh * r.kw;
  void *x, *y, *w, *dx, *dw, *ws;
  const size_t ws_size = size_t(512) << 20;
  CK(cudaMalloc(&x, n * eb));
  CK(cudaMalloc(&y, n * eb));
  CK(cudaMalloc(&dx, n * eb));
  CK(cudaMalloc(&w, taps * eb));
  CK(cudaMalloc(&dw, taps * eb));
  CK(cudaMalloc(&ws, ws_size));
  CK(cudaMemset(x, 0, n * eb));
  CK(cudaMemset(w, 0, taps * eb));
  int got = 0, best = -1, dbest = -1, fbest = -1;
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  cudnnConvolutionBwdDataAlgoPerf_t dperf[8];
  cudnnConvolutionBwdFilterAlgoPerf_t fperf[8];
  CKDNN(cudnnFindConvolutionForwardAlgorithmEx(h, xd, x, wd, w, cd, yd, y, 8, &got, perf, ws, ws_size));
  for (int i = 0; i < got && best < 0; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) best = i;
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
    st.SetLabel(train ? fmt::format("cudnn algos {} {} {}", int(perf[best].algo), int(dperf[dbest].algo),
                                    int(fperf[fbest].algo))
                      : fmt::format("cudnn algo {}", int(perf[best].algo)));
    time_loop(st, [&] {
      CKDNN(cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, perf[best].algo, ws, ws_size, &zero, yd, y));
      if (train) {
        CKDNN(cudnnConvolutionBackwardData(h, &one, wd, w, yd, y, cd, dperf[dbest].algo, ws, ws_size, &zero, xd, dx));
        CKDNN(cudnnConvolutionBackwardFilter(h, &one, xd, x, yd, y, cd, fperf[fbest].algo, ws, ws_size, &zero, wd, dw));
      }
    }, (train ? 5.0 : 2.0) * n * eb, (train ? 3 : 1) * flops_of(r));
  }
  for (void* p : {x, y, w, dx, dw, ws}) cudaFree(p);
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
}


}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> keep;
  std::vector<char*> args = args_with_out_json(argc, argv, "bench_dwconv", keep);
  int n_args = int(args.size());
  benchmark::Initialize(&n_args, args.data());
  std::string why;
  if (!lkjit::gpu_available(&why)) {
    std::fprintf(stderr, "bench_dwconv: no GPU (%s)\n", why.c_str());
    return 0;
  }
  const auto dev = lkjit::device_info(0);
  CK(cudaSetDevice(0));
  g_copy_gbs = measure_copy_gbs();
  g_ffma_tflops = dev.limits.sm_count * 128.0 * 2 * dev.clock_mhz * 1e6 / 1e12;
  benchmark::AddCustomContext("gpu", dev.name);
  benchmark::AddCustomContext("arch", lkjit::arch_name(dev.arch));
  benchmark::AddCustomContext("cudnn", std::to_string(cudnnGetVersion()));
  benchmark::AddCustomContext("copy_GBps", fmt::format("{:.1f}", g_copy_gbs));
  benchmark::AddCustomContext("ffma_TFLOPs", fmt::format("{:.1f}", g_ffma_tflops));
  for (const Row& r : kRows)
    for (bool train : {false, true})
      for (bool nhwc : {false, true}) {
        const std::string name = fmt::format("{}/{}/{}x{}x{}x{}/k{}x{}/{}/{}", r.tag, r.dtype, r.B, r.C, r.H, r.H, r.kh,
                                             r.kw, nhwc ? "nhwc" : "nchw", train ? "train" : "fwd");
        for (bool cudnn : {false, true}) {
          auto* b = cudnn ? benchmark::RegisterBenchmark(("cudnn/" + name).c_str(), BM_Cudnn, r, nhwc, train)
                          : benchmark::RegisterBenchmark(("lkjit/" + name).c_str(), BM_Lkjit, r,
                                                         nhwc ? lkjit::Layout::kNHWC : lkjit::Layout::kNCHW, train);
          b->UseManualTime()->Unit(benchmark::kMillisecond)->MinWarmUpTime(0.02)->MinTime(0.2);
        }
      }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
