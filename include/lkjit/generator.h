// Spec -> CUDA source. Pure: no CUDA calls, the same (spec, tile) gives the same bytes.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/spec.h"

namespace lkjit {

// Bumped whenever emitted code changes in a way the source text alone would not show.
constexpr int kGeneratorVersion = 1;

struct GeneratedSource {
  std::string kernel_name;  // the extern "C" entry, e.g. lkjit_wtconv_fwd_plane_f32_k5_L3_p1_v4_w256_sm90
  std::string source;       // one translation unit: generated Cfg prologue + #include of the template
  // The embedded headers the source reaches through its #includes (name -> contents): what NVRTC gets and
  // what the cache key hashes (not the other templates, so adding a family leaves other keys unchanged).
  const std::map<std::string, std::string>* headers = nullptr;
};

// Throws SpecError naming every violated constraint (field, value, allowed range).
void validate(const OpSpec& spec);
void validate(const OpSpec& spec, const Tile& tile, const DeviceLimits& limits);

std::string kernel_name(const OpSpec& spec, const Tile& tile);
GeneratedSource generate(const OpSpec& spec, const Tile& tile);

// The embedded templates (templates/**), name -> contents.
const std::map<std::string, std::string>& embedded_headers();

// ---- tile spaces (data) ---------------------------------------------------------------------
struct TileAxis {
  std::string name;         // "tile_h", "tile_w", "planes", "threads"
  std::vector<int> values;  // candidates
  std::string doc;
};

struct TileSpace {
  std::vector<TileAxis> axes;
};

TileSpace tile_space(const OpSpec& spec);

// Why `tile` cannot run `spec` on `limits` for this shape (shared memory, threads, ...), or nullopt.
// shape may be null: shape-independent checks only.
std::optional<std::string> reject_reason(const OpSpec& spec, const Tile& tile,
                                         const DeviceLimits& limits, const Shape* shape);

// Every valid point of the space (shape-independent checks), in a fixed order.
std::vector<Tile> enumerate(const OpSpec& spec, const DeviceLimits& limits,
                            const Shape* shape = nullptr);

// Pure shape-dependent heuristic default; always a point of enumerate().
Tile default_tile(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits);

// Launch geometry. The generator owns it; templates never recompute it.
struct LaunchGeometry {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned smem_bytes = 0;  // dynamic shared memory
};
LaunchGeometry launch_geometry(const OpSpec& spec, const Tile& tile, const Shape& shape);

}  // namespace lkjit
