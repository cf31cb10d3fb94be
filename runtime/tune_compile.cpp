// The tuner's compile step: candidates rejected for the actual shape or failing in NVRTC become
// recorded results. NVRTC runs on several threads (compile_kernel is thread-safe); no exception
// leaves a worker thread.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <system_error>
#include <thread>

#include "lkjit/error.h"
#include "runtime/tune_search.h"

namespace lkjit::detail {

int resolve_jobs(int jobs) {
  if (jobs > 0) return jobs;
  return std::max(1u, std::thread::hardware_concurrency());
}

std::pair<CandidateStatus, std::string> classify(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const SpecError& x) {
    return {CandidateStatus::kRejected, x.what()};
  } catch (const CompileError& x) {
    return {CandidateStatus::kCompileFailed, x.what()};
  } catch (const DriverError& x) {
    return {CandidateStatus::kLaunchFailed, x.what()};
  } catch (const std::exception& x) {
    return {CandidateStatus::kError, x.what()};
  } catch (...) {
    return {CandidateStatus::kError, "unknown exception"};
  }
}

std::vector<CompileOutcome> compile_candidates(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits,
                                               const std::vector<Tile>& tiles, int jobs, const CompileFn& compile) {
  std::vector<CompileOutcome> out(tiles.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < tiles.size(); ++i) {
    if (auto why = reject_reason(spec, tiles[i], limits, &shape)) {
      out[i].status = CandidateStatus::kRejected;
      out[i].reason = fmt::format("{} on {}: {}", tiles[i].to_string(), shape.to_string(), *why);
    } else {
      todo.push_back(i);
    }
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (;;) {
      const size_t k = next.fetch_add(1);
      if (k >= todo.size()) return;
      const size_t i = todo[k];
      const auto t0 = std::chrono::steady_clock::now();
      try {
        compile(spec, tiles[i]);
      } catch (...) {
        std::tie(out[i].status, out[i].reason) = classify(std::current_exception());
      }
      out[i].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  // The calling thread works too, so a failure to start threads only costs parallelism.
  const size_t threads = std::min<size_t>(size_t(resolve_jobs(jobs)), todo.size());
  std::vector<std::thread> pool;
  try {
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {
  }
  work();
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace lkjit::detail

namespace lkjit {

std::vector<Tile> tune_candidates(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits) {
  return detail::candidate_order(spec, shape, limits);
}

std::vector<CandidateResult> precompile_candidates(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits,
                                                   const std::vector<Tile>& tiles, int jobs) {
  const auto comp = detail::compile_candidates(spec, shape, limits, tiles, jobs);
  std::vector<CandidateResult> out(tiles.size());
  for (size_t i = 0; i < tiles.size(); ++i) {
    out[i].tile = tiles[i];
    out[i].order = static_cast<int>(i);
    out[i].status = comp[i].status;
    out[i].reason = comp[i].reason;
    out[i].compile_s = comp[i].seconds;
  }
  return out;
}

}  // namespace lkjit
