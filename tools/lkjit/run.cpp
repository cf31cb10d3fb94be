// `lkjit run`: the main job. WTConv forward on the four WTConv layers of WTConvNeXt-T (224x224, batch
// 64) or given shapes: generate, compile or load from the cache, run, check against the float64
// reference, time. Without a GPU: compile the same kernels for sm_90 into the cache and list them.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <set>

#include "lkjit/cache.h"
#include "lkjit/numeric.h"
#include "lkjit/reference.h"
#include "lkjit/runtime.h"
#include "lkjit/testing.h"
#include "lkjit/tuning.h"
#include "lkjit/wtconv.h"
#include "tools/lkjit/common.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

cl::SubCommand kRun("run", "WTConv forward on WTConvNeXt-T layers (default) or given shapes: compile, run, check, time");
cl::OptionCategory kRunCat("lkjit run options");
cl::opt<std::string> kShapes("shapes", cl::desc("layers as B:C:H:W:L separated by commas (default: WTConvNeXt-T at 224x224, batch 64)"),
                             cl::init("64:96:56:56:5,64:192:28:28:4,64:384:14:14:3,64:768:7:7:2"), cl::sub(kRun), cl::cat(kRunCat));
OddIntOption<1, 31> kK("k", cl::desc("odd kernel size, 1..31"), cl::init(5), cl::sub(kRun), cl::cat(kRunCat));
cl::opt<std::string> kDtypes("dtypes", cl::desc("comma-separated: f32,f16,bf16"), cl::init("f32,f16"), cl::sub(kRun), cl::cat(kRunCat));
IntOption<1, 64> kStride("stride", cl::desc("output stride, 1..64"), cl::init(1), cl::sub(kRun), cl::cat(kRunCat));
cl::opt<bool> kNoBias("no-bias", cl::desc("layers without bias"), cl::sub(kRun), cl::cat(kRunCat));
IntOption<1, kIntMax> kIters("iters", cl::desc("timed iterations (median reported)"), cl::init(50), cl::sub(kRun), cl::cat(kRunCat));
IntOption<1, kIntMax> kCheckPlanes("check-planes", cl::desc("(b,c) planes per layer checked against the float64 reference"), cl::init(16), cl::sub(kRun), cl::cat(kRunCat));
cl::opt<std::string> kArch("arch", cl::desc("target arch when there is no GPU"), cl::init("sm_90"), cl::sub(kRun), cl::cat(kRunCat));
cl::opt<std::string> kPath("path", cl::desc("auto | plane | tiled | lane (run times NCHW activations, which the lane "
                                            "kernels read uncoalesced)"), cl::init("auto"), cl::sub(kRun), cl::cat(kRunCat));

struct Layer {
  int64_t B, C, H, W;
  int L;
};

std::vector<Layer> parse_layers(const std::string& s) {
  std::vector<Layer> out;
  for (const auto& item : split_list(s, "--shapes")) {
    const auto v = parse_dims(item, "--shapes", "B:C:H:W:L");
    if (v[4] < 0 || v[4] > kMaxLevels)
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("lkjit: error: --shapes: L={} in '{}' is out of range; supported: L in [0, {}]", v[4], item, kMaxLevels));
    out.push_back({v[0], v[1], v[2], v[3], static_cast<int>(v[4])});
  }
  if (out.empty()) throw Error(ErrorCode::kUsage, "lkjit: error: --shapes is empty");
  return out;
}

WTConvPath parse_path(const std::string& s) {
  if (s == "auto") return WTConvPath::kAuto;
  if (s == "plane") return WTConvPath::kPlane;
  if (s == "tiled") return WTConvPath::kTiled;
  if (s == "lane") return WTConvPath::kLane;
  throw SpecError(fmt::format("lkjit: error: --path '{}' is unknown; supported: auto, plane, tiled, lane", s));
}

