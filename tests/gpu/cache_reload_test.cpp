// The driver rejecting a cached image (runtime/device.cpp load_kernel): a verified entry whose cubin
// is for another GPU generation is evicted, rebuilt once and loaded, and the cache then holds the
// right binary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "cache/store.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/cache.h"
#include "lkjit/runtime.h"
#include "tests/gpu/gpu_fixture.h"

namespace lkjit::testing {
namespace {

namespace fs = std::filesystem;

class CacheReload : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    std::string tmpl = (fs::temp_directory_path() / "lkjit-reload-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ::setenv("LKJIT_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (dir_.empty()) return;
    ::unsetenv("LKJIT_CACHE_DIR");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(CacheReload, AnImageForAnotherGpuIsRefusedBeforeTheDriver) {
  const int arch = device_info(0).arch;
  const int other = arch >= 90 ? 80 : 90;  // SASS never crosses a major version
  const Tile t = wtconv_tile(0, 0, 0, 0, 96);            // a fold tile no other GPU test compiles
  const OpSpec here = wtconv_spec(kWTConvFold, DType::kF32, 3, 2, true, arch);
  const OpSpec there = wtconv_spec(kWTConvFold, DType::kF32, 3, 2, true, other);
  const CompiledKernel foreign = compile_kernel(there, t);
  // Plant it under this GPU's key with this kernel's inputs, checksummed: the cache reads the cubin's
  // arch and symbols and refuses it, so the driver never sees it.
  const KeyInputsInfo in = kernel_key_inputs(here, t);
  cache::EntryMeta m;
  cache::copy_key_summary(m, in);
  m.key = in.key;
  cache::DiskStore(dir_).store(m, foreign.cubin);
  const CompiledKernel planted = compile_kernel(here, t);
  EXPECT_EQ(planted.origin, "compiled");
  EXPECT_NE(planted.cubin, foreign.cubin);
  const LoadedKernel& lk = load_kernel(planted);
  EXPECT_NE(lk.function, nullptr);
  const auto now = cache::DiskStore(dir_).load(in.key);
  ASSERT_TRUE(now.has_value()) << "the rebuilt entry was not stored";
  EXPECT_EQ(*now, planted.cubin);
}

}  // namespace
}  // namespace lkjit::testing
