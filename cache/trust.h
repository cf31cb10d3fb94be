// What an entry must prove before its payload is handed out, on top of its checksums (cache/entry.h):
// that it is what it says (its key recomputed from the inputs it records, a payload that is a cubin
// for its arch defining its kernel: cache/elf.h) and, for a lookup, what was asked for (same key,
// kernel name, arch, NVRTC and generator versions). Checksums only prove that nothing changed since
// a writer wrote the entry; these checks stop an entry that a writer made up (a bundle, a shared
// folder, a remote store) from being served under another kernel's key.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cache/entry.h"
#include "cache/key.h"

namespace lkjit::cache {

// What a lookup asks for: compile_kernel's key and the inputs it hashed.
struct Lookup {
  std::string key;
  std::string kernel_name;
  int arch = 0;
  std::string nvrtc_version;
  int generator_version = 0;
};
Lookup lookup_for(const std::string& key, const KeySummary& inputs);

// Empty when the entry is what it says; else what is wrong, e.g. "key aaaa.. does not match its
// recorded inputs (they hash to 1b2c..)" or "cubin is for sm_80, expected sm_90". Format 1 entries
// record no inputs, so their keys cannot be checked: refused (key format 2 made them unreachable).
std::string entry_problem(const Entry& e);
// The same, and the entry matches the lookup field by field ("kernel name evil, expected lkjit_..").
std::string entry_problem(const Entry& e, const Lookup& want);

// decode_entry (checksums, key echo against expected_key unless it is empty), then entry_problem.
std::optional<Entry> decode_checked(std::string_view bytes, const std::string& expected_key, std::string* why);

// Refusals this process made, by where the entry came from (monotonic, for logs and `cache stat`).
enum class Source { kDisk = 0, kBundle = 1, kRemote = 2 };
void count_refusal(Source s);
uint64_t refusals(Source s);

// Lowest and highest arch an entry may name (sm_30 ... sm_255: e_flags keeps the SM in 8 bits).
constexpr int kMinArch = 30, kMaxArch = 255;

}  // namespace lkjit::cache
