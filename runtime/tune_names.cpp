// Names, parsing and keys of the tuner: modes, strategies, tiers, device classes, shape buckets,
// spec keys and tile axes.
#include <fmt/format.h>

#include <cassert>

#include "cache/tuning_db.h"
#include "lkjit/error.h"
#include "lkjit/tuning.h"
#include "runtime/env.h"

namespace lkjit {
namespace {

template <class E, size_t N>
E parse_enum(const std::string& s, const std::pair<E, const char*> (&table)[N], const char* what) {
  std::string all;
  for (const auto& [e, name] : table) {
    if (s == name) return e;
    all += (all.empty() ? "" : ", ") + std::string(name);
  }
  throw SpecError(fmt::format("lkjit: error: {} '{}' is unknown; supported: {}", what, s, all));
}

template <class E, size_t N>
const char* name_of(E e, const std::pair<E, const char*> (&table)[N]) {
  for (const auto& [v, name] : table)
    if (v == e) return name;
  return "?";
}

constexpr std::pair<TuneMode, const char*> kModes[] = {
    {TuneMode::kOff, "off"}, {TuneMode::kCached, "cached"}, {TuneMode::kTune, "tune"}, {TuneMode::kRetune, "retune"}};
constexpr std::pair<TuneStrategy, const char*> kStrategies[] = {
    {TuneStrategy::kExhaustive, "exhaustive"}, {TuneStrategy::kRandom, "random"}, {TuneStrategy::kGreedy, "greedy"}};
constexpr std::pair<LookupTier, const char*> kTiers[] = {
    {LookupTier::kTuned, "tuned"},     {LookupTier::kExact, "exact"},     {LookupTier::kNearestShape, "nearest_shape"},
    {LookupTier::kSameArch, "same_arch"}, {LookupTier::kDefault, "default"}, {LookupTier::kOverride, "override"}};
constexpr std::pair<CandidateStatus, const char*> kStatuses[] = {
    {CandidateStatus::kOk, "ok"},
    {CandidateStatus::kRejected, "rejected"},
    {CandidateStatus::kCompileFailed, "compile_failed"},
    {CandidateStatus::kLaunchFailed, "launch_failed"},
    {CandidateStatus::kError, "error"}};

int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Exact up to 64; above, rounded up to a multiple of a quarter of the power of two below it.
int64_t extent_bucket(int64_t v) {
  if (v <= 64) return v;
  int64_t p = 64;
  while (p * 2 <= v) p *= 2;
  const int64_t step = p / 4;
  return (v + step - 1) / step * step;
}

}  // namespace

const char* to_string(TuneMode m) { return name_of(m, kModes); }
TuneMode parse_tune_mode(const std::string& s) { return parse_enum(s, kModes, "tune mode"); }
const char* to_string(TuneStrategy s) { return name_of(s, kStrategies); }
TuneStrategy parse_tune_strategy(const std::string& s) { return parse_enum(s, kStrategies, "tune strategy"); }
const char* to_string(LookupTier t) { return name_of(t, kTiers); }
const char* to_string(CandidateStatus s) { return name_of(s, kStatuses); }

std::optional<TuneMode> tune_mode_from_env() {
  const std::string v = rt::env("LKJIT_TUNE");
  if (v.empty()) return std::nullopt;
  try {
    return parse_tune_mode(v);
  } catch (const SpecError&) {
    throw SpecError(fmt::format("lkjit: error: LKJIT_TUNE='{}' is unknown; supported: off, cached, tune, retune", v));
  }
}

TuneMode resolve_tune_mode(std::optional<TuneMode> api, TuneMode fallback) {
  if (api) return *api;
  if (auto e = tune_mode_from_env()) return *e;
  return fallback;
}

std::string tuning_db_path() {
  const std::string v = rt::env("LKJIT_TUNING_DB");
  return v.empty() ? cache_dir() + "/tuning.json" : v;
}

std::string tuning_db_problem(const std::string& path) {
  try {
    cache::TuningDb::load(path);
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.rfind("lkjit: error: ", 0) == 0) why.erase(0, 14);
    return why;
  }
  return "";
}

std::string DeviceClass::to_string() const { return fmt::format("{} ({}, {} SMs)", name, arch_name(arch), sm_count); }

DeviceClass device_class(const DeviceInfo& d) { return DeviceClass{d.name, d.arch, d.limits.sm_count}; }

Shape shape_bucket(const Shape& s) {
  return Shape{pow2_ceil(s.B), pow2_ceil(s.C), extent_bucket(s.H), extent_bucket(s.W), s.stride};
}

std::string bucket_key(const Shape& s) {
  const Shape b = shape_bucket(s);
  return fmt::format("B{}_C{}_H{}_W{}_s{}", b.B, b.C, b.H, b.W, b.stride);
}

std::string spec_key(const OpSpec& s) {
  // Every kernel name ends in "<tile>_sm<arch>"; Tile{} prints as "w0".
  std::string n = kernel_name(s, Tile{});
  const std::string tail = fmt::format("_w0_sm{}", s.arch);
  assert(n.size() > tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0);
  n.resize(n.size() - tail.size());
  return n + fmt::format("_sm{}", s.arch);
}

}  // namespace lkjit
