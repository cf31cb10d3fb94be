// Shared by the lkjit subcommands: error reporting, parsing of lists, random data.
#pragma once
#include <llvm/Support/CommandLine.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/spec.h"
#include "support/parse_int.h"

namespace lkjit {
class KernelCache;
}

namespace lkjit::tool {

// Items of s between seps, spaces around each item dropped, empty items dropped.
std::vector<std::string> split(const std::string& s, char sep);
// A comma-separated list of integers of option `what` ("k" for --k), each through support/parse_int.h (decimal
// only: "011" is 11, "0x5" is refused): usage error (1) for an item that is not a decimal integer, bad input (2)
// naming the item and the range for one outside [lo, hi] (or even, if odd).
std::vector<int> parse_ints(const std::string& s, const char* what, int lo = std::numeric_limits<int>::min(),
                            int hi = std::numeric_limits<int>::max(), bool odd = false);

// Integer options with their allowed range: IntOption<1, 31> is a cl::opt<int> parsed by InRange, through the
// one decimal parser (support/parse_int.h), not LLVM's (which reads 011 as octal 9 and 0x5 as 5). A value that
// is not a decimal integer is a usage error (1); a decimal integer outside [Lo, Hi] is bad input (2); both
// messages name the option, the value and the range. A parser cannot throw through LLVM (built without
// exceptions), so the messages wait in option_usage_errors() / option_errors() until main reports them.
// Odd: an even value is out of range too (kernel sizes), and the message says "odd".
constexpr int64_t kIntMax = std::numeric_limits<int>::max();
std::vector<std::string>& option_errors();
std::vector<std::string>& option_usage_errors();
void note_out_of_range(llvm::StringRef name, llvm::StringRef value, int64_t lo, int64_t hi, bool odd = false);
void note_not_decimal(llvm::StringRef name, llvm::StringRef value, int64_t lo, int64_t hi, bool odd = false);
template <class T, int64_t Lo, int64_t Hi, bool Odd = false>
class InRange : public llvm::cl::parser<T> {
 public:
  using llvm::cl::parser<T>::parser;
  bool parse(llvm::cl::Option&, llvm::StringRef name, llvm::StringRef arg, T& v) {
    const support::IntParse p = support::parse_decimal(std::string_view(arg.data(), arg.size()), Lo, Hi);
    if (p.status == support::IntStatus::kMalformed) note_not_decimal(name, arg, Lo, Hi, Odd);
    else if (p.status == support::IntStatus::kOutOfRange || (Odd && p.value % 2 == 0)) note_out_of_range(name, arg, Lo, Hi, Odd);
    else v = static_cast<T>(p.value);
    return false;
  }
};
template <int64_t Lo, int64_t Hi>
using IntOption = llvm::cl::opt<int, false, InRange<int, Lo, Hi>>;
template <int64_t Lo, int64_t Hi>
using OddIntOption = llvm::cl::opt<int, false, InRange<int, Lo, Hi, true>>;
template <int64_t Lo, int64_t Hi>
using UnsignedOption = llvm::cl::opt<unsigned, false, InRange<unsigned, Lo, Hi>>;

// A comma-separated option value (what: "--arch"): usage error when the list or an item is empty.
std::vector<std::string> split_list(const std::string& s, const char* what);
// One shape item such as "8:64:56:56" of option `what` ("--shapes"), whose fields `form` names
// ("B:C:H:W"): its integers. Usage error (1) for a wrong field count or a field that is not an integer; bad
// input (2) naming the field, the value and its range for an integer beyond int64: range_of(field) (the op's
// ranges, e.g. wtconv_field_range), or int64's where it gives "" or is null.
std::vector<int64_t> parse_dims(const std::string& item, const char* what, const std::string& form,
                                std::string (*range_of)(const std::string&) = nullptr);
// SpecError (bad input, 2) naming the first of the leading B, C, H, W fields of v that is below 1.
void require_positive_bchw(const std::vector<int64_t>& v, const char* what, const std::string& item);
// 512 B, 48.0 KiB, 3.2 MiB, 1.5 GiB.
std::string human_bytes(uint64_t bytes);
// A count with its noun in agreement, for messages: counted(1, "kernel") is "1 kernel", counted(3, "kernel")
// "3 kernels", counted(0, "entry", "entries") "0 entries" (many: the plural when it is not one + "s").
std::string counted(uint64_t n, std::string_view one, std::string_view many = {});
// Refuses an option given as an empty path (usage error): it names no file, and would be dropped or read as "".
void refuse_empty_paths(std::initializer_list<const llvm::cl::opt<std::string>*> options);
// The same for any string option whose empty value would silently mean its default (--tile ''); supported: what
// the message offers instead ("a tile such as 0,0,1,4,256").
void refuse_empty(std::initializer_list<const llvm::cl::opt<std::string>*> options, const char* supported);
// message with every argument longer than support::kClipPathBytes (512) replaced by its clipped form
// (support::clip), so that an error never echoes a 100 kB argument whole, whichever layer wrote it.
std::string clip_arguments(std::string message, int argc, char** argv);
// A file a command will write (a bundle): a regular file (replaced) or a new name, in a folder this process
// can write. Error (kInvalidArgument) naming `what` and the path otherwise: checked before the work.
void check_output_file(const std::string& path, const std::string& what);
// The warning when the cache's size cap evicted n of the `stored` entries a command just stored (0: none).
void warn_evicted_by_cap(const KernelCache& c, size_t n, size_t stored, const char* what);
// After a command stored `keys`: the cap warning for those this process's size-cap prunes evicted, and a
// separate warning for those gone otherwise (a concurrent `cache clear`, another process), which the cap is
// not blamed for.
void warn_missing_after_store(const KernelCache& c, const std::vector<std::string>& keys, const char* what);
// A tuning database file that does not parse: a warning naming it and the error (layers read it only on a
// GPU, and then ignore it quietly), not a failure. Nothing for a missing or good file.
void warn_broken_tuning_db(const std::string& path);
// --progress's value: auto, always or never, else bad input (2) naming it.
void check_progress_mode(const std::string& mode);
// "sm_80, sm_90".
std::string join_archs(const std::vector<int>& archs);
// Parses archs and checks each has a limits table and is a target of the loaded NVRTC (SpecError).
std::vector<int> parse_target_archs(const std::vector<std::string>& items, const char* what);

// Subcommands: whether the command line chose it, and its entry point (returns the exit code).
bool run_cmd();
int run_main();
bool compile_cmd();
int compile_main();
bool tune_cmd();
int tune_main();
bool prewarm_cmd();
int prewarm_main();
bool cache_cmd();
int cache_main();
int dispatch();

}  // namespace lkjit::tool
