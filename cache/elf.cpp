#include "cache/elf.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "cache/entry.h"

namespace lkjit::cache {
namespace {

// ELF constants (System V gABI); EM_CUDA and the OS/ABI values are NVIDIA's.
constexpr uint16_t kEmCuda = 190;
constexpr uint8_t kElfClass64 = 2, kElfData2Lsb = 1, kEvCurrent = 1;
constexpr uint8_t kOsAbiCudaV7 = 0x33, kOsAbiCudaV8 = 0x41;
constexpr uint16_t kEtRel = 1, kEtExec = 2;
constexpr size_t kEhdrSize = 64, kShdrSize = 64, kPhdrSize = 56, kSymSize = 24;
constexpr uint32_t kShtNobits = 8, kShtSymtab = 2, kShtStrtab = 3;
constexpr uint64_t kShfExecinstr = 0x4;
constexpr uint8_t kSttFunc = 2, kStbGlobal = 1;
constexpr uint16_t kShnLoreserve = 0xff00;

// Little-endian loads at a checked offset (memcpy: no alignment assumptions).
template <class T>
T load(std::string_view b, uint64_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

struct Section {
  uint32_t name = 0, type = 0, link = 0;
  uint64_t flags = 0, offset = 0, size = 0, entsize = 0;
};

// True when [off, off + n) lies inside a buffer of `size` bytes, without overflow.
bool inside(uint64_t off, uint64_t n, uint64_t size) { return off <= size && n <= size - off; }

// The NUL-terminated string at `at` in the string table `s` of the image, or nullopt when it runs past
// the table. Names longer than 4096 bytes are refused: no kernel lkjit writes has one.
std::optional<std::string_view> string_at(std::string_view b, const Section& s, uint64_t at) {
  if (at >= s.size) return std::nullopt;
  const std::string_view table = b.substr(s.offset, s.size);
  const size_t end = table.find('\0', at);
  if (end == std::string_view::npos || end - at > 4096) return std::nullopt;
  return table.substr(at, end - at);
}

}  // namespace

std::optional<CubinInfo> read_cubin(std::string_view b, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<CubinInfo> {
    if (why) *why = w;
    return std::nullopt;
  };
  const uint64_t n = b.size();
  if (n < kEhdrSize) return fail(fmt::format("cubin is {} bytes, shorter than an ELF header ({} bytes)", n, kEhdrSize));
  if (b.substr(0, 4) != std::string_view("\x7f" "ELF", 4))
    return fail(fmt::format("payload is not an ELF image (starts with '{}')", escape_bytes(b.substr(0, 8))));
  const auto ident = [&](int i) { return static_cast<uint8_t>(b[i]); };
  if (ident(4) != kElfClass64) return fail(fmt::format("cubin ELF class is {}, expected 2 (64-bit)", ident(4)));
  if (ident(5) != kElfData2Lsb) return fail(fmt::format("cubin ELF data encoding is {}, expected 1 (little endian)", ident(5)));
  if (ident(6) != kEvCurrent) return fail(fmt::format("cubin ELF version is {}, expected 1", ident(6)));
  const uint16_t type = load<uint16_t>(b, 16), machine = load<uint16_t>(b, 18);
  if (machine != kEmCuda) return fail(fmt::format("ELF machine is {}, expected {} (EM_CUDA)", machine, kEmCuda));
  if (ident(7) != kOsAbiCudaV7 && ident(7) != kOsAbiCudaV8)
    return fail(fmt::format("cubin OS/ABI is 0x{:02x}, expected 0x33 or 0x41 (CUDA)", ident(7)));
  if (type != kEtExec && type != kEtRel) return fail(fmt::format("cubin ELF type is {}, expected 2 (executable)", type));
  if (load<uint32_t>(b, 20) != kEvCurrent) return fail("cubin ELF header version is not 1");
  CubinInfo info;
  info.abi_version = ident(8);
  info.type = type;
  const uint32_t flags = load<uint32_t>(b, 48);
  info.sm = static_cast<int>(info.abi_version >= 8 ? (flags >> 8) & 0xff : flags & 0xff);
  if (info.sm < 10) return fail(fmt::format("cubin e_flags 0x{:08x} name no SM (ABI version {})", flags, info.abi_version));

  const uint64_t shoff = load<uint64_t>(b, 40);
  const uint16_t ehsize = load<uint16_t>(b, 52), shentsize = load<uint16_t>(b, 58);
  uint64_t shnum = load<uint16_t>(b, 60);
  const uint16_t shstrndx = load<uint16_t>(b, 62);
  if (ehsize != kEhdrSize) return fail(fmt::format("cubin ELF header size is {}, expected {}", ehsize, kEhdrSize));
  if (shoff == 0 || shnum == 0) return fail("cubin has no section table");
  if (shentsize != kShdrSize) return fail(fmt::format("cubin section header size is {}, expected {}", shentsize, kShdrSize));
  if (shnum > kMaxCubinSections) return fail(fmt::format("cubin has {} sections; at most {} are read", shnum, kMaxCubinSections));
  if (shoff < kEhdrSize || !inside(shoff, shnum * kShdrSize, n))
    return fail(fmt::format("cubin section table ({} headers at offset {}) runs past the end of the {}-byte image", shnum,
                            shoff, n));
  // Program headers (the segments the driver loads) must lie inside the image too.
  const uint64_t phoff = load<uint64_t>(b, 32);
  const uint16_t phentsize = load<uint16_t>(b, 54), phnum = load<uint16_t>(b, 56);
  if (phnum) {
    if (phentsize != kPhdrSize) return fail(fmt::format("cubin program header size is {}, expected {}", phentsize, kPhdrSize));
    if (phoff < kEhdrSize || !inside(phoff, uint64_t(phnum) * kPhdrSize, n))
      return fail(fmt::format("cubin program headers ({} at offset {}) run past the end of the {}-byte image", phnum, phoff, n));
    for (uint64_t i = 0; i < phnum; ++i) {
      const uint64_t at = phoff + i * kPhdrSize, off = load<uint64_t>(b, at + 8), filesz = load<uint64_t>(b, at + 32);
      if (filesz && !inside(off, filesz, n))
        return fail(fmt::format("cubin segment {} (offset {}, {} bytes) runs past the end of the {}-byte image", i, off,
                                filesz, n));
    }
  }
  if (shstrndx >= shnum) return fail(fmt::format("cubin section name table index {} is not below the section count {}", shstrndx, shnum));

  std::vector<Section> sections(shnum);
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t at = shoff + i * kShdrSize;
    Section& s = sections[i];
    s.name = load<uint32_t>(b, at);
    s.type = load<uint32_t>(b, at + 4);
    s.flags = load<uint64_t>(b, at + 8);
    s.offset = load<uint64_t>(b, at + 24);
    s.size = load<uint64_t>(b, at + 32);
    s.link = load<uint32_t>(b, at + 40);
    s.entsize = load<uint64_t>(b, at + 56);
    if (s.type != kShtNobits && !inside(s.offset, s.size, n))
      return fail(fmt::format("cubin section {} (offset {}, {} bytes) runs past the end of the {}-byte image", i, s.offset,
                              s.size, n));
  }
  if (sections[shstrndx].type != kShtStrtab) return fail(fmt::format("cubin section name table {} is not a string table", shstrndx));