int run_without_gpu(const std::vector<Layer>& layers, const std::vector<DType>& dtypes, const std::string& why) {
  const int arch = parse_arch(kArch);
  const std::string into = disk_cache_enabled()
                               ? fmt::format("into {}", cache_dir())
                               : "(the on-disk cache is disabled by LKJIT_CACHE_DISABLE=1: nothing is kept)";
  std::cout << fmt::format("lkjit run: no GPU ({}).\nCompiling the same kernels for {} {} instead.\n\n", why,
                           arch_name(arch), into);
  std::cout << fmt::format("{:<62} {:>9} {:>9}\n", "kernel", "origin", "seconds");
  const DeviceLimits lim = DeviceLimits::for_arch(arch);
  int n = 0;
  std::string store_error;     // as `lkjit compile`: a kernel not stored is reported, and the run fails
  std::set<std::string> seen;  // layers share kernels (e.g. the fold kernel): list each once
  for (const auto& ly : layers)
    for (DType dt : dtypes) {
      WTConvOptions o{ly.C, kK, ly.L, dt, !kNoBias, kStride, 0};
      for (const auto& pk : wtconv_plan(o, Shape{ly.B, ly.C, ly.H, ly.W, kStride}, lim, false, parse_path(kPath))) {
        if (!seen.insert(kernel_name(pk.spec, pk.tile)).second) continue;
        const auto ck = compile_kernel(pk.spec, pk.tile);
        std::cout << fmt::format("{:<62} {:>9} {:>9.3f}{}\n", ck.kernel_name, ck.origin, ck.seconds,
                                 ck.store_error.empty() ? "" : "  (not cached)");
        if (store_error.empty()) store_error = ck.store_error;
        ++n;
      }
    }
  if (!store_error.empty())
    throw CacheError(fmt::format("lkjit: error: {}: the compiled kernels could not be stored in the cache: {}",
                                 cache_dir(), store_error));
  std::cout << fmt::format("\n{} kernels ready for {}; run on a GPU to execute and check them.\n", n, arch_name(arch));
  return 0;
}

}  // namespace

bool run_cmd() { return static_cast<bool>(kRun); }

