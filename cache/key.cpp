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

std::string make_key(const KeyInputs& in) {
  llvm::SHA256 h;
  field(h, "format", "lkjit-key-1");
  field(h, "generator", std::to_string(in.generator_version));
  field(h, "nvrtc", in.nvrtc_version);
  field(h, "arch", std::to_string(in.arch));
  for (const auto& o : in.options) field(h, "option", o);
  field(h, "source", in.source);
  if (in.headers)
    for (const auto& [name, text] : *in.headers) {  // std::map: sorted, so order is stable
      field(h, "header-name", name);
      field(h, "header", text);
    }
  return llvm::toHex(h.final(), /*LowerCase=*/true);
}

std::string sha256_hex(const std::string& bytes) {
  llvm::SHA256 h;
  h.update(llvm::StringRef(bytes));
  return llvm::toHex(h.final(), true);
}

}  // namespace lkjit::cache
