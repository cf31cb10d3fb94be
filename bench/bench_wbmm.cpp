// WBMM benchmarks on the GPU: lkjit's fused kernels (forward, backward, forward + backward) against the PyTorch
// path's steps done with cuBLAS in the same run, and a device-to-device copy (the bandwidth yardstick).
// CUDA-event timing (UseManualTime), L2 flushed before every timed iteration, median of repetitions.
//
// Shapes (docs/wbmm.md, issue targets in docs/anchors-h200.md): the operator study, C = 256 at 51.4 M elements
// (64 x 256 x 56 x 56), windows 7 and 14, fp32 with TF32 off (fp32-accurate) and on, and bf16; the WBMM-T layers
// (batch 128, 7x7 windows: 80 @ 56, 160 @ 28, 320 @ 14, 640 @ 7) in bf16, NCHW and channels_last.
// Tile forms beside the defaults: wbmm_wgmma_* (bf16 forward / dgrad on wgmma), wbmm_kt<kchunk>[_wn4]_* (14x14:
// the forward / dgrad K-tiled, M_c's rows streamed in chunks, no column split; 4 warps along the columns),
// wbmm_split_bwd (14x14: the default tiles on the split backward).
// Counters: GB/s of the traffic floor (fwd 2|x|, bwd 3|x|, fwd+bwd 5|x|) and that as % of copy, TFLOP/s of the
// products (2 d FLOP per padded element per product; fwd 1 product, bwd 2).
//
// Baseline "torch_path": the published algorithm's steps in their best layout, T (C, N, d) contiguous for
// cublasGemmStridedBatchedEx: partition copy, Y = T M + T (a copy of T into Y, then the GEMM with beta = 1),
// un-partition copy; backward: partition copies of x and dY, dT = dY M^T + dY, dM = T^T dY, un-partition of dT
// (dR's reduction of dM and M's materialisation are left out). The copies are plain device copies of the same
// bytes, which a permuting partition cannot beat: the row is a lower bound of PyTorch's time for those steps.
// bench/bench_torch.py times PyTorch itself.
//
//   bench_wbmm [--benchmark_filter=...]        (JSON to $OUT/bench_wbmm.json when OUT is set)
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "lkjit/numeric.h"
#include "lkjit/wbmm.h"

