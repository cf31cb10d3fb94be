// Internal: what the generator knows about each kernel. An op family contributes one KernelTraits per
// kernel (generator/ops/<family>.cpp) and one line in generator/ops/registry.cpp.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/generator.h"
#include "lkjit/spec.h"

namespace lkjit::gen {

struct KernelTraits {
  Kernel kernel;
  const char* template_header;  // e.g. "wtconv/fwd_plane.cuh"
  const char* device_fn;        // template <class Cfg> __device__ void device_fn(const Params&)
  const char* params_type;      // e.g. "WTConvParams"
  // Appends one message per violated spec constraint.
  void (*validate)(const OpSpec&, std::vector<std::string>& errors);
  TileSpace (*space)(const OpSpec&);
  std::optional<std::string> (*reject)(const OpSpec&, const Tile&, const DeviceLimits&, const Shape*);
  Tile (*default_tile)(const OpSpec&, const Shape&, const DeviceLimits&);
  LaunchGeometry (*geometry)(const OpSpec&, const Tile&, const Shape&);
  std::string (*cfg_body)(const OpSpec&, const Tile&);     // members of `struct Cfg`
  std::string (*name_fields)(const OpSpec&, const Tile&);  // kernel name without "lkjit_" and arch
};

const KernelTraits& traits(Kernel k);  // ops/registry.cpp
std::vector<KernelTraits> wtconv_kernels();  // ops/wtconv.cpp

const std::map<std::string, std::string>& embedded_template_table();  // generated at build time

// The headers of `table` that `root` reaches through #include "..." lines, `root` included (SpecError
// for an include that is not in the table). includes.cpp.
std::map<std::string, std::string> include_closure(const std::map<std::string, std::string>& table,
                                                   const std::string& root);
// include_closure of the embedded templates, computed once per root; the reference stays valid.
const std::map<std::string, std::string>& kernel_headers(const std::string& template_header);

}  // namespace lkjit::gen
