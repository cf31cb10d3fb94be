#include "cache/trust.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "cache/elf.h"

namespace lkjit::cache {
namespace {

std::array<std::atomic<uint64_t>, 3>& counters() {
  static std::array<std::atomic<uint64_t>, 3> c{};
  return c;
}

// A C identifier of at most 512 bytes: what the generator names kernels, and all a symbol check needs.
bool is_identifier(const std::string& s) {
  if (s.empty() || s.size() > 512 || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string short_key(const std::string& k) { return escape_bytes(k.substr(0, 16)) + (k.size() > 16 ? ".." : ""); }

}  // namespace

Lookup lookup_for(const std::string& key, const KeySummary& in) {
  return Lookup{key, in.kernel_name, in.arch, in.nvrtc_version, in.generator_version};
}

std::string entry_problem(const Entry& e) {
  const EntryMeta& m = e.meta;
  if (m.format < 2) return "format 1 entry records no key inputs, so its key cannot be checked";
  if (!is_identifier(m.kernel_name))
    return fmt::format("kernel name '{}' is not a C identifier", escape_bytes(m.kernel_name.substr(0, 80)));
  if (m.arch < kMinArch || m.arch > kMaxArch)
    return fmt::format("arch sm_{} is out of range; supported: sm_{} to sm_{}", m.arch, kMinArch, kMaxArch);
  const std::string recomputed = make_key(inputs_of(m));
  if (recomputed != m.key)
    return fmt::format("key {} does not match its recorded inputs (they hash to {})", short_key(m.key), short_key(recomputed));
  return cubin_problem(e.payload, m.arch, m.kernel_name);
}

std::string entry_problem(const Entry& e, const Lookup& want) {
  const EntryMeta& m = e.meta;
  // The lookup's fields first: they say best why this entry is not the one asked for.
  if (m.key != want.key) return fmt::format("key {}, expected {}", short_key(m.key), short_key(want.key));
  if (m.kernel_name != want.kernel_name)
    return fmt::format("kernel {}, expected {}", escape_bytes(m.kernel_name.substr(0, 80)), want.kernel_name);
  if (m.arch != want.arch) return fmt::format("arch sm_{}, expected sm_{}", m.arch, want.arch);
  if (m.nvrtc_version != want.nvrtc_version)
    return fmt::format("NVRTC {}, expected {}", escape_bytes(m.nvrtc_version.substr(0, 40)), want.nvrtc_version);
  if (m.generator_version != want.generator_version)
    return fmt::format("generator v{}, expected v{}", m.generator_version, want.generator_version);
  return entry_problem(e);
}

std::optional<Entry> decode_checked(std::string_view bytes, const std::string& expected_key, std::string* why) {
  auto e = decode_entry(bytes, expected_key, why);
  if (!e) return e;
  if (std::string p = entry_problem(*e); !p.empty()) {
    if (why) *why = "refused: " + p;
    return std::nullopt;
  }
  return e;
}

void count_refusal(Source s) { counters()[static_cast<size_t>(s)].fetch_add(1, std::memory_order_relaxed); }
uint64_t refusals(Source s) { return counters()[static_cast<size_t>(s)].load(std::memory_order_relaxed); }

}  // namespace lkjit::cache
