// Cache entries that pass the cache's trust checks (cache/trust.h) without NVRTC: a synthetic CUDA ELF
// laid out as NVRTC 13 lays out a cubin (ELF64, EM_CUDA, OS/ABI 0x41, ABI version 8, the SM in bits 8..15
// of e_flags, one executable ".text.<kernel>" section per kernel, a GLOBAL FUNC symbol each), and
// metadata whose recorded inputs hash to its key. For tests of the store, bundles and remote tier whose
// subject is not the compiler; the ELF reader itself is tested on real NVRTC output (cache_trust_test).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cache/entry.h"
#include "cache/key.h"
#include "lkjit/cache.h"

namespace lkjit::test {

namespace detail {
template <class T>
void put(std::string& b, size_t at, T v) {
  std::memcpy(&b[at], &v, sizeof v);
}
}  // namespace detail

// A cubin for sm_<sm> defining `kernels`, padded to at least min_bytes.
inline std::string test_cubin(int sm, const std::vector<std::string>& kernels, size_t min_bytes = 0) {
  using detail::put;
  // Sections: 0 null, 1 .shstrtab, 2 .strtab, 3 .symtab, 4.. one .text.<kernel> each.
  std::string shstr("\0.shstrtab\0.strtab\0.symtab\0", 27), str(1, '\0');
  std::vector<uint32_t> text_names, sym_names;
  for (const auto& k : kernels) {
    text_names.push_back(static_cast<uint32_t>(shstr.size()));
    shstr += ".text." + k + '\0';
    sym_names.push_back(static_cast<uint32_t>(str.size()));
    str += k + '\0';
  }
  const size_t nsec = 4 + kernels.size(), nsym = 1 + kernels.size();
  const size_t text_bytes = 128;
  size_t at = 64;
  const size_t shstr_at = at;
  at += shstr.size();
  const size_t str_at = at;
  at += str.size();
  at = (at + 7) & ~size_t(7);
  const size_t sym_at = at;
  at += nsym * 24;
  at = (at + 127) & ~size_t(127);
  const size_t text_at = at;
  size_t pad = 0;
  const size_t table_bytes = nsec * 64;
  if (text_at + kernels.size() * text_bytes + table_bytes < min_bytes)
    pad = min_bytes - (text_at + kernels.size() * text_bytes + table_bytes);
  at += kernels.size() * text_bytes + pad;
  const size_t shoff = at;
  std::string b(shoff + table_bytes, '\0');
  std::memcpy(&b[0], "\x7f" "ELF\x02\x01\x01\x41\x08", 9);
  put<uint16_t>(b, 16, 2);    // ET_EXEC
  put<uint16_t>(b, 18, 190);  // EM_CUDA
  put<uint32_t>(b, 20, 1);
  put<uint64_t>(b, 40, shoff);
  put<uint32_t>(b, 48, 0x06000002u | (uint32_t(sm) << 8));
  put<uint16_t>(b, 52, 64);
  put<uint16_t>(b, 58, 64);
  put<uint16_t>(b, 60, static_cast<uint16_t>(nsec));
  put<uint16_t>(b, 62, 1);
  std::memcpy(&b[shstr_at], shstr.data(), shstr.size());
  std::memcpy(&b[str_at], str.data(), str.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const size_t s = sym_at + (i + 1) * 24;
    put<uint32_t>(b, s, sym_names[i]);
    b[s + 4] = static_cast<char>(0x12);  // STB_GLOBAL, STT_FUNC
    put<uint16_t>(b, s + 6, static_cast<uint16_t>(4 + i));
    put<uint64_t>(b, s + 16, text_bytes);
    std::memset(&b[text_at + i * text_bytes], 0x5a, text_bytes);
  }
  auto section = [&](size_t i, uint32_t name, uint32_t type, uint64_t flags, size_t off, size_t size, uint32_t link,
                     uint64_t entsize) {
    const size_t h = shoff + i * 64;
    put<uint32_t>(b, h, name);
    put<uint32_t>(b, h + 4, type);
    put<uint64_t>(b, h + 8, flags);
    put<uint64_t>(b, h + 24, off);
    put<uint64_t>(b, h + 32, size);
    put<uint32_t>(b, h + 40, link);
    put<uint64_t>(b, h + 56, entsize);
  };
  section(1, 1, 3, 0, shstr_at, shstr.size(), 0, 0);
  section(2, 11, 3, 0, str_at, str.size(), 0, 0);
  section(3, 19, 2, 0, sym_at, nsym * 24, 2, 24);
  for (size_t i = 0; i < kernels.size(); ++i)
    section(4 + i, text_names[i], 1, 0x6 /* ALLOC | EXECINSTR */, text_at + i * text_bytes, text_bytes, 3, 0);
  return b;
}

// Metadata of a made-up kernel "lkjit_test_<tag>_sm<arch>" whose recorded inputs hash to its key.
inline cache::EntryMeta test_meta(const std::string& tag, int arch = 90) {
  cache::EntryMeta m;
  m.kernel_name = "lkjit_test_" + tag + "_sm" + std::to_string(arch);
  m.spec = "test " + tag;
  m.arch = arch;
  m.nvrtc_version = "13.0";
  m.generator_version = 1;
  m.options = {"--gpu-architecture=sm_" + std::to_string(arch), "--std=c++17"};
  m.source_sha256 = cache::sha256_hex("source of " + tag);
  m.header_sha256 = {{"wtconv/fold.cuh", cache::sha256_hex("fold")}};
  m.key = cache::make_key(cache::inputs_of(m));
  return m;
}

// The payload test_meta's entry needs: a cubin for its arch defining its kernel, of at least min_bytes.
inline std::string test_payload(const cache::EntryMeta& m, size_t min_bytes = 0) {
  return test_cubin(m.arch, {m.kernel_name}, min_bytes);
}

// Metadata for the inputs compile_kernel would hash (lkjit::kernel_key_inputs): a genuine entry of that
// kernel, whatever payload goes with it.
inline cache::EntryMeta meta_from_inputs(const KeyInputsInfo& in) {
  cache::EntryMeta m;
  cache::copy_key_summary(m, in);
  m.key = in.key;
  m.spec = "test entry of " + in.kernel_name;
  return m;
}

}  // namespace lkjit::test
