// Host time of one layer call (checks, plan lookup, parameter packing, launches), without the GPU's: run with
// the null driver (tests/null_driver, built as build/null-driver/libcuda.so.1), whose launches return at once,
//   cmake --build build --target bench_host lkjit_null_cuda
//   LD_LIBRARY_PATH=build/null-driver build/bench_host
// On a real GPU it measures the same calls with real (asynchronous) launches. The first call of each layer
// compiles its kernels with NVRTC (the kernel cache keeps them); the timed calls hit the prepared plans.
// Rows: depthwise 7x7 (C++ API and C ABI), WTConv L5 and WBMM 7x7, bf16, 1x96x56x56, forward and forward +
// backward, in the layer's default policy (cached tiles, no tuning).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "lkjit/c_api_dwconv.h"
#include "lkjit/dwconv.h"
#include "lkjit/reference.h"
#include "lkjit/runtime.h"
#include "lkjit/testing.h"
#include "lkjit/wbmm.h"
#include "lkjit/wtconv.h"

namespace {

using namespace lkjit;  // NOLINT

constexpr int64_t B = 1, C = 96, H = 56, W = 56;
constexpr size_t kElems = size_t(B * C * H * W), kBytes = kElems * 2;

void BM_DWConv(benchmark::State& st, bool backward) {
  DWConvOptions o;
  o.C = C, o.kh = o.kw = 7, o.dtype = DType::kBF16, o.bias = true, o.same = true;
  DepthwiseConv layer(o);
  DeviceBuffer x(kBytes), y(kBytes), g(kBytes), dx(kBytes), w(C * 49 * 4), b(C * 4), dw(C * 49 * 4), db(C * 4);
  layer.set_weights(static_cast<const float*>(w.data()), static_cast<const float*>(b.data()));
  layer.prepare(B, H, W, backward);
  DWConvGradients gr{static_cast<float*>(dw.data()), static_cast<float*>(db.data())};
  for (auto _ : st) {
    layer.forward(x.data(), y.data(), B, H, W);
    if (backward) layer.backward(x.data(), g.data(), dx.data(), gr, B, H, W);
  }
}

void BM_DWConvCAbi(benchmark::State& st, bool backward) {
  lkjit_dwconv* h = nullptr;
  if (lkjit_dwconv_create(C, 7, 7, 1, 1, 0, 0, 1, LKJIT_DTYPE_BF16, 1, LKJIT_LAYOUT_NCHW, 0, &h) != 0) {
    st.SkipWithError("lkjit_dwconv_create failed");
    return;
  }
  DeviceBuffer x(kBytes), y(kBytes), g(kBytes), dx(kBytes), w(C * 49 * 4), b(C * 4), dw(C * 49 * 4), db(C * 4);
  const int64_t nchw[4] = {C * H * W, H * W, W, 1};
  auto call = [&] {
    lkjit_dwconv_set_weights(h, static_cast<const float*>(w.data()), static_cast<const float*>(b.data()));
    int rc = lkjit_dwconv_forward(h, x.data(), nchw, y.data(), nchw, B, H, W, nullptr);
    if (backward)
      rc |= lkjit_dwconv_backward(h, x.data(), nchw, g.data(), nchw, dx.data(), nchw, static_cast<float*>(dw.data()),
                                  static_cast<float*>(db.data()), B, H, W, nullptr);
    return rc;
  };
  if (call() != 0) {
    st.SkipWithError("a C ABI call failed");
    lkjit_dwconv_destroy(h);
    return;
  }
  for (auto _ : st) benchmark::DoNotOptimize(call());
  lkjit_dwconv_destroy(h);
}

void BM_WTConv(benchmark::State& st, bool backward) {
  WTConv layer({C, 5, 5, DType::kBF16, true, 1, 0});
  const auto params = ref::init_params(int(C), 5, 5, true, 1);
  auto dp = testing::upload_params(params, true);
  layer.set_weights(dp.weights);
  DeviceBuffer x(kBytes), g(kBytes), out(kBytes), dx(kBytes);
  layer.forward(x.data(), out.data(), B, H, W);
  if (backward) layer.backward(x.data(), g.data(), dx.data(), dp.grads, B, H, W);
  for (auto _ : st) {
    layer.forward(x.data(), out.data(), B, H, W);
    if (backward) layer.backward(x.data(), g.data(), dx.data(), dp.grads, B, H, W);
  }
}

void BM_WBMM(benchmark::State& st, bool backward) {
  WBMMOptions o;
  o.C = C, o.wh = o.ww = 7, o.dtype = DType::kBF16;
  WBMM layer(o);
  DeviceBuffer R(C * 169 * 4), dR(C * 169 * 4), x(kBytes), g(kBytes), out(kBytes), dx(kBytes);
  layer.set_weights({static_cast<const float*>(R.data()), nullptr, nullptr});
  WBMMGradients grads{static_cast<float*>(dR.data()), nullptr, nullptr};
  layer.prepare(B, H, W, backward);
  for (auto _ : st) {
    layer.forward(x.data(), out.data(), B, H, W);
    if (backward) layer.backward(x.data(), g.data(), dx.data(), grads, B, H, W);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::string why;
  if (!gpu_available(&why)) {
    std::fprintf(stderr, "bench_host: no CUDA driver (%s); run with LD_LIBRARY_PATH=build/null-driver\n", why.c_str());
    return 0;
  }
  benchmark::AddCustomContext("device", device_info(0).name);
  for (bool bwd : {false, true}) {
    const char* pass = bwd ? "fwd+bwd" : "fwd";
    benchmark::RegisterBenchmark((std::string("dwconv_k7/") + pass).c_str(), BM_DWConv, bwd)->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("dwconv_k7_c_abi/") + pass).c_str(), BM_DWConvCAbi, bwd)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("wtconv_L5/") + pass).c_str(), BM_WTConv, bwd)->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("wbmm_w7/") + pass).c_str(), BM_WBMM, bwd)->Unit(benchmark::kMicrosecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
