// GPU tests of the depthwise kernels against the float64 reference (runtime/reference/dwconv_ref.cpp): every
// problem of tests/gpu/dwconv_problems.h in every dtype and layout (NCHW, channels_last, padded rows), every
// kernel (forward and dgrad, direct and NHWC; wgrad direct and NHWC with the reduction) at its default tile
// and, on the small problems, two tile variants that reach other code paths. Outputs are NaN-poisoned before
// each launch; the tolerance is the output dtype's rounding plus fp32 accumulation error scaled by the sum of
// |terms|, and NaN never passes. wgrad must give identical bits on a second run. Layer-sized problems are
// checked on sampled planes (forward, dgrad) and channels (wgrad). Until the family is wired into the
// generator the kernels are built from the hand-written instance units of tests/dwconv_instances.h.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lkjit/dwconv_reference.h"
#include "lkjit/generator.h"
#include "lkjit/numeric.h"
#include "lkjit/runtime.h"
#include "runtime/nvrtc_compiler.h"
#include "templates/abi/dwconv_params.h"
#include "tests/dwconv_instances.h"
#include "tests/gpu/dwconv_buffers.h"
#include "tests/gpu/dwconv_problems.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/random_inputs.h"
#include "tests/parallel_cases.h"

namespace {

using namespace lkjit;            // NOLINT
using namespace lkjit::testing;   // NOLINT
using lkjit::test::dwconv::DWKernel;
using lkjit::test::dwconv::Instance;
namespace gd = lkjit::gen::dwconv;

struct Case {
  size_t problem;  // index into dwconv_problems()
  DType dtype;
  DWConvLayout layout;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  const auto& ps = dwconv_problems();
  for (size_t i = 0; i < ps.size(); ++i)
    for (DType t : kDWConvDTypes)
      for (DWConvLayout l : kDWConvLayouts)
        if (!(dwconv_is_layer(ps[i]) && l == DWConvLayout::kPadded)) v.push_back({i, t, l});
  return v;
}

// ---- problem set-up and reference -------------------------------------------------------------------

struct ProblemSetup {
  gd::SpecVals spec;
  gd::Padding pad;
  gd::Problem p;
  ref::DWConvArgs args;
};
ProblemSetup setup(const DWConvProblem& q, DType t, int arch) {
  ProblemSetup u;
  u.spec = {t, q.kh, q.kw, q.stride, q.dil, arch};
  u.pad = q.same ? gd::same_padding(u.spec) : gd::Padding{q.pad_top, q.pad_bottom, q.pad_left, q.pad_right};
  u.p = gd::make_problem(u.spec, q.B, q.C, q.H, q.W, u.pad);
  u.args.kh = q.kh, u.args.kw = q.kw, u.args.stride = q.stride, u.args.dil = q.dil;
  u.args.pad_top = u.pad.top, u.args.pad_bottom = u.pad.bottom, u.args.pad_left = u.pad.left, u.args.pad_right = u.pad.right;
  return u;
}

using lkjit::test::as_double;
using lkjit::test::randn;

// Reference values (and sums of |terms|) on the checked elements: all, or sampled planes / channels of a layer.
struct Checked {
  std::vector<size_t> idx;  // NCHW element indices of the output
  std::vector<double> want, scale;
};
struct Reference {
  std::vector<float> x, dy, w, bias;  // inputs (x, dy rounded to the dtype)
  Checked y, dx, dw, db;
};

Reference make_reference(const DWConvProblem& q, const ProblemSetup& u) {
  const auto& p = u.p;
  const int64_t B = p.B, C = p.C, H = p.H, W = p.W, Ho = p.Ho, Wo = p.Wo, KK = int64_t(q.kh) * q.kw;
  Reference r;
  r.x = randn(B * C * H * W, u.spec.dtype, 11 + q.kh);
  r.dy = randn(B * C * Ho * Wo, u.spec.dtype, 12 + q.kw);
  r.w = randn(C * KK, DType::kF32, 13);
  for (float& e : r.w) e /= std::sqrt(float(KK));  // outputs of unit scale
  if (q.bias) r.bias = randn(C, DType::kF32, 14);
  auto add = [](Checked& c, const std::vector<double>& want, const std::vector<double>& scale, size_t first) {
    for (size_t i = 0; i < want.size(); ++i) c.idx.push_back(first + i), c.want.push_back(want[i]), c.scale.push_back(scale[i]);
  };
  auto slice = [](const std::vector<float>& v, int64_t from, int64_t n) {
    return std::vector<float>(v.begin() + from, v.begin() + from + n);
  };
  std::vector<std::pair<int64_t, int64_t>> planes;
  std::vector<int64_t> chans;
  if (dwconv_is_layer(q)) {
    planes = {{0, 0}, {B - 1, C - 1}, {B / 2, C / 3}, {1, C / 2 + 1}};
    chans = {0, C - 1};
  } else {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) planes.push_back({b, c});
    for (int64_t c = 0; c < C; ++c) chans.push_back(c);
  }
  const ref::DWConvShape plane{1, 1, H, W};
  for (auto [b, c] : planes) {
    const auto xp = slice(r.x, (b * C + c) * H * W, H * W), gp = slice(r.dy, (b * C + c) * Ho * Wo, Ho * Wo);
    const auto wc = slice(r.w, c * KK, KK);
    const auto bc = r.bias.empty() ? std::vector<float>{} : std::vector<float>{r.bias[c]};
    add(r.y, ref::dwconv_forward(as_double(xp), plane, as_double(wc), as_double(bc), u.args),
        ref::dwconv_forward(as_double(xp, true), plane, as_double(wc, true), as_double(bc, true), u.args), (b * C + c) * Ho * Wo);
    add(r.dx, ref::dwconv_dgrad(as_double(gp), plane, as_double(wc), u.args),
        ref::dwconv_dgrad(as_double(gp, true), plane, as_double(wc, true), u.args), (b * C + c) * H * W);
  }
  for (int64_t c : chans) {
    std::vector<float> xs, gs;
    for (int64_t b = 0; b < B; ++b) {
      const auto xp = slice(r.x, (b * C + c) * H * W, H * W), gp = slice(r.dy, (b * C + c) * Ho * Wo, Ho * Wo);
      xs.insert(xs.end(), xp.begin(), xp.end());
      gs.insert(gs.end(), gp.begin(), gp.end());
    }
    const ref::DWConvShape sh{B, 1, H, W};
    add(r.dw, ref::dwconv_wgrad(as_double(xs), sh, as_double(gs), u.args),
        ref::dwconv_wgrad(as_double(xs, true), sh, as_double(gs, true), u.args), c * KK);
    add(r.db, ref::dwconv_dbias(as_double(gs), sh, u.args), ref::dwconv_dbias(as_double(gs, true), sh, u.args), c);
  }
  return r;
}

