// What `lkjit prewarm` compiles. Layers of any op family (from a preset, lists or a manifest) are
// expanded through their family's plan (tools/lkjit/op_cli.h, every path: WTConv's plane where the
// planes fit, tiled always, lane where it applies) for every target arch, dtype and pass (forward,
// backward); named kernels (a tuning database, a manifest) are added as they are; --all-tiles adds every
// tile candidate of each planned kernel. Jobs are unique by kernel name. Pure: no NVRTC, no GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lkjit/spec.h"
#include "tools/lkjit/op_cli.h"

namespace lkjit::tool {

struct PrewarmSet {
  std::vector<int> archs;
  std::string archs_from = "--arch";  // where archs came from, for the notes: "--arch" or the manifest's "archs"
  std::vector<DType> dtypes;
  std::vector<LayerProblem> layers;
  std::vector<std::string> kernel_names;  // explicit kernels, e.g. the tuned ones
  bool forward = true, backward = true;
  bool all_tiles = false;
};

struct PrewarmJob {
  OpSpec spec;
  Tile tile;
  std::string kernel_name;
};

struct PrewarmPlan {
  std::vector<PrewarmJob> jobs;    // sorted by kernel name, unique
  std::vector<std::string> notes;  // what was left out and why, one line each
};

// Throws SpecError for an invalid layer (WTConv: k, L, C, stride) or an arch without a limits table.
PrewarmPlan expand(const PrewarmSet& set);

// --manifest FILE (schema in prewarm.cpp's help). Fills set; *archs_given / *dtypes_given say
// whether the manifest named them. Throws Error naming the file, the field and the bad value; a
// kernel name this lkjit does not generate, or whose spec or tile is invalid, is such an error.
void read_manifest(const std::string& path, PrewarmSet* set, bool* archs_given, bool* dtypes_given);
// The same for a manifest's text (path names it in messages). Both refuse a file that is not a regular file,
// over 256 MiB, or nested deeper than 32 levels, before parsing it.
void parse_manifest(const std::string& text, const std::string& path, PrewarmSet* set, bool* archs_given,
                    bool* dtypes_given);

// --tuning-db FILE: appends the kernel names of lkjit's tuning database or of {"entries": [{"kernel":
// NAME, ...}, ...]}. Throws Error (kInvalidArgument) naming the file and the problem when it cannot be
// read or is not one of these formats.
void read_tuning_db(const std::string& path, std::vector<std::string>* kernel_names);
void parse_tuning_db(const std::string& text, const std::string& path, std::vector<std::string>* kernel_names);

}  // namespace lkjit::tool
