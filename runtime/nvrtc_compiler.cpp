#include "runtime/nvrtc_compiler.h"

#include <fmt/format.h>
#include <nvrtc.h>

#include <chrono>

#include "lkjit/error.h"
#include "runtime/dump_dir.h"

namespace lkjit::rt {
namespace {

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int a : v) s += (s.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return s;
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::vector<int> nvrtc_supported_archs() {
  int n = 0;
  std::vector<int> v;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS) return v;
  v.resize(n);
  nvrtcGetSupportedArchs(v.data());
  return v;
}

std::vector<std::string> nvrtc_options(int arch) {
  // sm_XY (not compute_XY) makes NVRTC emit a cubin for exactly this arch. No fast-math: results
  // must match the float64 reference to fp32 rounding.
  return {fmt::format("--gpu-architecture=sm_{}", arch), "--std=c++17", "--restrict", "-lineinfo"};
}

NvrtcOutput nvrtc_compile(const GeneratedSource& src, int arch) {
  const auto archs = nvrtc_supported_archs();
  if (std::find(archs.begin(), archs.end(), arch) == archs.end())
    throw CompileError(fmt::format("lkjit: error: {}: sm_{} is not supported by NVRTC {}; supported: {}",
                                   src.kernel_name, arch, nvrtc_version(), join(archs)));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<const char*> names, bodies;
  if (src.headers)
    for (const auto& [n, b] : *src.headers) {
      names.push_back(n.c_str());
      bodies.push_back(b.c_str());
    }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, src.source.c_str(), (src.kernel_name + ".cu").c_str(),
                                     static_cast<int>(names.size()), bodies.data(), names.data());
  if (r != NVRTC_SUCCESS)
    throw CompileError(fmt::format("lkjit: error: {}: nvrtcCreateProgram failed: {}", src.kernel_name,
                                   nvrtcGetErrorString(r)));
  const auto opts = nvrtc_options(arch);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  r = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  NvrtcOutput out;
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  out.log.resize(log_size);
  if (log_size) nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  dump_source(src, out.log);
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    std::string hint;
    if (r == NVRTC_ERROR_BUILTIN_OPERATION_FAILURE)
      hint = " (the NVRTC builtins library libnvrtc-builtins.so could not be loaded: is the CUDA "
             "toolkit's lib64 directory on the library path?)";
    std::string optstr;
    for (const auto& o : opts) optstr += " " + o;
    throw CompileError(fmt::format("lkjit: error: {}: NVRTC {} failed: {}{}\n  options:{}\n  log:\n{}",
                                   src.kernel_name, nvrtc_version(), nvrtcGetErrorString(r), hint, optstr,
                                   out.log));
  }
  size_t n = 0;
  nvrtcGetCUBINSize(prog, &n);
  out.cubin.resize(n);
  nvrtcGetCUBIN(prog, out.cubin.data());
  nvrtcDestroyProgram(&prog);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace lkjit::rt
