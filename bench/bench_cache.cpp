// Kernel cache lookups on the CPU (no GPU, cuDNN or cudart): compile_kernel() of a kernel that is on
// disk, as the first call of a fresh process sees it (origin "disk": generate, key, read, verify), and
// of one already in the process (origin "memory"). Targets: disk <= 5 ms, memory <= 50 us.
// The tuning database at scale (5 000 to 40 000 records): parsing it (what every `lkjit run` and layer does
// first), a lookup, and a merged save; each reports its complexity in the record count.
//
// "Fresh process" is literal: each disk iteration forks a child that has never looked the kernel up
// and reports compile_kernel()'s own time through a pipe (UseManualTime); fork and exit are not timed.
//
//   bench_cache --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cache/tuning_db.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/runtime.h"

namespace {

// The largest WTConvNeXt-T forward kernel: a plane-resident bf16 k=5 L=5 kernel (~110 KB cubin).
const lkjit::OpSpec kSpec = wtconv_spec(lkjit::kWTConvFwdPlane, lkjit::DType::kBF16, 5, 5, true, 90);

lkjit::Tile tile() {
  return lkjit::default_tile(kSpec, lkjit::Shape{64, 96, 56, 56, 1}, lkjit::DeviceLimits::for_arch(90));
}

struct ChildResult {
  double seconds = -1;
  size_t bytes = 0;
  char origin[16] = {};
};

// compile_kernel() in a forked child: its memory cache is empty, as in a new process.
ChildResult in_child() {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ChildResult r;
    try {
      const auto ck = lkjit::compile_kernel(kSpec, tile());
      r.seconds = ck.seconds;
      r.bytes = ck.cubin.size();
      std::snprintf(r.origin, sizeof r.origin, "%s", ck.origin.c_str());
    } catch (...) {
    }
    const bool sent = ::write(fds[1], &r, sizeof r) == static_cast<ssize_t>(sizeof r);
    ::_exit(sent ? 0 : 1);
  }
  ChildResult r;
  if (::read(fds[0], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) r.seconds = -1;
  ::waitpid(pid, nullptr, 0);
  ::close(fds[0]);
  ::close(fds[1]);
  return r;
}

void BM_LoadFromDisk(benchmark::State& state) {
  size_t bytes = 0;
  for (auto _ : state) {
    const ChildResult r = in_child();
    if (r.seconds < 0 || std::string(r.origin) != "disk") {
      state.SkipWithError(fmt::format("expected origin disk, got '{}'", r.origin).c_str());
      break;
    }
    state.SetIterationTime(r.seconds);
    bytes = r.bytes;
  }
  state.counters["cubin_bytes"] = static_cast<double>(bytes);
}
// Registered first: the memory benchmark fills this process's memory cache, which children inherit.
BENCHMARK(BM_LoadFromDisk)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_LoadFromMemory(benchmark::State& state) {
  const lkjit::Tile t = tile();
  lkjit::compile_kernel(kSpec, t);  // from disk, once
  for (auto _ : state) {
    const auto ck = lkjit::compile_kernel(kSpec, t);
    if (ck.origin != "memory") {
      state.SkipWithError(("expected origin memory, got " + ck.origin).c_str());
      break;
    }
    benchmark::DoNotOptimize(ck.cubin.data());
  }
}
BENCHMARK(BM_LoadFromMemory)->Unit(benchmark::kMicrosecond);

// n records over 64 specs, each with its own shape bucket: a large, realistic database (one device).
lkjit::cache::TuningDb tuning_db(size_t n) {
  lkjit::cache::TuningDb db;
  for (size_t i = 0; i < n; ++i) {
    lkjit::cache::TuningRecord r;
    r.device = "NVIDIA H200";
    r.arch = 90;
    r.sm_count = 132;
    r.spec = fmt::format("lkjit_wtconv_fwd_plane_f32_k5_L{}_s{}_sm90", i % 8, i % 64);
    r.bucket = fmt::format("B{}_C{}_H56_W56_s1", 1 + i / 64, 96);
    r.B = 1 + static_cast<int64_t>(i / 64), r.C = 96, r.H = 56, r.W = 56;
    r.tile = {{"planes", 1}, {"threads", 256}, {"vy", 4}};
    r.time_s = 1e-3;
    r.strategy = "greedy";
    db.upsert(r);
  }
  return db;
}

void BM_TuningDbParse(benchmark::State& state) {
  const std::string text = tuning_db(state.range(0)).serialize();
  for (auto _ : state) benchmark::DoNotOptimize(lkjit::cache::TuningDb::parse(text, "<bench>").records().size());
  state.SetComplexityN(state.range(0));
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_TuningDbParse)->RangeMultiplier(2)->Range(5000, 40000)->Unit(benchmark::kMillisecond)->Complexity();

void BM_TuningDbLookup(benchmark::State& state) {
  const lkjit::cache::TuningDb db = tuning_db(state.range(0));
  lkjit::cache::TuningQuery q{"NVIDIA H200", 90, 132, "lkjit_wtconv_fwd_plane_f32_k5_L3_s11_sm90", "B7_C96_H56_W56_s1",
                              7, 96, 56, 56, 1};
  for (auto _ : state) benchmark::DoNotOptimize(db.lookup(q).size());
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_TuningDbLookup)->RangeMultiplier(2)->Range(5000, 40000)->Unit(benchmark::kMicrosecond)->Complexity();

void BM_TuningDbSaveMerged(benchmark::State& state) {
  const std::string path = std::string(std::getenv("LKJIT_CACHE_DIR")) + "/bench-tuning.json";
  const lkjit::cache::TuningDb db = tuning_db(state.range(0));
  std::vector<lkjit::cache::TuningRecord> add(db.records().end() - 16, db.records().end());  // 16 re-tuned
  for (auto _ : state) {
    state.PauseTiming();
    std::ofstream(path, std::ios::trunc) << db.serialize();
    state.ResumeTiming();
    lkjit::cache::TuningDb::save_merged(path, add);
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_TuningDbSaveMerged)->RangeMultiplier(2)->Range(5000, 40000)->Unit(benchmark::kMillisecond)->Complexity();

}  // namespace

int main(int argc, char** argv) {
  // A private cache holding just this kernel, compiled by a child so this process stays cold.
  std::string dir = (std::filesystem::temp_directory_path() / "lkjit-bench-cache-XXXXXX").string();
  if (!::mkdtemp(dir.data())) return 1;
  ::setenv("LKJIT_CACHE_DIR", dir.c_str(), 1);
  ::unsetenv("LKJIT_CACHE_DISABLE");
  const ChildResult first = in_child();
  if (std::string(first.origin) != "compiled") {
    std::fprintf(stderr, "bench_cache: could not compile the kernel into %s (origin '%s')\n", dir.c_str(), first.origin);
    return 1;
  }
  benchmark::AddCustomContext("kernel", lkjit::kernel_name(kSpec, tile()));
  benchmark::AddCustomContext("nvrtc", lkjit::nvrtc_version());
  benchmark::AddCustomContext("gpu", "none (CPU only)");
  benchmark::AddCustomContext("cpus", std::to_string(std::thread::hardware_concurrency()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
