#include "support/parse_int.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "lkjit/error.h"
#include "support/message.h"

namespace lkjit::support {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

IntParse parse_decimal(std::string_view text, int64_t lo, int64_t hi) {
  IntParse r;
  const std::string_view digits = !text.empty() && text[0] == '-' ? text.substr(1) : text;
  if (!all_digits(digits)) return r;
  // from_chars reads base 10 only and reports overflow instead of wrapping; it takes the '-' itself.
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec == std::errc::result_out_of_range || v < lo || v > hi) {
    r.status = IntStatus::kOutOfRange;
    return r;
  }
  if (ec != std::errc() || end != text.data() + text.size()) return r;  // cannot happen after all_digits
  r.status = IntStatus::kOk;
  r.value = v;
  return r;
}

std::optional<int> to_int(std::string_view text, int lo, int hi) {
  const IntParse p = parse_decimal(text, lo, hi);
  if (p.status != IntStatus::kOk) return std::nullopt;
  return static_cast<int>(p.value);
}

std::string range_text(int64_t lo, int64_t hi) { return fmt::format("[{}, {}]", lo, hi); }

int64_t parse_int(std::string_view text, std::string_view field, int64_t lo, int64_t hi) {
  const IntParse p = parse_decimal(text, lo, hi);
  if (p.status == IntStatus::kOk) return p.value;
  if (p.status == IntStatus::kOutOfRange)
    throw SpecError(
        fmt::format("lkjit: error: {}={} is out of range; supported: {}", field, clip(text), range_text(lo, hi)));
  throw SpecError(fmt::format("lkjit: error: {}='{}' is not a decimal integer; supported: {}", field, clip(text),
                              range_text(lo, hi)));
}

int64_t check_range(int64_t v, std::string_view field, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw SpecError(fmt::format("lkjit: error: {}={} is out of range; supported: {}", field, v, range_text(lo, hi)));
  return v;
}

double parse_decimal_number(std::string_view text, std::string_view field, double lo, double hi, bool lo_exclusive) {
  const std::string range = lo_exclusive ? fmt::format("> {} and <= {}", lo, hi) : fmt::format("[{}, {}]", lo, hi);
  const std::string_view body = !text.empty() && text[0] == '-' ? text.substr(1) : text;
  size_t digits = 0, dots = 0;
  bool ok = !body.empty();
  for (char c : body) {
    if (c >= '0' && c <= '9') ++digits;
    else if (c == '.') ++dots;
    else ok = false;
  }
  ok = ok && digits > 0 && dots <= 1;
  double v = 0;
  if (ok) {
    // from_chars is locale-independent ('.' whatever LC_NUMERIC says), unlike strtod.
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::fixed);
    ok = ec == std::errc() && end == text.data() + text.size() && std::isfinite(v);
  }
  if (!ok)
    throw SpecError(fmt::format("lkjit: error: {}='{}' is not a decimal number; supported: digits with an optional "
                                "fraction (such as 10 or 0.5), {}", field, clip(text), range));
  if (!((lo_exclusive ? v > lo : v >= lo) && v <= hi))
    throw SpecError(fmt::format("lkjit: error: {}={} is out of range; supported: {}", field, clip(text), range));
  return v;
}

}  // namespace lkjit::support
