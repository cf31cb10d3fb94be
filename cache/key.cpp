#include "cache/key.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

namespace lkjit::cache {
namespace {

// Length-prefixed fields: no concatenation of two inputs can collide with another split.
void field(llvm::SHA256& h, const std::string& tag, const std::string& v) {
  const std::string head = tag + ":" + std::to_string(v.size()) + ":";
  h.update(llvm::StringRef(head));
  h.update(llvm::StringRef(v));
}

}  // namespace

// Key format 2: the inputs as digests (KeySummary), so an entry's key can be recomputed from the inputs
// its metadata records. Format 1 hashed the texts of every embedded header.
std::string make_key(const KeySummary& in) {
  llvm::SHA256 h;
  field(h, "format", "lkjit-key-2");
  field(h, "generator", std::to_string(in.generator_version));
  field(h, "nvrtc", in.nvrtc_version);
  field(h, "arch", std::to_string(in.arch));
  for (const auto& o : in.options) field(h, "option", o);
  field(h, "source", in.source_sha256);
  for (const auto& [name, digest] : in.header_sha256) {  // std::map: sorted, so order is stable
    field(h, "header-name", name);
    field(h, "header", digest);
  }
  return llvm::toHex(h.final(), /*LowerCase=*/true);
}

std::string make_key(const KeyInputs& in) { return make_key(summarize(in)); }

std::string sha256_hex(std::string_view bytes) {
  llvm::SHA256 h;
  h.update(llvm::StringRef(bytes.data(), bytes.size()));
  return llvm::toHex(h.final(), true);
}

}  // namespace lkjit::cache

namespace lkjit::cache {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

std::string short_hash(const std::string& h) { return h.empty() ? "(none)" : h.substr(0, 12); }

}  // namespace

KeySummary summarize(const KeyInputs& in) {
  KeySummary s;
  copy_plain_key_inputs(s, in);
  s.source_sha256 = sha256_hex(in.source);
  if (in.headers)
    for (const auto& [name, text] : *in.headers) s.header_sha256[name] = sha256_hex(text);
  return s;
}

std::vector<std::string> key_differences(const KeySummary& a, const KeySummary& b) {
  std::vector<std::string> d;
  auto field = [&](const char* what, const std::string& x, const std::string& y) {
    if (x != y) d.push_back(std::string(what) + ": " + x + " -> " + y);
  };
  field("arch", "sm_" + std::to_string(a.arch), "sm_" + std::to_string(b.arch));
  field("nvrtc", a.nvrtc_version, b.nvrtc_version);
  field("generator", "v" + std::to_string(a.generator_version), "v" + std::to_string(b.generator_version));
  field("options", join(a.options), join(b.options));
  field("source sha256", short_hash(a.source_sha256), short_hash(b.source_sha256));
  for (const auto& [name, h] : a.header_sha256) {
    auto it = b.header_sha256.find(name);
    if (it == b.header_sha256.end()) d.push_back("header " + name + ": removed");
    else if (it->second != h) d.push_back("header " + name + ": " + short_hash(h) + " -> " + short_hash(it->second));
  }
  for (const auto& [name, h] : b.header_sha256)
    if (!a.header_sha256.count(name)) d.push_back("header " + name + ": added");
  return d;
}

}  // namespace lkjit::cache
