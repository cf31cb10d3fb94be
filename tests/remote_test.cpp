// Tests of the Redis cluster tier (cache/redis_url.cpp, cache/remote_store.cpp, cache/remote_decisions.cpp,
// runtime/remote_tier.cpp, compile_kernel's remote path, the CLI's remote actions) against a real
// redis-server. LKJIT_TEST_REDIS=redis://127.0.0.1:PORT/0 names the server .ci/run starts (its database is
// flushed by each test); tests that kill or pause Redis start a private redis-server of their own. Without
// LKJIT_TEST_REDIS they skip, saying so. Every wait is bounded in count and time.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cache/redis_client.h"
#include "cache/redis_url.h"
#include "cache/remote_decisions.h"
#include "cache/remote_store.h"
#include "cache/signing.h"
#include "cache/tuning_db.h"
#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "lkjit/wtconv_kernels.h"
#include "runtime/plan_runner.h"
#include "runtime/remote_tier.h"
#include "runtime/tuner_internal.h"
#include "tests/cubin_fixture.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace lkjit;         // NOLINT
using namespace lkjit::cache;  // NOLINT
using lkjit::test::read_file;
using lkjit::test::run_command;
using lkjit::test::ScopedEnv;
using lkjit::test::shell_quote;
using lkjit::test::TempDir;
using lkjit::test::test_meta;
using lkjit::test::test_payload;
using lkjit::test::write_file;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kTmpPrefix[] = "lkjit-remote-test";
const char* kFold[] = {"lkjit_wtconv_fold_k3_L1_w256_sm90", "lkjit_wtconv_fold_k5_L1_w256_sm90",
                       "lkjit_wtconv_fold_k7_L1_w256_sm90", "lkjit_wtconv_fold_k3_L2_w256_sm90",
                       "lkjit_wtconv_fold_k5_L2_w256_sm90", "lkjit_wtconv_fold_k7_L2_w256_sm90"};

std::string test_redis() {
  const char* v = std::getenv("LKJIT_TEST_REDIS");
  return v ? v : "";
}

#define REQUIRE_REDIS()                                                                                        \
  if (test_redis().empty())                                                                                    \
  GTEST_SKIP() << "LKJIT_TEST_REDIS is unset: no redis-server to test the cluster tier against (.ci/run starts " \
                  "one; locally: redis-server --port 6390 --save '' & LKJIT_TEST_REDIS=redis://127.0.0.1:6390/0)"

std::unique_ptr<RedisClient> connect(const std::string& url) {
  std::string why;
  const auto ep = parse_redis_url(url, &why);
  EXPECT_TRUE(ep.has_value()) << why;
  auto c = ep ? RedisClient::connect(*ep, 1000, 2000, &why) : nullptr;
  EXPECT_NE(c, nullptr) << why;
  return c;
}

RedisReply cmd(RedisClient& c, const std::vector<std::string_view>& argv) {
  std::string why;
  auto r = c.command(argv, &why);
  EXPECT_TRUE(r.has_value()) << why;
  return r.value_or(RedisReply{});
}

// A redis-server of the test's own, on a free loopback port, killed at the end.
class PrivateRedis {
 public:
  PrivateRedis() {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
    ::close(s);
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      ::execlp("redis-server", "redis-server", "--bind", "127.0.0.1", "--port", port.c_str(), "--save", "", "--appendonly",
               "no", "--dir", dir_.path().c_str(), "--logfile", (dir_.path() + "/log").c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 100; ++i) {  // up to 5 s
      std::string why;
      const auto ep = parse_redis_url(url(), &why);
      if (auto c = RedisClient::connect(*ep, 100, 100, &why)) return;
      std::this_thread::sleep_for(milliseconds(50));
    }
    ADD_FAILURE() << "redis-server did not start on port " << port_;
  }
  ~PrivateRedis() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }
  void signal(int sig) const { ::kill(pid_, sig); }
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  TempDir dir_{"lkjit-redis"};
  int port_ = 0;
  pid_t pid_ = -1;
};

// ---- URLs -----------------------------------------------------------------------------------------

TEST(RedisUrl, ParsesEveryForm) {
  std::string why;
  auto ep = parse_redis_url("redis://127.0.0.1:6390/3", &why);
  ASSERT_TRUE(ep) << why;
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 6390);
  EXPECT_EQ(ep->db, 3);
  EXPECT_TRUE(ep->password.empty());
  ep = parse_redis_url("redis://alice:p%40ss@cache.example:7000", &why);
  ASSERT_TRUE(ep) << why;
  EXPECT_EQ(ep->user, "alice");
  EXPECT_EQ(ep->password, "p@ss");
  EXPECT_EQ(ep->db, 0);
  EXPECT_EQ(ep->redacted, "redis://alice:***@cache.example:7000");
  ep = parse_redis_url("redis://:secret@h", &why);
  ASSERT_TRUE(ep) << why;
  EXPECT_EQ(ep->port, 6379);
  EXPECT_EQ(ep->password, "secret");
  EXPECT_EQ(ep->redacted, "redis://:***@h");
  ep = parse_redis_url("redis://[::1]:6390/0", &why);
  ASSERT_TRUE(ep) << why;
  EXPECT_EQ(ep->host, "::1");
  ep = parse_redis_url("unix:///run/redis.sock?db=2", &why);
  ASSERT_TRUE(ep) << why;
  EXPECT_EQ(ep->socket, "/run/redis.sock");
  EXPECT_EQ(ep->db, 2);
}

