// Shared by the lkjit subcommands: error reporting, parsing of lists, random data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/spec.h"

namespace lkjit::tool {

std::vector<std::string> split(const std::string& s, char sep);
std::vector<int> parse_ints(const std::string& s, const char* what);
// A comma-separated option value (what: "--arch"): usage error when the list or an item is empty.
std::vector<std::string> split_list(const std::string& s, const char* what);
// One shape item such as "8:64:56:56" of option `what` ("--shapes"), whose fields `form` names
// ("B:C:H:W"): its integers. Usage error (1) for a wrong field count or a field that is not an integer.
std::vector<int64_t> parse_dims(const std::string& item, const char* what, const std::string& form);
// SpecError (bad input, 2) naming the first of the leading B, C, H, W fields of v that is below 1.
void require_positive_bchw(const std::vector<int64_t>& v, const char* what, const std::string& item);
// 512 B, 48.0 KiB, 3.2 MiB, 1.5 GiB.
std::string human_bytes(uint64_t bytes);
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
