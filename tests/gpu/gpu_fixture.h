// GPU tests skip cleanly, with the reason, where there is no driver or device.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "lkjit/runtime.h"

namespace lkjit::testing {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  }
};

template <class P>
class GpuTestP : public ::testing::TestWithParam<P> {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  }
};

}  // namespace lkjit::testing