TEST(RedisUrl, RefusesBadUrlsNamingThemRedacted) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"redis://u:hunter2@h:99999/0", "port 99999 is out of range; supported: [1, 65535]"},
      {"redis://u:hunter2@h:0x10/0", "port 0x10 is out of range"},
      {"redis://h:6379/1024", "db 1024 is out of range; supported: [0, 1023]"},
      {"redis://h:6379/-1", "db -1 is out of range"},
      {"rediss://u:hunter2@h:6379", "TLS (rediss://) is not supported"},
      {"http://h:6379", "unknown scheme"},
      {"redis://:hunter2@/0", "no host"},
      {"redis://h;rm -rf:1/0", "is not a host name"},
      {"unix://relative.sock", "absolute path"},
      {"redis://[::1:6379", "closing ']'"},
  };
  for (const auto& [url, reason] : bad) {
    SCOPED_TRACE(url);
    std::string why;
    EXPECT_FALSE(parse_redis_url(url, &why).has_value());
    EXPECT_THAT(why, AllOf(HasSubstr(reason), HasSubstr("supported: "), Not(HasSubstr("hunter2"))));
  }
  EXPECT_EQ(redact_url("redis://u:hunter2@h:1/0"), "redis://u:***@h:1/0");
  EXPECT_EQ(redact_url("redis://hunter2@h:1/0"), "redis://:***@h:1/0");
}

// ---- the store against a real server --------------------------------------------------------------

class RemoteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_REDIS();
    admin_ = connect(test_redis());
    ASSERT_NE(admin_, nullptr);
    cmd(*admin_, {"FLUSHDB"});
  }
  std::unique_ptr<RemoteStore> store(std::shared_ptr<const Signer> signer = nullptr,
                                     std::shared_ptr<const TrustedKeys> trusted = nullptr, RemoteOptions o = {}) {
    std::string why;
    auto ep = parse_redis_url(test_redis(), &why);
    auto breaker = std::make_shared<Breaker>(o.retry_s, RemoteLog{}, ep->redacted);
    return std::make_unique<RemoteStore>(*ep, o, breaker, std::move(signer), std::move(trusted));
  }
  static Lookup want(const EntryMeta& m) { return lookup_for(m.key, inputs_of(m)); }
  std::unique_ptr<RedisClient> admin_;
};

TEST_F(RemoteStoreTest, RoundTripsAndRefusesEveryKindOfBadValue) {
  auto s = store();
  const EntryMeta a = test_meta("a"), b = test_meta("b");
  ASSERT_TRUE(s->put_entry(a, test_payload(a)));
  auto f = s->get_entry(want(a));
  ASSERT_TRUE(f.entry.has_value()) << f.refused;
  EXPECT_EQ(f.entry->payload, test_payload(a));
  // A miss is no refusal.
  f = s->get_entry(want(b));
  EXPECT_FALSE(f.entry);
  EXPECT_EQ(f.refused, "");
  EXPECT_FALSE(f.unavailable);
  const std::string good = cmd(*admin_, {"GET", s->entry_key(a.key)}).str;
  const std::string entry_a = encode_entry(a, test_payload(a));
  EntryMeta wrong_arch = a;  // this kernel's inputs and name, a cubin for sm_80
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty value (0 bytes)"},
      {"x", "has no header line"},
      {good.substr(0, good.size() - 10), "value header declares"},
      {"LKJIT-REMOTE 1 999999999999 - -\n" + entry_a, "declares 999999999999 bytes of entry; the value holds"},
      {[&] { std::string v = good; v[v.size() - 20] ^= 1; return v; }(), "checksum"},
      {s->encode_value(s->entry_key(a.key), encode_entry(b, test_payload(b))), "key echo"},
      {s->encode_value(s->entry_key(a.key), encode_entry(wrong_arch, lkjit::test::test_cubin(80, {a.kernel_name}))),
       "cubin is for sm_80, expected sm_90"},
      {s->encode_value(s->entry_key(a.key), encode_entry(a, std::string(100, 'g'))), "payload is not an ELF image"},
  };
  for (const auto& [value, reason] : cases) {
    SCOPED_TRACE(reason);
    cmd(*admin_, {"SET", s->entry_key(a.key), value});
    const uint64_t before = refusals(Source::kRemote);
    f = s->get_entry(want(a));
    EXPECT_FALSE(f.entry.has_value());
    EXPECT_THAT(f.refused, HasSubstr(reason));
    EXPECT_EQ(refusals(Source::kRemote), before + 1);
  }
  EXPECT_GE(std::stoll(cmd(*admin_, {"HGET", std::string(RemoteStore::kPrefix) + "stats", "refused"}).str), 8);
  // A writer overwrites a refused value with the entry it builds.
  ASSERT_TRUE(s->put_entry(a, test_payload(a)));
  EXPECT_TRUE(s->get_entry(want(a)).entry.has_value());
}

