#include "lkjit/testing.h"

#include <fmt/format.h>

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

}  // namespace

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
  for (auto& b : grad_bufs) b.fill_u32(0xffffffffu);
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

}  // namespace lkjit::testing
