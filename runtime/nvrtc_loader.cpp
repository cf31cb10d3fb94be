#include "runtime/nvrtc_loader.h"

#include <cuda.h>  // CUDA_VERSION: the toolkit this was built with, hence NVRTC's soname major
#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <filesystem>
#include <mutex>

#include "lkjit/error.h"
#include "runtime/env.h"

#ifndef LKJIT_CUDA_ROOT_DEFAULT
#define LKJIT_CUDA_ROOT_DEFAULT "/usr/local/cuda"
#endif

namespace lkjit::rt {
namespace {

namespace fs = std::filesystem;

#define LKJIT_STR2(x) #x
#define LKJIT_STR(x) LKJIT_STR2(x)

constexpr int kMajor = CUDA_VERSION / 1000;
const std::string kSoname = fmt::format("libnvrtc.so.{}", kMajor);

// site-packages folders of a torch loaded in this process: <site>/torch/lib/<lib>.so -> <site>.
int collect_torch_site(dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (!name || !*name) return 0;
  const fs::path lib_dir = fs::path(name).parent_path();
  if (lib_dir.filename() == "lib" && lib_dir.parent_path().filename() == "torch") {
    auto* sites = static_cast<std::vector<std::string>*>(out);
    const std::string site = lib_dir.parent_path().parent_path().string();
    if (std::find(sites->begin(), sites->end(), site) == sites->end()) sites->push_back(site);
  }
  return 0;
}

// The site-packages folder this library sits in when pip installed it (<site>/lkjit/liblkjit.so), else "".
std::string own_site() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&nvrtc_candidates), &info) || !info.dli_fname) return {};
  const fs::path pkg = fs::path(info.dli_fname).parent_path();
  return pkg.filename() == "lkjit" ? pkg.parent_path().string() : std::string();
}

struct Loaded {
  Nvrtc n;
  std::string error;  // empty when usable
};

Loaded load() {
  Loaded l;
  std::string tried;
  for (const auto& c : nvrtc_candidates()) {
    const bool is_file = c.path.find('/') != std::string::npos;
    if (is_file && !fs::exists(c.path)) {
      tried += fmt::format("\n  {} ({}): no such file", c.path, c.origin);
      continue;
    }
    if (is_file) {
      // NVRTC dlopens its builtins by soname at the first compile; one already loaded by that name is taken.
      for (const char* b : {"libnvrtc-builtins.so.{}.{}", "libnvrtc-builtins.so"}) {
        const fs::path p = fs::path(c.path).parent_path() /
                           fmt::format(fmt::runtime(b), kMajor, (CUDA_VERSION % 1000) / 10);
        if (fs::exists(p) && dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL)) break;
      }
    }
    void* h = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      tried += fmt::format("\n  {} ({}): {}", c.path, c.origin, e ? e : "dlopen failed");
      continue;
    }
    bool complete = true;
#define LKJIT_NVRTC_FN(name)                                                                       \
  l.n.name = reinterpret_cast<decltype(&::name)>(dlsym(h, LKJIT_STR(name)));                      \
  if (!l.n.name && complete) {                                                                    \
    tried += fmt::format("\n  {} ({}): symbol {} is missing (NVRTC too old)", c.path, c.origin, #name); \
    complete = false;                                                                             \
  }
#include "runtime/nvrtc_fns.inc"
#undef LKJIT_NVRTC_FN
    if (!complete) {
      dlclose(h);
      l.n = Nvrtc{};
      continue;
    }
    char resolved[4096] = {};
    l.n.path = dlinfo(h, RTLD_DI_ORIGIN, resolved) == 0 && !is_file
                   ? (fs::path(resolved) / c.path).string()  // where the linker found the soname
                   : c.path;
    int major = 0, minor = 0;
    l.n.nvrtcVersion(&major, &minor);
    log_line(fmt::format("nvrtc: loaded NVRTC {}.{} from {} ({})", major, minor, l.n.path, c.origin));
    return l;
  }
  l.error = fmt::format(
      "lkjit: error: NVRTC could not be loaded; looked in:{}\n"
      "Install the CUDA {} toolkit (or set CUDA_ROOT to it), or torch's nvidia-cuda-nvrtc wheel "
      "(pip install nvidia-cuda-nvrtc), or set LKJIT_NVRTC_LIBRARY to a libnvrtc.so.{}",
      tried, kMajor, kMajor);
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

std::vector<NvrtcCandidate> nvrtc_candidates() {
  const std::string explicit_path = env("LKJIT_NVRTC_LIBRARY");
  if (!explicit_path.empty()) return {{explicit_path, "LKJIT_NVRTC_LIBRARY"}};
  std::vector<NvrtcCandidate> out;
  const std::string root = env("CUDA_ROOT");
  const std::string toolkit = root.empty() ? LKJIT_CUDA_ROOT_DEFAULT : root;
  out.push_back({(fs::path(toolkit) / "lib64" / kSoname).string(), "toolkit"});
  std::vector<std::string> sites;
  dl_iterate_phdr(&collect_torch_site, &sites);
  if (const std::string s = own_site(); !s.empty() && std::find(sites.begin(), sites.end(), s) == sites.end())
    sites.push_back(s);
  for (const auto& site : sites)
    for (const std::string sub : {fmt::format("nvidia/cu{}/lib", kMajor), std::string("nvidia/cuda_nvrtc/lib")})
      out.push_back({(fs::path(site) / sub / kSoname).string(), "torch wheel"});
  out.push_back({kSoname, "linker path"});
  return out;
}

const Nvrtc& nvrtc() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw CompileError(l.error);
  return l.n;
}

std::string nvrtc_library(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.error;
  return l.n.path;
}

}  // namespace lkjit::rt
