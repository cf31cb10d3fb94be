// Internal: what the generator knows about each op family. A family contributes one FamilyDef
// (generator/ops/<family>.cpp: its spec fields, tile axes and one KernelDef per kernel) and one line in
// generator/ops/registry.cpp.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/generator.h"
#include "lkjit/spec.h"

namespace lkjit::gen {

struct KernelDef {
  std::string name;             // e.g. "wtconv_fwd_plane": the Kernel's name and the kernel-name stem
  const char* template_header;  // e.g. "wtconv/fwd_plane.cuh"
  const char* device_fn;        // template <class Cfg> __device__ void device_fn(const Params&)
  const char* params_type;      // e.g. "WTConvParams"
  std::vector<std::string> fields;  // the family's spec fields this kernel has (its specs hold exactly these)
  // Appends one message per violated cross-field rule (each field's range is checked from the table).
  void (*validate)(const OpSpec&, std::vector<std::string>& errors) = nullptr;
  TileSpace (*space)(const OpSpec&) = nullptr;
  std::optional<std::string> (*reject)(const OpSpec&, const Tile&, const DeviceLimits&, const Shape*) = nullptr;
  Tile (*default_tile)(const OpSpec&, const Shape&, const DeviceLimits&) = nullptr;
  LaunchGeometry (*geometry)(const OpSpec&, const Tile&, const Shape&) = nullptr;
  std::string (*cfg_body)(const OpSpec&, const Tile&) = nullptr;  // members of `struct Cfg`
  // Optional. The kernel name without "lkjit_" and the target suffix; null: the generic form
  // <name>[_<dtype>]{_<field token><value>}_<tile>, fields in the family's order.
  std::string (*name_fields)(const OpSpec&, const Tile&) = nullptr;
  // Optional. The fields as OpSpec::to_string() words them; null: "k=5 L=3" (every field, name=value).
  std::string (*describe)(const OpSpec&) = nullptr;
  // Optional: threads per block for __launch_bounds__, where the tile derives them (WBMM: 32 x warps x
  // channels per block); null: the tile's "threads" axis.
  int (*threads)(const OpSpec&, const Tile&) = nullptr;
  // Optional: blocks per thread-block cluster (sm_90; emitted as __cluster_dims__, so plain launches form
  // the clusters and the grid must be a multiple of it); null or < 2: none.
  int (*cluster)(const OpSpec&, const Tile&) = nullptr;
  bool has_dtype = true;  // the generic name prints the dtype
  // Optional: a field printed right after the stem as one of these words for the values 1 and 0
  // (WTConv's level kernels: "first" as "level1" / "levelN"), for parse_kernel_name().
  std::string glued_field;
  std::pair<std::string, std::string> glued_words;
};

struct FamilyDef {
  std::string name;
  std::vector<SpecField> fields;
  std::vector<TileAxisDef> axes;
  std::vector<KernelDef> kernels;
};

// The registered families (ops/registry.cpp), in order.
const std::vector<FamilyDef>& registered_families();
const KernelDef& kernel_def(const Kernel& k);  // SpecError for an unregistered kernel
const FamilyDef& family_def(const Kernel& k);


const std::map<std::string, std::string>& embedded_template_table();  // generated at build time

// The headers of `table` that `root` reaches through #include "..." lines, `root` included (SpecError
// for an include that is not in the table). includes.cpp.
std::map<std::string, std::string> include_closure(const std::map<std::string, std::string>& table,
                                                   const std::string& root);
// include_closure of the embedded templates, computed once per root; the reference stays valid.
const std::map<std::string, std::string>& kernel_headers(const std::string& template_header);

}  // namespace lkjit::gen
