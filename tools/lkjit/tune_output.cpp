#include "tools/lkjit/tune_output.h"

#include <fmt/format.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <algorithm>

#include "lkjit/error.h"
#include "lkjit/version.h"
#include "tools/lkjit/common.h"

namespace lkjit::tool {
namespace {

namespace json = llvm::json;

std::string first_line(const std::string& s) {
  const size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl) + " ...";
}

double fastest(const KernelTuneResult& k) {
  double best = 0;
  for (const auto& c : k.candidates)
    if (c.status == CandidateStatus::kOk && (best == 0 || c.summary.median_ms < best)) best = c.summary.median_ms;
  return best;
}

json::Object tile_json(const Tile& t) {
  json::Object o;
  for (const auto& a : tile_axis_names())
    if (int v = tile_axis(t, a)) o[a] = v;
  return o;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

const char* pass_name(const PassInfo& p) { return p.backward ? "bwd" : "fwd"; }

// The pass as the tune JSON's "problem" object: pass, dtype, shape, then the op's parameters and flags.
json::Object problem_json(const PassInfo& p) {
  json::Object o{{"op", p.op}, {"pass", pass_name(p)}, {"dtype", to_string(p.dtype)},
                 {"shape", json::Array{p.B, p.C, p.H, p.W}}};
  for (const auto& [n, v] : p.params) o[n] = v;
  for (const auto& [n, v] : p.flags) o[n] = v;
  return o;
}

}  // namespace

std::string kernel_label(const KernelTuneResult& k) {
  return k.level > 0 ? fmt::format("{} l={}", to_string(k.spec.kernel), k.level) : to_string(k.spec.kernel);
}

void print_device(std::ostream& os, const DeviceInfo& d) {
  os << fmt::format("device: {} ({}, {} SMs, {:.0f} MHz, L2 {} MiB, {:.1f} GiB), driver {}, NVRTC {}\n", d.name,
                    arch_name(d.arch), d.limits.sm_count, d.clock_mhz, d.l2_bytes >> 20, d.total_bytes / 1073741824.0,
                    d.driver_version, nvrtc_version());
}

void print_ranked(std::ostream& os, const KernelTuneResult& k, double traffic_bytes) {
  int failed = 0;
  for (const auto& c : k.candidates) failed += c.status != CandidateStatus::kOk;
  os << fmt::format("\n{}{} on {}: {}, {} measured, {} failed; {} in {:.1f} s{}\n", k.spec.to_string(),
                    k.level > 0 ? fmt::format(" level {}", k.level) : "", k.shape.to_string(),
                    counted(k.space_size, "valid candidate"), k.candidates.size() - failed, failed,
                    to_string(k.strategy), k.seconds, k.budget_hit ? " (budget reached)" : "");
  os << fmt::format("  {:>4}  {:<16} {:>10} {:>7} {:>8} {:>7} {:>5} {:>6} {:>8}  {}\n", "rank", "config", "median ms",
                    "noise", "GB/s", "% best", "regs", "spill", "smem B", "note");
  const double best = fastest(k);
  int rankno = 0;
  for (size_t i : rank(k.candidates)) {
    const auto& c = k.candidates[i];
    if (c.status != CandidateStatus::kOk) continue;
    std::string note;
    if (c.tile == k.chosen) note += "chosen ";
    if (c.tile == k.rejected && !k.check_failure.empty()) note += "rejected (output) ";
    if (c.tile == k.default_tile) note += "default ";
    if (c.finalist) note += "finalist";
    const double ms = c.summary.median_ms;
    os << fmt::format("  {:>4}  {:<16} {:>10.4f} {:>6.1f}% {:>8.0f} {:>6.1f}% {:>5} {:>6} {:>8}  {}\n", ++rankno,
                      c.tile.to_string(), ms, 100 * c.summary.noise, traffic_bytes / (ms * 1e-3) / 1e9,
                      100 * best / ms, c.regs, c.spill_bytes, c.smem_bytes, note);
  }
  if (failed) {
    os << "  failed:\n";
    for (const auto& c : k.candidates)
      if (c.status != CandidateStatus::kOk)
        os << fmt::format("    {:<16} {:<14} {}\n", c.tile.to_string(), to_string(c.status), first_line(c.reason));
  }
}

void print_summary(std::ostream& os, const TuneReport& r) {
  os << "\n";
  for (const auto& k : r.kernels)
    os << fmt::format("{:<22} default {:<16} -> chosen {:<16} ({})\n", kernel_label(k), k.default_tile.to_string(),
                      k.chosen == Tile{} ? "none (all failed)" : k.chosen.to_string(), kernel_name(k.spec, k.chosen));
  for (const auto& k : r.kernels)
    if (!k.check_failure.empty()) os << "not recorded: " << k.check_failure << "\n";
  if (r.default_pass.n && r.tuned_pass.n)
    os << fmt::format("layer {}: default tiles {:.4f} ms (noise {:.1f}%), chosen tiles {:.4f} ms (noise {:.1f}%): {:.3f}x\n",
                      r.problem.text, r.default_pass.median_ms, 100 * r.default_pass.noise, r.tuned_pass.median_ms,
                      100 * r.tuned_pass.noise, r.default_pass.median_ms / r.tuned_pass.median_ms);
  os << fmt::format("GB/s divides the traffic model of the layer's kernels ({:.1f} MB per pass) by the pass time.\n",
                    r.traffic_bytes / 1e6);
  if (!r.save_error.empty()) os << "decisions not recorded: " << r.save_error << "\n";
  else if (!r.db_path.empty()) os << "decisions recorded in " << r.db_path << "\n";
  else os << "decisions not recorded (--no-save)\n";
}

std::string tune_csv(const TuneReport& r) {
  std::string out = "kernel,level,config";
  for (const auto& a : tile_axis_names()) out += "," + a;
  out += ",status,median_ms,noise,samples,gb_per_s,pct_of_best,regs,spill_bytes,smem_bytes,is_default,is_chosen,finalist,reason\n";
  for (const auto& k : r.kernels) {
    const double best = fastest(k);
    for (size_t i : rank(k.candidates)) {
      const auto& c = k.candidates[i];
      const bool ok = c.status == CandidateStatus::kOk;
      out += fmt::format("{},{},{}", to_string(k.spec.kernel), k.level, c.tile.to_string());
      for (const auto& a : tile_axis_names()) out += fmt::format(",{}", tile_axis(c.tile, a));
      out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{},{},{}\n", to_string(c.status),
                         ok ? fmt::format("{:.6f}", c.summary.median_ms) : "", ok ? fmt::format("{:.4f}", c.summary.noise) : "",
                         c.summary.n, ok ? fmt::format("{:.1f}", r.traffic_bytes / (c.summary.median_ms * 1e-3) / 1e9) : "",
                         ok ? fmt::format("{:.2f}", 100 * best / c.summary.median_ms) : "", c.regs, c.spill_bytes,
                         c.smem_bytes, c.tile == k.default_tile ? 1 : 0, c.tile == k.chosen ? 1 : 0, c.finalist ? 1 : 0,
                         csv_field(first_line(c.reason)));
    }
  }
  return out;
}