  size_t symtabs = 0;
  for (uint64_t i = 0; i < shnum; ++i) {
    const Section& st = sections[i];
    if (st.type != kShtSymtab) continue;
    ++symtabs;
    if (st.entsize != kSymSize || st.size % kSymSize != 0)
      return fail(fmt::format("cubin symbol table {} has entries of {} bytes in {} bytes, expected {}-byte entries", i,
                              st.entsize, st.size, kSymSize));
    if (st.size / kSymSize > kMaxCubinSymbols)
      return fail(fmt::format("cubin symbol table {} has {} symbols; at most {} are read", i, st.size / kSymSize, kMaxCubinSymbols));
    if (st.link == 0 || st.link >= shnum || sections[st.link].type != kShtStrtab)
      return fail(fmt::format("cubin symbol table {} links to section {}, which is not a string table", i, st.link));
    const Section& strtab = sections[st.link];
    for (uint64_t at = st.offset; at < st.offset + st.size; at += kSymSize) {
      const uint32_t name = load<uint32_t>(b, at);
      const uint8_t sym_info = static_cast<uint8_t>(b[at + 4]);
      const uint16_t shndx = load<uint16_t>(b, at + 6);
      if ((sym_info & 0xf) != kSttFunc || (sym_info >> 4) != kStbGlobal) continue;
      const auto sym = string_at(b, strtab, name);
      if (!sym) return fail(fmt::format("cubin symbol {} of table {} has a name outside its string table", (at - st.offset) / kSymSize, i));
      // Defined, in an executable section of this image: not an import, not data.
      if (shndx == 0 || shndx >= kShnLoreserve || shndx >= shnum) continue;
      const Section& text = sections[shndx];
      if (text.type == kShtNobits || !(text.flags & kShfExecinstr)) continue;
      info.kernels.emplace_back(*sym);
    }
  }
  if (symtabs == 0) return fail("cubin has no symbol table");
  return info;
}

std::string cubin_problem(std::string_view bytes, int arch, const std::string& kernel) {
  std::string why;
  const auto info = read_cubin(bytes, &why);
  if (!info) return why;
  if (info->sm != arch) return fmt::format("cubin is for sm_{}, expected sm_{}", info->sm, arch);
  for (const auto& k : info->kernels)
    if (k == kernel) return {};
  std::string defined;
  for (size_t i = 0; i < info->kernels.size() && i < 4; ++i) defined += (i ? ", " : "") + escape_bytes(info->kernels[i]);
  if (info->kernels.size() > 4) defined += fmt::format(" and {} more", info->kernels.size() - 4);
  return fmt::format("cubin defines no kernel {} ({})", escape_bytes(kernel),
                     defined.empty() ? "it defines none" : "it defines " + defined);
}

}  // namespace lkjit::cache
