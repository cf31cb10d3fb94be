// Shared by the lkjit subcommands: error reporting, parsing of lists, random data.
#pragma once
#include <llvm/Support/CommandLine.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/spec.h"

namespace lkjit {
class KernelCache;
}

namespace lkjit::tool {

std::vector<std::string> split(const std::string& s, char sep);
// A comma-separated list of integers of option `what` ("k" for --k): usage error (1) for an item that is not
// an integer, bad input (2) naming the item and the range for one outside [lo, hi] (or even, if odd).
std::vector<int> parse_ints(const std::string& s, const char* what, int lo = std::numeric_limits<int>::min(),
                            int hi = std::numeric_limits<int>::max(), bool odd = false);
// An optional sign, then decimal digits: an integer, whether or not it fits a type.
bool is_decimal_integer(llvm::StringRef s);

// Integer options with their allowed range: IntOption<1, 31> is a cl::opt<int> parsed by InRange. LLVM's own
// parser calls a value beyond int a usage error (1) with a generic message; InRange makes any well-formed integer
// outside [Lo, Hi] bad input (2), with a message naming the option, the value and the range. A parser cannot throw
// through LLVM (built without exceptions), so the message waits in option_errors() until main reports it.
// Odd: an even value is out of range too (kernel sizes), and the message says "odd".
constexpr int64_t kIntMax = std::numeric_limits<int>::max();
std::vector<std::string>& option_errors();
void note_out_of_range(llvm::StringRef name, llvm::StringRef value, int64_t lo, int64_t hi, bool odd = false);
template <class T, int64_t Lo, int64_t Hi, bool Odd = false>
class InRange : public llvm::cl::parser<T> {
 public:
  using llvm::cl::parser<T>::parser;
  bool parse(llvm::cl::Option& o, llvm::StringRef name, llvm::StringRef arg, T& v) {
    long long n = 0;
    const bool fits = !arg.getAsInteger(0, n);  // radix 0, as LLVM's parser: 0x10 is 16
    if (!fits && !is_decimal_integer(arg)) return llvm::cl::parser<T>::parse(o, name, arg, v);  // "x": its usage error
    if (!fits || n < Lo || n > Hi || (Odd && n % 2 == 0)) note_out_of_range(name, arg, Lo, Hi, Odd);
    else v = static_cast<T>(n);
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
// Refuses an option given as an empty path (usage error): it names no file, and would be dropped or read as "".
void refuse_empty_paths(std::initializer_list<const llvm::cl::opt<std::string>*> options);
// A file a command will write (a bundle): a regular file (replaced) or a new name, in a folder this process
// can write. Error (kInvalidArgument) naming `what` and the path otherwise: checked before the work.
void check_output_file(const std::string& path, const std::string& what);
// The warning when the cache's size cap evicted n of the `stored` entries a command just stored (0: none).
void warn_evicted_by_cap(const KernelCache& c, size_t n, size_t stored, const char* what);
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