TEST_F(RemoteStoreTest, SignaturesAreRequiredWithTrustedKeys) {
  const auto kp = generate_key_pair(), other = generate_key_pair();
  auto signer = std::make_shared<const Signer>(Signer::from_pem(kp.private_pem, "test"));
  auto stranger = std::make_shared<const Signer>(Signer::from_pem(other.private_pem, "other"));
  auto trusted = std::make_shared<const TrustedKeys>(TrustedKeys::from_pem(kp.public_pem, "test"));
  const EntryMeta a = test_meta("a"), b = test_meta("b");
  ASSERT_TRUE(store()->put_entry(a, test_payload(a)));  // unsigned
  auto reader = store(nullptr, trusted);
  EXPECT_THAT(reader->get_entry(want(a)).refused, HasSubstr("unsigned, and LKJIT_CACHE_TRUSTED_KEYS is set"));
  ASSERT_TRUE(store(stranger)->put_entry(a, test_payload(a)));
  EXPECT_THAT(reader->get_entry(want(a)).refused, HasSubstr("which is not trusted"));
  ASSERT_TRUE(store(signer)->put_entry(a, test_payload(a)));
  EXPECT_TRUE(reader->get_entry(want(a)).entry.has_value());
  // A byte changed after signing, with the entry's own checksums redone by the attacker: the signature fails.
  const std::string value = cmd(*admin_, {"GET", reader->entry_key(a.key)}).str;
  const size_t nl = value.find('\n');
  EntryMeta forged = a;
  forged.spec = "changed";
  const std::string head = value.substr(0, nl + 1);
  const std::string new_entry = encode_entry(forged, test_payload(a));
  std::string tampered = "LKJIT-REMOTE 1 " + std::to_string(new_entry.size()) + head.substr(head.find(' ', 15)) + new_entry;
  cmd(*admin_, {"SET", reader->entry_key(a.key), tampered});
  EXPECT_THAT(reader->get_entry(want(a)).refused, HasSubstr("bad signature"));
  // A signed value copied under another key: its signature is bound to its own key.
  ASSERT_TRUE(store(signer)->put_entry(b, test_payload(b)));
  cmd(*admin_, {"SET", reader->entry_key(a.key), cmd(*admin_, {"GET", reader->entry_key(b.key)}).str});
  EXPECT_THAT(reader->get_entry(want(a)).refused, HasSubstr("bad signature"));
}

TEST_F(RemoteStoreTest, LeasesBelongToTheirHolder) {
  RemoteOptions o;
  o.lease_ms = 400;
  auto s = store(nullptr, nullptr, o);
  EXPECT_EQ(s->try_lease("k", "t1"), RemoteStore::LeaseState::kOwned);
  EXPECT_EQ(s->try_lease("k", "t2"), RemoteStore::LeaseState::kHeld);
  EXPECT_TRUE(s->lease_held("k"));
  EXPECT_FALSE(s->renew_lease("k", "t2"));
  EXPECT_TRUE(s->renew_lease("k", "t1"));
  s->release_lease("k", "t2");  // not its holder: nothing happens
  EXPECT_TRUE(s->lease_held("k"));
  s->release_lease("k", "t1");
  EXPECT_FALSE(s->lease_held("k"));
  // A holder that stops renewing loses the lease within lease_ms.
  EXPECT_EQ(s->try_lease("k", "t1"), RemoteStore::LeaseState::kOwned);
  const auto t0 = Clock::now();
  while (s->lease_held("k") && Clock::now() - t0 < std::chrono::seconds(5)) std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(s->lease_held("k"));
  EXPECT_EQ(s->try_lease("k", "t2"), RemoteStore::LeaseState::kOwned);
  // write none takes no lease, and writes nothing.
  RemoteOptions none;
  none.write = RemoteWrite::kNone;
  auto ro = store(nullptr, nullptr, none);
  EXPECT_EQ(ro->try_lease("other", "t3"), RemoteStore::LeaseState::kUnavailable);
  EXPECT_FALSE(ro->put_entry(test_meta("a"), test_payload(test_meta("a"))));
  EXPECT_EQ(cmd(*admin_, {"EXISTS", ro->lease_key("other")}).integer, 0);
}

TEST_F(RemoteStoreTest, DecisionsRoundTripAndStayOnTheirKey) {
  auto s = store();
  TuningRecord r;
  r.device = "NVIDIA H200";
  r.arch = 90;
  r.sm_count = 132;
  r.spec = "lkjit_wtconv_fwd_plane_f32_nchw_k5_L5_sm90";
  r.bucket = "B64_C128_H56_W56_s1";
  r.B = 64, r.C = 96, r.H = 56, r.W = 56;
  r.tile = {{"planes", 1}, {"threads", 256}, {"vy", 4}};
  ASSERT_TRUE(put_decision(*s, r));
  TuningQuery q;
  q.device = r.device, q.arch = 90, q.sm_count = 132, q.spec = r.spec, q.bucket = r.bucket;
  const auto got = get_decision(*s, q);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tile, r.tile);
  // Moved under another key: refused.
  TuningQuery other = q;
  other.bucket = "B1_C1_H1_W1_s1";
  cmd(*admin_, {"SET", s->decision_key(decision_key(other)), cmd(*admin_, {"GET", s->decision_key(decision_key(q))}).str});
  std::string why;
  EXPECT_FALSE(get_decision(*s, other, &why).has_value());
  EXPECT_THAT(why, HasSubstr("not the one of its key"));
  // write kernels: decisions are read, not written.
  RemoteOptions k;
  k.write = RemoteWrite::kKernels;
  EXPECT_FALSE(put_decision(*store(nullptr, nullptr, k), r));
}

