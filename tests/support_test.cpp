// Tests of the bottom layer support/ (parse_int, message, json_limits, read_file): the one decimal parser,
// clipping and escaping of outside text in messages, the JSON pre-check, and the bounded reader's refusals of
// what is not a regular file (every read that could block runs in a child with a deadline). CPU only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "lkjit/error.h"
#include "support/json_limits.h"
#include "support/message.h"
#include "support/parse_int.h"
#include "support/read_file.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace lkjit;  // NOLINT
using support::IntStatus;
using support::ReadStatus;
using lkjit::test::run_in_child;
using lkjit::test::TempDir;
using lkjit::test::write_file;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// ---- parse_int -----------------------------------------------------------------------------------

TEST(ParseDecimal, ReadsBaseTenOnly) {
  // Leading zeros are decimal: never octal (011 was 9 through strtol's base 0).
  const std::vector<std::pair<std::string, int64_t>> good = {
      {"0", 0},   {"7", 7},   {"011", 11}, {"010", 10}, {"-5", -5}, {"000", 0}, {"-0", 0},
      {"9223372036854775807", INT64_MAX}, {"-9223372036854775808", INT64_MIN}};
  for (const auto& [text, v] : good) {
    const auto p = support::parse_decimal(text);
    EXPECT_EQ(p.status, IntStatus::kOk) << text;
    EXPECT_EQ(p.value, v) << text;
  }
  // No other base, no sign '+', no whitespace, no suffix, no exponent, no fraction, no non-ASCII digit.
  for (const char* text : {"", "-", "+5", " 5", "5 ", "\t5", "5\n", "0x5", "0X5", "0b1", "5k", "1e3", "1.0", "--5",
                           "5-", "\xd9\xa3", "0x", "x5", "1_000", "1,000"})
    EXPECT_EQ(support::parse_decimal(text).status, IntStatus::kMalformed) << text;
  // Well formed but beyond int64 or the range given: out of range, never wrapped or clamped.
  for (const char* text : {"9223372036854775808", "-9223372036854775809", "99999999999999999999999"})
    EXPECT_EQ(support::parse_decimal(text).status, IntStatus::kOutOfRange) << text;
  EXPECT_EQ(support::parse_decimal("4294967552", 0, INT_MAX).status, IntStatus::kOutOfRange);  // not 256
  EXPECT_EQ(support::parse_decimal("32", 1, 31).status, IntStatus::kOutOfRange);
  EXPECT_EQ(support::parse_decimal("31", 1, 31).value, 31);
}

TEST(ParseDecimal, ToIntAnswersNotOneOfMine) {
  // What a kernel-name parser needs: "k99999999999" is no kernel name, not std::out_of_range.
  EXPECT_EQ(support::to_int("5"), 5);
  EXPECT_EQ(support::to_int("99999999999"), std::nullopt);
  EXPECT_EQ(support::to_int("2147483648"), std::nullopt);
  EXPECT_EQ(support::to_int("2147483647"), INT_MAX);
  EXPECT_EQ(support::to_int("-1", 0), std::nullopt);
  EXPECT_EQ(support::to_int("5x"), std::nullopt);
  EXPECT_EQ(support::to_int(""), std::nullopt);
}

TEST(ParseInt, MessagesNameTheFieldTheValueAndTheRange) {
  EXPECT_EQ(error_of([] { support::parse_int("4294967552", "tile threads", 0, INT_MAX); }),
            "lkjit: error: tile threads=4294967552 is out of range; supported: [0, 2147483647]");
  EXPECT_EQ(error_of([] { support::parse_int("0x5", "-k", 1, 31); }),
            "lkjit: error: -k='0x5' is not a decimal integer; supported: [1, 31]");
  EXPECT_EQ(error_of([] { support::parse_int("99999999999999999999", "LKJIT_X", 0, 10); }),
            "lkjit: error: LKJIT_X=99999999999999999999 is out of range; supported: [0, 10]");
  EXPECT_EQ(error_of([] { support::check_range(-3, "record 2: arch", 0, INT_MAX); }),
            "lkjit: error: record 2: arch=-3 is out of range; supported: [0, 2147483647]");
  EXPECT_EQ(support::parse_int("011", "-k", 1, 31), 11);
  // A 100 kB value is clipped in the message.
  const std::string huge(100000, '7');
  const std::string msg = error_of([&] { support::parse_int(huge, "--iters", 1, 10); });
  EXPECT_LT(msg.size(), 200u);
  EXPECT_THAT(msg, AllOf(HasSubstr("--iters=" + std::string(64, '7') + "... (100000 bytes) is out of range"),
                         HasSubstr("[1, 10]")));
  // Control bytes in a value are escaped, never written raw to a terminal.
  const std::string esc = error_of([] { support::parse_int("\x1b[31m5", "-L", 0, 8); });
  EXPECT_THAT(esc, HasSubstr("-L='\\x1b[31m5'"));
}

