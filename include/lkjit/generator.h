// Spec -> CUDA source. Pure: no CUDA calls, the same (spec, tile) gives the same bytes. The op families
// are data here: their spec fields, tile axes and kernels (families()), registered in
// generator/ops/registry.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/spec.h"

namespace lkjit {

// Bumped whenever emitted code changes in a way the source text alone would not show.
constexpr int kGeneratorVersion = 1;

// ---- families (data) ------------------------------------------------------------------------------
// A compile-time field of a family's specs (in the cache key): its range, default and kernel-name token.
struct SpecField {
  std::string name;   // "k"
  int lo = 0, hi = 0;  // allowed range (validate() checks it; a family may add cross-field rules)
  int def = 0;         // the value make_spec() gives a kernel's field that the caller leaves out
  std::string token;   // kernel-name token: "k" prints k=5 as "k5"; "" when the family words its names itself
  std::string doc;
  std::string range_text;  // how errors state the range when it is more than [lo, hi] ("odd k in [1, 31]")
};

// A tile axis: its kernel-name token ("w": threads=256 prints as "w256").
struct TileAxisDef {
  std::string name;   // "threads"
  std::string token;  // "w"
  std::string doc;
  int print_rank = 0;     // order of the axis in kernel names (lower first), within the family
  std::string pair_with;  // printed with this axis as "<token><this>x<other>" (WTConv: tile_h with tile_w)
  bool always = false;    // printed even when absent (as 0)
};

struct FamilyInfo {
  std::string name;                 // "wtconv"
  std::vector<SpecField> fields;
  std::vector<TileAxisDef> axes;    // declared order: JSON keys, table columns, positional --tile
  std::vector<Kernel> kernels;
};
const std::vector<FamilyInfo>& families();            // in registry order
const FamilyInfo& family(const std::string& name);     // SpecError naming the known families
const FamilyInfo& family_of(const Kernel& k);          // SpecError for an unregistered kernel
Kernel parse_kernel(const std::string& s);             // SpecError listing the known kernels
std::vector<Kernel> all_kernels();                     // every family's, in registry order
// The family fields a kernel has (its spec holds exactly these), in the family's declared order.
std::vector<std::string> kernel_fields(const Kernel& k);
// A spec of kernel k with `fields` set and the kernel's other fields at their defaults. SpecError for a
// field the kernel does not have (values are range-checked by validate(), not here).
OpSpec make_spec(const Kernel& k, DType dtype, int arch, const NamedInts& fields = {}, bool arch_specific = false);

// ---- generation -----------------------------------------------------------------------------------
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

// Kernel name -> (spec, tile): the inverse of kernel_name(), for names from outside (a tuning database,
// a manifest, `lkjit cache explain NAME`). Accepted only if kernel_name() of the result gives the same
// name back, so it can never disagree with the generator; nullopt otherwise (never throws).
struct NamedKernel {
  OpSpec spec;
  Tile tile;
};
std::optional<NamedKernel> parse_kernel_name(const std::string& name);

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

// Launch geometry. The generator owns it; templates and op layers never recompute it.
struct LaunchGeometry {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned smem_bytes = 0;  // dynamic shared memory
  double blocks = 0;        // grid blocks in all, in floating point (a layer refuses more than the grid allows)
  // Derived values the kernel's params need (e.g. WTConv's tiles_h, tiles_w, image pitches), by name: the
  // op layer copies them, so that only the generator knows the layouts behind them.
  std::map<std::string, int64_t> values;
  int64_t value(const std::string& name) const;  // SpecError naming a value the kernel does not derive
};
LaunchGeometry launch_geometry(const OpSpec& spec, const Tile& tile, const Shape& shape);

}  // namespace lkjit