// ---- the Tuner through the tier ------------------------------------------------------------------

// A node with no record of its own takes another node's published decision (exact tier), and a node that
// records decisions publishes them (write all), so the next node finds them.
TEST_F(RemoteStoreTest, TunerUsesAndPublishesDecisions) {
  ScopedEnv url("LKJIT_REMOTE_CACHE", test_redis().c_str());
  ScopedEnv write("LKJIT_REMOTE_CACHE_WRITE", "all");
  TempDir tmp(kTmpPrefix);
  const OpSpec spec = wtconv_spec(kWTConvFwdPlane, DType::kF32, 5, 2);
  const Shape shape{2, 96, 28, 28};
  const DeviceLimits limits = DeviceLimits::for_arch(90);
  const DeviceClass dev{"Remote Test GPU", 90, 132};
  const Tile def = default_tile(spec, shape, limits);
  const auto space = enumerate(spec, limits, &shape);
  ASSERT_GE(space.size(), 2u);
  const Tile other = space.front() == def ? space.back() : space.front();
  TuneOptions o;
  o.mode = TuneMode::kCached;
  o.db_path = tmp.path() + "/node-a.json";
  EXPECT_EQ(Tuner(o).lookup(spec, shape, dev, limits).tier, LookupTier::kDefault);

  TuningRecord r;
  r.device = dev.name, r.arch = dev.arch, r.sm_count = dev.sm_count;
  r.spec = spec_key(spec), r.bucket = bucket_key(shape);
  r.B = shape.B, r.C = shape.C, r.H = shape.H, r.W = shape.W;
  for (const auto& [a, v] : other.axes.entries()) r.tile[a] = v;
  ASSERT_TRUE(put_decision(*store(), r));
  const TileChoice got = Tuner(o).lookup(spec, shape, dev, limits);
  EXPECT_EQ(got.tile, other);
  EXPECT_EQ(got.tier, LookupTier::kExact);
  EXPECT_THAT(got.detail, HasSubstr("remote decision of Remote Test GPU"));
  {
    ScopedEnv off("LKJIT_REMOTE_CACHE", nullptr);
    EXPECT_EQ(Tuner(o).lookup(spec, shape, dev, limits).tier, LookupTier::kDefault);
  }
  // A decision whose tile the shape cannot take is not used.
  cmd(*admin_, {"FLUSHDB"});
  r.tile = {{"planes", 999}, {"threads", 256}, {"vy", 4}};
  ASSERT_TRUE(put_decision(*store(), r));
  EXPECT_EQ(Tuner(o).lookup(spec, shape, dev, limits).tier, LookupTier::kDefault);

  // Recording publishes.
  cmd(*admin_, {"FLUSHDB"});
  KernelTuneResult k;
  k.spec = spec, k.shape = shape, k.default_tile = def, k.chosen = other;
  lkjit::detail::record_decisions(tmp.path() + "/node-b.json", dev, {k});
  TuningQuery q;
  q.device = dev.name, q.arch = dev.arch, q.sm_count = dev.sm_count, q.spec = r.spec, q.bucket = r.bucket;
  const auto pub = get_decision(*store(), q);
  ASSERT_TRUE(pub.has_value()) << "record_decisions did not publish";
  std::map<std::string, int> want;
  for (const auto& [a, v] : other.axes.entries()) want[a] = v;
  EXPECT_EQ(pub->tile, want);
  // write kernels: recorded locally, not published.
  cmd(*admin_, {"FLUSHDB"});
  ScopedEnv kernels("LKJIT_REMOTE_CACHE_WRITE", "kernels");
  lkjit::detail::record_decisions(tmp.path() + "/node-c.json", dev, {k});
  EXPECT_FALSE(get_decision(*store(), q).has_value());
}

