// `lkjit cache ACTION`: inspect and maintain the kernel cache (LKJIT_CACHE_DIR). No GPU needed.
//   stat | ls | verify | prune [--max-bytes N] | clear | explain KEY|KERNEL [--kernel NAME]
//   import FILE | export FILE
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <iostream>
#include <map>

#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "tools/lkjit/cache_remote.h"
#include "tools/lkjit/common.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

cl::SubCommand kCmd("cache", "Inspect and maintain the kernel cache: stat | ls | verify | prune | clear | "
                             "explain KEY | import FILE | export FILE | push | pull");
cl::OptionCategory kCat("lkjit cache options");
cl::list<std::string> kArgs(cl::Positional, cl::desc("<action> [argument]"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kMaxBytes("max-bytes",
                               cl::desc("prune: the size to prune down to, bytes or with a K/M/G/T suffix (default "
                                        "LKJIT_CACHE_MAX_BYTES; 0: no limit, only stale temp and lock files are removed)"),
                               cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kKernel("kernel", cl::desc("explain: for a key not in the cache, the kernel name it was looked up for"),
                             cl::init(""), cl::sub(kCmd), cl::cat(kCat));

cl::opt<bool> kDecisions("decisions", cl::desc("push, pull: the tuning database's decisions too"), cl::sub(kCmd),
                         cl::cat(kCat));

constexpr const char* kActions = "stat, ls, verify, prune, clear, explain, import, export, push, pull";


std::string age(double when) {
  const double s = std::difftime(std::time(nullptr), static_cast<std::time_t>(when));
  if (s < 120) return fmt::format("{:.0f} s ago", std::max(0.0, s));
  if (s < 7200) return fmt::format("{:.0f} min ago", s / 60);
  if (s < 172800) return fmt::format("{:.0f} h ago", s / 3600);
  return fmt::format("{:.0f} d ago", s / 86400);
}

int usage(const std::string& why) { throw Error(ErrorCode::kUsage, "lkjit: error: cache: " + why); }

// Every action checks the directory the same way (KernelCache::exists); one that does not exist yet is
// an empty cache, said once.
bool present(const KernelCache& c) {
  if (c.exists()) return true;
  std::cout << fmt::format("no cache at {} yet\n", c.dir());
  return false;
}

// Each file a maintenance action could not remove, with the reason, then the cache error: entries
// that stay must not pass for a done job.
int report_unremoved(const KernelCache& c, const char* action, const std::vector<std::string>& failed) {
  if (failed.empty()) return 0;
  std::cout.flush();  // after the summary line
  for (const auto& f : failed) std::cerr << fmt::format("{}: {}\n", action, f);
  std::cerr << fmt::format("lkjit: error: {}: {} could not be removed\n", c.dir(), counted(failed.size(), "file"));
  return static_cast<int>(ErrorCode::kCache);
}

int stat_main(const KernelCache& c) {
  present(c);
  const auto entries = c.list();
  uint64_t bytes = 0;
  size_t bad = 0;
  std::map<std::string, size_t> by_toolchain;
  for (const auto& e : entries) {
    bytes += e.file_bytes;
    bad += !e.ok;
    if (e.ok) ++by_toolchain[fmt::format("{} / NVRTC {}", arch_name(e.inputs.arch), e.inputs.nvrtc_version)];
  }
  std::cout << fmt::format("cache      {}\n", c.dir());
  std::cout << fmt::format("entries    {}\n", entries.size());
  std::cout << fmt::format("size       {} of {} cap{}\n", human_bytes(bytes), c.max_bytes() ? human_bytes(c.max_bytes()) : "no",
                           c.max_bytes() ? fmt::format(" ({:.0f}%)", 100.0 * bytes / c.max_bytes()) : "");
  std::cout << fmt::format("unreadable {}\n", bad);
  std::cout << fmt::format("compiling  {}\n", c.compiling());
  if (!entries.empty())
    std::cout << fmt::format("last used  {} (oldest: {})\n", age(entries.front().last_used), age(entries.back().last_used));
  for (const auto& [what, n] : by_toolchain) std::cout << fmt::format("  {:>6}  {}\n", n, what);
  remote_stat();
  return 0;
}

int ls_main(const KernelCache& c) {
  present(c);
  const auto entries = c.list();
  std::cout << fmt::format("{:<16}  {:<60} {:>6} {:>9}  {}\n", "key", "kernel", "arch", "bytes", "last used");
  for (const auto& e : entries) {
    if (!e.ok) {
      std::cout << fmt::format("{:<16}  (unreadable: {})\n", e.key.substr(0, 16), e.problem);
      continue;
    }
    std::cout << fmt::format("{:<16}  {:<60} {:>6} {:>9}  {}{}\n", e.key.substr(0, 16), e.inputs.kernel_name,
                             arch_name(e.inputs.arch), e.file_bytes, age(e.last_used), e.locked ? "  (compiling)" : "");
  }
  std::cout << counted(entries.size(), "entry", "entries") << "\n";
  remote_ls();
  return 0;
}

int verify_local(const KernelCache& c) {
  if (!present(c)) return 0;  // a check creates nothing
  c.check();
  size_t ok = 0, bad = 0, stray = 0, stuck = 0;
  for (const auto& e : c.verify()) {
    if (e.ok) {
      ++ok;
      continue;
    }
    stuck += !e.remove_error.empty();
    const std::string fate = !e.remove_error.empty() ? "could not remove it: " + e.remove_error
                             : e.stray              ? "removed"  // never an entry: nothing rebuilds it
                                                    : "removed; it is rebuilt on next use";
    if (e.stray) {
      ++stray;
      std::cout << fmt::format("not a cache entry: {} (its name is not a key; {})\n", e.path, fate);
    } else {
      ++bad;
      // Some reasons start with the path already (a failed read): said once.
      const std::string why = e.problem.rfind(e.path + ": ", 0) == 0 ? e.problem.substr(e.path.size() + 2) : e.problem;
      std::cout << fmt::format("corrupt: {}: {} ({})\n", e.path, why, fate);
    }
  }
  std::cout << fmt::format("verify: {} ok, {} corrupt{}{}\n", counted(ok, "entry", "entries"), bad,
                           stray ? ", " + counted(stray, "stray file") : "",
                           stuck ? fmt::format("; {} could not be removed", stuck) : "");
  return bad || stray ? static_cast<int>(ErrorCode::kCache) : 0;
}

int verify_main(const KernelCache& c) {
  const int local = verify_local(c);
  const int remote = remote_verify();
  return local ? local : remote;
}

int prune_main(const KernelCache& c) {
  std::optional<uint64_t> cap;
  if (kMaxBytes.getNumOccurrences()) cap = parse_byte_size(kMaxBytes, "--max-bytes");
  if (!present(c)) return 0;
  const auto r = c.prune(cap);
  if (r.skipped) {
    std::cout << "prune: another process is pruning this cache; nothing done\n";
    return 0;
  }
  std::cout << fmt::format("prune: removed {} ({}), kept {} in use; {} ({}) {}; {} removed\n",
                           counted(r.removed, "entry", "entries"), human_bytes(r.removed_bytes), r.kept_in_use,
                           counted(r.remaining, "entry", "entries"), human_bytes(r.remaining_bytes),
                           r.remaining == 1 ? "remains" : "remain", counted(r.stale_files, "stale file"));
  const int code = report_unremoved(c, "prune", r.failed);
  if (r.lock_error.empty()) return code;
  // Unguarded, two prunes would each evict for the same excess: none is evicted, and the cache stays over its cap.
  std::cerr << fmt::format("lkjit: error: {}; prune evicts only under this lock, so nothing was evicted and {} stays "
                           "over the {} cap\n", r.lock_error, human_bytes(r.remaining_bytes),
                           human_bytes(cap.value_or(c.max_bytes())));
  return static_cast<int>(ErrorCode::kCache);
}

int clear_main(const KernelCache& c) {
  if (!present(c)) return 0;
  const auto r = c.clear();
  // Entries in use are kept by design; each is named, so that what stays is no surprise.
  if (!r.in_use.empty()) {
    std::map<std::string, std::string> names;
    for (const auto& e : c.list())
      if (e.ok) names[e.key] = e.inputs.kernel_name;
    for (const auto& key : r.in_use)
      std::cout << fmt::format("clear: kept {}  {} (in use: a live process holds its lock)\n", key.substr(0, 16),
                               names.count(key) ? names[key] : "(unreadable)");
  }
  std::cout << fmt::format("clear: removed {} from {}{}\n", counted(r.removed, "entry", "entries"), c.dir(),
                           r.in_use.empty() ? "" : fmt::format("; kept {} in use", r.in_use.size()));
  return report_unremoved(c, "clear", r.failed);
}

void print_inputs(const KeyInputsInfo& in) {
  std::cout << fmt::format("  kernel     {}\n  arch       {}\n  nvrtc      {}\n  generator  v{}\n", in.kernel_name,
                           arch_name(in.arch), in.nvrtc_version, in.generator_version);
  std::string opts;
  for (const auto& o : in.options) opts += (opts.empty() ? "" : " ") + o;
  std::cout << fmt::format("  options    {}\n  source     sha256 {}\n", opts, in.source_sha256);
  for (const auto& [name, h] : in.header_sha256) std::cout << fmt::format("  header     {} sha256 {}\n", name, h);
}

// Entries of the same kernel name with other keys, and which inputs differ from `ref`.
void print_siblings(const std::vector<CacheEntryInfo>& entries, const KeyInputsInfo& ref, const std::string& ref_what) {
  size_t n = 0;
  for (const auto& e : entries) {
    if (!e.ok || e.inputs.kernel_name != ref.kernel_name || e.key == ref.key) continue;
    ++n;
    std::cout << fmt::format("entry {} ({}, last used {}) differs from {} in:\n", e.key.substr(0, 16),
                             e.format >= 2 ? "inputs recorded" : "format 1: inputs not recorded", age(e.last_used),
                             ref_what);
    const auto diffs = key_input_differences(e.inputs, ref);
    if (diffs.empty()) std::cout << "  (no recorded input; the key derivation itself changed)\n";
    for (const auto& d : diffs) std::cout << "  " << d << "\n";
  }
  if (!n) std::cout << fmt::format("no other entry of {} is cached\n", ref.kernel_name);
}

// The inputs this lkjit would hash for a kernel name, when the name parses.
std::optional<KeyInputsInfo> current_inputs(const std::string& name) {
  const auto nk = parse_kernel_name(name);
  if (!nk) return std::nullopt;
  return kernel_key_inputs(nk->spec, nk->tile);
}

int explain_main(const KernelCache& c, std::string arg) {
  present(c);
  const auto entries = c.list();
  if (arg.rfind("lkjit_", 0) == 0) {  // a kernel name: why would it miss now?
    const auto now = current_inputs(arg);
    if (!now)
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("lkjit: error: cache explain: '{}' is not a kernel name this lkjit generates", arg));
    const bool present = std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.key == now->key; });
    std::cout << fmt::format("{} has key {} with this lkjit: {}\n", arg, now->key,
                             present ? "cached (a lookup hits)" : "not cached (a lookup misses)");
    print_inputs(*now);
    print_siblings(entries, *now, "what this lkjit computes");
    return 0;
  }
  const bool hex = arg.size() >= 6 && arg.size() <= 64 &&
                   std::all_of(arg.begin(), arg.end(), [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)); });
  if (!hex)
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: cache explain: '{}' is neither a key (6 to 64 hex digits) nor "
                                               "a kernel name (lkjit_..._smXY)", arg));
  std::transform(arg.begin(), arg.end(), arg.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  std::vector<const CacheEntryInfo*> hits;
  for (const auto& e : entries)
    if (arg.size() >= 6 && e.key.compare(0, arg.size(), arg) == 0) hits.push_back(&e);
  if (hits.size() > 1) usage(fmt::format("key prefix '{}' matches {} entries; give more digits", arg, hits.size()));
  if (hits.empty()) {
    std::cout << fmt::format("key {} is not in the cache {}\n", arg, c.dir());
    if (arg.size() == 64) remote_explain(arg);
    if (kKernel.empty()) {
      std::cout << "give the kernel name it was looked up for (--kernel NAME, or `lkjit cache explain NAME`) "
                   "to compare with the cached entries of that kernel\n";
      return 0;
    }
    const auto now = current_inputs(kKernel);
    if (!now)
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("lkjit: error: --kernel '{}' is not a kernel name this lkjit generates", std::string(kKernel)));
    if (now->key != arg)
      std::cout << fmt::format("this lkjit computes key {} for {}: key {} came from other inputs\n", now->key, kKernel, arg);
    print_siblings(entries, *now, "what this lkjit computes");
    return 0;
  }
  const CacheEntryInfo& e = *hits.front();
  remote_explain(e.key);
  std::cout << fmt::format("entry {}\n  path       {}\n  spec       {}\n  size       {} bytes (cubin {})\n  last used  {}\n",
                           e.key, e.path, e.spec, e.file_bytes, e.payload_bytes, age(e.last_used));
  if (!e.ok) {
    std::cout << fmt::format("  unreadable: {}\n", e.problem);
    return static_cast<int>(ErrorCode::kCache);
  }
  print_inputs(e.inputs);
  if (e.format < 2) std::cout << "  (format 1 entry: inputs other than arch and NVRTC were not recorded)\n";
  if (const auto now = current_inputs(e.inputs.kernel_name)) {
    if (now->key == e.key) {
      std::cout << "this lkjit computes the same key: lookups of this kernel hit this entry\n";
    } else {
      std::cout << fmt::format("this lkjit computes key {} for this kernel, so lookups miss this entry; inputs that differ:\n",
                               now->key.substr(0, 16));
      const auto diffs = key_input_differences(e.inputs, *now);
      if (diffs.empty()) std::cout << "  (no recorded input; the key derivation itself changed)\n";
      for (const auto& d : diffs) std::cout << "  " << d << "\n";
    }
  }
  print_siblings(entries, e.inputs, "this entry");
  return 0;
}

}  // namespace

