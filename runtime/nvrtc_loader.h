// NVRTC, loaded with dlopen on first use (as libcuda is, runtime/driver.cpp), so that liblkjit.so needs no
// CUDA toolkit at run time: PyTorch users have torch's nvidia-cuda-nvrtc wheel instead. Only
// runtime/nvrtc_compiler.cpp calls NVRTC, through nvrtc(). The build still uses the toolkit's nvrtc.h.
#pragma once
#include <nvrtc.h>

#include <string>
#include <vector>

namespace lkjit::rt {

struct Nvrtc {
#define LKJIT_NVRTC_FN(name) decltype(&::name) name = nullptr;
#include "runtime/nvrtc_fns.inc"
#undef LKJIT_NVRTC_FN
  std::string path;  // the libnvrtc that was loaded, as dlopen took it
};

// One place NVRTC may be loaded from: `path` is a file path, or a bare soname for the dynamic linker.
struct NvrtcCandidate {
  std::string path;
  std::string origin;  // "LKJIT_NVRTC_LIBRARY", "toolkit", "torch wheel", "linker path"
};

// Where NVRTC is looked for, first match wins:
//   1. $LKJIT_NVRTC_LIBRARY (a file; when set, the only candidate: an error if it does not load);
//   2. the toolkit: $CUDA_ROOT/lib64 (CUDA_ROOT unset: the build's toolkit, /usr/local/cuda);
//   3. torch's nvidia-cuda-nvrtc wheel: <site>/nvidia/cu13/lib, then <site>/nvidia/cuda_nvrtc/lib, for each
//      site-packages folder of a loaded torch (<site>/torch/lib/*.so in this process) and the one this library
//      was installed into (<site>/lkjit/liblkjit.so);
//   4. the dynamic linker's path (LD_LIBRARY_PATH, ldconfig).
// libnvrtc-builtins beside the chosen file is loaded first, so NVRTC finds it without LD_LIBRARY_PATH.
std::vector<NvrtcCandidate> nvrtc_candidates();

// Loads NVRTC on first use. Throws CompileError naming every place looked, with dlopen's reason for each.
const Nvrtc& nvrtc();
// Path of the loaded NVRTC (loading it), or "" with *why set when none loads.
std::string nvrtc_library(std::string* why);

}  // namespace lkjit::rt