// One process tunes a key: a claim while another holds the key's decision lease waits for its decision;
// a claim of a free key takes the lease (held until the claim goes away).
TEST_F(RemoteStoreTest, TuningClaimsWaitForTheHoldersDecisionOrTakeTheLease) {
  ScopedEnv url("LKJIT_REMOTE_CACHE", test_redis().c_str());
  ScopedEnv write("LKJIT_REMOTE_CACHE_WRITE", "all");
  ScopedEnv wait("LKJIT_REMOTE_CACHE_WAIT_S", "5");
  TuningRecord r;
  r.device = "Claim Test GPU", r.arch = 90, r.sm_count = 132;
  r.spec = "lkjit_wtconv_fwd_plane_f32_nchw_k5_L2_sm90", r.bucket = "B2_C96_H28_W28_s1";
  r.B = 2, r.C = 96, r.H = 28, r.W = 28;
  r.tile = {{"planes", 1}, {"threads", 256}, {"vy", 4}};
  TuningQuery q;
  q.device = r.device, q.arch = r.arch, q.sm_count = r.sm_count, q.spec = r.spec, q.bucket = r.bucket;
  auto other = store();
  const std::string lease = "decision:" + decision_key(q);
  ASSERT_EQ(other->try_lease(lease, "other-node"), RemoteStore::LeaseState::kOwned);
  std::thread holder([&] {
    std::this_thread::sleep_for(milliseconds(600));
    EXPECT_TRUE(put_decision(*other, r));
    other->release_lease(lease, "other-node");
  });
  const auto t0 = Clock::now();
  rt::TuningClaim c = rt::claim_tuning(q);
  holder.join();
  ASSERT_TRUE(c.decision.has_value()) << "the claim did not wait for the holder's decision";
  EXPECT_EQ(c.decision->tile, r.tile);
  EXPECT_EQ(c.lease, nullptr);
  EXPECT_GE(Clock::now() - t0, milliseconds(500));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));

  cmd(*admin_, {"FLUSHDB"});
  {
    rt::TuningClaim mine = rt::claim_tuning(q);
    EXPECT_FALSE(mine.decision.has_value());
    ASSERT_NE(mine.lease, nullptr) << "a free key's claim took no lease";
    EXPECT_EQ(cmd(*admin_, {"EXISTS", other->lease_key(lease)}).integer, 1);
    EXPECT_EQ(other->try_lease(lease, "third-node"), RemoteStore::LeaseState::kHeld);
  }
  EXPECT_EQ(cmd(*admin_, {"EXISTS", other->lease_key(lease)}).integer, 0) << "the claim's lease outlived it";
}

// Path decisions (lkjit/tuning.h) through the tier: a published one is a lookup's exact hit, recording one
// publishes it, and a layer's tune-mode choice waits for the holder's decision instead of measuring.
TEST_F(RemoteStoreTest, PathDecisionsArePublishedReadAndClaimed) {
  ScopedEnv url("LKJIT_REMOTE_CACHE", test_redis().c_str());
  ScopedEnv write("LKJIT_REMOTE_CACHE_WRITE", "all");
  ScopedEnv wait("LKJIT_REMOTE_CACHE_WAIT_S", "5");
  TempDir tmp(kTmpPrefix);
  PassPaths p;
  p.key = "lkjit_pass_fake_bwd_bf16_nhwc_sm90";
  p.shape = Shape{2, 96, 28, 28, 1};
  p.options = {{3, "mma"}, {1, "direct"}};
  p.harness = [](int) -> std::unique_ptr<PassHarness> {
    ADD_FAILURE() << "measured a path another node decided";
    throw lkjit::SpecError("lkjit: error: test: no harness here");
  };
  DeviceInfo info;
  info.name = "Path Test GPU", info.arch = 90, info.limits = DeviceLimits::for_arch(90);
  const DeviceClass dev = device_class(info);
  TuneOptions o;
  o.mode = TuneMode::kCached;
  o.db_path = tmp.path() + "/node-a.json";
  EXPECT_EQ(lookup_path(p, dev, o).tier, LookupTier::kDefault);

  TuningRecord r;
  r.device = dev.name, r.arch = dev.arch, r.sm_count = dev.sm_count;
  r.spec = p.key, r.bucket = bucket_key(p.shape);
  r.B = 2, r.C = 96, r.H = 28, r.W = 28;
  r.tile = {{"path", 1}};
  ASSERT_TRUE(put_decision(*store(), r));
  PathChoice got = lookup_path(p, dev, o);
  EXPECT_EQ(got.path.name, "direct");
  EXPECT_EQ(got.tier, LookupTier::kExact);
  EXPECT_THAT(got.detail, HasSubstr("remote decision of Path Test GPU"));

  // Recording publishes: save_records is what tune_paths records through.
  cmd(*admin_, {"FLUSHDB"});
  lkjit::detail::save_records(tmp.path() + "/node-b.json", {r});
  const TuningQuery q = lkjit::detail::query_of(p.key, p.shape, dev);
  const auto pub = get_decision(*store(), q);
  ASSERT_TRUE(pub.has_value()) << "a recorded path decision was not published";
  EXPECT_EQ(pub->tile, r.tile);

  // Tune mode while another node holds the key's lease: the layer's choice waits and takes its decision.
  cmd(*admin_, {"FLUSHDB"});
  auto other = store();
  const std::string lease = "decision:" + decision_key(q);
  ASSERT_EQ(other->try_lease(lease, "other-node"), RemoteStore::LeaseState::kOwned);
  std::thread holder([&] {
    std::this_thread::sleep_for(milliseconds(500));
    EXPECT_TRUE(put_decision(*other, r));
    other->release_lease(lease, "other-node");
  });
  rt::TilePolicy policy("fake");
  TuneOptions tune = o;
  tune.mode = TuneMode::kTune;
  tune.db_path = tmp.path() + "/node-c.json";
  policy.set_tune_options(tune);
  got = policy.choose_path(p, info);
  holder.join();
  EXPECT_EQ(got.path.name, "direct");
  EXPECT_EQ(got.tier, LookupTier::kExact);
  EXPECT_THAT(got.detail, HasSubstr("published while this process waited"));
}

// ---- compile_kernel through the tier --------------------------------------------------------------

