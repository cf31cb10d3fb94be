// `lkjit tune`: the explore mode. For one layer problem of an op family (--op; tools/lkjit/op_cli.h), search
// the tile spaces of the plan's kernels on the GPU (the family's PassHarness: the whole pass is timed per
// candidate), then print a ranked table per kernel, write CSV / JSON / an SVG plot, record the decisions
// in the tuning database and end with a pasteable `reproduce:` line. `--list` shows the candidate space
// (valid and rejected, with reasons) without a GPU; `--list --compile` also fills the kernel cache.
#include <fmt/format.h>
#include <llvm/Support/CommandLine.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "lkjit/tuning.h"
#include "tools/lkjit/common.h"
#include "tools/lkjit/op_cli.h"
#include "tools/lkjit/svg_plot.h"
#include "tools/lkjit/tune_output.h"

namespace cl = llvm::cl;

namespace lkjit::tool {
namespace {

std::string shape_help() {
  std::string forms;
  for (const OpCli* f : op_clis()) forms += (forms.empty() ? "" : "; ") + std::string(f->name()) + ": " + f->shape_form(Cmd::kTune);
  return "problem in the op's form (" + forms + ")";
}

std::string op_help() { return "op family: " + op_names(" | ") + " (default: " + default_op().name() + ")"; }

cl::SubCommand& kCmd = subcommand(Cmd::kTune);
cl::OptionCategory kCat("lkjit tune options");
cl::opt<std::string> kOp("op", help_from(op_help), cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kShape("shape", help_from(shape_help), cl::init("64:96:56:56"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kDtype("dtype", cl::desc("f32 | f16 | bf16"), cl::init("f32"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kPass("pass", cl::desc("fwd | bwd"), cl::init("fwd"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kKernel("kernel",
                             cl::desc("which kernels of the plan: all | main (the one that moves the most bytes; wtconv: "
                                      "the lane, plane or synthesis kernel) | <kernel>[:level], comma-separated (e.g. "
                                      "wtconv_fwd_level:2)"),
                             cl::init("all"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kStrategy("strategy", cl::desc("exhaustive | random | greedy"), cl::init("greedy"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<double> kBudget("budget", cl::desc("seconds per kernel for random/greedy (default: LKJIT_TUNE_BUDGET)"),
                        cl::init(0), cl::sub(kCmd), cl::cat(kCat));
IntOption<1, kIntMax> kTop("top", cl::desc("finalists re-measured (plus the default)"), cl::init(4), cl::sub(kCmd), cl::cat(kCat));
IntOption<1, kIntMax> kReps("reps", cl::desc("timed runs per candidate"), cl::init(5), cl::sub(kCmd), cl::cat(kCat));
IntOption<0, kIntMax> kFinalReps("final-reps", cl::desc("timed runs per finalist, in 3 interleaved rounds"), cl::init(15), cl::sub(kCmd), cl::cat(kCat));
IntOption<0, kIntMax> kWarmup("warmup", cl::desc("untimed runs before each candidate's samples"), cl::init(2), cl::sub(kCmd), cl::cat(kCat));
cl::opt<double> kMinNoise("min-noise", cl::desc("relative tie tolerance floor"), cl::init(0.02), cl::sub(kCmd), cl::cat(kCat));
UnsignedOption<0, UINT32_MAX> kSeed("seed", cl::desc("seed of random's order and greedy's restarts"), cl::init(1), cl::sub(kCmd), cl::cat(kCat));
UnsignedOption<0, kIntMax> kJobs("j", cl::desc("parallel compiles (default: hardware threads)"), cl::init(0), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kCsv("csv", cl::value_desc("file"), cl::desc("write the ranked candidates as CSV"), cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kJson("json", cl::value_desc("file"), cl::desc("write the report as JSON (SI units)"), cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kPlot("plot", cl::value_desc("file.svg"), cl::desc("plot time against each tile axis (SVG)"), cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<bool> kPaths("paths",
                     cl::desc("also choose the op's path (dwconv: direct, nhwc, mma): every path that runs the problem "
                              "has its tiles tuned, the tuned passes are timed against each other and the fastest is "
                              "recorded; the reports that follow are the chosen path's"),
                     cl::sub(kCmd), cl::cat(kCat));
cl::opt<bool> kNoSave("no-save", cl::desc("do not record the decisions in the tuning database"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kDb("db", cl::value_desc("file.json"), cl::desc("tuning database (default: LKJIT_TUNING_DB or <cache>/tuning.json)"),
                         cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<bool> kList("list", cl::desc("show the candidate space (valid and rejected, with reasons) and exit; no GPU needed"),
                    cl::sub(kCmd), cl::cat(kCat));
cl::opt<bool> kCompile("compile", cl::desc("with --list: compile every valid candidate into the kernel cache"), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kArch("arch", cl::desc("with --list: target arch (default: the GPU's, else sm_90)"), cl::init(""), cl::sub(kCmd), cl::cat(kCat));
cl::opt<std::string> kProgress("progress",
                               cl::desc("progress on stderr: auto | always (a bar on a terminal, else a line per kernel and "
                                        "every 10 candidates) | never"),
                               cl::init("auto"),
                               cl::sub(kCmd), cl::cat(kCat));

// The problem of the command line: the family's, with its dtype and pass.
struct Problem {
  OpCli* op = nullptr;
  LayerProblem layer;
  DType dtype = DType::kF32;
  bool backward = false;
  std::string to_string() const { return op->describe(layer, dtype, backward); }
  std::vector<PlannedKernel> plan(const DeviceLimits& lim) const {
    return op->plan(layer, dtype, backward, lim, PlanScope::kProblem, nullptr);
  }
};

Problem parse_problem() {
  Problem p;
  p.op = &chosen_op(kOp);
  check_family_options(Cmd::kTune, {p.op}, op_origin(kOp));
  p.layer = p.op->problems(Cmd::kTune, std::string(kShape)).front();
  if (kPass != "fwd" && kPass != "bwd")
    throw SpecError(fmt::format("lkjit: error: --pass '{}' is unknown; supported: fwd, bwd", std::string(kPass)));
  p.backward = kPass == "bwd";
  p.dtype = parse_dtype(kDtype);
  return p;
}

std::string entry_label(const PlannedKernel& pk) {
  return pk.level > 0 ? fmt::format("{}:{}", to_string(pk.spec.kernel), pk.level) : to_string(pk.spec.kernel);
}

bool selected(const std::vector<KernelSelector>& sel, const PlannedKernel& pk) {
  if (pk.fixed) return false;  // launched outside the pass (WTConv's fold): never tuned
  if (sel.empty()) return true;
  for (const auto& s : sel)
    if (s.kernel == pk.spec.kernel && (s.level < 0 || s.level == pk.level)) return true;
  return false;
}

// Each item must select a tunable entry of this plan: one that selects nothing would tune nothing and
// still exit 0.
std::vector<KernelSelector> parse_selectors(const Problem& p, const std::vector<PlannedKernel>& plan) {
  std::string tunable;
  for (const auto& pk : plan)
    if (selected({}, pk)) tunable += ", " + entry_label(pk);
  std::vector<KernelSelector> out;
  for (const auto& item : split(kKernel, ',')) {
    if (item == "all") return {};
    if (item == "main") {
      out.push_back(p.op->main_kernel(plan));
      continue;
    }
    const size_t colon = item.find(':');
    KernelSelector s{parse_kernel(item.substr(0, colon)), -1};
    if (colon != std::string::npos) {
      const std::string level = item.substr(colon + 1);
      if (level.empty() || level.find(':') != std::string::npos)
        throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: --kernel '{}' is not <kernel>[:level]", item));
      s.level = parse_ints(level, "kernel")[0];
    }
    // An explicit level below 0 would read as KernelSelector's "every level" (-1).
    const bool hit = s.level >= (colon == std::string::npos ? -1 : 0) &&
                     std::any_of(plan.begin(), plan.end(), [&](const PlannedKernel& pk) { return selected({s}, pk); });
    if (!hit)
      throw SpecError(fmt::format("lkjit: error: --kernel '{}' is not a tunable kernel of this plan; supported: all, "
                                  "main{}", item, tunable));
    out.push_back(s);
  }
  return out;
}

// ---- --list -----------------------------------------------------------------------------------------
// The whole product of the axes in enumerate()'s order (first axis fastest).
std::vector<Tile> full_product(const TileSpace& sp) {
  std::vector<Tile> out;
  std::vector<size_t> idx(sp.axes.size(), 0);
  for (;;) {
    Tile t;
    for (size_t a = 0; a < sp.axes.size(); ++a) set_tile_axis(t, sp.axes[a].name, sp.axes[a].values[idx[a]]);
    out.push_back(t);
    size_t a = 0;
    for (; a < idx.size(); ++a) {
      if (++idx[a] < sp.axes[a].values.size()) break;
      idx[a] = 0;
    }
    if (a == idx.size()) return out;
  }
}

int list_main(const Problem& p) {
  DeviceLimits lim;
  std::string where, why;
  if (!kArch.empty()) {
    lim = DeviceLimits::for_arch(parse_arch(kArch));
    where = fmt::format("limits table of {}", arch_name(lim.arch));
  } else if (gpu_available(&why)) {
    const DeviceInfo d = device_info(0);
    lim = d.limits;
    where = fmt::format("{} ({})", d.name, arch_name(d.arch));
  } else {
    lim = DeviceLimits::for_arch(90);
    where = fmt::format("no GPU ({}): limits table of sm_90", why);
  }
  const auto plan = p.plan(lim);
  const auto sel = parse_selectors(p, plan);
  std::cout << fmt::format("lkjit tune --list: {}, {}\n", p.to_string(), where);
  if (kPaths) {
    const auto pp = p.op->paths(p.layer, p.dtype, p.backward, lim);
    std::string names;
    for (const auto& o : pp->options) names += (names.empty() ? "" : ", ") + o.name;
    std::cout << fmt::format("paths of {}: {} (the rule's first; the plan below is its)\n", pp->key, names);
  }
  std::cout << "plan:";
  for (const auto& pk : plan) std::cout << " " << entry_label(pk) << (selected(sel, pk) ? "" : " (not tuned)");
  std::cout << "\n";
  int compile_failures = 0;
  for (const auto& pk : plan) {
    if (!selected(sel, pk)) continue;
    const TileSpace sp = tile_space(pk.spec);
    const auto all = full_product(sp);
    const auto cands = tune_candidates(pk.spec, pk.shape, lim);
    const Tile def = default_tile(pk.spec, pk.shape, lim);
    // A default fitted to the map may be no point of the space; the tuner measures it all the same.
    const bool off_space = std::find(all.begin(), all.end(), def) == all.end();
    const size_t valid_points = cands.size() - (off_space && !cands.empty() && cands[0] == def ? 1 : 0);
    std::cout << fmt::format("\n{}{} on {}: {}, {} valid, {} rejected; default {}{}\n", pk.spec.to_string(),
                             pk.level > 0 ? fmt::format(" level {}", pk.level) : "", pk.shape.to_string(),
                             counted(all.size(), "point"),
                             valid_points, all.size() - valid_points, def.to_string(),
                             off_space ? " (not a point of the space; measured first)" : "");
    for (const auto& ax : sp.axes) {
      std::string vals;
      for (int v : ax.values) vals += (vals.empty() ? "" : ", ") + std::to_string(v);
      std::cout << fmt::format("  axis {:<8} {{{}}}  {}\n", ax.name, vals, ax.doc);
    }
    std::cout << fmt::format("  {:>5}  {:<16} {:<9} {:>8} {:>10}  {}\n", "order", "config", "status", "smem B", "blocks",
                             "kernel / reason");
    for (size_t i = 0; i < cands.size(); ++i) {
      const auto g = launch_geometry(pk.spec, cands[i], pk.shape);
      std::cout << fmt::format("  {:>5}  {:<16} {:<9} {:>8} {:>10}  {}\n", i, cands[i].to_string(),
                               cands[i] == def ? "default" : "ok", g.smem_bytes,
                               uint64_t(g.grid[0]) * g.grid[1] * g.grid[2], kernel_name(pk.spec, cands[i]));
    }
    // Points no shape could run (e.g. the lane kernels' planes that are neither 0 nor threads/2) make one
    // line; the ones this shape rejects are listed with their reasons.
    size_t never = 0;
    std::string example;
    for (const auto& t : all)
      if (std::find(cands.begin(), cands.end(), t) == cands.end()) {
        if (const auto r0 = reject_reason(pk.spec, t, lim, nullptr)) {
          if (never++ == 0) example = fmt::format("{}: {}", t.to_string(), *r0);
          continue;
        }
        const auto r = reject_reason(pk.spec, t, lim, &pk.shape);
        std::cout << fmt::format("  {:>5}  {:<16} {:<9} {:>8} {:>10}  {}\n", "-", t.to_string(), "rejected", "", "",
                                 r ? *r : "not a candidate");
      }
    if (never)
      std::cout << fmt::format("  {:>5}  {} more rejected on {} whatever the shape, e.g. {}\n", "-", never,
                               arch_name(lim.arch), example);
    if (kCompile) {
      const auto res = precompile_candidates(pk.spec, pk.shape, lim, cands, static_cast<int>(kJobs));
      double secs = 0;
      int failed = 0;
      for (const auto& r : res) {
        secs += r.compile_s;
        if (r.status == CandidateStatus::kOk) continue;
        ++failed;
        std::cout << fmt::format("  compile {}: {}: {}\n", r.tile.to_string(), to_string(r.status), r.reason);
      }
      compile_failures += failed;
      std::cout << fmt::format("  compiled {} candidates into {} ({} failed, {:.1f} s of compile time)\n", res.size(),
                               cache_dir(), failed, secs);
    }
  }
  return compile_failures ? static_cast<int>(ErrorCode::kCompile) : 0;
}

// ---- progress -------------------------------------------------------------------------------------
class ProgressBar {
 public:
  explicit ProgressBar(const std::string& mode) {  // mode checked by tune_main (check_progress_mode)
    // Not a terminal: a line per kernel and every 10 candidates instead of a redrawn bar.
    tty_ = ::isatty(2) != 0;
    quiet_ = mode == "never";
  }
  void operator()(const TuneProgress& p) {
    if (quiet_) return;
    const double frac = p.total > 0 ? double(p.done) / p.total : p.budget_s > 0 ? std::min(1.0, p.elapsed_s / p.budget_s) : 0;
    const int fill = static_cast<int>(frac * 28);
    const std::string line = fmt::format("tune {:<28} [{}{}] {:>4}{} {:>6.1f} s  best {:.4f} ms", p.what, std::string(fill, '#'),
                                         std::string(28 - fill, '.'), p.done, p.total > 0 ? fmt::format("/{}", p.total) : "",
                                         p.elapsed_s, p.best_ms);
    if (tty_) {
      std::cerr << "\r" << line << "\x1b[K" << std::flush;
      open_ = true;
    } else if (p.what != last_ || p.done >= next_) {
      std::cerr << line << "\n";
      next_ = p.done + 10;
    }
    last_ = p.what;
  }
  void finish() {
    if (open_) std::cerr << "\n";
    open_ = false;
  }

 private:
  bool tty_ = false, quiet_ = false, open_ = false;
  std::string last_;
  int next_ = 0;
};

std::string reproduce_line(const Problem& p) {
  std::string s = "lkjit tune";
  if (!kOp.empty() && p.op != &default_op()) s += fmt::format(" --op {}", p.op->name());
  s += " " + p.op->reproduce(p.layer, kShape, kDtype, kPass);
  s += fmt::format(" --kernel {} --strategy {}", std::string(kKernel), std::string(kStrategy));
  if (kBudget > 0) s += fmt::format(" --budget {}", double(kBudget));
  s += fmt::format(" --top {} --reps {} --final-reps {} --warmup {} --min-noise {} --seed {}", int(kTop), int(kReps),
                   int(kFinalReps), int(kWarmup), double(kMinNoise), unsigned(kSeed));
  if (!kDb.empty()) s += " --db " + kDb;
  if (kNoSave) s += " --no-save";
  if (kPaths) s += " --paths";
  return s;
}

// Before --list and the GPU: --paths tunes every kernel of every path, of an op that has paths.
void check_paths_options(const Problem& p) {
  if (kKernel != "all")
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: tune: --paths tunes every kernel of every path, and "
                                               "--kernel {} picks some; drop one of them", std::string(kKernel)));
  if (!p.op->paths(p.layer, p.dtype, p.backward, DeviceLimits::for_arch(90)))
    throw SpecError(fmt::format("lkjit: error: tune: --paths: {} runs one path per problem; supported: an op with "
                                "several (dwconv)", p.op->name()));
}

// --paths: every path's tiles tuned and the tuned passes timed against each other (tune_paths), a table of
// them, and the chosen path's report for what follows.
TuneReport tune_path_choice(const Problem& p, const DeviceInfo& dev, const TuneOptions& o, PathTuneReport* out) {
  const auto pp = p.op->paths(p.layer, p.dtype, p.backward, dev.limits);
  if (!pp) return {};  // check_paths_options refused it
  const PathTuneReport& pr = *out = tune_paths(*pp, o);
  std::cout << fmt::format("\npaths of {} (whole pass, tuned tiles, median of {} interleaved runs):\n", pp->key,
                           3 * std::max(1, (o.final_reps + 2) / 3));
  std::cout << fmt::format("  {:<8} {:>10} {:>10} {:>9}  {}\n", "path", "ms", "default ms", "GB/s", "");
  for (const auto& r : pr.paths) {
    const bool ok = r.failure.empty() && r.pass.n > 0;
    const double gbs = ok ? r.tiles.traffic_bytes / (r.pass.median_ms * 1e-3) / 1e9 : 0;
    std::cout << fmt::format("  {:<8} {:>10} {:>10} {:>9}  {}\n", r.path.name, ok ? fmt::format("{:.4f}", r.pass.median_ms) : "-",
                             r.tiles.default_pass.n ? fmt::format("{:.4f}", r.tiles.default_pass.median_ms) : "-",
                             ok ? fmt::format("{:.0f}", gbs) : "-",
                             !r.failure.empty() ? "failed: " + r.failure
                             : r.path.id == pr.chosen.path.id ? (pr.chosen.tier == LookupTier::kTuned ? "chosen" : "kept")
                                                              : "");
  }
  if (!pr.check_failure.empty()) std::cout << "  not chosen: " << pr.check_failure << "\n";
  std::cout << fmt::format("chosen: {} ({}){}\n", pr.chosen.path.name, pr.chosen.detail,
                           pr.db_path.empty() ? "" : ", recorded in " + pr.db_path);
  if (!pr.save_error.empty()) std::cout << "path decision not recorded: " << pr.save_error << "\n";
  for (const auto& r : pr.paths)
    if (r.path.id == pr.chosen.path.id) return r.tiles;
  return {};
}

}  // namespace

bool tune_cmd() { return static_cast<bool>(kCmd); }

int tune_main() {
  const Problem p = parse_problem();
  TuneOptions o;
  o.strategy = parse_tune_strategy(kStrategy);
  o.budget_s = kBudget;
  o.top = kTop;
  o.reps = kReps;
  o.final_reps = kFinalReps;
  o.warmup = kWarmup;
  o.min_noise = kMinNoise;
  o.seed = kSeed;
  o.jobs = static_cast<int>(kJobs);
  o.save = !kNoSave;
  o.db_path = kDb;
  auto at_least = [](const char* name, double v, double min) {
    if (!(v >= min))
      throw SpecError(fmt::format("lkjit: error: tune: --{}={} is out of range; supported: >= {}", name, v, min));
  };
  at_least("min-noise", kMinNoise, 0);  // the integer options check their range as they are parsed (InRange)
  at_least("budget", kBudget, 0);
  check_progress_mode(kProgress);  // before --list and the GPU
  // An empty path would be no file (or, for --db, the default database): refused, as prewarm's --bundle ''.
  refuse_empty_paths({&kCsv, &kJson, &kPlot, &kDb});
  if (kPaths) check_paths_options(p);
  if (kList) {
    // Nothing is measured, so a report file would be empty: refused rather than silently not written.
    for (const auto* f : {&kCsv, &kJson, &kPlot})
      if (!f->empty())
        throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: tune: --{} writes measured results, and --list "
                                                   "measures nothing; drop one of them", f->ArgStr.str()));
    warn_broken_tuning_db(kDb.empty() ? tuning_db_path() : std::string(kDb));  // no GPU run reads it to say so
    return list_main(p);
  }

  std::string why;
  if (!gpu_available(&why))
    throw DriverError(fmt::format("lkjit: error: tune: tuning needs a GPU ({}); `lkjit tune --list` shows the candidate "
                                  "space without one", why));
  const DeviceInfo dev = device_info(0);
  const auto sel = parse_selectors(p, p.plan(dev.limits));
  ProgressBar bar(kProgress);
  o.progress = [&](const TuneProgress& pr) { bar(pr); };
  std::cout << fmt::format("lkjit tune: {}, strategy {}, cache {}\n", p.to_string(), to_string(o.strategy), cache_dir());
  print_device(std::cout, dev);
  std::cout << std::flush;
  TuneReport rep;
  PathTuneReport paths;  // --paths only
  if (kPaths) {
    rep = tune_path_choice(p, dev, o, &paths);
  } else {
    const std::unique_ptr<PassHarness> harness = p.op->harness(p.layer, p.dtype, p.backward);
    rep = tune_pass(*harness, sel, o);
  }
  bar.finish();
  if (rep.kernels.empty()) std::cout << "\nnothing to tune: every selected kernel has a single candidate for this shape\n";
  for (const auto& k : rep.kernels) print_ranked(std::cout, k, rep.traffic_bytes);
  print_summary(std::cout, rep);
  const std::string repro = reproduce_line(p);
  const std::vector<std::string> argv = split(repro, ' ');
  if (!kCsv.empty()) write_file_atomically(kCsv, tune_csv(rep));
  if (!kJson.empty()) write_file_atomically(kJson, tune_json(rep, o, argv, repro));
  if (!kPlot.empty())
    write_file_atomically(kPlot,
                          svg_main_effects(plot_input(rep), fmt::format("lkjit tune: {} on {}", p.to_string(), dev.name)));
  std::cout << fmt::format("tuning took {:.1f} s\nreproduce: {}\n", kPaths ? paths.seconds : rep.seconds, repro);
  return rep.save_error.empty() && paths.save_error.empty() ? 0 : static_cast<int>(ErrorCode::kCache);
}

}  // namespace lkjit::tool