bool cache_cmd() { return static_cast<bool>(kCmd); }

int cache_main() {
  if (kArgs.empty()) return usage(fmt::format("no action given; supported: {}", kActions));
  const std::string action = kArgs[0];
  const size_t want = (action == "explain" || action == "import" || action == "export") ? 2 : 1;
  if (kArgs.size() != want)
    return usage(want == 2 ? fmt::format("{} takes one argument", action) : fmt::format("{} takes no argument", action));
  // An option the action does not take is a usage error, not silently ignored.
  if (kMaxBytes.getNumOccurrences() && action != "prune")
    return usage(fmt::format("--max-bytes applies to prune, not {}", action));
  if (kKernel.getNumOccurrences() && action != "explain")
    return usage(fmt::format("--kernel applies to explain, not {}", action));
  if (kDecisions.getNumOccurrences() && action != "push" && action != "pull")
    return usage(fmt::format("--decisions applies to push and pull, not {}", action));
  const KernelCache c;
  if (action == "stat") return stat_main(c);
  if (action == "ls") return ls_main(c);
  if (action == "verify") return verify_main(c);
  if (action == "prune") return prune_main(c);
  if (action == "clear") return clear_main(c);
  if (action == "explain") return explain_main(c, kArgs[1]);
  if (action == "push" || action == "pull") return remote_transfer(c, action == "push", kDecisions);
  if (action == "import") {
    // Every entry that can go in does; each refused one is named with its reason, and only those fail the run.
    const auto r = c.import_bundle(kArgs[1]);
    if (!r.signer.empty())
      std::cout << fmt::format("import: {}: signed by key {}{}\n", kArgs[1], r.signer.substr(0, 16),
                               r.signature_checked ? " (trusted, signature verified)"
                                                   : " (not checked: LKJIT_CACHE_TRUSTED_KEYS is unset)");
    for (const auto& why : r.refused) std::cerr << "import: refused " << why << "\n";
    std::cout << fmt::format("import: {}: {} verified, {} added, {} already cached, {} refused\n", kArgs[1],
                             counted(r.entries, "entry", "entries"), r.imported, r.present, r.refused.size());
    warn_evicted_by_cap(c, r.evicted, r.imported, "import");
    if (r.refused.empty()) return 0;
    std::cout.flush();
    std::cerr << fmt::format("lkjit: error: {}: {} of its {} could not be imported\n", kArgs[1], r.refused.size(),
                             counted(r.entries, "entry", "entries"));
    return static_cast<int>(ErrorCode::kCache);
  }
  if (action == "export") {
    if (kArgs[1].empty()) return usage("export: the file path is empty");
    check_output_file(kArgs[1], "export");
    present(c);
    const auto r = c.export_bundle(kArgs[1]);
    for (const auto& s : r.skipped) std::cerr << "export: left out " << s << "\n";
    std::cout << fmt::format("export: {}: {}, {}{}\n", kArgs[1], counted(r.entries, "entry", "entries"), human_bytes(r.bytes),
                             r.signer.empty() ? ", unsigned" : ", signed by key " + r.signer.substr(0, 16));
    return 0;
  }
  return usage(fmt::format("action '{}' is unknown; supported: {}", action, kActions));
}

}  // namespace lkjit::tool
