// Parsing of command-line values shared by the subcommands (tools/lkjit/common.h): lists, integers through
// support/parse_int.h's decimal parser, shape items, and the messages of out-of-range options.
#include <fmt/format.h>

#include <limits>

#include "lkjit/error.h"
#include "support/message.h"
#include "support/parse_int.h"
#include "tools/lkjit/common.h"

namespace lkjit::tool {

using support::clip;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  auto flush = [&](size_t b, size_t e) {
    // Spaces around an item are dropped ("1, 2"); inside one they stay, so "1 1" is no integer (not 11).
    while (b < e && s[b] == ' ') ++b;
    while (e > b && s[e - 1] == ' ') --e;
    if (e > b) out.push_back(s.substr(b, e - b));
  };
  size_t begin = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == sep) {
      flush(begin, i);
      begin = i + 1;
    }
  flush(begin, s.size());
  return out;
}

std::string range_message(const std::string& what, int64_t lo, int64_t hi, bool odd) {
  return fmt::format("{}{}", odd ? fmt::format("odd {} in ", what) : "", support::range_text(lo, hi));
}

std::vector<int> parse_ints(const std::string& s, const char* what, int lo, int hi, bool odd) {
  std::vector<int> v;
  for (const auto& t : split(s, ',')) {
    const support::IntParse p = support::parse_decimal(t, lo, hi);
    if (p.status == support::IntStatus::kMalformed)
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --{}: '{}' is not a decimal integer", what, clip(t)));
    if (p.status == support::IntStatus::kOutOfRange || (odd && p.value % 2 == 0))
      throw SpecError(fmt::format("lkjit: error: --{}: '{}' is out of range; supported: {}", what, clip(t),
                                  range_message(what, lo, hi, odd)));
    v.push_back(static_cast<int>(p.value));
  }
  return v;
}

std::vector<std::string>& option_errors() {
  static std::vector<std::string> errors;
  return errors;
}

std::vector<std::string>& option_usage_errors() {
  static std::vector<std::string> errors;
  return errors;
}

namespace {

std::string dashes(llvm::StringRef name) { return name.size() == 1 ? "-" : "--"; }

}  // namespace

void note_out_of_range(llvm::StringRef name, llvm::StringRef value, int64_t lo, int64_t hi, bool odd) {
  option_errors().push_back(fmt::format("lkjit: error: {}{}={} is out of range; supported: {}", dashes(name), name.str(),
                                        clip(std::string_view(value.data(), value.size())),
                                        range_message(name.str(), lo, hi, odd)));
}

void note_not_decimal(llvm::StringRef name, llvm::StringRef value, int64_t lo, int64_t hi, bool odd) {
  option_usage_errors().push_back(fmt::format("lkjit: error: {}{}='{}' is not a decimal integer; supported: {}",
                                              dashes(name), name.str(), clip(std::string_view(value.data(), value.size())),
                                              range_message(name.str(), lo, hi, odd)));
}

std::vector<int64_t> parse_dims(const std::string& item, const char* what, const std::string& form,
                                std::string (*range_of)(const std::string&)) {
  const auto f = split(item, ':'), names = split(form, ':');
  if (f.size() != names.size())
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: {}: '{}' is not {}", what, clip(item), form));
  std::vector<int64_t> v;
  for (size_t i = 0; i < f.size(); ++i) {
    const support::IntParse p = support::parse_decimal(f[i]);
    if (p.status == support::IntStatus::kMalformed)
      throw Error(ErrorCode::kUsage,
                  fmt::format("lkjit: error: {}: '{}' in '{}' is not a decimal integer", what, clip(f[i]), clip(item)));
    if (p.status == support::IntStatus::kOutOfRange) {  // an integer all the same: bad input (2), as any value out of range
      // The layer's range (it never sees a value beyond int64), else int64's.
      std::string range = range_of ? range_of(names[i]) : "";
      if (range.empty())
        range = support::range_text(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
      throw SpecError(fmt::format("lkjit: error: {}: {}={} in '{}' is out of range; supported: {}", what, names[i],
                                  clip(f[i]), clip(item), range));
    }
    v.push_back(p.value);
  }
  return v;
}

void require_positive_bchw(const std::vector<int64_t>& v, const char* what, const std::string& item) {
  for (size_t i = 0; i < v.size() && i < 4; ++i)
    if (v[i] < 1)
      throw SpecError(fmt::format("lkjit: error: {}: {}={} in '{}' is out of range; supported: >= 1", what, "BCHW"[i],
                                  v[i], clip(item)));
}

std::vector<std::string> split_list(const std::string& s, const char* what) {
  const std::vector<std::string> all = split(s, ',');
  size_t items = 1;
  for (char c : s) items += c == ',';
  if (all.empty())
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: {}: the list is empty; supported: one or more "
                                               "comma-separated values", what));
  if (all.size() != items)
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: {}: '{}' has an empty item; supported: "
                                               "comma-separated values without empty items", what, clip(s)));
  return all;
}

void refuse_empty(std::initializer_list<const llvm::cl::opt<std::string>*> options, const char* supported) {
  for (const auto* o : options)
    if (o->getNumOccurrences() && o->empty())
      throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --{} is empty; supported: {}", o->ArgStr.str(), supported));
}

void refuse_empty_paths(std::initializer_list<const llvm::cl::opt<std::string>*> options) {
  refuse_empty(options, "a file path");
}

std::string join_archs(const std::vector<int>& archs) {
  std::string s;
  for (int a : archs) s += (s.empty() ? "" : ", ") + arch_name(a);
  return s;
}

std::string clip_arguments(std::string message, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.size() <= support::kClipPathBytes) continue;  // real paths stay whole
    const std::string short_form = clip(a);
    for (size_t at = message.find(a); at != std::string::npos; at = message.find(a, at + short_form.size()))
      message.replace(at, a.size(), short_form);
  }
  return message;
}

}  // namespace lkjit::tool