std::string tune_json(const TuneReport& r, const TuneOptions& o, const std::vector<std::string>& argv,
                      const std::string& reproduce) {
  const auto& d = r.device;
  const auto& p = r.problem;
  json::Array args;
  for (const auto& a : argv) args.push_back(a);
  json::Array kernels;
  for (const auto& k : r.kernels) {
    const double best = fastest(k);
    json::Array cands;
    for (size_t i : rank(k.candidates)) {
      const auto& c = k.candidates[i];
      const bool ok = c.status == CandidateStatus::kOk;
      json::Array samples;
      for (double ms : c.samples_ms) samples.push_back(ms * 1e-3);
      json::Object e{{"config", c.tile.to_string()},
                     {"tile", tile_json(c.tile)},
                     {"order", c.order},
                     {"status", to_string(c.status)},
                     {"reason", c.reason},
                     {"finalist", c.finalist},
                     {"regs", c.regs},
                     {"spill_bytes", c.spill_bytes},
                     {"smem_bytes", c.smem_bytes},
                     {"compile_s", c.compile_s},
                     {"samples_s", std::move(samples)}};
      if (ok) {
        e["time_s"] = c.summary.median_ms * 1e-3;
        e["min_time_s"] = c.summary.min_ms * 1e-3;
        e["noise"] = c.summary.noise;
        e["bytes_per_second"] = r.traffic_bytes / (c.summary.median_ms * 1e-3);
        e["fraction_of_best"] = best / c.summary.median_ms;
      }
      cands.push_back(std::move(e));
    }
    kernels.push_back(json::Object{{"kernel", to_string(k.spec.kernel)},
                                   {"level", k.level},
                                   {"spec", k.spec.to_string()},
                                   {"spec_key", spec_key(k.spec)},
                                   {"shape", json::Array{k.shape.B, k.shape.C, k.shape.H, k.shape.W, k.shape.stride}},
                                   {"default_tile", tile_json(k.default_tile)},
                                   {"chosen_tile", tile_json(k.chosen)},
                                   {"chosen_kernel_name", k.chosen == Tile{} ? "" : kernel_name(k.spec, k.chosen)},
                                   {"space_size", static_cast<int64_t>(k.space_size)},
                                   {"strategy", to_string(k.strategy)},
                                   {"budget_hit", k.budget_hit},
                                   {"seconds", k.seconds},
                                   {"default_time_s", k.default_ms * 1e-3},
                                   {"chosen_time_s", k.best_ms * 1e-3},
                                   {"rejected_tile", k.check_failure.empty() ? json::Value(nullptr) : json::Value(tile_json(k.rejected))},
                                   {"check_failure", k.check_failure},
                                   {"candidates", std::move(cands)}});
  }
  json::Value root = json::Object{
      {"schema", "lkjit-tune"},
      {"version", 1},
      {"lkjit", LKJIT_VERSION},
      {"argv", std::move(args)},
      {"reproduce", reproduce},
      {"device", json::Object{{"name", d.name},
                              {"arch", d.arch},
                              {"sm_count", d.limits.sm_count},
                              {"l2_bytes", static_cast<int64_t>(d.l2_bytes)},
                              {"total_bytes", static_cast<int64_t>(d.total_bytes)},
                              {"clock_hz", d.clock_mhz * 1e6},
                              {"mem_clock_hz", d.mem_clock_mhz * 1e6},
                              {"mem_bus_bits", d.mem_bus_bits},
                              {"driver_version", d.driver_version},
                              {"nvrtc", nvrtc_version()}}},
      {"problem", problem_json(p)},
      {"options", json::Object{{"strategy", to_string(o.strategy)},
                               {"budget_s", o.budget_s},
                               {"top", o.top},
                               {"warmup", o.warmup},
                               {"reps", o.reps},
                               {"final_reps", o.final_reps},
                               {"min_noise", o.min_noise},
                               {"seed", static_cast<int64_t>(o.seed)}}},
      {"layer", json::Object{{"default_time_s", r.default_pass.median_ms * 1e-3},
                             {"default_noise", r.default_pass.noise},
                             {"tuned_time_s", r.tuned_pass.median_ms * 1e-3},
                             {"tuned_noise", r.tuned_pass.noise},
                             {"traffic_bytes", r.traffic_bytes},
                             {"seconds", r.seconds}}},
      {"kernels", std::move(kernels)},
      {"db_path", r.db_path},
      {"save_error", r.save_error}};
  return llvm::formatv("{0:2}", root).str() + "\n";
}

std::vector<PlotKernel> plot_input(const TuneReport& r) {
  std::vector<PlotKernel> out;
  for (const auto& k : r.kernels) {
    PlotKernel pk;
    pk.title = fmt::format("{}{} on {}", k.spec.to_string(), k.level > 0 ? fmt::format(" level {}", k.level) : "",
                           k.shape.to_string());
    for (const auto& ax : tile_space(k.spec).axes) pk.axes.push_back(ax.name);
    for (const auto& c : k.candidates) {
      if (c.status != CandidateStatus::kOk) continue;
      PlotPoint p;
      for (const auto& a : pk.axes) p.axes[a] = tile_axis(c.tile, a);
      p.ms = c.summary.median_ms;
      p.is_default = c.tile == k.default_tile;
      p.is_chosen = c.tile == k.chosen;
      pk.points.push_back(std::move(p));
    }
    out.push_back(std::move(pk));
  }
  return out;
}

}  // namespace lkjit::tool