// |got - want| <= ulp(dtype) |want| + (4 * 2^-24 * sqrt(terms) + weight_rel) * sum |terms|; NaN fails. weight_rel:
// the relative error of the weights a kernel multiplies by (the tensor-core kernels' two 16-bit parts).
void expect_close(const std::string& what, const std::vector<float>& got, const Checked& c, DType out, double terms,
                  double weight_rel = 0) {
  const double ulp = out == DType::kF32 ? 0.0 : out == DType::kF16 ? 1.01 / 2048 : 1.01 / 256;
  const double acc = 4.0 * std::ldexp(1.0, -24) * std::sqrt(std::max(1.0, terms)) + weight_rel;
  int bad = 0;
  std::string first;
  for (size_t j = 0; j < c.idx.size(); ++j) {
    const double g = got[c.idx[j]], w = c.want[j], tol = ulp * std::fabs(w) + acc * c.scale[j] + 1e-30;
    if (!(std::fabs(g - w) <= tol) && bad++ == 0)
      first = "element " + std::to_string(c.idx[j]) + ": got " + std::to_string(g) + ", want " + std::to_string(w) +
              " (tolerance " + std::to_string(tol) + ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << c.idx.size() << " elements out of tolerance; first " << first;
}

// ---- kernels ----------------------------------------------------------------------------------------------

constexpr DWKernel kRuns[] = {DWKernel::kFwdDirect, DWKernel::kFwdNhwc, DWKernel::kDgradDirect, DWKernel::kDgradNhwc,
                              DWKernel::kWgradDirect, DWKernel::kWgradNhwc, DWKernel::kFwdMma, DWKernel::kDgradMma,
                              DWKernel::kWgradMma};
// The tensor-core forward and dgrad's weights: hi + lo parts within 2^-18 (bf16) / 2^-22 (fp16) of each tap; twice
// that here. (wgrad_mma multiplies the activations themselves, exactly.)
double weight_rel(const Instance& in, DType t) {
  if (in.name.find("_mma_") == std::string::npos || in.name.find("_wgrad_") != std::string::npos) return 0;
  return std::ldexp(1.0, t == DType::kBF16 ? -17 : -21);
}

// The instances a case runs: each kernel at its default tile and, on small problems, the variants that realise
// (a variant that falls back to the default is left out: the default runs anyway); then the reduction.
std::vector<Instance> instances(const Case& cs, int arch) {
  const DWConvProblem& q = dwconv_problems()[cs.problem];
  const ProblemSetup u = setup(q, cs.dtype, arch);
  std::vector<Instance> v;
  for (int var = 0; var < (dwconv_is_layer(q) ? 1 : 3); ++var)
    for (DWKernel k : kRuns) {
      Instance in = lkjit::test::dwconv::make_instance(k, u.spec, u.p, var);
      if (in.ok && in.variant == var) v.push_back(std::move(in));
    }
  v.push_back(lkjit::test::dwconv::make_instance(DWKernel::kWgradReduce, u.spec, u.p, 0));
  return v;
}

std::mutex g_built_mu;
std::map<std::string, CompiledKernel> g_built;

CompiledKernel build(const Instance& in, int arch) {
  GeneratedSource src;
  src.kernel_name = in.name;
  src.source = in.source;
  src.headers = &embedded_headers();
  CompiledKernel k;
  k.kernel_name = in.name;
  k.key = "dwconv-test:" + in.name;  // the module cache's key; the tile stays empty (no rebuild from a spec)
  k.cubin = rt::nvrtc_compile(src, arch).cubin;
  k.origin = "compiled";
  k.arch = arch;
  return k;
}

// Compiles the instances of every selected case once, on all cores (serially NVRTC would take minutes); a
// kernel that fails here is compiled again, and reported, by its test.
void prewarm(int arch) {
  static std::once_flag once;
  std::call_once(once, [arch] {
    std::map<std::string, Instance> todo;
    const auto all = cases();
    const std::set<std::string> selected = lkjit::test::selected_case_names();
    for (const Case& c : all)
      if (selected.count(dwconv_problem_name(dwconv_problems()[c.problem], c.dtype, c.layout)))
        for (auto& in : instances(c, arch)) todo.emplace(in.name, in);
    std::vector<const Instance*> list;
    for (auto& [n, in] : todo) list.push_back(&in);
    lkjit::test::for_each_on_all_cores(list.size(), [&](size_t i) {
      try {
        CompiledKernel k = build(*list[i], arch);
        std::lock_guard<std::mutex> lock(g_built_mu);
        g_built.emplace(k.kernel_name, std::move(k));
      } catch (...) {
      }
    });
  });
}

const LoadedKernel& kernel(const Instance& in, int arch) {
  std::lock_guard<std::mutex> lock(g_built_mu);
  auto it = g_built.find(in.name);
  if (it == g_built.end()) it = g_built.emplace(in.name, build(in, arch)).first;
  return load_kernel(it->second);
}

class DWConvKernels : public GpuTestP<Case> {};

TEST_P(DWConvKernels, MatchTheReference) {
  const Case& cs = GetParam();
  const DWConvProblem& q = dwconv_problems()[cs.problem];
  const int arch = device_info().arch;
  prewarm(arch);
  const DType t = cs.dtype;
  const ProblemSetup u = setup(q, t, arch);
  const auto& p = u.p;
  const int64_t B = p.B, C = p.C, H = p.H, W = p.W, Ho = p.Ho, Wo = p.Wo, KK = int64_t(q.kh) * q.kw;
  // One reference at a time, shared by the layouts of a problem and dtype (the cases come in that order); a
  // layer's inputs are hundreds of MB.
  static std::pair<size_t, DType> held{SIZE_MAX, DType::kF32};
  static Reference r;
  if (held != std::make_pair(cs.problem, t)) r = make_reference(q, u), held = {cs.problem, t};

  const auto xst = dwconv_strides(cs.layout, C, H, W), yst = dwconv_strides(cs.layout, C, Ho, Wo);
  const int eb = dtype_bytes(t);
  DeviceBuffer x = upload(r.x, t, xst, B, C, H, W), dy = upload(r.dy, t, yst, B, C, Ho, Wo);
  DeviceBuffer w(r.w.size() * 4), bias(std::max<size_t>(4, r.bias.size() * 4));
  w.upload(r.w.data(), r.w.size() * 4);
  if (!r.bias.empty()) bias.upload(r.bias.data(), r.bias.size() * 4);
  DeviceBuffer y = poisoned(extent(yst, B, C, Ho, Wo) * eb), dx = poisoned(extent(xst, B, C, H, W) * eb);
  DeviceBuffer dw = poisoned(C * KK * 4), db = poisoned(C * 4);

  DWConvParams base{};
  base.x = x.data(), base.w = static_cast<const float*>(w.data());
  base.bias = r.bias.empty() ? nullptr : static_cast<const float*>(bias.data());
  base.y = y.data(), base.dy = dy.data(), base.dx = dx.data();
  base.dw = static_cast<float*>(dw.data()), base.dbias = q.bias ? static_cast<float*>(db.data()) : nullptr;
  for (int i = 0; i < 4; ++i) base.x_st[i] = base.dx_st[i] = xst[i], base.y_st[i] = base.dy_st[i] = yst[i];
  base.B = int(B), base.C = int(C), base.H = int(H), base.W = int(W), base.Ho = int(Ho), base.Wo = int(Wo);
  base.ph = p.ph, base.pw = p.pw, base.taps = int(KK);

  const Instance red = lkjit::test::dwconv::make_instance(DWKernel::kWgradReduce, u.spec, p, 0);
  for (const Instance& in : instances(cs, arch)) {
    SCOPED_TRACE(in.name);
    const bool fwd = in.name.rfind("lkjit_dwconv_fwd_", 0) == 0, dgrad = in.name.rfind("lkjit_dwconv_dgrad_", 0) == 0;
    const bool wgrad = in.name.rfind("lkjit_dwconv_wgrad_direct", 0) == 0 || in.name.rfind("lkjit_dwconv_wgrad_nhwc", 0) == 0 ||
                       in.name.rfind("lkjit_dwconv_wgrad_mma", 0) == 0;
    if (fwd || dgrad) {
      DeviceBuffer& out = fwd ? y : dx;
      out.fill_u32(0xffffffffu);
      DWConvParams prm = base;
      prm.tiles_h = in.launch.tiles_h, prm.tiles_w = in.launch.tiles_w;
      launch(kernel(in, arch), lkjit::test::dwconv::launch_geometry(in), &prm, sizeof(prm));
      synchronize();
      if (fwd) expect_close("y", download(y, t, yst, B, C, Ho, Wo), r.y, t, double(KK), weight_rel(in, t));
      else expect_close("dx", download(dx, t, xst, B, C, H, W), r.dx, t, double(KK), weight_rel(in, t));
    } else if (wgrad) {
      DWConvParams prm = base;
      prm.tiles_h = in.launch.tiles_h, prm.tiles_w = in.launch.tiles_w, prm.chunks = in.launch.chunks;
      const bool direct = in.name.rfind("lkjit_dwconv_wgrad_direct", 0) == 0;
      const bool mma = in.name.rfind("lkjit_dwconv_wgrad_mma", 0) == 0;
      const auto st = direct ? gd::wgrad_direct_part_strides(u.spec, p, in.launch.chunks)
                      : mma  ? gd::wgrad_mma_part_strides(u.spec, p, in.launch.chunks)
                             : gd::wgrad_nhwc_part_strides(u.spec, p, in.launch.chunks);
      for (int i = 0; i < 3; ++i) prm.part_st[i] = st.st[i];
      DeviceBuffer part = poisoned(size_t(dwc::part_floats(int(C), in.launch.chunks, int(KK))) * 4);
      prm.partial = static_cast<float*>(part.data());
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        part.fill_u32(0xffffffffu), dw.fill_u32(0xffffffffu), db.fill_u32(0xffffffffu);
        launch(kernel(in, arch), lkjit::test::dwconv::launch_geometry(in), &prm, sizeof(prm));
        launch(kernel(red, arch), lkjit::test::dwconv::launch_geometry(red), &prm, sizeof(prm));
        synchronize();
        std::vector<float> dwv(static_cast<size_t>(C * KK)), dbv(static_cast<size_t>(C));
        dw.download(dwv.data(), dwv.size() * 4);
        db.download(dbv.data(), dbv.size() * 4);
        if (run == 0) {
          expect_close("dw", dwv, r.dw, DType::kF32, double(B) * Ho * Wo);
          if (q.bias) expect_close("dbias", dbv, r.db, DType::kF32, double(B) * Ho * Wo);
          first = dwv;
        } else {
          EXPECT_EQ(std::memcmp(first.data(), dwv.data(), dwv.size() * 4), 0) << "wgrad is not bit-identical across runs";
        }
      }
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return dwconv_problem_name(dwconv_problems()[info.param.problem], info.param.dtype, info.param.layout);
}
INSTANTIATE_TEST_SUITE_P(Problems, DWConvKernels, ::testing::ValuesIn(cases()), case_name);

}  // namespace