TEST(ParseDecimalNumber, SecondsAreDecimalFractions) {
  EXPECT_EQ(support::parse_decimal_number("10", "LKJIT_TUNE_BUDGET", 0, 1e9, true), 10.0);
  EXPECT_EQ(support::parse_decimal_number("0.5", "b", 0, 1e9, true), 0.5);
  EXPECT_EQ(support::parse_decimal_number(".5", "b", 0, 1e9, true), 0.5);
  EXPECT_EQ(support::parse_decimal_number("2.", "b", 0, 1e9, true), 2.0);
  EXPECT_EQ(support::parse_decimal_number("007", "b", 0, 1e9, true), 7.0);
  // stod took all of these: an exponent, hex, inf, nan, whitespace, '+', junk after the number.
  for (const char* text : {"1e3", "0x10", "inf", "nan", "infinity", " 10", "10 ", "+1", "1.2.3", ".", "", "10s", "1,5"})
    EXPECT_THAT(error_of([&] { support::parse_decimal_number(text, "LKJIT_TUNE_BUDGET", 0, 1e9, true); }),
                AllOf(HasSubstr("is not a decimal number; supported: digits with an optional fraction"), HasSubstr("> 0")))
        << text;
  EXPECT_EQ(error_of([] { support::parse_decimal_number("0", "LKJIT_TUNE_BUDGET", 0, 1e9, true); }),
            "lkjit: error: LKJIT_TUNE_BUDGET=0 is out of range; supported: > 0 and <= 1000000000");
  EXPECT_THAT(error_of([] { support::parse_decimal_number("-1", "b", 0, 10); }), HasSubstr("b=-1 is out of range; supported: [0, 10]"));
  EXPECT_THAT(error_of([] { support::parse_decimal_number("11", "b", 0, 10); }), HasSubstr("b=11 is out of range"));
}

// ---- message ----------------------------------------------------------------------------------------

TEST(Clip, LongValuesShowTheirStartAndLength) {
  EXPECT_EQ(support::clip("short"), "short");
  EXPECT_EQ(support::clip(std::string(64, 'a')), std::string(64, 'a'));
  EXPECT_EQ(support::clip(std::string(65, 'a')), std::string(64, 'a') + "... (65 bytes)");
  EXPECT_EQ(support::clip(std::string(100000, 'b')), std::string(64, 'b') + "... (100000 bytes)");
  EXPECT_EQ(support::clip("abcdef", 3), "abc... (6 bytes)");
  // Cut at a character boundary: the 3-byte "é"-like character is not split.
  const std::string euro = "\xe2\x82\xac";  // U+20AC
  EXPECT_EQ(support::clip("ab" + euro + "cd", 3), "ab... (7 bytes)");
  EXPECT_EQ(support::clip("ab" + euro + "cd", 5), "ab" + euro + "... (7 bytes)");
}

TEST(Clip, EscapesControlBytesButKeepsWholeUtf8Characters) {
  EXPECT_EQ(support::clip("a\x1b[2Jb\n\x7f"), "a\\x1b[2Jb\\x0a\\x7f");
  EXPECT_EQ(support::clip("caf\xc3\xa9"), "caf\xc3\xa9");  // é stays
  // A lone 0x9b is CSI to an 8-bit terminal; U+009B (C2 9B) is the same control in UTF-8: both escaped.
  EXPECT_EQ(support::clip("x\x9by"), "x\\x9by");
  EXPECT_EQ(support::clip("x\xc2\x9by"), "x\\xc2\\x9by");
  EXPECT_EQ(support::clip("\xe2\x82"), "\\xe2\\x82");  // truncated character
  EXPECT_EQ(support::escape_bytes("caf\xc3\xa9"), "caf\\xc3\\xa9");  // ascii_only
}

// ---- json_limits ---------------------------------------------------------------------------------------

