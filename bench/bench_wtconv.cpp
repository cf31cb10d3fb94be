// WTConv forward benchmarks on the GPU, side by side with cuDNN depthwise 5x5 / 7x7 forward and a
// device-to-device copy measured in the same run. CUDA-event timing (UseManualTime), L2 flushed before
// every timed iteration, median of repetitions. Bytes are the 2N floor (read X, write out), so
// GB/s / copy GB/s is the fraction of the achievable floor.
//
//   bench_wtconv --benchmark_out=wtconv.json --benchmark_out_format=json
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "bench/cudnn_depthwise.h"
#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "lkjit/wtconv.h"

namespace {

using namespace lkjit::bench;  // NOLINT


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
  const auto found = start_gpu_bench("bench_wtconv");
  if (!found) return 0;
  const lkjit::DeviceInfo& dev = *found;
  benchmark::AddCustomContext("sm_count", std::to_string(dev.limits.sm_count));
  benchmark::AddCustomContext("driver", std::to_string(dev.driver_version));
  benchmark::AddCustomContext("nvrtc", lkjit::nvrtc_version());
  benchmark::AddCustomContext("cudnn", std::to_string(cudnnGetVersion()));
  const auto reg = [](const std::string& name, auto fn) { return register_timed(name, fn); };
  reg("copy/2GiB", BM_Copy);
  for (const auto& r : kRows) {
    reg("wtconv_fwd/" + row_name(r), [r](benchmark::State& st) { BM_WTConvFwd(st, r, lkjit::WTConvPath::kAuto); });
    reg("wtconv_train/" + row_name(r), [r](benchmark::State& st) { BM_WTConvTrain(st, r, lkjit::WTConvPath::kAuto); });
    reg("wtconv_bwd/" + row_name(r), [r](benchmark::State& st) { BM_WTConvBwd(st, r); });
    // The baseline in both layouts: cuDNN's depthwise kernels are 3-5x faster on NHWC (report.py takes the faster).
    for (int k : {5, 7})
      for (bool train : {false, true})
        for (bool nhwc : {false, true})
          reg(fmt::format("cudnn_dw{}_{}/{}/{}x{}x{}x{}{}", k, train ? "train" : "fwd", r.dtype, r.B, r.C, r.H, r.H,
                          nhwc ? "/nhwc" : ""),
              [r, k, train, nhwc](benchmark::State& st) {
                time_cudnn_depthwise(st, r.dtype, int(r.B), int(r.C), int(r.H), k, k, nhwc, train);
              });
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_kernel_profiles();
  return 0;
}
