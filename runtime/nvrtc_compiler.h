// NVRTC: generated source in, cubin out for one exact arch. No driver calls: works without a GPU.
#pragma once
#include <string>
#include <vector>

#include "lkjit/generator.h"

namespace lkjit::rt {

struct NvrtcOutput {
  std::string cubin;
  std::string log;
  double seconds = 0;
};

std::string nvrtc_version();            // "13.0"
std::vector<int> nvrtc_supported_archs();  // e.g. {75, 80, 86, 87, 89, 90, 100, ...}
std::vector<std::string> nvrtc_options(int arch, bool specific = false);  // specific: sm_XYa

// Throws CompileError with the kernel name, options, and NVRTC log; or when the arch is not
// supported by the loaded NVRTC (listing the ones that are).
NvrtcOutput nvrtc_compile(const GeneratedSource& src, int arch, bool specific = false);

}  // namespace lkjit::rt
