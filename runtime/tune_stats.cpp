// Statistics and selection of the tuner: pure functions over timing samples.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "lkjit/tuning.h"

namespace lkjit {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool ok(const CandidateResult& c) { return c.status == CandidateStatus::kOk && c.summary.n > 0; }

}  // namespace

Summary summarize(std::vector<double> ms) {
  Summary s;
  s.n = static_cast<int>(ms.size());
  if (ms.empty()) return s;
  s.median_ms = median_of(ms);
  s.min_ms = *std::min_element(ms.begin(), ms.end());
  if (ms.size() >= 2 && s.median_ms > 0) {
    for (double& v : ms) v = std::fabs(v - s.median_ms);
    // 1.4826 * MAD estimates the stddev of normal noise and ignores a few outliers (a clock change).
    s.noise = 1.4826 * median_of(ms) / s.median_ms;
  }
  return s;
}

std::optional<size_t> select_best(const std::vector<CandidateResult>& c, double min_noise) {
  std::optional<size_t> best;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!ok(c[i])) continue;
    if (!best || std::make_tuple(c[i].summary.median_ms, c[i].order) <
                     std::make_tuple(c[*best].summary.median_ms, c[*best].order))
      best = i;
  }
  if (!best) return std::nullopt;
  const Summary& b = c[*best].summary;
  std::optional<size_t> pick;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!ok(c[i])) continue;
    const double tol = std::max({min_noise, b.noise, c[i].summary.noise});
    if (c[i].summary.median_ms > b.median_ms * (1 + tol)) continue;
    if (!pick || c[i].order < c[*pick].order) pick = i;
  }
  return pick;
}

std::vector<size_t> rank(const std::vector<CandidateResult>& c) {
  std::vector<size_t> idx(c.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const bool oa = ok(c[a]), ob = ok(c[b]);
    if (oa != ob) return oa;
    if (oa) return std::make_tuple(c[a].summary.median_ms, c[a].order) < std::make_tuple(c[b].summary.median_ms, c[b].order);
    return c[a].order < c[b].order;
  });
  return idx;
}

}  // namespace lkjit
