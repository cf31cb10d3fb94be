// What `lkjit prewarm` compiles. WTConv layers (from a preset, lists or a manifest) are expanded
// through wtconv_plan for every target arch, dtype, pass (forward, backward) and path (plane where
// the planes fit, tiled always); named kernels (a tuning database, a manifest) are added as they
// are; --all-tiles adds every tile candidate of each planned kernel. Jobs are unique by kernel name.
// Pure: no NVRTC, no GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lkjit/spec.h"

namespace lkjit::tool {

struct PrewarmLayer {
  int64_t B = 1, C = 1, H = 1, W = 1;
  int k = 5, L = 1, stride = 1;
};

struct PrewarmSet {
  std::vector<int> archs;
  std::string archs_from = "--arch";  // where archs came from, for the notes: "--arch" or the manifest's "archs"
  std::vector<DType> dtypes;
  std::vector<PrewarmLayer> layers;
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

// Throws SpecError for an invalid layer (k, L, C, stride) or an arch without a limits table.
PrewarmPlan expand(const PrewarmSet& set);

// WTConvNeXt stage layers at 224x224, batch 64, k=5, levels 5/4/3/2 by stage:
// "wtconvnext-t" and "wtconvnext-s" (same layer shapes) C 96/192/384/768, "wtconvnext-b" 128..1024. An
// unknown name is an Error (invalid argument) that starts with `where` ("--preset", or a manifest's place).
std::vector<PrewarmLayer> preset_layers(const std::string& name, const std::string& where);
extern const char* const kPresetNames;  // "wtconvnext-t, wtconvnext-s, wtconvnext-b"

// --shapes B:C:H:W,... crossed with --k and --L lists.
std::vector<PrewarmLayer> parse_shapes(const std::string& shapes, const std::vector<int>& ks,
                                       const std::vector<int>& Ls);

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
