// The JSON inputs of `lkjit prewarm`: a manifest of what to compile, and a tuning database whose
// tuned kernels to add.
#include <fmt/format.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/spec.h"
#include "lkjit/tuning.h"
#include "support/json_limits.h"
#include "support/message.h"
#include "support/read_file.h"
#include "tools/lkjit/op_cli.h"
#include "tools/lkjit/prewarm_set.h"

namespace lkjit::tool {
namespace {

// Manifests and tuning databases are small: 40 000 tuning records are about 16 MB.
constexpr uint64_t kMaxInputBytes = uint64_t(256) << 20;

Error bad(const std::string& path, const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, fmt::format("lkjit: error: {}: {}", path, what));
}

// Through the one bounded reader: a FIFO or device is refused without blocking, a file over the cap unread.
std::string read_text(const std::string& path, const char* what) {
  support::ReadOptions o;
  o.max_bytes = kMaxInputBytes;
  o.what = what;
  return support::read_file_or_throw(path, o, ErrorCode::kInvalidArgument);
}

// llvm::json::parse recurses per nesting level: too deep a text is refused before it parses.
void check_limits(const std::string& text, const std::string& path, const char* what) {
  support::check_json_limits(text, path, what, ErrorCode::kInvalidArgument, {support::JsonLimits{}.max_depth, kMaxInputBytes});
}

std::vector<std::string> strings(const llvm::json::Object& o, const char* key, const std::string& path) {
  std::vector<std::string> out;
  const llvm::json::Value* v = o.get(key);
  if (!v) return out;
  const llvm::json::Array* a = v->getAsArray();
  if (!a) throw bad(path, fmt::format("\"{}\" must be an array of strings", key));
  for (const auto& e : *a) {
    auto s = e.getAsString();
    if (!s) throw bad(path, fmt::format("\"{}\" must be an array of strings", key));
    out.push_back(s->str());
  }
  return out;
}

// What json::parse drops from a manifest it accepted: of two equal keys it keeps one, and it reads an integer
// literal beyond int64 as INT64_MAX or INT64_MIN (99999999999999999999 would be reported as 9223372036854775807).
// A walk over the same text (well-formed, so it needs no error handling) finds the first duplicate key and
// keeps each scalar as written, by its path ("layers[0].B").
class ManifestText {
 public:
  explicit ManifestText(const std::string& text) : s_(text) { value(""); }
  std::optional<std::pair<std::string, std::string>> duplicate;  // (the object's path, "" for the root; the key)
  std::map<std::string, std::string> literals;                   // path -> the scalar's text

