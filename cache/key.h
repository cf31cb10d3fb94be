// Content key of a compiled binary: SHA-256 over every input that changes the cubin (generated
// source, the name and bytes of each embedded header the source includes, NVRTC options, arch, NVRTC
// version, generator version), each as its SHA-256. Never a name alone, so an edited template can never
// load a stale cubin; never another kernel's headers, so adding a template changes no other key.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lkjit::cache {

struct KeyInputs {
  std::string kernel_name;  // display only; not hashed (the source already names it)
  std::string source;
  const std::map<std::string, std::string>* headers = nullptr;
  std::vector<std::string> options;
  int arch = 0;
  std::string nvrtc_version;  // "13.0"
  int generator_version = 0;
};


// Hex SHA-256 of bytes (entry checksums).
std::string sha256_hex(std::string_view bytes);

// What went into a key, small enough to keep in every entry: digests instead of texts. Two
// summaries that differ name the input that made two keys differ (`lkjit cache explain`).
struct KeySummary {
  std::string kernel_name;
  int arch = 0;
  std::string nvrtc_version;
  int generator_version = 0;
  std::vector<std::string> options;
  std::string source_sha256;
  std::map<std::string, std::string> header_sha256;  // header name -> SHA-256 of its bytes
};
KeySummary summarize(const KeyInputs& in);

// 64 lowercase hex digits: SHA-256 over the summary's fields (every input as a digest), so a key can be
// recomputed from the inputs an entry records. make_key(in) == make_key(summarize(in)).
std::string make_key(const KeySummary& in);
std::string make_key(const KeyInputs& in);

// Copies the key inputs between the types that hold them under the same member names (KeyInputs,
// KeySummary, EntryMeta, lkjit::KeyInputsInfo): the plain ones, or those plus the two digests.
template <class To, class From>
void copy_plain_key_inputs(To& to, const From& from) {
  to.kernel_name = from.kernel_name;
  to.arch = from.arch;
  to.nvrtc_version = from.nvrtc_version;
  to.generator_version = from.generator_version;
  to.options = from.options;
}
template <class To, class From>
void copy_key_summary(To& to, const From& from) {
  copy_plain_key_inputs(to, from);
  to.source_sha256 = from.source_sha256;
  to.header_sha256 = from.header_sha256;
}

// One line per differing input, "nvrtc: 12.8 -> 13.0", "header wtconv/fold.cuh: changed", ...;
// empty when the summaries agree.
std::vector<std::string> key_differences(const KeySummary& from, const KeySummary& to);

}  // namespace lkjit::cache
