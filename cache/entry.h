// One cache entry as bytes: a magic line with the format version and a checksum of everything after
// it, one JSON line of metadata (key echo, kernel, spec, arch, NVRTC, sizes, and the key's inputs as
// digests), then the payload (a cubin). Decoding verifies all of it before a byte is handed out.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/key.h"

namespace lkjit::cache {

// MUST be bumped on any change of the layout below; tests/data/ holds a golden entry per version.
// v1: magic line without checksum, payload SHA-256 only. v2: whole-entry checksum + key inputs.
// Version 1 entries are still read (their keys are computed the same way).
constexpr int kEntryFormatVersion = 2;

struct EntryMeta {
  std::string key;          // 64 hex digits (cache/key.h)
  std::string kernel_name;  // display name
  std::string spec;         // OpSpec::to_string() + tile
  int arch = 0;
  std::string nvrtc_version;
  uint64_t size = 0;        // payload bytes
  std::string sha256;       // of the payload
  // The key's other inputs (v2; empty in v1 entries), for `lkjit cache explain`.
  int generator_version = 0;
  std::vector<std::string> options;
  std::string source_sha256;
  std::map<std::string, std::string> header_sha256;
  int format = kEntryFormatVersion;  // the version it was read in
};

struct Entry {
  EntryMeta meta;
  std::string payload;  // cubin
};

// Copies a key summary's inputs into the metadata, and back.
void set_inputs(EntryMeta& meta, const KeySummary& inputs);
KeySummary inputs_of(const EntryMeta& meta);

// Serialized entry (always the current format). meta.size and meta.sha256 are computed here.
std::string encode_entry(const EntryMeta& meta, const std::string& payload);

// Parses and verifies (format, key echo unless expected_key is empty, size, checksum); *why names
// what is wrong: truncated, checksum mismatch, key echo, format version...
std::optional<Entry> decode_entry(std::string_view bytes, const std::string& expected_key, std::string* why);

// Metadata only, from the first bytes of an entry file of file_size bytes; checks the format and
// that the size adds up, not the checksum. For listings that must not read every payload.
std::optional<EntryMeta> decode_entry_meta(std::string_view head, uint64_t file_size, std::string* why);

// Untrusted bytes (a damaged header, a key echo) for a message: printable ASCII as is, every other
// byte as \xNN, so that a corrupt entry cannot write control sequences to a terminal.
std::string escape_bytes(std::string_view bytes);

// Bytes of the first two lines are at most this long in any entry lkjit writes.
constexpr size_t kMaxEntryHeadBytes = 64 * 1024;

}  // namespace lkjit::cache
