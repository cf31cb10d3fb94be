#include "cache/entry.h"

#include <fmt/format.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <limits>

#include "support/json_limits.h"
#include "support/message.h"

namespace lkjit::cache {
namespace {

constexpr const char* kMagic = "LKJIT-KERNEL-CACHE";

struct Head {
  int format = 0;
  std::string checksum;  // v2: SHA-256 of everything after the magic line
  size_t meta_begin = 0, meta_end = 0;  // the JSON line, without its newline
};

// Splits the magic line and the metadata line off; the payload starts at meta_end + 1.
std::optional<Head> split_head(std::string_view bytes, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<Head> {
    if (why) *why = w;
    return std::nullopt;
  };
  const size_t nl1 = bytes.find('\n');
  if (nl1 == std::string_view::npos) return fail("truncated header");
  const std::string_view magic = bytes.substr(0, nl1);
  const std::string expect_v1 = fmt::format("{} 1", kMagic), prefix_v2 = fmt::format("{} 2 ", kMagic);
  Head h;
  if (magic == expect_v1) {
    h.format = 1;
  } else if (magic.substr(0, prefix_v2.size()) == prefix_v2 && magic.size() == prefix_v2.size() + 64) {
    h.format = 2;
    h.checksum = std::string(magic.substr(prefix_v2.size()));
  } else {
    return fail(fmt::format("bad magic or format version '{}' (expected '{} {} <sha256>' or '{} 1')",
                            escape_bytes(magic.substr(0, 40)), kMagic, kEntryFormatVersion, kMagic));
  }
  const size_t nl2 = bytes.find('\n', nl1 + 1);
  if (nl2 == std::string_view::npos) return fail("truncated metadata");
  h.meta_begin = nl1 + 1;
  h.meta_end = nl2;
  return h;
}

std::optional<EntryMeta> parse_meta(std::string_view json, int format, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<EntryMeta> {
    if (why) *why = w;
    return std::nullopt;
  };
  // llvm::json::parse recurses per nesting level: a line of '[' x 50000 would overflow the stack.
  if (auto problem = support::json_limit_problem(json, {8, kMaxEntryHeadBytes})) return fail("metadata " + *problem);
  auto parsed = llvm::json::parse(llvm::StringRef(json.data(), json.size()));
  if (!parsed) return fail("metadata is not JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object* o = parsed->getAsObject();
  if (!o) return fail("metadata is not a JSON object");
  auto str = [&](const char* k) {
    auto v = o->getString(k);
    return v ? v->str() : std::string();
  };
  EntryMeta m;
  m.format = format;
  m.key = str("key");
  m.kernel_name = str("kernel");
  m.spec = str("spec");
  m.nvrtc_version = str("nvrtc");
  m.sha256 = str("sha256");
  // Never truncated to int: an arch of 2^32 + 90 is not sm_90.
  const int64_t arch = o->getInteger("arch").getValueOr(0), generator = o->getInteger("generator").getValueOr(0);
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"arch", arch}, {"generator", generator}})
    if (v < 0 || v > std::numeric_limits<int>::max())
      return fail(fmt::format("metadata {}={} is out of range; supported: [0, {}]", name, v, std::numeric_limits<int>::max()));
  m.arch = static_cast<int>(arch);
  const int64_t size = o->getInteger("size").getValueOr(-1);
  if (size < 0) return fail("metadata has no payload size");
  m.size = static_cast<uint64_t>(size);
  m.generator_version = static_cast<int>(generator);
  m.source_sha256 = str("source");
  if (const auto* opts = o->getArray("options"))
    for (const auto& v : *opts)
      if (auto s = v.getAsString()) m.options.push_back(s->str());
  if (const auto* hs = o->getObject("headers"))
    for (const auto& [name, v] : *hs)
      if (auto s = v.getAsString()) m.header_sha256[name.str()] = s->str();
  return m;
}

}  // namespace

std::string escape_bytes(std::string_view bytes) { return support::escape_bytes(bytes); }

void set_inputs(EntryMeta& m, const KeySummary& in) { copy_key_summary(m, in); }

KeySummary inputs_of(const EntryMeta& m) {
  KeySummary s;
  copy_key_summary(s, m);
  return s;
}

std::string encode_entry(const EntryMeta& m, const std::string& payload) {
  llvm::json::Array options;
  for (const auto& opt : m.options) options.push_back(opt);
  llvm::json::Object headers;
  for (const auto& [name, h] : m.header_sha256) headers[name] = h;
  llvm::json::Object o{{"format", kEntryFormatVersion},
                       {"key", m.key},
                       {"kernel", m.kernel_name},
                       {"spec", m.spec},
                       {"arch", m.arch},
                       {"nvrtc", m.nvrtc_version},
                       {"generator", m.generator_version},
                       {"options", std::move(options)},
                       {"source", m.source_sha256},
                       {"headers", std::move(headers)},
                       {"size", static_cast<int64_t>(payload.size())},
                       {"sha256", sha256_hex(payload)}};
  std::string body;
  llvm::raw_string_ostream os(body);
  os << llvm::json::Value(std::move(o)) << '\n';  // objects print with sorted keys: stable bytes
  os.flush();
  body += payload;
  return fmt::format("{} {} {}\n", kMagic, kEntryFormatVersion, sha256_hex(body)) + body;
}

std::optional<Entry> decode_entry(std::string_view bytes, const std::string& expected_key, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<Entry> {
    if (why) *why = w;
    return std::nullopt;
  };
  const auto head = split_head(bytes, why);
  if (!head) return std::nullopt;
  auto meta = parse_meta(bytes.substr(head->meta_begin, head->meta_end - head->meta_begin), head->format, why);
  if (!meta) return std::nullopt;
  if (!expected_key.empty() && meta->key != expected_key)
    return fail(fmt::format("key echo {} does not match the requested key {}", escape_bytes(meta->key), expected_key));
  const uint64_t have = bytes.size() - head->meta_end - 1;
  if (have != meta->size) return fail(fmt::format("payload is {} bytes, header says {}", have, meta->size));
  const std::string_view payload = bytes.substr(head->meta_end + 1);
  if (head->format == 1) {
    if (sha256_hex(payload) != meta->sha256) return fail("payload checksum mismatch");
  } else if (sha256_hex(bytes.substr(head->meta_begin)) != head->checksum) {
    return fail("entry checksum mismatch");
  }
  return Entry{std::move(*meta), std::string(payload)};
}

std::optional<EntryMeta> decode_entry_meta(std::string_view head_bytes, uint64_t file_size, std::string* why) {
  const auto head = split_head(head_bytes, why);
  if (!head) return std::nullopt;
  auto meta = parse_meta(head_bytes.substr(head->meta_begin, head->meta_end - head->meta_begin), head->format, why);
  if (!meta) return std::nullopt;
  const uint64_t have = file_size > head->meta_end ? file_size - head->meta_end - 1 : 0;
  if (have != meta->size) {
    if (why) *why = fmt::format("payload is {} bytes, header says {}", have, meta->size);
    return std::nullopt;
  }
  return meta;
}

}  // namespace lkjit::cache
