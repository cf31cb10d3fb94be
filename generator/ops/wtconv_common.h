// Internal helpers shared by the WTConv family's forward and backward kernel descriptions.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "generator/family.h"

namespace lkjit::gen::wtconv {

inline constexpr int kMaxK = 31, kMaxL = 8;

inline int cdiv(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }
inline int R(const OpSpec& s) { return (s.k - 1) / 2; }

inline const char* ctype(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF16: return "lkjit::f16";
    case DType::kBF16: return "lkjit::bf16";
  }
  return "?";
}

inline void validate_common(const OpSpec& s, std::vector<std::string>& e) {
  if (s.k < 1 || s.k > kMaxK || s.k % 2 == 0)
    e.push_back(fmt::format("k={} is out of range; supported: odd k in [1, {}]", s.k, kMaxK));
  if (s.L < 0 || s.L > kMaxL)
    e.push_back(fmt::format("L={} is out of range; supported: L in [0, {}]", s.L, kMaxL));
  if (s.arch < 80) e.push_back(fmt::format("arch sm_{} is not supported; supported: sm_80 and newer", s.arch));
}

// Level sizes: lh[0] = H, lh[l] = ceil(lh[l-1] / 2) (odd sizes are zero-padded by one).
inline std::vector<int64_t> level_sizes(int64_t n, int L) {
  std::vector<int64_t> v{n};
  for (int l = 1; l <= L; ++l) v.push_back((v.back() + 1) / 2);
  return v;
}

inline std::string base_cfg(const OpSpec& s, const Tile& t) {
  return fmt::format("  using T = {};\n  static constexpr int k = {}, R = {}, L = {}, vy = {}, threads = {};\n",
                     ctype(s.dtype), s.k, R(s), s.L, t.vy, t.threads);
}

inline std::optional<std::string> reject_threads(const Tile& t, const DeviceLimits& d) {
  if (t.threads < 32 || t.threads > d.max_threads_per_block || t.threads % 32 != 0)
    return fmt::format("threads={} is out of range; supported: a multiple of 32 in [32, {}]", t.threads,
                       d.max_threads_per_block);
  return std::nullopt;
}

inline std::optional<std::string> reject_smem(int64_t bytes, const DeviceLimits& d) {
  if (bytes > d.max_smem_per_block)
    return fmt::format("shared memory {} B exceeds the {} limit of {} B per block", bytes,
                       arch_name(d.arch), d.max_smem_per_block);
  return std::nullopt;
}


// Tiled kernels share one tile space and its basic constraints.
TileSpace tiled_space(const OpSpec&);
std::optional<std::string> tiled_reject_common(const Tile& t, const DeviceLimits& d);

}  // namespace lkjit::gen::wtconv