class CompileRemote : public RemoteStoreTest {
 protected:
  void SetUp() override {
    RemoteStoreTest::SetUp();
    if (IsSkipped()) return;
    url_.emplace("LKJIT_REMOTE_CACHE", test_redis().c_str());
  }
  // compile_kernel as a fresh process on node `dir` would do it: nothing in memory.
  CompiledKernel fresh(const std::string& dir, const Tile& t) {
    ScopedEnv d("LKJIT_CACHE_DIR", dir.c_str());
    CompiledKernel drop;
    drop.key = kernel_key_inputs(spec_, t).key;
    evict_compiled(drop);
    auto k = compile_kernel(spec_, t);
    flush_remote_cache();
    return k;
  }
  TempDir tmp_{kTmpPrefix};
  std::optional<ScopedEnv> url_;
  ScopedEnv write_{"LKJIT_REMOTE_CACHE_WRITE", nullptr};
  ScopedEnv keys_{"LKJIT_CACHE_TRUSTED_KEYS", nullptr};
  ScopedEnv signer_{"LKJIT_CACHE_SIGNING_KEY", nullptr};
  ScopedEnv enabled_{"LKJIT_CACHE_DISABLE", nullptr};
  const OpSpec spec_ = wtconv_spec(kWTConvFold, DType::kF32, 7, 3, true, 90);
};

TEST_F(CompileRemote, ANodeReadsWhatAnotherCompiled) {
  const Tile t = wtconv_tile(0, 0, 0, 0, 448);
  const auto a = fresh(tmp_.path() + "/node-a", t);
  EXPECT_EQ(a.origin, "compiled");
  const auto b = fresh(tmp_.path() + "/node-b", t);
  EXPECT_EQ(b.origin, "remote");
  EXPECT_EQ(b.cubin, a.cubin);
  EXPECT_TRUE(fs::exists(tmp_.path() + "/node-b/" + a.key + ".lkjit")) << "a remote hit was not written to disk";
  EXPECT_EQ(cmd(*admin_, {"EXISTS", std::string(RemoteStore::kPrefix) + "lease:" + a.key}).integer, 0)
      << "the lease outlived the write";
  // A refused remote value is a miss; the node that compiles overwrites it.
  cmd(*admin_, {"SET", std::string(RemoteStore::kPrefix) + "entry:" + a.key, "garbage"});
  const auto c = fresh(tmp_.path() + "/node-c", t);
  EXPECT_EQ(c.origin, "compiled");
  EXPECT_EQ(fresh(tmp_.path() + "/node-d", t).origin, "remote");
}

TEST_F(CompileRemote, TtlIsRefreshedOnHitExceptWithWriteNone) {
  ScopedEnv ttl("LKJIT_REMOTE_CACHE_TTL", "1000");
  const Tile t = wtconv_tile(0, 0, 0, 0, 480);
  const auto a = fresh(tmp_.path() + "/node-a", t);
  const std::string rkey = std::string(RemoteStore::kPrefix) + "entry:" + a.key;
  EXPECT_GT(cmd(*admin_, {"TTL", rkey}).integer, 900);
  cmd(*admin_, {"EXPIRE", rkey, "50"});
  {
    ScopedEnv none("LKJIT_REMOTE_CACHE_WRITE", "none");
    EXPECT_EQ(fresh(tmp_.path() + "/node-b", t).origin, "remote");
    EXPECT_LE(cmd(*admin_, {"TTL", rkey}).integer, 50) << "write none refreshed a TTL";
  }
  EXPECT_EQ(fresh(tmp_.path() + "/node-c", t).origin, "remote");
  EXPECT_GT(cmd(*admin_, {"TTL", rkey}).integer, 900);
}

TEST_F(CompileRemote, WriteNoneWritesNothingAtAll) {
  ScopedEnv none("LKJIT_REMOTE_CACHE_WRITE", "none");
  const Tile t = wtconv_tile(0, 0, 0, 0, 512);
  EXPECT_EQ(fresh(tmp_.path() + "/node-a", t).origin, "compiled");
  EXPECT_EQ(cmd(*admin_, {"DBSIZE"}).integer, 0) << "write none wrote to Redis";
}

