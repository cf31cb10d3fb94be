// The cuDNN baseline of the convolution benchmarks: a depthwise (groups = C) kh x kw 'same' convolution,
// stride 1, in NCHW or NHWC (cuDNN's best depthwise layout is NHWC: 3-5x faster on H200), forward or a
// training step (forward, dgrad, wgrad). Algorithms are chosen like cudnn.benchmark=True: every one timed
// (cudnnFind*Ex), the fastest that succeeds kept.
#pragma once
#include <cudnn.h>

#include <string>

#include "bench/bench_support.h"

#define CKDNN(x)                                                                                            \
  do {                                                                                                      \
    cudnnStatus_t s_ = (x);                                                                                 \
    if (s_ != CUDNN_STATUS_SUCCESS) throw std::runtime_error(fmt::format("{}: {}", #x, cudnnGetErrorString(s_))); \
  } while (0)

namespace lkjit::bench {

// Times the cuDNN depthwise conv of B x C x H x H in dtype "f32" | "f16" | "bf16" (odd kh and kw: symmetric
// 'same' padding) with time_loop; bytes: 2N forward, 5N a training step; flops passed through.
inline void time_cudnn_depthwise(benchmark::State& st, const std::string& dtype, int B, int C, int H, int kh, int kw,
                                 bool nhwc, bool train, double flops = 0) {
  const cudnnDataType_t dt = dtype == "f32" ? CUDNN_DATA_FLOAT : dtype == "f16" ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  const size_t eb = dt == CUDNN_DATA_FLOAT ? 4 : 2;
  const cudnnTensorFormat_t layout = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  static cudnnHandle_t h = nullptr;
  if (!h) CKDNN(cudnnCreate(&h));
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CKDNN(cudnnCreateTensorDescriptor(&xd));
  CKDNN(cudnnCreateTensorDescriptor(&yd));
  CKDNN(cudnnCreateFilterDescriptor(&wd));
  CKDNN(cudnnCreateConvolutionDescriptor(&cd));
  CKDNN(cudnnSetTensor4dDescriptor(xd, layout, dt, B, C, H, H));
  CKDNN(cudnnSetTensor4dDescriptor(yd, layout, dt, B, C, H, H));
  CKDNN(cudnnSetFilter4dDescriptor(wd, dt, layout, C, 1, kh, kw));
  CKDNN(cudnnSetConvolution2dDescriptor(cd, kh / 2, kw / 2, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CKDNN(cudnnSetConvolutionGroupCount(cd, C));
  if (dt != CUDNN_DATA_FLOAT) CKDNN(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH));
  const size_t n = size_t(B) * C * H * H, taps = size_t(C) * kh * kw;
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
  auto first_ok = [](const auto* perf, int got) {
    for (int i = 0; i < got; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS) return i;
    return -1;
  };
  int got = 0, dbest = -1, fbest = -1;
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  cudnnConvolutionBwdDataAlgoPerf_t dperf[8];
  cudnnConvolutionBwdFilterAlgoPerf_t fperf[8];
  CKDNN(cudnnFindConvolutionForwardAlgorithmEx(h, xd, x, wd, w, cd, yd, y, 8, &got, perf, ws, ws_size));
  const int best = first_ok(perf, got);
  if (train) {
    int gd = 0, gf = 0;
    CKDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, w, yd, y, cd, xd, dx, 8, &gd, dperf, ws, ws_size));
    CKDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, x, yd, y, cd, wd, dw, 8, &gf, fperf, ws, ws_size));
    dbest = first_ok(dperf, gd);
    fbest = first_ok(fperf, gf);
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
    }, (train ? 5.0 : 2.0) * n * eb, flops);
  }
  for (void* p : {x, y, w, dx, dw, ws}) cudaFree(p);
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
}

}  // namespace lkjit::bench
