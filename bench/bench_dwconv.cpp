// Depthwise-convolution benchmarks on the GPU (lkjit::DepthwiseConv against cuDNN called directly, each in NCHW
// and in NHWC, cuDNN with its fastest algorithm of cudnnFind*), forward and training step (forward, dgrad, wgrad
// and dbias), with a device-to-device copy measured in the same run. CUDA-event timing (UseManualTime), L2
// flushed before every timed iteration. Counters: GB/s of the traffic floor (forward: read x, write y; training
// step: 5 activation passes) and %copy of the measured copy bandwidth; TFLOP/s (2 B C Ho Wo kh kw a pass, three
// passes a step) and %FFMA of the FP32 peak (SMs x 128 lanes x 2 x clock). Rows: ConvNeXt-T's 7x7 layers and
// RepLKNet-31B's at batch 64, SLaK's 51x5 / 5x51, and the 51.4 M-element k = 5 / 13 / 27 anchors (fp32). Rows
// "lkjit/" take the layer's automatic path; on 16-bit rows "lkjit-mma/" pin the tensor-core kernels and
// "lkjit-ffma/" the layout's FFMA kernels (direct for NCHW, nhwc for NHWC).
//
//   bench_dwconv [--benchmark_filter=...]     (with $OUT set: JSON to $OUT/bench_dwconv.json as well)
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "bench/cudnn_depthwise.h"
#include "lkjit/dwconv.h"
#include "lkjit/generator.h"
#include "lkjit/numeric.h"
#include "lkjit/runtime.h"
#include "lkjit/testing.h"

namespace {

using namespace lkjit::bench;  // NOLINT


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

void BM_Lkjit(benchmark::State& st, Row r, lkjit::Layout layout, bool train, lkjit::DWConvPath path) {
  using namespace lkjit;
  DWConvOptions o = options_of(r);
  o.layout = layout;
  DepthwiseConv layer(o);
  layer.set_path(path);
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



}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> keep;
  std::vector<char*> args = args_with_out_json(argc, argv, "bench_dwconv", keep);
  int n_args = int(args.size());
  benchmark::Initialize(&n_args, args.data());
  const auto dev = start_gpu_bench("bench_dwconv");
  if (!dev) return 0;
  g_ffma_tflops = dev->limits.sm_count * 128.0 * 2 * dev->clock_mhz * 1e6 / 1e12;
  benchmark::AddCustomContext("cudnn", std::to_string(cudnnGetVersion()));
  benchmark::AddCustomContext("ffma_TFLOPs", fmt::format("{:.1f}", g_ffma_tflops));
  for (const Row& r : kRows)
    for (bool train : {false, true})
      for (bool nhwc : {false, true}) {
        const std::string name = fmt::format("{}/{}/{}x{}x{}x{}/k{}x{}/{}/{}", r.tag, r.dtype, r.B, r.C, r.H, r.H, r.kh,
                                             r.kw, nhwc ? "nhwc" : "nchw", train ? "train" : "fwd");
        const auto layout = nhwc ? lkjit::Layout::kNHWC : lkjit::Layout::kNCHW;
        std::vector<benchmark::internal::Benchmark*> runs = {
            benchmark::RegisterBenchmark(("lkjit/" + name).c_str(), BM_Lkjit, r, layout, train, lkjit::DWConvPath::kAuto),
            benchmark::RegisterBenchmark(("cudnn/" + name).c_str(), [r, nhwc, train](benchmark::State& st) {
              time_cudnn_depthwise(st, r.dtype, int(r.B), int(r.C), int(r.H), r.kh, r.kw, nhwc, train,
                                   (train ? 3 : 1) * flops_of(r));
            })};
        if (std::string(r.dtype) != "f32") {
          runs.push_back(benchmark::RegisterBenchmark(("lkjit-mma/" + name).c_str(), BM_Lkjit, r, layout, train,
                                                      lkjit::DWConvPath::kMma));
          runs.push_back(benchmark::RegisterBenchmark(("lkjit-ffma/" + name).c_str(), BM_Lkjit, r, layout, train,
                                                      nhwc ? lkjit::DWConvPath::kNhwc : lkjit::DWConvPath::kDirect));
        }
        for (auto* b : runs) b->UseManualTime()->Unit(benchmark::kMillisecond)->MinWarmUpTime(0.02)->MinTime(0.2);
      }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
