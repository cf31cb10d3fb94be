// compile_kernel: generator -> key -> memory cache -> disk cache -> NVRTC -> both caches.
#include <fmt/format.h>

#include <chrono>
#include <mutex>
#include <unordered_map>

#include "cache/key.h"
#include "cache/store.h"
#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "runtime/env.h"
#include "runtime/nvrtc_compiler.h"

namespace lkjit {
namespace {

struct MemoryCache {
  std::mutex mu;
  std::unordered_map<std::string, std::string> cubins;  // key -> cubin
};
MemoryCache& memory_cache() {
  static MemoryCache m;
  return m;
}

// Per-key compile lock within the process: concurrent callers of one spec compile it once.
std::mutex& key_mutex(const std::string& key) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::unique_ptr<std::mutex>> m;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = m[key];
  if (!p) p = std::make_unique<std::mutex>();
  return *p;
}

}  // namespace

std::string nvrtc_version() { return rt::nvrtc_version(); }
std::vector<int> nvrtc_archs() { return rt::nvrtc_supported_archs(); }
std::string cache_dir() { return cache::default_cache_dir(); }

CompiledKernel compile_kernel(const OpSpec& spec, const Tile& tile) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const GeneratedSource src = generate(spec, tile);
  cache::KeyInputs in;
  in.kernel_name = src.kernel_name;
  in.source = src.source;
  in.headers = src.headers;
  in.options = rt::nvrtc_options(spec.arch);
  in.arch = spec.arch;
  in.nvrtc_version = rt::nvrtc_version();
  in.generator_version = kGeneratorVersion;
  CompiledKernel out;
  out.kernel_name = src.kernel_name;
  out.key = cache::make_key(in);
  out.arch = spec.arch;

  auto& mem = memory_cache();
  {
    std::lock_guard<std::mutex> lock(mem.mu);
    if (auto it = mem.cubins.find(out.key); it != mem.cubins.end()) {
      out.cubin = it->second;
      out.origin = "memory";
      out.seconds = elapsed();
      return out;
    }
  }
  std::lock_guard<std::mutex> key_lock(key_mutex(out.key));
  {
    std::lock_guard<std::mutex> lock(mem.mu);  // another thread may have compiled it meanwhile
    if (auto it = mem.cubins.find(out.key); it != mem.cubins.end()) {
      out.cubin = it->second;
      out.origin = "memory";
      out.seconds = elapsed();
      return out;
    }
  }
  const bool use_disk = rt::env("LKJIT_CACHE_DISABLE") != "1";
  std::optional<cache::DiskStore> store;
  if (use_disk) store.emplace(cache::default_cache_dir());
  if (store) {
    std::string why;
    if (auto bytes = store->load(out.key, &why)) {
      out.cubin = std::move(*bytes);
      out.origin = "disk";
    } else if (!why.empty()) {
      rt::log_line("warning: corrupt cache entry: " + why);
    }
  }
  if (out.origin.empty()) {
    auto r = rt::nvrtc_compile(src, spec.arch);
    out.cubin = std::move(r.cubin);
    out.origin = "compiled";
    rt::log_line(fmt::format("compiled {} in {:.3f} s", src.kernel_name, r.seconds));
    if (store) {
      cache::EntryMeta meta;
      meta.key = out.key;
      meta.kernel_name = src.kernel_name;
      meta.spec = spec.to_string() + " " + tile.to_string();
      meta.arch = spec.arch;
      meta.nvrtc_version = in.nvrtc_version;
      store->store(meta, out.cubin);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mem.mu);
    mem.cubins.emplace(out.key, out.cubin);
  }
  out.seconds = elapsed();
  return out;
}

}  // namespace lkjit