TEST_F(CompileRemote, AHolderKilledMidCompileIsTakenOver) {
  // A real process takes the lease and is SIGKILLed while compiling: its lease stops being renewed and
  // expires, and this process compiles the kernel itself, within the lease time, not the wait bound.
  const std::string name = "lkjit_wtconv_fold_k7_L3_w544_sm90";
  const Tile t = wtconv_tile(0, 0, 0, 0, 544);
  const std::string key = kernel_key_inputs(spec_, t).key;
  const std::string lease = std::string(RemoteStore::kPrefix) + "lease:" + key;
  const std::string dir = tmp_.path() + "/holder";
  const pid_t holder = ::fork();
  if (holder == 0) {
    ::setenv("LKJIT_CACHE_DIR", dir.c_str(), 1);
    ::setenv("LKJIT_REMOTE_CACHE_LEASE_MS", "1500", 1);
    ::execl(LKJIT_CLI_PATH, "lkjit", "compile", "--kernel", "wtconv_fold", "--k", "7", "--L", "3", "--tile", "0,0,0,0,544",
            "--arch", "sm_90", nullptr);
    ::_exit(127);
  }
  const auto t0 = Clock::now();
  while (cmd(*admin_, {"EXISTS", lease}).integer == 0 && Clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(milliseconds(5));
  ASSERT_EQ(cmd(*admin_, {"EXISTS", lease}).integer, 1) << "the holder never took the lease";
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  ASSERT_EQ(cmd(*admin_, {"EXISTS", std::string(RemoteStore::kPrefix) + "entry:" + key}).integer, 0)
      << "the holder finished before it was killed";
  ScopedEnv wait("LKJIT_REMOTE_CACHE_WAIT_S", "60");
  const auto t1 = Clock::now();
  const auto k = fresh(tmp_.path() + "/taker", t);
  EXPECT_EQ(k.origin, "compiled");
  EXPECT_EQ(k.kernel_name, name);
  EXPECT_LT(Clock::now() - t1, std::chrono::seconds(30)) << "waited past the dead holder's lease";
}

// ---- many processes, outages -----------------------------------------------------------------------

std::string manifest(const std::string& dir) {
  std::string m = "{\"kernels\": [";
  for (size_t i = 0; i < std::size(kFold); ++i) m += std::string(i ? ", " : "") + "\"" + kFold[i] + "\"";
  write_file(dir + "/manifest.json", m + "]}");
  return dir + "/manifest.json";
}

size_t count_lines(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(RemoteStoreTest, SixteenProcessesOnTwoNodesCompileEachKeyOnce) {
  TempDir tmp(kTmpPrefix);
  const std::string m = manifest(tmp.path());
  // Two nodes (cache folders) x 8 processes, all at once; each logs its compiles.
  std::string script;
  for (int node = 0; node < 2; ++node)
    for (int p = 0; p < 8; ++p)
      // Generous timeouts: 16 processes on a small machine must not trip the breaker by being slow.
      script += fmt::format("(LKJIT_LOG=1 LKJIT_REMOTE_CACHE_TIMEOUT_MS=5000 LKJIT_CACHE_DIR={}/node{} LKJIT_REMOTE_CACHE={} {} prewarm --remote -j 1 --arch sm_90 "
                            "--progress never --manifest {} > {}/out{}_{} 2>&1; echo $? >> {}/codes) & ",
                            tmp.path(), node, test_redis(), shell_quote(LKJIT_CLI_PATH), m, tmp.path(), node, p, tmp.path());
  script += "wait";
  const auto t0 = Clock::now();
  ASSERT_EQ(run_command("timeout 300 sh -c " + shell_quote(script)).code, 0);
  std::string all;
  for (int node = 0; node < 2; ++node)
    for (int p = 0; p < 8; ++p) all += read_file(fmt::format("{}/out{}_{}", tmp.path(), node, p));
  EXPECT_EQ(count_lines(read_file(tmp.path() + "/codes"), "0\n"), 16u) << all;
  for (const char* k : kFold) EXPECT_EQ(count_lines(all, "lkjit: compiling " + std::string(k) + " "), 1u) << k << "\n" << all;
  EXPECT_EQ(count_lines(all, "lkjit: compiling "), std::size(kFold));
  for (int node = 0; node < 2; ++node) {
    const auto r = run_command(fmt::format("LKJIT_CACHE_DIR={}/node{} {} cache verify 2>&1", tmp.path(), node,
                                           shell_quote(LKJIT_CLI_PATH)));
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(fmt::format("{} entries ok, 0 corrupt", std::size(kFold))));
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(300));
}

TEST(RemoteOutage, RedisKilledOrPausedMidRunCostsNothingButOneWarning) {
  REQUIRE_REDIS();
  TempDir tmp(kTmpPrefix);
  const std::string m = manifest(tmp.path());
  for (const char* how : {"kill", "pause"}) {
    SCOPED_TRACE(how);
    PrivateRedis redis;
    const std::string dir = tmp.path() + "/" + how;
    // The run starts against a live server, which dies (or hangs) after the first compile.
    const std::string cmdline = fmt::format(
        "LKJIT_LOG=1 LKJIT_REMOTE_CACHE_TIMEOUT_MS=200 LKJIT_CACHE_DIR={} LKJIT_REMOTE_CACHE={} {} prewarm -j 1 --arch sm_90 "
        "--progress never --manifest {} > {}.out 2>&1", dir, redis.url(), shell_quote(LKJIT_CLI_PATH), m, dir);
    const pid_t run = ::fork();
    if (run == 0) {
      ::execl("/bin/sh", "sh", "-c", cmdline.c_str(), nullptr);
      ::_exit(127);
    }
    const auto t0 = Clock::now();
    while (count_lines(read_file(dir + ".out"), "compiled lkjit_") == 0 && Clock::now() - t0 < std::chrono::seconds(60))
      std::this_thread::sleep_for(milliseconds(20));
    if (std::string(how) == "kill") redis.kill();
    else redis.signal(SIGSTOP);
    int status = 0;
    ::waitpid(run, &status, 0);
    const std::string out = read_file(dir + ".out");
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    EXPECT_THAT(out, HasSubstr(fmt::format("{} kernels for sm_90 (f32, f16, bf16) into {}: {} compiled", std::size(kFold),
                                           dir, std::size(kFold))));
    EXPECT_EQ(count_lines(out, "lkjit: warning: remote cache " + redis.url()), 1u) << out;
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(60));
    const auto v = run_command(fmt::format("LKJIT_CACHE_DIR={} {} cache verify 2>&1", dir, shell_quote(LKJIT_CLI_PATH)));
    EXPECT_EQ(v.code, 0) << v.output;
  }
}

