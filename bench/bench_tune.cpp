// bench_tune: what tuning buys on the anchor layers, as markdown. For each anchor (fp32, k=5; forward
// and backward) it tunes the plan's main kernel (the plane kernel, else the synthesis kernel; the
// other kernels stay at their defaults) twice: greedy under a small budget (the "tuned" config) and
// exhaustively (the best the space holds). The default, tuned and exhaustive-best tiles are then
// timed against each other in interleaved rounds of whole-pass runs (L2 flushed, inputs rotated), and
// each search's wall time (compiles included) is reported. Decisions are not recorded.
//
//   bench_tune [--prepare] [--only fwd|bwd] [--rows N] [--budget S] [--reps N] [--final-reps N] [-j N]
//
// --prepare compiles every candidate the run can need into the kernel cache and exits (no GPU needed;
// run it with the same LKJIT_CACHE_DIR first and the GPU run loads instead of compiling).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "lkjit/tuning.h"
#include "lkjit/wtconv_tune.h"

namespace {

using namespace lkjit;  // NOLINT

struct Args {
  bool prepare = false;
  std::string only;  // "", "fwd", "bwd"
  int rows = 5;
  double budget = 2;
  int reps = 3, final_reps = 6, jobs = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "bench_tune: error: " << why
            << "\nusage: bench_tune [--prepare] [--only fwd|bwd] [--rows 1..5] [--budget S] [--reps N] [--final-reps N] [-j N]\n";
  std::exit(1);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(s + " needs a value");
      return argv[++i];
    };
    try {
      if (s == "--prepare") a.prepare = true;
      else if (s == "--only") a.only = value();
      else if (s == "--rows") a.rows = std::stoi(value());
      else if (s == "--budget") a.budget = std::stod(value());
      else if (s == "--reps") a.reps = std::stoi(value());
      else if (s == "--final-reps") a.final_reps = std::stoi(value());
      else if (s == "-j") a.jobs = std::stoi(value());
      else usage("unknown option " + s);
    } catch (const std::logic_error&) {
      usage("bad value for " + s);
    }
  }
  if (!a.only.empty() && a.only != "fwd" && a.only != "bwd") usage("--only must be fwd or bwd, not " + a.only);
  if (a.rows < 1 || a.rows > 5) usage(fmt::format("--rows={} is out of range; supported: [1, 5]", a.rows));
  if (a.reps < 1 || a.final_reps < 1 || a.budget <= 0) usage("--reps and --final-reps must be >= 1, --budget > 0");
  return a;
}

std::vector<WTConvTuneProblem> anchors(const Args& a) {
  const int64_t rows[5][5] = {{8, 64, 256, 256, 3}, {64, 96, 56, 56, 5}, {64, 192, 28, 28, 4}, {64, 384, 14, 14, 3},
                              {64, 768, 7, 7, 2}};
  std::vector<WTConvTuneProblem> out;
  for (int r = 0; r < a.rows; ++r)
    for (bool bwd : {false, true}) {
      if ((a.only == "fwd" && bwd) || (a.only == "bwd" && !bwd)) continue;
      WTConvTuneProblem p;
      p.options = WTConvOptions{rows[r][1], 5, int(rows[r][4]), DType::kF32, true, 1, 0};
      p.B = rows[r][0], p.H = rows[r][2], p.W = rows[r][3];
      p.backward = bwd;
      out.push_back(p);
    }
  return out;
}

const PlannedKernel* entry(const std::vector<PlannedKernel>& plan, const KernelSelector& s) {
  for (const auto& pk : plan)
    if (pk.spec.kernel == s.kernel && pk.level == std::max(s.level, 0)) return &pk;
  return nullptr;
}