TEST(JsonLimits, RefusesDeepNestingBeforeTheParserRecurses) {
  EXPECT_EQ(support::json_limit_problem(R"({"records": [{"tile": {"a": [1]}}]})"), std::nullopt);
  const std::string deep32 = std::string(32, '[') + std::string(32, ']');
  EXPECT_EQ(support::json_limit_problem(deep32), std::nullopt);
  EXPECT_EQ(support::json_limit_problem("[" + deep32 + "]"),
            "is nested deeper than 32 levels (at byte 32); supported: at most 32");
  // Objects count as arrays do, mixed.
  std::string mixed;
  for (int i = 0; i < 40; ++i) mixed += i % 2 ? "[" : "{\"a\":";
  EXPECT_THAT(support::json_limit_problem(mixed).value_or(""), HasSubstr("deeper than 32"));
  // 50 000 levels (the crash) and 10 MB of them: refused at the first excess byte.
  EXPECT_THAT(support::json_limit_problem(std::string(50000, '[') + std::string(50000, ']')).value_or(""),
              HasSubstr("(at byte 32)"));
  EXPECT_THAT(support::json_limit_problem(std::string(10 << 20, '{')).value_or(""), HasSubstr("deeper than 32"));
  // Brackets inside strings are text, escaped quotes do not end a string.
  const std::string in_string = "[\"" + std::string(100, '[') + "\\\"" + std::string(100, '{') + "\"]";
  EXPECT_EQ(support::json_limit_problem(in_string), std::nullopt);
  EXPECT_EQ(support::json_limit_problem("[\"\\\\\"" + std::string(31, '[')), std::nullopt);  // "\\" then 31: 32 deep
  EXPECT_NE(support::json_limit_problem("[\"\\\\\"" + std::string(32, '[')), std::nullopt);
  // Unbalanced closers do not lower the depth below zero (the parser reports them).
  EXPECT_NE(support::json_limit_problem(std::string(10, ']') + std::string(33, '[')), std::nullopt);
  // The size limit.
  EXPECT_EQ(support::json_limit_problem("[1, 2, 3]", {32, 4}), "is 9 bytes; supported: at most 4");
  EXPECT_EQ(support::json_limit_problem("[[1]]", {1, 100}), "is nested deeper than 1 levels (at byte 1); supported: at most 1");
}

TEST(JsonLimits, CheckNamesTheFile) {
  try {
    support::check_json_limits(std::string(40, '['), "/x/tuning.json", "tuning database", ErrorCode::kCache);
    ADD_FAILURE() << "accepted";
  } catch (const CacheError& e) {
    EXPECT_EQ(std::string(e.what()),
              "lkjit: error: /x/tuning.json: tuning database is nested deeper than 32 levels (at byte 32); supported: at "
              "most 32");
  }
}

// ---- read_file -------------------------------------------------------------------------------------------

class ReadFile : public ::testing::Test {
 protected:
  // read_file in a child with a deadline: status, or -1 if it blocked.
  int status_in_child(const std::string& path, support::ReadOptions o = {}) {
    const auto code = run_in_child([&] { return static_cast<int>(support::read_file(path, o).status); }, 20);
    return code ? *code : -1;
  }
  TempDir tmp_{"lkjit-support-test"};
  std::string path(const std::string& name) const { return tmp_.path() + "/" + name; }
};

TEST_F(ReadFile, ReadsARegularFileWhole) {
  write_file(path("a"), "hello\n");
  support::ReadOptions o;
  o.what = "manifest";
  const auto r = support::read_file(path("a"), o);
  EXPECT_EQ(r.status, ReadStatus::kOk);
  EXPECT_EQ(r.bytes, "hello\n");
  EXPECT_EQ(r.file_size, 6u);
  EXPECT_TRUE(r.why.empty());
  write_file(path("empty"), "");
  EXPECT_EQ(support::read_file(path("empty"), o).status, ReadStatus::kOk);
  // A file of 1 MB, larger than the reader's chunk.
  const std::string big(1 << 20, 'z');
  write_file(path("big"), big);
  EXPECT_EQ(support::read_file(path("big"), o).bytes, big);
}

TEST_F(ReadFile, RefusesAFifoWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_EQ(status_in_child(path("fifo")), int(ReadStatus::kNotRegular)) << "-1: the read blocked";
  support::ReadOptions o;
  o.what = "tuning database";
  const auto r = support::read_file(path("fifo"), o);  // in this process too: it returned in the child
  EXPECT_EQ(r.why, path("fifo") + ": cannot read tuning database: it is a FIFO, not a regular file");
  EXPECT_EQ(r.reason, "it is a FIFO, not a regular file");
  // Through a link, and through a link when links are refused.
  fs::create_symlink(path("fifo"), path("to-fifo"));
  EXPECT_EQ(status_in_child(path("to-fifo")), int(ReadStatus::kNotRegular));
  o.follow_links = false;
  EXPECT_EQ(status_in_child(path("to-fifo"), o), int(ReadStatus::kNotRegular));
  // With a writer holding it open and writing: still refused, still not read.
  const auto code = run_in_child([&] {
    const int w = ::open(path("fifo").c_str(), O_RDWR | O_NONBLOCK);
    if (w < 0 || ::write(w, "{}", 2) != 2) return 99;
    return static_cast<int>(support::read_file(path("fifo"), {}).status);
  });
  EXPECT_EQ(code, int(ReadStatus::kNotRegular));
}

