// The scale family, y = a[c] * x: the smallest family there is. It exists to show, and to test, that a
// family is its own files plus one registry line per layer (README, "Adding an op family"): no spec fields,
// one tile axis, one kernel with generic names (lkjit_scale_copy_f16_w256_sm90).
#include <fmt/format.h>

#include <algorithm>

#include "generator/family.h"

namespace lkjit::gen {
namespace {

const char* ctype(DType t) { return t == DType::kF32 ? "float" : t == DType::kF16 ? "lkjit::f16" : "lkjit::bf16"; }

TileSpace space(const OpSpec&) { return {{{"threads", {64, 128, 256, 512}, "threads per block"}}}; }

std::optional<std::string> reject(const OpSpec&, const Tile& t, const DeviceLimits& d, const Shape*) {
  const int n = t.get("threads");
  if (n < 32 || n > d.max_threads_per_block || n % 32)
    return fmt::format("threads={} is out of range; supported: a multiple of 32 in [32, {}]", n, d.max_threads_per_block);
  return std::nullopt;
}

Tile default_tile(const OpSpec&, const Shape&, const DeviceLimits&) { return Tile::of({{"threads", 256}}); }

// A grid-stride loop: enough blocks to fill the device several times over, never more than the elements need.
LaunchGeometry geometry(const OpSpec&, const Tile& t, const Shape& sh) {
  LaunchGeometry g;
  const int64_t threads = t.get("threads");
  g.grid[0] = static_cast<unsigned>(std::clamp<int64_t>((sh.numel() + threads - 1) / threads, 1, 65536));
  g.block[0] = static_cast<unsigned>(threads);
  return g;
}

std::string cfg(const OpSpec& s, const Tile& t) {
  return fmt::format("  using T = {};\n  static constexpr int threads = {};\n", ctype(s.dtype), t.get("threads"));
}

}  // namespace

FamilyDef scale_family() {
  FamilyDef f;
  f.name = "scale";
  f.axes = {{"threads", "w", "threads per block", 0}};
  KernelDef k;
  k.name = "scale_copy";
  k.template_header = "scale/copy.cuh";
  k.device_fn = "scale_copy";
  k.params_type = "ScaleParams";
  k.space = space;
  k.reject = reject;
  k.default_tile = default_tile;
  k.geometry = geometry;
  k.cfg_body = cfg;
  f.kernels = {k};
  return f;
}

}  // namespace lkjit::gen
