// LKJIT_DUMP_DIR (runtime/dump_dir.cpp): the folder is created private, planted links are replaced and never
// written through, FIFOs never block the compile, and a failure is one warning. CPU only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "runtime/dump_dir.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using lkjit::rt::write_dump;
using lkjit::test::read_file;
using lkjit::test::run_command;
using lkjit::test::run_in_child;
using lkjit::test::shell_quote;
using lkjit::test::TempDir;
using lkjit::test::write_file;

const std::string kName = "lkjit_wtconv_fold_k3_L1_w256_sm90";

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(DumpDir, CreatesAPrivateFolderAndWritesSourceAndLog) {
  TempDir tmp("lkjit-dump-test");
  const std::string dir = tmp.path() + "/a/b/dumps";  // parents too
  const mode_t old = ::umask(022);                     // a common umask: 0755 folders before
  EXPECT_THAT(write_dump(dir, kName, "source text\n", "log text"), IsEmpty());
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(read_file(dir + "/" + kName + ".cu"), "source text\n");
  EXPECT_EQ(read_file(dir + "/" + kName + ".log"), "log text");
  // A second dump replaces both; no temp file stays behind.
  EXPECT_THAT(write_dump(dir, kName, "v2", ""), IsEmpty());
  EXPECT_EQ(read_file(dir + "/" + kName + ".cu"), "v2");
  EXPECT_EQ(read_file(dir + "/" + kName + ".log"), "");
  EXPECT_EQ(files_in(dir), 2u);
}

TEST(DumpDir, PlantedLinksAreReplacedNotFollowed) {
  TempDir tmp("lkjit-dump-test");
  const std::string dir = tmp.path() + "/dumps", precious = tmp.path() + "/precious", other = tmp.path() + "/other";
  fs::create_directories(dir);
  write_file(precious, "precious data\n");
  write_file(other, "other data\n");
  // A link at <kernel>.log used to truncate its target; one at .cu; and a dangling one into a folder.
  fs::create_symlink(precious, dir + "/" + kName + ".log");
  fs::create_symlink(other, dir + "/" + kName + ".cu");
  EXPECT_THAT(write_dump(dir, kName, "src", "log"), IsEmpty());
  EXPECT_EQ(read_file(precious), "precious data\n");
  EXPECT_EQ(read_file(other), "other data\n");
  for (const char* ext : {".cu", ".log"}) {
    EXPECT_FALSE(fs::is_symlink(fs::symlink_status(dir + "/" + kName + ext))) << ext;
    EXPECT_TRUE(fs::is_regular_file(dir + "/" + kName + ext)) << ext;
  }
  EXPECT_EQ(read_file(dir + "/" + kName + ".log"), "log");
  fs::remove(dir + "/" + kName + ".cu");
  fs::create_symlink(tmp.path() + "/nowhere/x", dir + "/" + kName + ".cu");
  EXPECT_THAT(write_dump(dir, kName, "src2", "log2"), IsEmpty());
  EXPECT_FALSE(fs::exists(tmp.path() + "/nowhere"));
  EXPECT_EQ(read_file(dir + "/" + kName + ".cu"), "src2");
}

TEST(DumpDir, AFifoAtADumpPathDoesNotBlock) {
  TempDir tmp("lkjit-dump-test");
  const std::string dir = tmp.path() + "/dumps";
  fs::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir + "/" + kName + ".cu").c_str(), 0600), 0);
  const auto code = run_in_child([&] { return write_dump(dir, kName, "src", "log").empty() ? 0 : 1; });
  ASSERT_TRUE(code.has_value()) << "the dump blocked on a FIFO";
  EXPECT_EQ(*code, 0);
  EXPECT_TRUE(fs::is_regular_file(dir + "/" + kName + ".cu"));
}

TEST(DumpDir, FailuresNameTheFileAndTheReason) {
  TempDir tmp("lkjit-dump-test");
  write_file(tmp.path() + "/plain", "x");
  EXPECT_THAT(write_dump(tmp.path() + "/plain", kName, "s", "l"), AllOf(HasSubstr(tmp.path() + "/plain"), HasSubstr("folder")));
  EXPECT_THAT(write_dump(tmp.path() + "/plain/sub", kName, "s", "l"), HasSubstr("cannot create the folder"));
  // A name that would leave the folder.
  EXPECT_THAT(write_dump(tmp.path(), "../escape", "s", "l"), HasSubstr("is not a file name"));
  EXPECT_THAT(write_dump(tmp.path(), ".hidden", "s", "l"), HasSubstr("is not a file name"));
  EXPECT_FALSE(fs::exists(tmp.path() + "/../escape.cu"));
  if (::geteuid() != 0) {  // root writes into read-only folders
    const std::string ro = tmp.path() + "/ro";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THAT(write_dump(ro, kName, "s", "l"), AllOf(HasSubstr(ro + "/" + kName + ".cu"), HasSubstr("Permission denied")));
  }
}

TEST(DumpDir, TheCliWarnsOnceAndStillCompiles) {
  // Two kernels compiled with a dump folder that cannot exist (a file is in the way): one warning, exit 0.
  TempDir tmp("lkjit-dump-test");
  write_file(tmp.path() + "/blocker", "x");
  const std::string env = "env -u LKJIT_CACHE_MAX_BYTES LKJIT_CACHE_DIR=" + shell_quote(tmp.path() + "/cache") +
                          " LKJIT_DUMP_DIR=" + shell_quote(tmp.path() + "/blocker/dumps") + " ";
  const auto r = run_command(lkjit::test::bounded(env + shell_quote(LKJIT_CLI_PATH) +
                                                  " compile --kernel wtconv_fold -k 3 -L 2 --arch sm_80,sm_90", 300) + " 2>&1");
  EXPECT_EQ(r.code, 0) << r.output;
  const std::string warning = "lkjit: warning: LKJIT_DUMP_DIR: cannot write ";
  EXPECT_THAT(r.output, AllOf(HasSubstr(warning + tmp.path() + "/blocker/dumps: cannot create the folder"),
                              HasSubstr("further dump failures are not reported")));
  EXPECT_EQ(r.output.find(warning), r.output.rfind(warning)) << r.output;
  // A good folder gets both kernels' files.
  const std::string dumps = tmp.path() + "/dumps";
  const auto ok = run_command(lkjit::test::bounded("env -u LKJIT_CACHE_MAX_BYTES LKJIT_CACHE_DIR=" + shell_quote(tmp.path() + "/cache2") +
                                                   " LKJIT_DUMP_DIR=" + shell_quote(dumps) + " " + shell_quote(LKJIT_CLI_PATH) +
                                                   " compile --kernel wtconv_fold -k 3 -L 2 --arch sm_80,sm_90", 300) + " 2>&1");
  EXPECT_EQ(ok.code, 0) << ok.output;
  for (const char* f : {"lkjit_wtconv_fold_k3_L2_w256_sm80.cu", "lkjit_wtconv_fold_k3_L2_w256_sm90.log"})
    EXPECT_TRUE(fs::is_regular_file(dumps + "/" + f)) << f;
}

}  // namespace
