#include "cache/bundle.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "cache/file_io.h"
#include "cache/signing.h"
#include "cache/trust.h"
#include "lkjit/error.h"
#include "support/parse_int.h"
#include "support/read_file.h"

namespace lkjit::cache {
namespace {

const std::string kBundleMagic = "LKJIT-BUNDLE " + std::to_string(kBundleFormatVersion) + "\n";
const std::string kBundleMagicV1 = "LKJIT-BUNDLE 1\n";
constexpr const char* kSignatureContext = "bundle";

// Start of the last line of b[0, end) (which ends in "\n"), searching no further back than `floor`.
size_t last_line_at(std::string_view b, size_t end, size_t floor) {
  if (end < floor + 2) return floor;
  const size_t nl = b.rfind('\n', end - 2);
  return nl == std::string_view::npos || nl < floor ? floor : nl + 1;
}

// Reads one "\n"-terminated line at *pos; false when there is none.
bool next_line(std::string_view b, size_t* pos, std::string_view* line) {
  const size_t nl = b.find('\n', *pos);
  if (nl == std::string_view::npos) return false;
  *line = b.substr(*pos, nl - *pos);
  *pos = nl + 1;
  return true;
}

// n lowercase hex digits exactly.
bool is_hex(std::string_view s, size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
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
  write_output_file(path, out, 0644);  // made to be shipped: readable like any other output
  st.bytes = out.size();
  return st;
}

BundleFrame split_bundle(std::string_view b, const std::string& origin) {
  auto bad = [&](const std::string& what) {
    return CacheError(fmt::format("lkjit: error: {}: not a valid lkjit bundle: {}; nothing imported", origin, what));
  };
  if (b.empty()) throw bad("empty");
  BundleFrame f;
  if (b.substr(0, kBundleMagic.size()) == kBundleMagic) f.format = kBundleFormatVersion;
  else if (b.substr(0, kBundleMagicV1.size()) == kBundleMagicV1) f.format = 1;
  else throw bad(fmt::format("bad magic (expected '{}')", kBundleMagic.substr(0, kBundleMagic.size() - 1)));
  const size_t magic_size = kBundleMagic.size();  // the same length for both versions
  if (b.back() != '\n') throw bad("truncated (no end line)");
  // Trailer first: the signature vouches for every byte before it, the end line for every byte before that.
  size_t end_at = last_line_at(b, b.size(), magic_size);
  f.signed_size = b.size();
  if (b.substr(end_at, 10) == "signature ") {
    if (f.format < 2) throw bad("a format 1 bundle has no signature line");
    // "signature ed25519 <64 hex> <128 hex>", single spaces, the last line.
    const std::string_view sig_line = b.substr(end_at, b.size() - 1 - end_at);
    const std::string_view prefix = "signature ed25519 ";
    const std::string_view id = sig_line.substr(std::min(sig_line.size(), prefix.size()), kKeyIdHexDigits);
    const size_t sig_at = prefix.size() + kKeyIdHexDigits + 1;
    const std::string_view sig = sig_line.size() > sig_at ? sig_line.substr(sig_at) : std::string_view();
    if (sig_line.substr(0, prefix.size()) != prefix || !is_hex(id, kKeyIdHexDigits) || sig_line.size() <= sig_at ||
        sig_line[sig_at - 1] != ' ' || !is_hex(sig, 2 * kSignatureBytes) || !from_hex(sig, &f.signature))
      throw bad("malformed signature line (expected 'signature ed25519 <64 hex digits> <128 hex digits>')");
    f.signer = std::string(id);
    f.signed_size = end_at;
    end_at = last_line_at(b, end_at, magic_size);
  }
  // "end <count> <sha256>", single spaces, a decimal count (support/parse_int.h: no sign, no spaces, no wrap).
  const std::string_view end_line = b.substr(end_at, f.signed_size - 1 - end_at);
  if (end_line.substr(0, 4) != "end ") throw bad("truncated (no end line)");
  const size_t space = end_line.find(' ', 4);
  const std::string_view count_text = end_line.substr(4, space == std::string_view::npos ? 0 : space - 4);
  const std::string_view sha = space == std::string_view::npos ? std::string_view() : end_line.substr(space + 1);
  const support::IntParse count = support::parse_decimal(count_text, 0, int64_t(b.size()));
  if (count.status != support::IntStatus::kOk || !is_hex(sha, 64)) throw bad("malformed end line");
  if (sha256_hex(b.substr(0, end_at)) != sha) throw bad("checksum mismatch (damaged or truncated)");
  size_t pos = magic_size;
  std::string_view line;
  while (pos < end_at) {
    const size_t at = pos;
    if (!next_line(b, &pos, &line) || line.substr(0, 6) != "entry ") throw bad(fmt::format("bad record at byte {}", at));
    const support::IntParse n = support::parse_decimal(line.substr(6), 0, int64_t(end_at - pos) - 1);
    if (n.status != support::IntStatus::kOk || b[pos + n.value] != '\n')
      throw bad(fmt::format("entry {} runs past its record", f.entries.size() + 1));
    f.entries.push_back(b.substr(pos, n.value));
    pos += n.value + 1;
  }
  if (f.entries.size() != static_cast<uint64_t>(count.value))
    throw bad(fmt::format("{} entries, end line says {}", f.entries.size(), count.value));
  return f;
}

BundleStats import_bundle(const DiskStore& store, const std::string& path, const TrustedKeys* trusted) {
  // The file is the caller's input, not the cache: one that cannot be read is bad input, not a cache error.
  support::ReadOptions o;
  o.max_bytes = kMaxBundleBytes;
  o.what = "bundle file";
  support::ReadResult file = support::read_file(path, o);
  if (!file.ok())
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: {}; supported: a bundle file written by `lkjit cache export` or "
                            "`lkjit prewarm --bundle`", file.why));
  const std::string& b = file.bytes;
  const BundleFrame frame = split_bundle(b, path);
  BundleStats st;
  st.format = frame.format;
  st.signer = frame.signer;
  if (trusted && !trusted->empty()) {
    auto refuse = [&](const std::string& what) {
      return CacheError(fmt::format("lkjit: error: {}: bundle refused: {}; nothing imported", path, what));
    };
    if (frame.signer.empty())
      throw refuse("it is not signed, and LKJIT_CACHE_TRUSTED_KEYS is set: only bundles signed by a trusted key import");
    const Verdict v =
        trusted->verify(kSignatureContext, std::string_view(b).substr(0, frame.signed_size), frame.signature, frame.signer);
    if (!v.ok) throw refuse(v.reason);
  }
  st.entries = frame.entries.size();
  st.bytes = b.size();
  const DiskStore uncapped(store.dir(), 0);  // one prune at the end, not one per entry
  for (size_t i = 0; i < frame.entries.size(); ++i) {
    std::string why;
    auto e = decode_entry(frame.entries[i], "", &why);
    if (!e) {
      count_refusal(Source::kBundle);
      st.refused.push_back(fmt::format("entry {}: {}", i + 1, why));
      continue;
    }
    if (!is_key(e->meta.key)) {
      count_refusal(Source::kBundle);
      st.refused.push_back(fmt::format("entry {}: key '{}' is not 64 hex digits", i + 1, escape_bytes(e->meta.key)));
      continue;
    }
    // Well-formed is not enough: the entry must be what it says, or it would be served under its key.
    if (const std::string p = entry_problem(*e); !p.empty()) {
      count_refusal(Source::kBundle);
      st.refused.push_back(fmt::format("entry {} ({}, key {}): {}", i + 1, escape_bytes(e->meta.kernel_name.substr(0, 80)),
                                       e->meta.key.substr(0, 16), p));
      continue;
    }
    try {
      if (uncapped.read(e->meta.key)) {
        ++st.present;
        continue;
      }
      uncapped.store(e->meta, e->payload);
      st.added.push_back(e->meta.key);
    } catch (const CacheError& err) {  // this entry's path (a folder, a FIFO), a full disk: the others still go in
      std::string msg = err.what();
      if (msg.rfind("lkjit: error: ", 0) == 0) msg.erase(0, 14);
      st.refused.push_back(fmt::format("entry {} (key {}): {}", i + 1, e->meta.key.substr(0, 16), msg));
    }
  }
  if (store.max_bytes()) {
    const auto pruned = store.prune(store.max_bytes());
    for (const auto& key : st.added)
      if (std::find(pruned.removed_keys.begin(), pruned.removed_keys.end(), key) != pruned.removed_keys.end())
        st.evicted.push_back(key);
  }
  return st;
}

}  // namespace lkjit::cache
