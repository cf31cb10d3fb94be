#include "cache/bundle.h"

#include <fmt/format.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "cache/file_io.h"
#include "cache/signing.h"
#include "cache/trust.h"
#include "lkjit/error.h"

namespace lkjit::cache {
namespace {

const std::string kBundleMagic = "LKJIT-BUNDLE " + std::to_string(kBundleFormatVersion) + "\n";
const std::string kBundleMagicV1 = "LKJIT-BUNDLE 1\n";
constexpr const char* kSignatureContext = "bundle";

// Start of the last line of b (which ends in "\n"), searching no further back than `floor`.
size_t last_line_at(const std::string& b, size_t end, size_t floor) {
  if (end < floor + 2) return floor;
  const size_t nl = b.rfind('\n', end - 2);
  return nl == std::string::npos || nl < floor ? floor : nl + 1;
}

// Reads one "\n"-terminated line at *pos; false when there is none.
bool next_line(const std::string& b, size_t* pos, std::string* line) {
  const size_t nl = b.find('\n', *pos);
  if (nl == std::string::npos) return false;
  *line = b.substr(*pos, nl - *pos);
  *pos = nl + 1;
  return true;
}

}  // namespace

bool is_key(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

BundleStats export_bundle(const DiskStore& store, const std::vector<std::string>& keys, const std::string& path,
                          const Signer* signer) {
  std::vector<std::string> wanted = keys;
  if (wanted.empty())
    for (const auto& l : store.list(/*verify=*/false)) wanted.push_back(l.key);
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  BundleStats st;
  std::string out = kBundleMagic;
  for (const auto& key : wanted) {
    std::string bytes, why;
    if (!is_key(key) || !read_whole_file(store.path_for(key), &bytes, &why)) {
      // Absent to open(), yet a dangling link is there: unreadable, as `cache ls` and `verify` say.
      if (why.empty() && is_key(key) && unfollowable(store.path_for(key), ENOENT, &why))
        why = store.path_for(key) + ": " + why;
      st.skipped.push_back(fmt::format("{}: {}", key, why.empty() ? "not in the cache" : why));
      continue;
    }
    if (!decode_checked(bytes, key, &why)) {  // never ship a corrupt or made-up entry
      st.skipped.push_back(fmt::format("{}: {}", key, why));
      continue;
    }
    out += fmt::format("entry {}\n", bytes.size());
    out += bytes;
    out += '\n';  // keeps every record line, and the end line, at the start of a line
    ++st.entries;
  }
  out += fmt::format("end {} {}\n", st.entries, sha256_hex(out));
  if (signer) {
    out += fmt::format("signature ed25519 {} {}\n", signer->key_id(), to_hex(signer->sign(kSignatureContext, out)));
    st.signer = signer->key_id();
  }
  std::string dir = llvm::sys::path::parent_path(path).str();
  if (dir.empty()) dir = ".";
  write_file_atomically(dir, path, out, 0644);  // made to be shipped: readable like any other output
  st.bytes = out.size();
  return st;
}

BundleStats import_bundle(const DiskStore& store, const std::string& path, const TrustedKeys* trusted) {
  auto bad = [&](const std::string& what) {
    return CacheError(fmt::format("lkjit: error: {}: not a valid lkjit bundle: {}; nothing imported", path, what));
  };
  auto refuse = [&](const std::string& what) {
    return CacheError(fmt::format("lkjit: error: {}: bundle refused: {}; nothing imported", path, what));
  };
  std::string b, why;
  // The file is the caller's input, not the cache: one that cannot be read is bad input, not a cache error.
  if (!read_whole_file(path, &b, &why))
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: {}; supported: a bundle file written by `lkjit cache export` or "
                            "`lkjit prewarm --bundle`", why.empty() ? path + ": no such bundle file" : why));
  BundleStats st;
  if (b.compare(0, kBundleMagic.size(), kBundleMagic) == 0) st.format = kBundleFormatVersion;
  else if (b.compare(0, kBundleMagicV1.size(), kBundleMagicV1) == 0) st.format = 1;
  else throw bad(fmt::format("bad magic (expected '{}')", kBundleMagic.substr(0, kBundleMagic.size() - 1)));
  const size_t magic_size = kBundleMagic.size();  // the same length for both versions
  if (b.back() != '\n') throw bad("truncated (no end line)");
  // Trailer first: the signature vouches for every byte before it, the end line for every byte before that.
  size_t end_at = last_line_at(b, b.size(), magic_size), signed_size = b.size();
  std::string signer, signature;
  if (b.compare(end_at, 10, "signature ") == 0) {
    if (st.format < 2) throw bad("a format 1 bundle has no signature line");
    char id[65] = {}, sig[129] = {};
    int used = 0;
    if (std::sscanf(b.c_str() + end_at, "signature ed25519 %64[0-9a-f] %128[0-9a-f]%n", id, sig, &used) != 2 ||
        std::string(id).size() != kKeyIdHexDigits || std::string(sig).size() != 2 * kSignatureBytes ||
        end_at + used + 1 != b.size())
      throw bad("malformed signature line (expected 'signature ed25519 <64 hex digits> <128 hex digits>')");
    signer = id;
    from_hex(sig, &signature);
    signed_size = end_at;
    end_at = last_line_at(b, end_at, magic_size);
  }
  if (b.compare(end_at, 4, "end ") != 0) throw bad("truncated (no end line)");
  size_t count = 0;
  char sha[65] = {};
  if (std::sscanf(b.c_str() + end_at, "end %zu %64[0-9a-f]\n", &count, sha) != 2 || std::string(sha).size() != 64)
    throw bad("malformed end line");
  if (sha256_hex(std::string_view(b).substr(0, end_at)) != sha) throw bad("checksum mismatch (damaged or truncated)");
  st.signer = signer;
  if (trusted && !trusted->empty()) {
    if (signer.empty())
      throw refuse("it is not signed, and LKJIT_CACHE_TRUSTED_KEYS is set: only bundles signed by a trusted key import");
    const Verdict v = trusted->verify(kSignatureContext, std::string_view(b).substr(0, signed_size), signature, signer);
    if (!v.ok) throw refuse(v.reason);
  }
  std::vector<Entry> entries;
  size_t pos = magic_size;
  std::string line;
  while (pos < end_at) {
    if (!next_line(b, &pos, &line) || line.rfind("entry ", 0) != 0) throw bad(fmt::format("bad record at byte {}", pos));
    const uint64_t n = std::strtoull(line.c_str() + 6, nullptr, 10);
    if (n >= end_at - pos || b[pos + n] != '\n') throw bad(fmt::format("entry {} runs past its record", entries.size() + 1));
    auto e = decode_entry(std::string_view(b).substr(pos, n), "", &why);
    if (!e) throw bad(fmt::format("entry {}: {}", entries.size() + 1, why));
    if (!is_key(e->meta.key))
      throw bad(fmt::format("entry {}: key '{}' is not 64 hex digits", entries.size() + 1, escape_bytes(e->meta.key)));
    entries.push_back(std::move(*e));
    pos += n + 1;
  }
  if (entries.size() != count) throw bad(fmt::format("{} entries, end line says {}", entries.size(), count));
  st.entries = entries.size();
  st.bytes = b.size();
  const DiskStore uncapped(store.dir(), 0);  // one prune at the end, not one per entry
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    // Well-formed is not enough: the entry must be what it says, or it would be served under its key.
    if (const std::string p = entry_problem(e); !p.empty()) {
      count_refusal(Source::kBundle);
      st.refused.push_back(fmt::format("entry {} ({}, key {}): {}", i + 1, escape_bytes(e.meta.kernel_name.substr(0, 80)),
                                       e.meta.key.substr(0, 16), p));
      continue;
    }
    if (uncapped.read(e.meta.key)) {
      ++st.present;
      continue;
    }
    uncapped.store(e.meta, e.payload);
    st.added.push_back(e.meta.key);
  }
  if (store.max_bytes()) store.prune(store.max_bytes());
  return st;
}

}  // namespace lkjit::cache