TEST_F(ReadFile, RefusesDevicesFoldersAndSockets) {
  // /dev/zero would be read forever, /dev/tty could block: refused by kind before it is opened.
  for (const char* dev : {"/dev/zero", "/dev/null", "/dev/urandom"}) {
    EXPECT_EQ(status_in_child(dev), int(ReadStatus::kNotRegular)) << dev;
    EXPECT_EQ(support::read_file(dev, {}).reason, "it is a character device, not a regular file") << dev;
  }
  fs::create_directories(path("dir"));
  EXPECT_EQ(support::read_file(path("dir"), {}).reason, "it is a directory, not a regular file");
  // A Unix socket.
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = path("sock");
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(status_in_child(sock), int(ReadStatus::kNotRegular));
  EXPECT_EQ(support::read_file(sock, {}).reason, "it is a socket, not a regular file");
  ::close(s);
}

TEST_F(ReadFile, LinksAreFollowedOrRefusedAsAsked) {
  write_file(path("target"), "data");
  fs::create_symlink(path("target"), path("link"));
  EXPECT_EQ(support::read_file(path("link"), {}).bytes, "data");
  support::ReadOptions nofollow;
  nofollow.follow_links = false;
  const auto r = support::read_file(path("link"), nofollow);
  EXPECT_EQ(r.status, ReadStatus::kNotRegular);
  EXPECT_EQ(r.reason, "it is a symbolic link, not a regular file; links are not followed here");
  // A dangling link is missing, and says where it points.
  fs::create_symlink(path("gone"), path("dangling"));
  const auto d = support::read_file(path("dangling"), {});
  EXPECT_EQ(d.status, ReadStatus::kMissing);
  EXPECT_EQ(d.reason, "No such file or directory (a symbolic link to " + path("gone") + ")");
  const auto m = support::read_file(path("nothing"), {});
  EXPECT_EQ(m.status, ReadStatus::kMissing);
  EXPECT_EQ(m.why, path("nothing") + ": cannot read file: No such file or directory");
}

TEST_F(ReadFile, CapsTheSize) {
  write_file(path("f"), std::string(1000, 'x'));
  support::ReadOptions o;
  o.max_bytes = 999;
  o.what = "bundle file";
  const auto r = support::read_file(path("f"), o);
  EXPECT_EQ(r.status, ReadStatus::kTooLarge);
  EXPECT_EQ(r.why, path("f") + ": cannot read bundle file: it is 1000 bytes; supported: at most 999 bytes");
  EXPECT_TRUE(r.bytes.empty());
  o.max_bytes = 1000;
  EXPECT_EQ(support::read_file(path("f"), o).status, ReadStatus::kOk);
  // A prefix read takes the first bytes of a larger file.
  o.max_bytes = 10;
  o.prefix = true;
  const auto p = support::read_file(path("f"), o);
  EXPECT_EQ(p.status, ReadStatus::kOk);
  EXPECT_EQ(p.bytes, std::string(10, 'x'));
  EXPECT_EQ(p.file_size, 1000u);
}

TEST_F(ReadFile, OsRefusalsCarryTheReason) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  write_file(path("secret"), "x");
  ASSERT_EQ(::chmod(path("secret").c_str(), 0), 0);
  const auto r = support::read_file(path("secret"), {});
  EXPECT_EQ(r.status, ReadStatus::kError);
  EXPECT_EQ(r.reason, "Permission denied");
}

TEST_F(ReadFile, ThrowingFormUsesTheCodeAsked) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  try {
    support::read_file_or_throw(path("fifo"), {}, ErrorCode::kCache);
    ADD_FAILURE() << "read a FIFO";
  } catch (const CacheError& e) {
    EXPECT_THAT(e.what(), HasSubstr("lkjit: error: " + path("fifo") + ": cannot read file: it is a FIFO"));
  }
}

// ---- layering ----------------------------------------------------------------------------------------

TEST(SupportLayer, IncludesNothingOfOursButErrorH) {
  // The bottom layer: every other folder may use it, so it may use none of them.
  const std::regex include(R"(#include\s+"([^"]+)\")");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(std::string(LKJIT_SOURCE_DIR) + "/support")) {
    std::ifstream in(e.path());
    ++files;
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string inc = m[1];
      EXPECT_TRUE(inc.rfind("support/", 0) == 0 || inc == "lkjit/error.h") << e.path().filename() << ": " << inc;
    }
  }
  EXPECT_GE(files, 8u);
}

}  // namespace