TEST(RemoteOutage, BadUrlsAndUnreachableHostsWarnNamingTheUrlRedacted) {
  TempDir tmp(kTmpPrefix);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"redis://bob:hunter2@127.0.0.1:1/0", "redis://bob:***@127.0.0.1:1/0: connect to 127.0.0.1:1: Connection refused"},
      {"redis://bob:hunter2@127.0.0.1:99999/0", "port 99999 is out of range"},
      {"ftp://bob:hunter2@host", "unknown scheme"},
  };
  int n = 0;
  for (const auto& [url, warning] : cases) {
    SCOPED_TRACE(url);
    // A fresh cache each time: the tier is set up on the first disk miss.
    const auto r = run_command(fmt::format("LKJIT_CACHE_DIR={}/c{} LKJIT_REMOTE_CACHE={} {} compile --kernel wtconv_fold --k 3 "
                                           "--L 1 --arch sm_90 2>&1", tmp.path(), n++, shell_quote(url), shell_quote(LKJIT_CLI_PATH)));
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit: warning: "), HasSubstr(warning), Not(HasSubstr("hunter2"))));
    EXPECT_EQ(count_lines(r.output, "lkjit: warning: "), 1u) << r.output;
  }
}

// ---- the CLI ---------------------------------------------------------------------------------------

TEST_F(RemoteStoreTest, PushPullStatLsVerifyAndTheManifestRecorder) {
  TempDir tmp(kTmpPrefix);
  auto cli = [&](const std::string& node, const std::string& args, const std::string& env = "") {
    return run_command(fmt::format("LKJIT_CACHE_DIR={}/{} LKJIT_REMOTE_CACHE={} LKJIT_TUNING_DB={}/{}.json {} {} {} 2>&1",
                                   tmp.path(), node, test_redis(), tmp.path(), node, env, shell_quote(LKJIT_CLI_PATH), args));
  };
  // A run that records its kernels, without the remote tier; its manifest prewarms the same kernels.
  const std::string rec = tmp.path() + "/used.json";
  auto r = run_command(fmt::format("LKJIT_CACHE_DIR={}/a LKJIT_RECORD_MANIFEST={} {} compile --kernel wtconv_fold --k 3 --L 1 "
                                   "--arch sm_90 2>&1", tmp.path(), rec, shell_quote(LKJIT_CLI_PATH)));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(read_file(rec), AllOf(HasSubstr("\"sm_90\""), HasSubstr("\"lkjit_wtconv_fold_k3_L1_w256_sm90\"")));
  r = cli("a", "prewarm --progress never --list --manifest " + rec);
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm90"), HasSubstr("\n1 kernel\n")));
  // push: node a's entry (and its tuning decisions) to Redis; pull: into node b.
  fs::copy_file(std::string(LKJIT_SOURCE_DIR) + "/tests/data/tuning_db_v1.json", tmp.path() + "/a.json");
  r = cli("a", "cache push --decisions");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("push: 1 entry written to the remote cache, 0 already there"));
  r = cli("a", "cache push");
  EXPECT_THAT(r.output, HasSubstr("push: 0 entries written to the remote cache, 1 already there"));
  r = cli("b", "cache pull --decisions");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("pull: 1 entry written here"));
  EXPECT_EQ(TuningDb::load(tmp.path() + "/b.json").records(), TuningDb::load(tmp.path() + "/a.json").records());
  r = cli("b", "cache verify");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("1 entry ok"), HasSubstr("1 remote entry ok, 0 refused")));
  r = cli("b", "cache stat");
  EXPECT_THAT(r.output, AllOf(HasSubstr("remote     " + test_redis() + " (write all"), HasSubstr("entries 1,")));
  r = cli("b", "cache ls");
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm90"), HasSubstr("1 remote entry\n")));
  // A planted remote value: verify names it, removes it and exits 5.
  cmd(*admin_, {"SET", std::string(RemoteStore::kPrefix) + "entry:" + std::string(64, 'e'), "LKJIT-REMOTE 1 3 - -\nabc"});
  r = cli("b", "cache verify");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("remote refused: " + std::string(64, 'e')), HasSubstr("(1 removed)")));
  EXPECT_EQ(cmd(*admin_, {"EXISTS", std::string(RemoteStore::kPrefix) + "entry:" + std::string(64, 'e')}).integer, 0);
  // Unreachable: stat says so, push fails with 5, and nothing hangs.
  r = run_command(fmt::format("LKJIT_CACHE_DIR={}/a LKJIT_REMOTE_CACHE=redis://127.0.0.1:1/0 {} cache push 2>&1", tmp.path(),
                              shell_quote(LKJIT_CLI_PATH)));
  EXPECT_EQ(r.code, 5) << r.output;
}

}  // namespace
