// Integers from outside text (command line, environment, JSON, kernel names) through one decimal parser, so
// that "011" is eleven everywhere (never octal nine), "0x5", "+5", " 5" and "5k" are refused everywhere, and
// no value is truncated to fit a narrower type.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace lkjit::support {

enum class IntStatus {
  kOk,
  kMalformed,   // not an optional '-' followed by one or more ASCII digits
  kOutOfRange,  // well formed, but outside [lo, hi] (also beyond int64)
};

struct IntParse {
  IntStatus status = IntStatus::kMalformed;
  int64_t value = 0;  // valid when kOk
};

// Grammar: '-'? [0-9]+, nothing before or after. Leading zeros are decimal ("011" is 11). Never throws.
IntParse parse_decimal(std::string_view text, int64_t lo = std::numeric_limits<int64_t>::min(),
                       int64_t hi = std::numeric_limits<int64_t>::max());

// The value when text is a decimal integer in [lo, hi], else nullopt: for parsers that answer "not one of
// mine" rather than throw (kernel names: "k99999999999" is no kernel name, not a crash).
std::optional<int> to_int(std::string_view text, int lo = std::numeric_limits<int>::min(),
                          int hi = std::numeric_limits<int>::max());

// Throws SpecError (code kInvalidArgument) naming the field, the value (clipped, support/message.h) and the range:
//   "lkjit: error: <field>=<text> is out of range; supported: [lo, hi]"
//   "lkjit: error: <field>='<text>' is not a decimal integer; supported: [lo, hi]"
// field is what the user wrote it as: "-k", "LKJIT_CACHE_MAX_BYTES", "tuning.json: record 3: tile threads".
int64_t parse_int(std::string_view text, std::string_view field, int64_t lo, int64_t hi);

// A value already read as an integer (a JSON number), checked against its field's range with the message of
// parse_int. Returns v.
int64_t check_range(int64_t v, std::string_view field, int64_t lo, int64_t hi);

// "[lo, hi]", with the ends of int and int64 as such ("[1, 2147483647]").
std::string range_text(int64_t lo, int64_t hi);

// A decimal number such as a time in seconds: '-'? digits with at most one '.', at least one digit
// ("10", "0.5", ".5", "2."); no exponent, hex, inf or nan, sign '+' or whitespace. Throws SpecError naming
// the field, the value and the range when malformed or outside [lo, hi] ("> lo and <= hi" when lo_exclusive:
// a time budget must be above 0).
double parse_decimal_number(std::string_view text, std::string_view field, double lo, double hi,
                            bool lo_exclusive = false);

}  // namespace lkjit::support