 private:
  static bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
  void skip_space() {
    while (i_ < s_.size() && space(s_[i_])) ++i_;
  }
  std::string string_token() {  // quotes included
    const size_t b = i_++;
    while (s_[i_] != '"') i_ += s_[i_] == '\\' ? 2 : 1;
    return s_.substr(b, ++i_ - b);
  }
  // Keys compare decoded, as json::Object compares them ("\u0042" is "B").
  static std::string decoded(const std::string& token) {
    auto v = llvm::json::parse(token);
    if (!v) {
      llvm::consumeError(v.takeError());
      return token;
    }
    return v->getAsString() ? v->getAsString()->str() : token;
  }
  void value(const std::string& path) {
    skip_space();
    const char open = s_[i_];
    if (open != '{' && open != '[') {
      const size_t b = i_;
      if (open == '"') string_token();
      else
        while (i_ < s_.size() && !space(s_[i_]) && s_[i_] != ',' && s_[i_] != ']' && s_[i_] != '}') ++i_;
      literals[path] = s_.substr(b, i_ - b);
      return;
    }
    ++i_;
    std::set<std::string> keys;
    for (size_t n = 0;; ++n) {
      skip_space();
      if (s_[i_] == ',') {
        ++i_;
        skip_space();
      }
      if (s_[i_] == '}' || s_[i_] == ']') {
        ++i_;
        return;
      }
      if (open == '[') {
        value(fmt::format("{}[{}]", path, n));
        continue;
      }
      const std::string key = decoded(string_token());
      if (!keys.insert(key).second && !duplicate) duplicate = {path, key};
      skip_space();
      ++i_;  // ':'
      value(path.empty() ? key : path + "." + key);
    }
  }
  const std::string& s_;
  size_t i_ = 0;
};

// fallback nullopt: the field is required. literal: the value as the file writes it ("" if unknown).
int64_t integer(const llvm::json::Object& o, const char* key, std::optional<int64_t> fallback, int64_t lo, int64_t hi,
                const std::string& where, const std::string& literal) {
  const llvm::json::Value* v = o.get(key);
  if (!v) {
    if (!fallback) throw Error(ErrorCode::kInvalidArgument, fmt::format("lkjit: error: {}: \"{}\" is required", where, key));
    return *fallback;
  }
  const auto n = v->getAsInteger();
  if (n && *n >= lo && *n <= hi) return *n;
  // 1e30 is an integer, only not an int64 one; 2.5 is none.
  const auto d = v->getAsNumber();
  double whole = 0;
  const bool integral = n || (d && std::modf(*d, &whole) == 0.0);
  std::string got = literal;
  if (got.empty()) {
    llvm::raw_string_ostream os(got);
    os << *v;
    os.flush();
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("lkjit: error: {}: \"{}\" is {} ({}); supported: an integer in [{}, {}]", where, key,
                          integral ? "out of range" : "not an integer", got, lo, hi));
}

// Parses a value of the manifest with a parser of the command line's (parse_arch, parse_dtype), whose error
// then names the file and the key it came from.
template <class Parse>
auto located(const std::string& where, Parse parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.rfind("lkjit: error: ", 0) == 0) why = why.substr(14);
    throw Error(e.code(), fmt::format("lkjit: error: {}: {}", where, why));
  }
}

// A named kernel must be one this lkjit generates, with a valid spec and tile for its arch: caught
// here, before anything compiles, rather than as a compile failure.
void check_kernel_name(const std::string& name, const std::string& where) {
  const auto nk = parse_kernel_name(name);
  if (!nk)
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: {}: '{}' is not a kernel name this lkjit generates; supported: names as "
                            "`lkjit compile` or `lkjit prewarm --list` prints them (lkjit_<kernel>_..._smXY)",
                            where, name));
  try {
    validate(nk->spec, nk->tile, DeviceLimits::for_arch(nk->spec.arch));
  } catch (const SpecError& e) {
    std::string why = e.what();
    if (why.rfind("lkjit: error: ", 0) == 0) why = why.substr(14);
    throw Error(ErrorCode::kInvalidArgument, fmt::format("lkjit: error: {}: '{}' is invalid: {}", where, name, why));
  }
}

}  // namespace

void read_manifest(const std::string& path, PrewarmSet* set, bool* archs_given, bool* dtypes_given) {
  parse_manifest(read_text(path, "manifest"), path, set, archs_given, dtypes_given);
}

