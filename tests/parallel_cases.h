// What the tests that compile many kernels share: the cases this run selects (gtest filter and shard), and a
// loop over items on all cores (NVRTC compiles in parallel; serially a matrix takes minutes on two cores).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace lkjit::test {

// The names after '/' of the value-parameterized tests this run selects ("Compiles/<kernel name>" gives
// "<kernel name>"), so that a filtered or sharded run compiles only its own cases.
inline std::set<std::string> selected_case_names() {
  std::set<std::string> selected;
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j) {
      const auto* info = suite->GetTestInfo(j);
      const std::string name = info->name();
      if (info->should_run() && name.find('/') != std::string::npos) selected.insert(name.substr(name.find('/') + 1));
    }
  }
  return selected;
}

// f(i) for every i in [0, n), on as many threads as the machine has cores; f must be safe to call concurrently.
template <class F>
void for_each_on_all_cores(size_t n, F&& f) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < n;) f(i);
    });
  for (auto& th : pool) th.join();
}

}  // namespace lkjit::test