namespace {

using namespace lkjit::bench;  // NOLINT

#define CKB(x)                                                                                              \
  do {                                                                                                      \
    cublasStatus_t s_ = (x);                                                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(fmt::format("{}: status {}", #x, int(s_)));   \
  } while (0)

struct Row {
  const char* dtype;
  bool tf32;
  int64_t B, C, H;
  int w;
  bool nhwc;
};

std::vector<Row> rows() {
  std::vector<Row> v;
  for (int w : {7, 14})
    for (auto [dt, tf32] : std::vector<std::pair<const char*, bool>>{{"f32", false}, {"f32", true}, {"bf16", false}})
      v.push_back({dt, tf32, 64, 256, 56, w, false});
  for (bool nhwc : {false, true})
    for (auto [C, H] : std::vector<std::pair<int64_t, int64_t>>{{80, 56}, {160, 28}, {320, 14}, {640, 7}})
      v.push_back({"bf16", false, 128, C, H, 7, nhwc});
  return v;
}

std::string row_name(const Row& r) {
  return fmt::format("{}{}/{}x{}x{}x{}/w{}{}", r.dtype, r.tf32 ? "_tf32" : "", r.B, r.C, r.H, r.H, r.w,
                     r.nhwc ? "/nhwc" : "");
}



struct Sizes {
  int64_t n, padded, windows, d, K;
  size_t eb;
};
Sizes sizes_of(const Row& r) {
  const int64_t nh = (r.H + r.w - 1) / r.w, windows = r.B * nh * nh;
  return {r.B * r.C * r.H * r.H, r.C * windows * r.w * r.w, windows, int64_t(r.w) * r.w,
          int64_t(2 * r.w - 1) * (2 * r.w - 1), size_t(lkjit::dtype_bytes(lkjit::parse_dtype(r.dtype)))};
}

std::vector<float> random_floats(size_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = nd(rng);
  return v;
}

enum class Pass { kFwd, kBwd, kTrain };
const char* pass_name(Pass p) { return p == Pass::kFwd ? "fwd" : p == Pass::kBwd ? "bwd" : "fwd+bwd"; }

// Overrides the forward and dgrad kernels' tiles with form(default tile), halving the channels a block where the
// result outgrows shared memory. False where no such tile is in a kernel's space.
template <class Form>
bool override_products(lkjit::WBMM& layer, const Row& r, bool bwd, Form form) {
  using namespace lkjit;
  bool any = false;
  for (const auto& pk : layer.plan(r.B, r.H, r.H, bwd)) {
    if (pk.spec.kernel != kWBMMFwd && pk.spec.kernel != kWBMMDgrad) continue;
    Tile t = form(Tile(pk.tile));
    for (; !in_space(pk.spec, t, DeviceLimits::for_arch(pk.spec.arch), &pk.shape) && t.get("cpb") > 1;)
      t.set("cpb", t.get("cpb") / 2).set("vec", std::min(t.get("vec"), t.get("cpb")));
    if (!in_space(pk.spec, t, DeviceLimits::for_arch(pk.spec.arch), &pk.shape)) return false;
    layer.set_tile_override(pk.spec.kernel, t);
    any = true;
  }
  return any;
}

// The forward and dgrad kernels on wgmma (engine 2, sm_90a) instead of the default tile's mma.sync: a
// warpgroup of 4 warps along the windows, the default's windows per tile (not on sm_90 without the a).
bool use_wgmma(lkjit::WBMM& layer, const Row& r, bool bwd) {
  return override_products(layer, r, bwd, [](lkjit::Tile t) {
    const int windows16 = t.get("wm") * t.get("mt");
    return t.set("engine", 2).set("wm", 4).set("mt", std::max(1, windows16 / 4));
  });
}

// The forward and dgrad kernels K-tiled (M_c's rows streamed in chunks of kchunk, the kchunk axis) without a
// column split, on the default tile's engine (mma.sync for wgmma, which reads M_c whole) and warps (wn if given).
bool use_ktile(lkjit::WBMM& layer, const Row& r, bool bwd, int kchunk, int wn) {
  return override_products(layer, r, bwd, [&](lkjit::Tile t) {
    t.set("kchunk", kchunk).set("split", 1);
    if (wn) t.set("wn", wn);
    if (t.get("engine") == 2) t.set("engine", 1).set("wm", 4);
    return t;
  });
}

// How a row picks its kernels: the default tiles and path, or the split backward (dgrad + wgrad without dX) with
// the default tiles, wgmma (use_wgmma) or K-tiling (use_ktile: kchunk, wn column warps if given). wgmma and
// K-tiled rows run the split backward too: the dgrad is the kernel they change.
struct Form {
  bool split = false, wgmma = false;
  int kchunk = 0, wn = 0;
};

void BM_Lkjit(benchmark::State& st, Row r, Pass pass, Form form) {
  using namespace lkjit;
  const Sizes z = sizes_of(r);
  WBMMOptions o;
  o.C = r.C, o.wh = o.ww = r.w, o.dtype = parse_dtype(r.dtype), o.allow_tf32 = r.tf32;
  o.layout = r.nhwc ? Layout::kNHWC : Layout::kNCHW;
  WBMM layer(o);
  const bool bwd = pass != Pass::kFwd;
  try {
    layer.plan(r.B, r.H, r.H, bwd);
    if (form.split || form.wgmma || form.kchunk) layer.set_backward_path(WBMMBackward::kSplit);
    if (form.wgmma && !use_wgmma(layer, r, bwd)) throw std::runtime_error("no wgmma tile here (sm_90a only)");
    if (form.kchunk && !use_ktile(layer, r, bwd, form.kchunk, form.wn))
      throw std::runtime_error(fmt::format("no kchunk={} tile here", form.kchunk));
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  const auto R = random_floats(size_t(r.C * z.K), 1.f / r.w, 3);
  DeviceBuffer dR(R.size() * 4), gR(R.size() * 4), x(z.n * z.eb), g(z.n * z.eb), out(z.n * z.eb);
  dR.upload(R.data(), R.size() * 4);
  const auto xb = encode(o.dtype, random_floats(size_t(z.n), 1.f, 5));
  x.upload(xb.data(), xb.size());
  g.upload(xb.data(), xb.size());
  layer.set_weights({static_cast<const float*>(dR.data()), nullptr, nullptr});
  WBMMGradients grads{static_cast<float*>(gR.data()), nullptr, nullptr};
  layer.prepare(r.B, r.H, r.H, bwd);
  std::string label;
  for (const auto& pk : layer.plan(r.B, r.H, r.H, bwd)) label += (label.empty() ? "" : " ") + kernel_name(pk.spec, pk.tile);
  st.SetLabel(label);
  const double floor = pass == Pass::kFwd ? 2 : pass == Pass::kBwd ? 3 : 5;
  const double products = pass == Pass::kFwd ? 1 : pass == Pass::kBwd ? 2 : 3;
  time_loop(st, [&] {
    if (pass != Pass::kBwd) layer.forward(x.data(), out.data(), r.B, r.H, r.H);
    if (bwd) layer.backward(x.data(), g.data(), out.data(), grads, r.B, r.H, r.H);
  }, floor * double(z.n) * double(z.eb), products * 2.0 * double(z.padded) * double(z.d));
}

// The PyTorch path's steps with cuBLAS (see the file comment).
void BM_TorchPath(benchmark::State& st, Row r, Pass pass) {
  const Sizes z = sizes_of(r);
  static cublasHandle_t h = nullptr;
  if (!h) CKB(cublasCreate(&h));
  const bool bf16 = std::string(r.dtype) == "bf16";
  const cudaDataType_t dt = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t ct = !bf16 && r.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CKB(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));  // TF32 or not by the compute type, as PyTorch
  const size_t act = size_t(z.padded) * z.eb, mb = size_t(r.C * z.d * z.d) * z.eb;
  void *x, *T, *Y, *out, *M, *g, *dY, *dT, *dM;
  for (void** p : {&x, &T, &Y, &out, &g, &dY, &dT}) CK(cudaMalloc(p, act));
  CK(cudaMalloc(&M, mb));
  CK(cudaMalloc(&dM, size_t(r.C * z.d * z.d) * 4));
  for (void* p : {x, T, Y, out, g, dY, dT}) CK(cudaMemset(p, 0, act));
  CK(cudaMemset(M, 0, mb));
  const float one = 1.f, zero = 0.f;
  const int d = int(z.d), N = int(z.windows);
  const long long sM = d * d, sT = (long long)N * d;
  // Row-major T (N x d) is column-major T^T (d x N): Y^T = M^T T^T is gemm(N, N, d, N, d, M, T, Y).
  auto fwd = [&] {
    CK(cudaMemcpyAsync(T, x, act, cudaMemcpyDeviceToDevice));   // partition
    CK(cudaMemcpyAsync(Y, T, act, cudaMemcpyDeviceToDevice));   // + T (beta = 1)
    CKB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, d, N, d, &one, M, dt, d, sM, T, dt, d, sT, &one, Y, dt, d,
                                   sT, int(r.C), ct, CUBLAS_GEMM_DEFAULT));
    CK(cudaMemcpyAsync(out, Y, act, cudaMemcpyDeviceToDevice));  // un-partition
  };
  auto bwd = [&] {
    CK(cudaMemcpyAsync(T, x, act, cudaMemcpyDeviceToDevice));   // partition x (PyTorch keeps T: saved)
    CK(cudaMemcpyAsync(dY, g, act, cudaMemcpyDeviceToDevice));  // partition dY
    CK(cudaMemcpyAsync(dT, dY, act, cudaMemcpyDeviceToDevice)); // + dY
    // dT^T = M dY^T: gemm(T, N) of M.
    CKB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, d, N, d, &one, M, dt, d, sM, dY, dt, d, sT, &one, dT, dt,
                                   d, sT, int(r.C), ct, CUBLAS_GEMM_DEFAULT));
    // dM^T = dY^T T (column-major d x d): gemm(N, T, d, d, N, dY, T) in fp32.
    CKB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, d, d, N, &one, dY, dt, d, sT, T, dt, d, sT, &zero, dM,
                                   CUDA_R_32F, d, sM, int(r.C), ct, CUBLAS_GEMM_DEFAULT));
    CK(cudaMemcpyAsync(out, dT, act, cudaMemcpyDeviceToDevice));  // un-partition dX
  };
  st.SetLabel("cuBLAS strided batched GEMM + copies");
  const double floor = pass == Pass::kFwd ? 2 : pass == Pass::kBwd ? 3 : 5;
  const double products = pass == Pass::kFwd ? 1 : pass == Pass::kBwd ? 2 : 3;
  try {
    time_loop(st, [&] {
      if (pass != Pass::kBwd) fwd();
      if (pass != Pass::kFwd) bwd();
    }, floor * double(z.n) * double(z.eb), products * 2.0 * double(z.padded) * double(z.d));
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
  for (void* p : {x, T, Y, out, g, dY, dT, M, dM}) cudaFree(p);
}