void parse_manifest(const std::string& text, const std::string& path, PrewarmSet* set, bool* archs_given,
                    bool* dtypes_given) {
  check_limits(text, path, "manifest");
  auto parsed = llvm::json::parse(text);
  if (!parsed) throw bad(path, "not JSON: " + llvm::toString(parsed.takeError()));
  const ManifestText raw(text);
  // json::parse would keep one of the two values silently.
  if (raw.duplicate)
    throw bad(path, fmt::format("{}duplicate key \"{}\"; supported: each key once per object",
                                raw.duplicate->first.empty() ? "" : raw.duplicate->first + ": ", raw.duplicate->second));
  const llvm::json::Object* root = parsed->getAsObject();
  if (!root) throw bad(path, "the manifest must be a JSON object");
  static const std::set<std::string> known = {"archs", "dtypes", "passes", "presets", "layers", "kernels", "all_tiles"};
  for (const auto& kv : *root)
    if (!known.count(kv.first.str()))
      throw bad(path, fmt::format("unknown key \"{}\"; known: archs, dtypes, passes, presets, layers, kernels, all_tiles",
                                  kv.first.str()));
  const auto archs = strings(*root, "archs", path), dtypes = strings(*root, "dtypes", path);
  for (size_t i = 0; i < archs.size(); ++i)
    set->archs.push_back(located(fmt::format("{}: archs[{}]", path, i), [&] { return parse_arch(archs[i]); }));
  *archs_given = root->get("archs") != nullptr;
  for (size_t i = 0; i < dtypes.size(); ++i)
    set->dtypes.push_back(located(fmt::format("{}: dtypes[{}]", path, i), [&] { return parse_dtype(dtypes[i]); }));
  *dtypes_given = root->get("dtypes") != nullptr;
  if (root->get("passes")) {
    if (strings(*root, "passes", path).empty()) throw bad(path, "\"passes\" is empty; supported: fwd, bwd or both");
    set->forward = set->backward = false;
    for (const auto& p : strings(*root, "passes", path)) {
      if (p == "fwd") set->forward = true;
      else if (p == "bwd") set->backward = true;
      else throw bad(path, fmt::format("pass \"{}\" is unknown; supported: fwd, bwd", p));
    }
  }
  const auto presets = strings(*root, "presets", path);
  for (size_t i = 0; i < presets.size(); ++i)
    for (const auto& ly : preset_layers(presets[i], fmt::format("{}: presets[{}]: preset", path, i)))
      set->layers.push_back(ly);
  if (const llvm::json::Value* v = root->get("layers")) {
    const llvm::json::Array* a = v->getAsArray();
    if (!a) throw bad(path, "\"layers\" must be an array of objects");
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string where = fmt::format("{}: layers[{}]", path, i);
      const llvm::json::Object* o = (*a)[i].getAsObject();
      if (!o) throw Error(ErrorCode::kInvalidArgument, fmt::format("lkjit: error: {}: not an object", where));
      // The op's keys besides op, B, C, H, W (WTConv: k, L, stride).
      std::string op_name;
      if (const llvm::json::Value* op = o->get("op")) {
        if (!op->getAsString())
          throw Error(ErrorCode::kInvalidArgument, fmt::format("lkjit: error: {}: \"op\" must be a string", where));
        op_name = op->getAsString()->str();
      }
      const OpCli& op = op_name.empty() ? default_op() : op_cli(op_name, where + ": op");
      const std::vector<LayerParam> params = op.layer_params();
      // A misspelt key would silently fall back to its default (L = 1, stride = 1): refused instead.
      std::string known = "B, C, H, W";
      for (const auto& p : params) known += ", " + p.name;
      for (const auto& kv : *o) {
        const std::string key = kv.first.str();
        if (key == "op" || key == "B" || key == "C" || key == "H" || key == "W" ||
            std::any_of(params.begin(), params.end(), [&](const LayerParam& p) { return p.name == key; }))
          continue;
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("lkjit: error: {}: unknown key \"{}\"; known: {} (op {}) and op", where, key, known,
                                op.name()));
      }
      auto literal = [&](const std::string& key) {
        const auto it = raw.literals.find(fmt::format("layers[{}].{}", i, key));
        return it == raw.literals.end() ? std::string() : it->second;
      };
      LayerProblem ly;
      ly.op = op.name();
      ly.B = integer(*o, "B", 1, 1, (int64_t(1) << 31) - 1, where, literal("B"));
      ly.C = integer(*o, "C", std::nullopt, 1, int64_t(1) << 24, where, literal("C"));
      ly.H = integer(*o, "H", std::nullopt, 1, int64_t(1) << 20, where, literal("H"));
      ly.W = integer(*o, "W", std::nullopt, 1, int64_t(1) << 20, where, literal("W"));
      for (const auto& p : params) {
        const int def = p.def_from.empty() ? p.def : ly.params.get(p.def_from, p.def);
        const int v = static_cast<int>(integer(*o, p.name.c_str(), def, p.lo, p.hi, where, literal(p.name)));
        if (p.odd && v % 2 == 0)
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("lkjit: error: {}: \"{}\" is {}; supported: an odd integer in [{}, {}]", where, p.name,
                                  v, p.lo, p.hi));
        ly.params.set(p.name, v);
      }
      set->layers.push_back(ly);
    }
  }
  const auto kernels = strings(*root, "kernels", path);
  for (size_t i = 0; i < kernels.size(); ++i) {
    check_kernel_name(kernels[i], fmt::format("{}: kernels[{}]", path, i));
    set->kernel_names.push_back(kernels[i]);
  }
  if (const llvm::json::Value* v = root->get("all_tiles")) {
    auto b = v->getAsBoolean();
    if (!b) throw bad(path, "\"all_tiles\" must be true or false");
    set->all_tiles = set->all_tiles || *b;
  }
}

