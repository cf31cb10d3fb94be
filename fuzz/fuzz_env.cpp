// LKJIT_* values and the support/ parsers under them: LKJIT_CACHE_MAX_BYTES (parse_byte_size), integer and
// seconds variables (support::parse_int / parse_decimal_number), LKJIT_TUNE (parse_tune_mode), arch names,
// and the message helpers every refusal goes through. Properties: a parsed integer prints back as its text
// without leading zeros; a clipped message holds no control byte and is bounded.
#include <string>

#include "fuzz/fuzz_util.h"
#include "lkjit/cache.h"
#include "lkjit/spec.h"
#include "lkjit/tuning.h"
#include "support/json_limits.h"
#include "support/message.h"
#include "support/parse_int.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  const std::string v = fuzz::text(data, size);
  fuzz::refusal_ok([&] {
    const uint64_t n = parse_byte_size(v, "LKJIT_CACHE_MAX_BYTES");
    fuzz::require(n <= (uint64_t(1) << 62), "size cap bounded");
  });
  const support::IntParse p = support::parse_decimal(v);
  if (p.status == support::IntStatus::kOk) {
    std::string canon = v;
    const bool neg = !canon.empty() && canon[0] == '-';
    std::string digits = canon.substr(neg);
    while (digits.size() > 1 && digits[0] == '0') digits.erase(0, 1);
    canon = (neg && digits != "0" ? "-" : "") + digits;
    fuzz::require(std::to_string(p.value) == canon, "decimal round trip");
  }
  fuzz::refusal_ok([&] { support::parse_int(v, "LKJIT_X", -5, 1000); });
  fuzz::refusal_ok([&] {
    const double s = support::parse_decimal_number(v, "LKJIT_TUNE_BUDGET", 0, 1e9, true);
    fuzz::require(s > 0 && s <= 1e9, "seconds in range");
  });
  fuzz::refusal_ok([&] { parse_tune_mode(v); });
  fuzz::refusal_ok([&] { parse_arch(v); });
  fuzz::refusal_ok([&] { parse_dtype(v); });
  const std::string c = support::clip(v);
  fuzz::require(c.size() <= 4 * support::kClipBytes + 32, "clip is bounded");
  for (unsigned char ch : c) fuzz::require(ch >= 0x20 && ch != 0x7f, "clip escapes control bytes");
  (void)support::json_limit_problem(v);
  return 0;
}