void BM_Copy(benchmark::State& st) {
  const size_t n = size_t(2) << 30;
  void *x, *y;
  CK(cudaMalloc(&x, n));
  CK(cudaMalloc(&y, n));
  CK(cudaMemset(x, 0, n));
  time_loop(st, [&] { CK(cudaMemcpyAsync(y, x, n, cudaMemcpyDeviceToDevice)); }, 2.0 * n, 0);
  cudaFree(x);
  cudaFree(y);
}


}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> keep;
  std::vector<char*> args = args_with_out_json(argc, argv, "bench_wbmm", keep);
  int n = int(args.size());
  benchmark::Initialize(&n, args.data());
  if (!start_gpu_bench("bench_wbmm")) return 0;
  benchmark::AddCustomContext("nvrtc", lkjit::nvrtc_version());
  const auto reg = [](const std::string& name, auto fn) { return register_timed(name, fn); };
  reg("copy/2GiB", BM_Copy);
  for (const auto& r : rows())
    for (Pass p : {Pass::kFwd, Pass::kBwd, Pass::kTrain}) {
      const auto lk = [&](const std::string& prefix, Form f) {
        reg(fmt::format("{}_{}/{}", prefix, pass_name(p), row_name(r)), [r, p, f](benchmark::State& st) { BM_Lkjit(st, r, p, f); });
      };
      lk("wbmm", {});
      if (std::string(r.dtype) == "bf16" && p != Pass::kTrain) lk("wbmm_wgmma", {false, true});
      if (r.w == 14 && p == Pass::kBwd) lk("wbmm_split", {true});
      if (r.w == 14 && p != Pass::kTrain)  // d = 196: M_c's part large enough to K-tile
        for (int wn : {0, 4})
          for (int kc : {32, 64}) lk(fmt::format("wbmm_kt{}{}", kc, wn ? "_wn4" : ""), {false, false, kc, wn});
      if (!r.nhwc)  // the baseline's best layout is its own (C, N, d): one row per shape
        reg(fmt::format("torch_path_{}/{}", pass_name(p), row_name(r)), [r, p](benchmark::State& st) { BM_TorchPath(st, r, p); });
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