int prepare(const Args& a) {
  std::string why;
  const DeviceLimits lim = gpu_available(&why) ? device_info(0).limits : DeviceLimits::for_arch(90);
  const auto t0 = std::chrono::steady_clock::now();
  int n = 0, failed = 0;
  for (const auto& p : anchors(a)) {
    const auto plan = wtconv_plan(p.options, p.shape(), lim, p.backward, p.path);
    const auto* main = entry(plan, wtconv_main_kernel(plan));
    for (const auto& pk : plan) {
      // The main kernel's whole space; every other kernel at its default.
      const auto tiles = &pk == main ? tune_candidates(pk.spec, pk.shape, lim) : std::vector<Tile>{pk.tile};
      for (const auto& r : precompile_candidates(pk.spec, pk.shape, lim, tiles, a.jobs)) {
        ++n;
        if (r.status != CandidateStatus::kOk) {
          ++failed;
          std::cerr << fmt::format("{} {}: {}: {}\n", pk.spec.to_string(), r.tile.to_string(), to_string(r.status), r.reason);
        }
      }
    }
    std::cerr << fmt::format("prepared {} ({} kernels so far)\n", p.to_string(), n);
  }
  std::cout << fmt::format("bench_tune --prepare: {} kernels for {} in {} ({} failed) in {:.1f} s\n", n, arch_name(lim.arch),
                           cache_dir(), failed,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return failed ? 3 : 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run(const Args& a) {
  std::string why;
  if (!gpu_available(&why)) {
    std::cerr << "bench_tune: error: needs a GPU (" << why << "); --prepare works without one\n";
    return 4;
  }
  const DeviceInfo dev = device_info(0);
  const auto t0 = std::chrono::steady_clock::now();
  std::cout << fmt::format("# Tuning: default vs tuned (greedy, {} s budget) vs exhaustive-best tiles\n\n", a.budget);
  std::cout << fmt::format("{} ({}, {} SMs, L2 {} MiB), driver {}, NVRTC {}; fp32, k=5, bias; cache {}\n\n", dev.name,
                           arch_name(dev.arch), dev.limits.sm_count, dev.l2_bytes >> 20, dev.driver_version, nvrtc_version(),
                           cache_dir());
  std::cout << "| pass | B x C x H x W | L | tuned kernel | default | ms | greedy | ms | vs default | exhaustive best | ms "
               "| greedy / best | greedy s (tried) | exhaustive s (tried) |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& p : anchors(a)) {
    std::cerr << "bench_tune: " << p.to_string() << "\n";
    const auto plan = wtconv_plan(p.options, p.shape(), dev.limits, p.backward, p.path);
    const KernelSelector main = wtconv_main_kernel(plan);
    TuneOptions o;
    o.reps = a.reps;
    o.final_reps = a.final_reps;
    o.warmup = 1;
    o.top = 3;
    o.jobs = a.jobs;
    o.save = false;
    o.budget_s = a.budget;
    o.strategy = TuneStrategy::kGreedy;
    const auto greedy = wtconv_tune(p, {main}, o);
    o.strategy = TuneStrategy::kExhaustive;
    const auto exhaustive = wtconv_tune(p, {main}, o);
    if (greedy.kernels.empty() || exhaustive.kernels.empty()) {
      std::cout << fmt::format("| {} | {} | {} | {} | (one candidate: nothing to tune) |||||||||\n", p.backward ? "bwd" : "fwd",
                               p.shape().to_string(), p.options.L, to_string(main.kernel));
      continue;
    }
    const auto& g = greedy.kernels[0];
    const auto& e = exhaustive.kernels[0];
    // The three tiles in interleaved rounds of the whole pass, so drift affects all alike.
    WTConvHarness h(p);
    const KernelSelector sel{g.spec.kernel, g.level};
    const Tile tiles[3] = {g.default_tile, g.chosen == Tile{} ? g.default_tile : g.chosen,
                           e.chosen == Tile{} ? e.default_tile : e.chosen};
    std::vector<double> ms[3];
    for (int r = 0; r < 3; ++r)
      for (int i = 0; i < 3; ++i) {
        h.set_tile(sel, tiles[i]);
        h.prepare();
        for (double v : h.time(1, 5)) ms[i].push_back(v);
      }
    const double d = median(ms[0]), t = median(ms[1]), b = median(ms[2]);
    std::cout << fmt::format("| {} | {} | {} | {} | {} | {:.4f} | {} | {:.4f} | {:.3f}x | {} | {:.4f} | {:.3f} | {:.1f} ({}) | {:.1f} ({}) |\n",
                             p.backward ? "bwd" : "fwd", p.shape().to_string(), p.options.L, to_string(g.spec.kernel),
                             tiles[0].to_string(), d, tiles[1].to_string(), t, d / t, tiles[2].to_string(), b, t / b, g.seconds,
                             g.candidates.size(), e.seconds, e.candidates.size());
    std::cout << std::flush;
  }
  std::cout << fmt::format(
      "\nSearch restricted to one kernel per plan (the plane kernel, else the synthesis kernel); the other kernels keep "
      "their default tiles. Times: median of 15 whole-pass runs per tile (3 interleaved rounds of 5, L2 flushed, inputs "
      "rotated). vs default = default ms / greedy ms; greedy / best = greedy ms / exhaustive-best ms. Search wall times "
      "include NVRTC compiles unless `bench_tune --prepare` filled the cache first. Total {:.1f} s.\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    return a.prepare ? prepare(a) : run(a);
  } catch (const lkjit::Error& e) {
    std::cerr << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "bench_tune: error: " << e.what() << "\n";
    return 2;
  }
}