// A record of lkjit's tuning database ({"spec": "<kernel name without the tile>", "tile": {axis: n}})
// as a kernel name: the tile goes where kernel_name() puts it, before "_smXY". A tile value beyond int is an
// error naming the file, the record and the value (never truncated: 4294967552 is not 256).
std::optional<std::string> record_kernel_name(const llvm::json::Object& r, const std::string& path, size_t i) {
  auto spec = r.getString("spec");
  const llvm::json::Object* axes = r.getObject("tile");
  if (!spec || !axes) return std::nullopt;
  Tile t;
  for (const auto& [axis, v] : *axes) {
    auto n = v.getAsInteger();
    if (!n) return std::nullopt;
    if (*n < 0 || *n > std::numeric_limits<int>::max())
      throw bad(path, fmt::format("tuning database record {}: tile {}={} is out of range; supported: [0, {}]", i,
                                  support::clip(axis.str()), *n, std::numeric_limits<int>::max()));
    if (!set_tile_axis(t, axis.str(), static_cast<int>(*n))) return std::nullopt;
  }
  const std::string s = spec->str();
  const size_t sm = s.rfind("_sm");
  if (sm == std::string::npos) return std::nullopt;
  return s.substr(0, sm) + "_" + t.to_string() + s.substr(sm);
}

void read_tuning_db(const std::string& path, std::vector<std::string>* kernel_names) {
  parse_tuning_db(read_text(path, "tuning database"), path, kernel_names);
}

void parse_tuning_db(const std::string& text, const std::string& path, std::vector<std::string>* kernel_names) {
  check_limits(text, path, "tuning database");
  const std::string expected =
      "supported: lkjit's tuning database ({\"records\": [{\"spec\": ..., \"tile\": {...}}, ...]}) or "
      "{\"entries\": [{\"kernel\": \"lkjit_..._smXY\"}, ...]}";
  auto parsed = llvm::json::parse(text);
  if (!parsed)
    throw bad(path, fmt::format("tuning database is not JSON: {}; {}", llvm::toString(parsed.takeError()), expected));
  const llvm::json::Object* root = parsed->getAsObject();
  std::vector<std::string> names;
  auto unknown = [&](const std::string& why) {
    return bad(path, fmt::format("unknown tuning database format: {}; {}", why, expected));
  };
  if (const llvm::json::Array* records = root ? root->getArray("records") : nullptr) {
    for (size_t i = 0; i < records->size(); ++i) {
      const llvm::json::Object* o = (*records)[i].getAsObject();
      // A path decision (lkjit/tuning.h) names no kernel; the kernels of its path have records of their own.
      if (auto spec = o ? o->getString("spec") : llvm::None; spec && spec->startswith(kPassKeyPrefix)) continue;
      auto name = o ? record_kernel_name(*o, path, i) : std::nullopt;
      if (!name) throw unknown("a record has no \"spec\" string or no \"tile\" of known axes");
      names.push_back(*name);
    }
  } else if (const llvm::json::Array* entries = root ? root->getArray("entries") : nullptr) {
    for (const auto& e : *entries) {
      const llvm::json::Object* o = e.getAsObject();
      auto name = o ? o->getString("kernel") : llvm::None;
      if (!name) throw unknown("an entry has no \"kernel\" string");
      names.push_back(name->str());
    }
  } else {
    throw unknown("no \"records\" or \"entries\" array");
  }
  kernel_names->insert(kernel_names->end(), names.begin(), names.end());
}

}  // namespace lkjit::tool
