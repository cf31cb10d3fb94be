// Outside input of the cluster tier and the trust layer, by class: remote values' header lines (Redis is
// outside: any client may write them), LKJIT_REMOTE_CACHE's numbers, and key files that are FIFOs or
// devices. Each is read through support/ (the one decimal parser, the one bounded reader). CPU only; no Redis.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>
#include <vector>

#include "cache/redis_url.h"
#include "cache/remote_store.h"
#include "cache/signing.h"
#include "lkjit/error.h"
#include "tests/test_support.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;         // NOLINT
using namespace lkjit::cache;  // NOLINT
using lkjit::test::run_in_child;
using lkjit::test::TempDir;

const std::string kId(64, 'a'), kSig(128, 'b');

TEST(RemoteValueHead, ReadsWhatEncodeValueWrites) {
  std::string why;
  auto h = parse_value_head("LKJIT-REMOTE 1 5 - -\nhello", &why);
  ASSERT_TRUE(h) << why;
  EXPECT_EQ(h->entry_bytes, 5u);
  EXPECT_EQ(h->key_id, "");
  EXPECT_EQ(h->signature_hex, "");
  EXPECT_EQ(h->body_at, 21u);
  h = parse_value_head("LKJIT-REMOTE 1 011 " + kId + " " + kSig + "\n", &why);
  ASSERT_TRUE(h) << why;
  EXPECT_EQ(h->entry_bytes, 11u);  // decimal, never octal
  EXPECT_EQ(h->key_id, kId);
  EXPECT_EQ(h->signature_hex, kSig);
  // The store's own encoder agrees with the parser.
  RedisEndpoint ep;
  ep.host = "127.0.0.1";
  const RemoteStore store(ep, RemoteOptions{}, std::make_shared<Breaker>(30, RemoteLog{}, "test"), nullptr, nullptr);
  const std::string v = store.encode_value("lkjit:v1:entry:x", "entry bytes");
  h = parse_value_head(v, &why);
  ASSERT_TRUE(h) << why;
  EXPECT_EQ(h->entry_bytes, 11u);
  EXPECT_EQ(v.substr(h->body_at), "entry bytes");
  std::string signer;
  EXPECT_EQ(store.decode_value("lkjit:v1:entry:x", v, &signer, &why).value_or("?"), "entry bytes") << why;
}

TEST(RemoteValueHead, RefusesEverySloppyHeader) {
  // What sscanf("%20s %79s %139s") and strtoull took: signs, spaces, other bases, wrapped values, short fields.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"LKJIT-REMOTE 1 +5 - -\n", "declares '+5' bytes"},
      {"LKJIT-REMOTE 1 -5 - -\n", "declares '-5' bytes"},
      {"LKJIT-REMOTE 1 0x5 - -\n", "declares '0x5' bytes"},
      {"LKJIT-REMOTE 1 18446744073709551621 - -\n", "declares '18446744073709551621' bytes"},
      {"LKJIT-REMOTE 1  5 - -\n", "malformed value header"},
      {"LKJIT-REMOTE 1 5  - -\n", "malformed value header"},
      {"LKJIT-REMOTE 1 5 - - \n", "malformed value header"},
      {"LKJIT-REMOTE 1 5 -\n", "malformed value header"},
      {"LKJIT-REMOTE 1 5 " + kId + " -\n", "malformed value header"},
      {"LKJIT-REMOTE 1 5 " + kId + " " + kSig.substr(1) + "\n", "malformed value header"},
      {"LKJIT-REMOTE 1 5 " + std::string(64, 'A') + " " + kSig + "\n", "malformed value header"},
      {"LKJIT-REMOTE 2 5 - -\n", "does not start with"},
      {"LKJIT-REMOTE 1 5 - -", "has no header line"},
      {"LKJIT-REMOTE 1 " + std::string(400, '1') + " - -\n", "has no header line"},
      {"", "empty value"},
  };
  for (const auto& [value, message] : bad) {
    std::string why;
    EXPECT_FALSE(parse_value_head(value, &why)) << value;
    EXPECT_THAT(why, HasSubstr(message)) << value;
  }
  // A header whose count is not the value's size is refused by decode_value, naming both.
  RedisEndpoint ep;
  ep.host = "127.0.0.1";
  const RemoteStore store(ep, RemoteOptions{}, std::make_shared<Breaker>(30, RemoteLog{}, "test"), nullptr, nullptr);
  std::string why;
  EXPECT_FALSE(store.decode_value("k", "LKJIT-REMOTE 1 6 - -\nhello", nullptr, &why));
  EXPECT_THAT(why, HasSubstr("declares 6 bytes of entry; the value holds 5"));
}

TEST(RedisUrlNumbers, AreDecimalWithoutSignOrSpaces) {
  std::string why;
  auto ep = parse_redis_url("redis://h:06379/010", &why);
  ASSERT_TRUE(ep) << why;
  EXPECT_EQ(ep->port, 6379);
  EXPECT_EQ(ep->db, 10);  // not octal 8
  ep = parse_redis_url("unix:///run/r.sock?db=07", &why);
  ASSERT_TRUE(ep) << why;
  EXPECT_EQ(ep->db, 7);
  ep = parse_redis_url("redis://u:%41%62%2f@h:1", &why);
  ASSERT_TRUE(ep) << why;
  EXPECT_EQ(ep->password, "Ab/");
  for (const std::string url : {"redis://h:+80", "redis://h: 80", "redis://h:80 ", "redis://h:-0", "redis://h:1/+1",
                                "redis://h:1/ 1", "redis://h:99999999999999999999", "unix:///r.sock?db=-0"}) {
    EXPECT_FALSE(parse_redis_url(url, &why)) << url;
  }
}

TEST(KeyFiles, AFifoOrDeviceIsRefusedWithoutBlocking) {
  // The signing key and trusted key files are read through support/read_file.h: a FIFO is refused at once,
  // /dev/zero is no key of endless bytes. In a child with a deadline, so that a regression fails, not hangs.
  TempDir tmp("lkjit-remote-input-test");
  const std::string fifo = tmp.path() + "/key.pem";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string path : {fifo, std::string("/dev/zero")}) {
    const auto code = run_in_child(
        [&] {
          int refused = 0;
          try {
            Signer::load(path);
          } catch (const CacheError& e) {
            refused += std::string(e.what()).find(path + ": the signing key is not a regular file") != std::string::npos;
          }
          try {
            TrustedKeys::load({path});
          } catch (const CacheError& e) {
            refused += std::string(e.what()).find(path + ": the trusted key file is not a regular file") != std::string::npos;
          }
          return refused == 2 ? 0 : 1;
        },
        20);
    ASSERT_TRUE(code) << path << ": the read blocked";
    EXPECT_EQ(*code, 0) << path;
  }
}

}  // namespace
