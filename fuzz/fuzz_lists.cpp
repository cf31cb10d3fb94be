// Shape and tile lists of the command line (tools/lkjit/args.cpp, the op families' problems()): --shapes items of run
// and prewarm, integer lists (--k, --L, --tile), comma lists. They may only refuse with an lkjit::Error.
// The first byte picks the parser; the rest is the option's value.
#include "fuzz/fuzz_util.h"
#include "lkjit/spec.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"
#include "tools/lkjit/prewarm_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  if (size == 0) return 0;
  const std::string value = fuzz::text(data + 1, size - 1);
  fuzz::refusal_ok([&] {
    switch (data[0] % 6) {
      case 0: {
        for (const auto& item : tool::split_list(value, "--shapes")) {
          const auto v = tool::parse_dims(item, "--shapes", "B:C:H:W:L");
          fuzz::require(v.size() == 5, "five fields");
        }
        break;
      }
      case 1: {  // prewarm --shapes of the default op family (tools/lkjit/ops/), with its options at their defaults
        const auto layers = tool::default_op().problems(tool::Cmd::kPrewarm, value);
        for (const auto& l : layers) fuzz::require(l.B >= 1 && l.C >= 1 && l.H >= 1 && l.W >= 1, "positive dims");
        break;
      }
      case 2: {
        for (int k : tool::parse_ints(value, "k", 1, 31, /*odd=*/true)) fuzz::require(k % 2 == 1 && k >= 1 && k <= 31, "odd k");
        break;
      }
      case 3: {  // compile --tile: integers in their fields' order
        const auto v = tool::parse_ints(value, "tile");
        Tile t;
        for (size_t i = 0; i < v.size() && i < tile_axis_names().size(); ++i) set_tile_axis(t, tile_axis_names()[i], v[i]);
        (void)t.to_string();
        break;
      }
      case 4: {
        for (const auto& s : tool::split_list(value, "--arch")) fuzz::require(!s.empty(), "no empty item");
        break;
      }
      default: {
        for (const auto& s : tool::split(value, ',')) fuzz::require(!s.empty() && s.front() != ' ' && s.back() != ' ', "trimmed");
        break;
      }
    }
  });
  return 0;
}