int run_main() {
  const auto layers = parse_layers(kShapes);
  std::vector<DType> dtypes;
  for (const auto& d : split_list(kDtypes, "--dtypes")) dtypes.push_back(parse_dtype(d));
  // Every layer is checked (options and sizes) before anything is compiled or run.
  for (const auto& ly : layers)
    for (DType dt : dtypes)
      wtconv_plan({ly.C, kK, ly.L, dt, !kNoBias, kStride, 0}, Shape{ly.B, ly.C, ly.H, ly.W, kStride},
                  DeviceLimits::for_arch(parse_arch(kArch)), false, parse_path(kPath));
  const WTConvPath path = parse_path(kPath);
  // The cache folder is made or refused (unsafe, not a folder) before the first line of output, so that its
  // error comes alone rather than after a header.
  if (disk_cache_enabled()) KernelCache().check();
  // A GPU run's layers would ignore a broken database quietly; without one it is never read.
  if (resolve_tune_mode(std::nullopt, TuneMode::kCached) != TuneMode::kOff) warn_broken_tuning_db(tuning_db_path());
  std::string why;
  if (!gpu_available(&why)) return run_without_gpu(layers, dtypes, why);

  const DeviceInfo dev = device_info(0);
  std::cout << fmt::format("lkjit run: {} ({}, {} SMs), NVRTC {}, cache {}\n", dev.name, arch_name(dev.arch),
                           dev.limits.sm_count, nvrtc_version(), cache_dir());
  std::cout << fmt::format("WTConv forward, k={}, stride={}, bias={}, median of {} runs\n\n", int(kK), int(kStride),
                           !kNoBias, int(kIters));
  std::cout << fmt::format("{:<18} {:>2} {:<5} {:<6} {:>9} {:>8} {:>10} {:>9}  {}\n", "B x C x H x W", "L", "dtype",
                           "path", "ms", "GB/s", "max err", "check", "kernels");
  std::mt19937_64 rng(1234);
  bool all_ok = true;
  for (const auto& ly : layers) {
    for (DType dt : dtypes) {
      WTConvOptions o{ly.C, kK, ly.L, dt, !kNoBias, kStride, 0};
      WTConv layer(o);
      layer.set_path(path);
      const Shape sh{ly.B, ly.C, ly.H, ly.W, kStride};
      const auto params = ref::init_params(static_cast<int>(ly.C), kK, ly.L, !kNoBias, 42);
      const auto dparams = testing::upload_params(params);
      layer.set_weights(dparams.weights);
      const size_t n = static_cast<size_t>(sh.numel()), nout = static_cast<size_t>(sh.B * sh.C * sh.H_out() * sh.W_out());
      const auto xr = testing::random_tensor(n, dt, rng());
      const size_t eb = dtype_bytes(dt);
      DeviceBuffer x(n * eb), out(nout * eb + 4);
      const auto xbytes = encode(dt, xr);
      x.upload(xbytes.data(), xbytes.size());
      out.fill_u32(0xffffffffu);  // NaN poison: every output must be written
      layer.prepare(ly.B, ly.H, ly.W);
      const std::string origin = layer.last_origin();
      layer.forward(x.data(), out.data(), ly.B, ly.H, ly.W);
      synchronize();
      std::vector<uint8_t> raw(nout * eb);
      out.download(raw.data(), raw.size());
      // Check a sample of planes (always the first and last) against the float64 reference.
      const auto tol = testing::tolerance(dt);
      double max_err = 0;
      bool ok = true;
      const int64_t planes = sh.B * sh.C, hwo = sh.H_out() * sh.W_out();
      const int checks = static_cast<int>(std::min<int64_t>(kCheckPlanes, planes));
      for (int i = 0; i < checks; ++i) {
        const int64_t pl = i == 0 ? 0 : (i == checks - 1 ? planes - 1 : int64_t(rng() % planes));
        const int64_t c = pl % sh.C;
        std::vector<double> xp(xr.begin() + pl * sh.H * sh.W, xr.begin() + (pl + 1) * sh.H * sh.W);
        const auto want = ref::wtconv_forward(xp, ref::Shape4{1, 1, sh.H, sh.W}, testing::slice_channel(params, c), kStride);
        std::vector<float> got(hwo);
        for (int64_t j = 0; j < hwo; ++j) got[j] = decode_one(dt, raw.data(), static_cast<size_t>(pl * hwo + j));
        const auto cmp = testing::compare(got, want, tol);
        ok = ok && cmp.ok;
        max_err = std::max(max_err, cmp.max_abs_err);
      }
      all_ok = all_ok && ok;
      // Timing.
      EventTimer timer;
      std::vector<float> ms;
      for (int i = 0; i < 3; ++i) layer.forward(x.data(), out.data(), ly.B, ly.H, ly.W);
      for (int i = 0; i < kIters; ++i) {
        timer.start();
        layer.forward(x.data(), out.data(), ly.B, ly.H, ly.W);
        ms.push_back(timer.stop_ms());
      }
      std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
      const double med = ms[ms.size() / 2];
      const double gbs = double(n + nout) * eb / (med * 1e-3) / 1e9;
      const auto plan = layer.plan(ly.B, ly.H, ly.W);
      const Kernel main = plan.back().spec.kernel;
      const char* path_name = main == kWTConvFwdPlane ? "plane" : main == kWTConvFwdLane ? "lane" : "tiled";
      std::cout << fmt::format("{:<18} {:>2} {:<5} {:<6} {:>9.4f} {:>8.0f} {:>10.2e} {:>9}  {} ({})\n",
                               sh.to_string(), ly.L, to_string(dt), path_name, med, gbs, max_err,
                               ok ? "ok" : "FAIL", plan.size() - 1, origin);
    }
  }
  std::cout << "\nGB/s counts the 2N floor (read X, write out). Check: float64 reference on sampled planes, "
               "|err| <= atol + rtol |ref| per dtype.\n";
  return all_ok ? 0 : 2;
}

}  // namespace lkjit::tool
