#include "lkjit/testing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "lkjit/numeric.h"

namespace lkjit::testing {
namespace {

DeviceBuffer upload(const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  DeviceBuffer b(std::max<size_t>(f.size(), 1) * 4);
  if (!f.empty()) b.upload(f.data(), f.size() * 4);
  return b;
}

std::vector<double> download(const DeviceBuffer& b, size_t n) {
  std::vector<float> f(n);
  if (n) b.download(f.data(), n * 4);
  return std::vector<double>(f.begin(), f.end());
}

std::vector<double> download(const GuardedBuffer& b, size_t n) { return download(b.buffer(), n); }

}  // namespace

GuardedBuffer::GuardedBuffer(size_t bytes, int device)
    : buf_((bytes + kGuardBytes + 3) / 4 * 4, device), bytes_(bytes) {}

void GuardedBuffer::poison() {
  buf_.fill_u32(0xffffffffu);
  const std::vector<uint8_t> guard(buf_.bytes() - bytes_, kGuardByte);
  buf_.upload(guard.data(), guard.size(), bytes_);
}

int64_t GuardedBuffer::guard_bytes_changed() const {
  std::vector<uint8_t> guard(buf_.bytes() - bytes_);
  buf_.download(guard.data(), guard.size(), bytes_);
  return std::count_if(guard.begin(), guard.end(), [](uint8_t b) { return b != kGuardByte; });
}

DeviceParams upload_params(const ref::WTConvParams& p, bool with_grads) {
  DeviceParams d;
  std::vector<const std::vector<double>*> all = {&p.base_w, &p.base_b, &p.base_s};
  for (int l = 0; l < p.L; ++l) {
    all.push_back(&p.level_w[l]);
    all.push_back(&p.level_s[l]);
  }
  for (const auto* v : all) {
    d.bufs.push_back(upload(*v));
    if (with_grads) d.grad_bufs.emplace_back(std::max<size_t>(v->size(), 1) * 4);
  }
  auto f = [&](size_t i) { return static_cast<const float*>(d.bufs[i].data()); };
  d.weights.base_w = f(0);
  d.weights.base_b = p.base_b.empty() ? nullptr : f(1);
  d.weights.base_s = f(2);
  for (int l = 0; l < p.L; ++l) {
    d.weights.level_w[l] = f(3 + 2 * l);
    d.weights.level_s[l] = f(4 + 2 * l);
  }
  if (with_grads) {
    auto g = [&](size_t i) { return static_cast<float*>(d.grad_bufs[i].data()); };
    d.grads.base_w = g(0);
    d.grads.base_b = p.base_b.empty() ? nullptr : g(1);
    d.grads.base_s = g(2);
    for (int l = 0; l < p.L; ++l) {
      d.grads.level_w[l] = g(3 + 2 * l);
      d.grads.level_s[l] = g(4 + 2 * l);
    }
  }
  return d;
}

void DeviceParams::poison_grads() {
  for (auto& b : grad_bufs) b.poison();
}

std::string DeviceParams::grad_guards_changed() const {
  std::string r;
  for (size_t i = 0; i < grad_bufs.size(); ++i) {
    const int64_t n = grad_bufs[i].guard_bytes_changed();
    if (n == 0) continue;
    const std::string name = i < 3 ? std::string(i == 0 ? "base_w" : i == 1 ? "base_b" : "base_s")
                                    : fmt::format("level_{}[{}]", (i - 3) % 2 ? 's' : 'w', (i - 3) / 2);
    r += fmt::format("{}{}: {} guard bytes changed", r.empty() ? "" : ", ", name, n);
  }
  return r;
}

ref::WTConvGrads download_grads(const DeviceParams& d, const ref::WTConvParams& p) {
  ref::WTConvGrads g;
  g.base_w = download(d.grad_bufs[0], p.base_w.size());
  g.base_b = download(d.grad_bufs[1], p.base_b.size());
  g.base_s = download(d.grad_bufs[2], p.base_s.size());
  for (int l = 0; l < p.L; ++l) {
    g.level_w.push_back(download(d.grad_bufs[3 + 2 * l], p.level_w[l].size()));
    g.level_s.push_back(download(d.grad_bufs[4 + 2 * l], p.level_s[l].size()));
  }
  return g;
}

ref::WTConvParams slice_channel(const ref::WTConvParams& p, int64_t c) {
  ref::WTConvParams q;
  const int kk = p.k * p.k;
  q.C = 1;
  q.k = p.k;
  q.L = p.L;
  q.base_w.assign(p.base_w.begin() + c * kk, p.base_w.begin() + (c + 1) * kk);
  if (!p.base_b.empty()) q.base_b = {p.base_b[c]};
  q.base_s = {p.base_s[c]};
  for (int l = 0; l < p.L; ++l) {
    q.level_w.emplace_back(p.level_w[l].begin() + 4 * c * kk, p.level_w[l].begin() + 4 * (c + 1) * kk);
    q.level_s.emplace_back(p.level_s[l].begin() + 4 * c, p.level_s[l].begin() + 4 * (c + 1));
  }
  return q;
}

ref::WTConvParams random_params(int C, int k, int L, bool bias, uint64_t seed) {
  ref::WTConvParams p = ref::init_params(C, k, L, bias, seed);  // shapes, checks and kaiming-uniform weights
  std::mt19937_64 rng(seed ^ 0x5ca1ab1eu);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto scale = [&] {
    const double m = u(rng) < 0.5 ? 0.3 + 0.5 * u(rng) : 1.25 + 0.75 * u(rng);
    return u(rng) < 0.5 ? -m : m;
  };
  for (double& b : p.base_b) b = 2 * u(rng) - 1;
  for (double& s : p.base_s) s = scale();
  for (auto& ls : p.level_s)
    for (double& s : ls) s = scale();
  return p;
}

Tolerance tolerance(DType t) {
  // fp32: accumulation-order error only. fp16/bf16: one output rounding (2^-11 / 2^-8 relative)
  // plus cancellation in sums of a few hundred terms of magnitude ~1.
  switch (t) {
    case DType::kF32: return {1e-4, 1e-4};
    case DType::kF16: return {2e-3, 2e-3};
    case DType::kBF16: return {1.5e-2, 1.5e-2};
  }
  return {0, 0};
}

Tolerance gradient_tolerance(double scale, DType t) {
  const double rel = t == DType::kF32 ? 2e-4 : 2e-3;
  return {rel * (scale + 1e-3), rel};
}

std::string Comparison::to_string() const {
  return fmt::format("max |err| {:.3e}, worst err/tol {:.3f} at index {} (got {}, want {})", max_abs_err,
                     worst_ratio, worst_index, worst_got, worst_want);
}

Comparison compare(const std::vector<float>& got, const std::vector<double>& want, Tolerance tol) {
  Comparison c;
  if (got.size() != want.size()) {
    c.ok = false;
    c.worst_ratio = INFINITY;
    return c;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    double ratio = err / (tol.atol + tol.rtol * std::fabs(want[i]));
    if (std::isnan(ratio)) ratio = INFINITY;  // NaN never passes
    if (std::isnan(err) || err > c.max_abs_err) c.max_abs_err = std::isnan(err) ? INFINITY : err;
    if (ratio > c.worst_ratio || c.worst_index < 0) {
      c.worst_ratio = ratio;
      c.worst_index = static_cast<int64_t>(i);
      c.worst_got = got[i];
      c.worst_want = want[i];
    }
  }
  c.ok = c.worst_ratio <= 1.0;
  return c;
}

std::vector<float> random_tensor(size_t n, DType t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to(t, nd(rng));
  return v;
}

std::optional<std::string> compare_outputs(const PassOutputs& want, const PassOutputs& got, DType dtype) {
  if (!want.guard_damage.empty()) return "the reference run wrote past its buffers: " + want.guard_damage;
  if (!got.guard_damage.empty()) return "wrote past its buffers: " + got.guard_damage;
  if (want.tensors.size() != got.tensors.size())
    return fmt::format("{} tensors against the reference run's {}", got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    const auto &w = want.tensors[i], &g = got.tensors[i];
    if (w.name != g.name || w.gradient != g.gradient || w.v.size() != g.v.size())
      return fmt::format("tensor {} is {} ({} elements) against the reference run's {} ({} elements)", i, g.name,
                         g.v.size(), w.name, w.v.size());
    const std::vector<double> ref(w.v.begin(), w.v.end());
    double scale = 0;
    for (double v : ref) scale = std::max(scale, std::fabs(v));  // NaN leaves it: compare() fails the element
    const Comparison c = compare(g.v, ref, w.gradient ? gradient_tolerance(scale, dtype) : tolerance(dtype));
    if (!c.ok) return fmt::format("{}: {}", w.name, c.to_string());
  }
  return std::nullopt;
}

}  // namespace lkjit::testing
