#include "runtime/nvrtc_compiler.h"

#include <fmt/format.h>

#include <chrono>

#include "lkjit/error.h"
#include "runtime/dump_dir.h"
#include "runtime/env.h"
#include "runtime/nvrtc_loader.h"

namespace lkjit::rt {
namespace {

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int a : v) s += (s.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return s;
}

}  // namespace

std::string nvrtc_version() {
  const Nvrtc& n = nvrtc();
  int major = 0, minor = 0;
  n.nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::vector<int> nvrtc_supported_archs() {
  const Nvrtc& nv = nvrtc();
  int n = 0;
  std::vector<int> v;
  if (nv.nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS) return v;
  v.resize(n);
  nv.nvrtcGetSupportedArchs(v.data());
  return v;
}

std::vector<std::string> nvrtc_options(int arch, bool specific) {
  // sm_XY (not compute_XY) makes NVRTC emit a cubin for exactly this arch. No fast-math: results
  // must match the float64 reference to fp32 rounding.
  return {fmt::format("--gpu-architecture=sm_{}{}", arch, specific ? "a" : ""), "--std=c++17", "--restrict", "-lineinfo"};
}

NvrtcOutput nvrtc_compile(const GeneratedSource& src, int arch, bool specific) {
  const auto archs = nvrtc_supported_archs();
  if (std::find(archs.begin(), archs.end(), arch) == archs.end())
    throw CompileError(fmt::format("lkjit: error: {}: sm_{} is not supported by NVRTC {}; supported: {}",
                                   src.kernel_name, arch, nvrtc_version(), join(archs)));
  const Nvrtc& n = nvrtc();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<const char*> names, bodies;
  if (src.headers)
    for (const auto& [n, b] : *src.headers) {
      names.push_back(n.c_str());
      bodies.push_back(b.c_str());
    }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.nvrtcCreateProgram(&prog, src.source.c_str(), (src.kernel_name + ".cu").c_str(),
                                     static_cast<int>(names.size()), bodies.data(), names.data());
  if (r != NVRTC_SUCCESS)
    throw CompileError(fmt::format("lkjit: error: {}: nvrtcCreateProgram failed: {}", src.kernel_name,
                                   n.nvrtcGetErrorString(r)));
  const auto opts = nvrtc_options(arch, specific);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  r = n.nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  NvrtcOutput out;
  size_t log_size = 0;
  n.nvrtcGetProgramLogSize(prog, &log_size);
  out.log.resize(log_size);
  if (log_size) n.nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  dump_source(src, out.log);
  if (r != NVRTC_SUCCESS) {
    n.nvrtcDestroyProgram(&prog);
    std::string hint;
    if (r == NVRTC_ERROR_BUILTIN_OPERATION_FAILURE)
      hint = fmt::format(" (the NVRTC builtins library libnvrtc-builtins.so could not be loaded: it must sit "
                         "beside {} or be on the library path)", n.path);
    std::string optstr;
    for (const auto& o : opts) optstr += " " + o;
    throw CompileError(fmt::format("lkjit: error: {}: NVRTC {} failed: {}{}\n  options:{}\n  log:\n{}",
                                   src.kernel_name, nvrtc_version(), n.nvrtcGetErrorString(r), hint, optstr,
                                   out.log));
  }
  size_t bytes = 0;
  n.nvrtcGetCUBINSize(prog, &bytes);
  out.cubin.resize(bytes);
  n.nvrtcGetCUBIN(prog, out.cubin.data());
  n.nvrtcDestroyProgram(&prog);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace lkjit::rt
