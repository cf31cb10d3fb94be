// Element strides shared by every op layer (runtime/strides.h).
#include "runtime/strides.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "lkjit/error.h"

namespace lkjit::rt {
namespace {

constexpr const char* kDimNames[4] = {"B", "C", "H", "W"};
// Largest element offset a strided tensor may reach: far beyond any allocation, and offsets times the
// element size stay clear of 64-bit overflow in the kernels' address math.
constexpr int64_t kMaxElementOffset = int64_t(1) << 60;

std::string dims_string(const Dims4& v) { return fmt::format("[{}, {}, {}, {}]", v[0], v[1], v[2], v[3]); }

}  // namespace

Dims4 dense_strides(Layout layout, const Dims4& n) {
  if (layout == Layout::kNHWC) return {n[2] * n[3] * n[1], 1, n[3] * n[1], n[1]};
  return {n[1] * n[2] * n[3], n[2] * n[3], n[3], 1};
}

// One tensor's strides: >= 1 for dims of size > 1 (>= 0 for size 1), offsets below 2^60, and for the
// written tensor no two elements at one address. The dims of size > 1, sorted by stride, must each
// step past the span (1 + sum of (n-1)*stride) of the dims before them: sufficient for no overlap, and
// true of every dense layout.
void check_strides(const char* op, const char* name, const Dims4& st, const Dims4& n, bool written) {
  for (int d = 0; d < 4; ++d) {
    if (n[d] > 1 && st[d] < 1)
      throw SpecError(fmt::format("lkjit: error: {}: {} stride[{}]={} ({} of size {}) is out of range; supported: "
                                  ">= 1 for a dim of size > 1 (element strides in (B, C, H, W) order)",
                                  op, name, d, st[d], kDimNames[d], n[d]));
    if (st[d] < 0)
      throw SpecError(fmt::format("lkjit: error: {}: {} stride[{}]={} ({} of size 1) is out of range; supported: "
                                  ">= 0", op, name, d, st[d], kDimNames[d]));
  }
  std::array<int, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return st[a] < st[b]; });
  int64_t span = 1;
  std::string below;
  for (int d : order) {
    if (n[d] <= 1) continue;
    if (written && st[d] < span)
      throw SpecError(fmt::format(
          "lkjit: error: {}: {} strides {} overlap for shape {}: stride[{}]={} ({}) is below {}, the span of the "
          "dims with smaller strides ({}); supported: a written tensor whose elements have distinct addresses "
          "(e.g. dense NCHW or NHWC)", op, name, dims_string(st), dims_string(n), d, st[d], kDimNames[d], span, below));
    if (st[d] > (kMaxElementOffset - span) / (n[d] - 1))
      throw SpecError(fmt::format("lkjit: error: {}: {} strides {} for shape {} reach element offsets past 2^60; "
                                  "supported: offsets below 2^60", op, name, dims_string(st), dims_string(n)));
    span += (n[d] - 1) * st[d];
    below += (below.empty() ? "" : ", ") + std::string(kDimNames[d]);
  }
}


}  // namespace lkjit::rt
