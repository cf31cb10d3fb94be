#include "cache/remote_store.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>

#include "cache/signing.h"
#include "support/parse_int.h"

namespace lkjit::cache {
namespace {

constexpr const char* kValueMagic = "LKJIT-REMOTE 1 ";
constexpr size_t kMaxValueHead = 300;  // magic, size, key id, signature, spaces

// Compare-and-renew and compare-and-delete: only the holder's token touches its lease.
constexpr const char* kRenewScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr const char* kReleaseScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

std::string context_for(const std::string& redis_key) {
  // "remote-entry <key>" for entries, "remote-decision <key>" for decisions: the value is bound to its key.
  const bool decision = redis_key.find(":decision:") != std::string::npos;
  return std::string(decision ? "remote-decision " : "remote-entry ") + redis_key;
}

bool hex_digits(std::string_view s, size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::optional<RemoteValueHead> parse_value_head(std::string_view value, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<RemoteValueHead> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (value.empty()) return fail("empty value");
  const size_t nl = value.find('\n');
  if (nl == std::string_view::npos || nl > kMaxValueHead)
    return fail(fmt::format("value of {} bytes has no header line", value.size()));
  const std::string_view magic = kValueMagic;
  if (value.substr(0, magic.size()) != magic)
    return fail(fmt::format("value does not start with '{}' ('{}')", kValueMagic, escape_bytes(value.substr(0, 16))));
  const std::string_view head = value.substr(0, nl), fields = head.substr(magic.size());
  auto malformed = [&] { return fail(fmt::format("malformed value header '{}'", escape_bytes(head.substr(0, 80)))); };
  const size_t s1 = fields.find(' '), s2 = s1 == std::string_view::npos ? s1 : fields.find(' ', s1 + 1);
  if (s2 == std::string_view::npos) return malformed();
  const std::string_view size_text = fields.substr(0, s1), id = fields.substr(s1 + 1, s2 - s1 - 1), sig = fields.substr(s2 + 1);
  const bool unsigned_value = id == "-" && sig == "-";
  if (!unsigned_value && (!hex_digits(id, kKeyIdHexDigits) || !hex_digits(sig, 2 * kSignatureBytes))) return malformed();
  const support::IntParse n = support::parse_decimal(size_text, 0, std::numeric_limits<int64_t>::max());
  if (n.status != support::IntStatus::kOk)
    return fail(fmt::format("value header declares '{}' bytes of entry; supported: a decimal byte count",
                            escape_bytes(size_text.substr(0, 24))));
  RemoteValueHead h;
  h.entry_bytes = static_cast<uint64_t>(n.value);
  if (!unsigned_value) {
    h.key_id = std::string(id);
    h.signature_hex = std::string(sig);
  }
  h.body_at = nl + 1;
  return h;
}

bool Breaker::allow() {
  if (!open_.load()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now < retry_at_) return false;
  retry_at_ = now + retry_;  // one caller probes; the others stay local until it says otherwise
  return true;
}

void Breaker::failure(const std::string& why) {
  failures_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  const bool was_open = open_.exchange(true);
  retry_at_ = std::chrono::steady_clock::now() + retry_;
  const std::string line = fmt::format("remote cache {}: {}; using the local cache only, retrying every {} s", url_, why,
                                       retry_.count());
  if (!warned_) {
    warned_ = true;
    if (log_.warn) log_.warn(line);
  } else if (!was_open && log_.log) {
    log_.log("warning: " + line);
  }
}

void Breaker::success() {
  if (!open_.load()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (open_.exchange(false) && log_.log) log_.log(fmt::format("remote cache {} is reachable again", url_));
}

std::string make_lease_token() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::random_device rd;
  const uint64_t r = (uint64_t(rd()) << 32) ^ rd();
  return fmt::format("{}:{}:{:016x}", host, ::getpid(), r);
}

RemoteStore::RemoteStore(RedisEndpoint ep, RemoteOptions opts, std::shared_ptr<Breaker> breaker,
                         std::shared_ptr<const Signer> signer, std::shared_ptr<const TrustedKeys> trusted)
    : ep_(std::move(ep)), opts_(opts), breaker_(std::move(breaker)), signer_(std::move(signer)), trusted_(std::move(trusted)) {}

RedisClient* RemoteStore::client(std::string* why) {
  if (conn_ && !conn_->broken()) return conn_.get();
  conn_.reset();
  conn_ = RedisClient::connect(ep_, opts_.timeout_ms, opts_.timeout_ms, why);
  return conn_.get();
}

std::optional<RedisReply> RemoteStore::run(const std::vector<std::string_view>& argv, std::string* why) {
  std::string w;
  if (!breaker_->allow()) {
    if (why) *why = "unavailable (recent failure)";
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mu_);
  RedisClient* c = client(&w);
  std::optional<RedisReply> r;
  if (c) r = c->command(argv, &w);
  if (!r) {
    conn_.reset();
    breaker_->failure(w);
  } else if (r->kind == RedisReply::Kind::kError) {
    // Refusing (OOM under maxmemory noeviction, NOAUTH, READONLY replica): the tier is unusable as well.
    w = std::string(argv.empty() ? "" : argv[0]) + ": " + r->str.substr(0, 200);
    breaker_->failure(w);
    r.reset();
  } else {
    breaker_->success();
  }
  if (!r && why) *why = w;
  return r;
}

std::optional<RedisReply> RemoteStore::raw(const std::vector<std::string_view>& argv, std::string* why) {
  return run(argv, why);
}

std::string RemoteStore::encode_value(const std::string& redis_key, const std::string& entry_bytes) const {
  std::string id = "-", sig = "-";
  if (signer_) {
    id = signer_->key_id();
    sig = to_hex(signer_->sign(context_for(redis_key), entry_bytes));
  }
  return fmt::format("{}{} {} {}\n", kValueMagic, entry_bytes.size(), id, sig) + entry_bytes;
}

std::optional<std::string> RemoteStore::decode_value(const std::string& redis_key, const std::string& value,
                                                     std::string* signer, std::string* why) const {
  auto fail = [&](const std::string& w) -> std::optional<std::string> {
    if (why) *why = w;
    return std::nullopt;
  };
  const auto head = parse_value_head(value, why);
  if (!head) return std::nullopt;
  const uint64_t have = value.size() - head->body_at;
  if (head->entry_bytes != have)
    return fail(fmt::format("value header declares {} bytes of entry; the value holds {}", head->entry_bytes, have));
  std::string entry = value.substr(head->body_at);
  const std::string& key_id = head->key_id;
  if (signer) *signer = key_id;
  if (trusted_ && !trusted_->empty()) {
    if (key_id.empty()) return fail("unsigned, and LKJIT_CACHE_TRUSTED_KEYS is set");
    std::string raw_sig;
    if (!from_hex(head->signature_hex, &raw_sig)) return fail("malformed signature fields");
    const Verdict v = trusted_->verify(context_for(redis_key), entry, raw_sig, key_id);
    if (!v.ok) return fail(v.reason);
  }
  return entry;
}

RemoteStore::Fetch RemoteStore::get_entry(const Lookup& want) {
  Fetch f;
  const std::string rkey = entry_key(want.key);
  std::string why;
  // Bounded read: a value larger than the limit is refused without being transferred whole.
  const auto r = run({"GETRANGE", rkey, "0", std::to_string(opts_.max_value_bytes)}, &why);
  if (!r) {
    f.unavailable = true;
    return f;
  }
  // GETRANGE answers "" for a missing key and for an empty value: EXISTS tells them apart (rare: misses
  // are the common case only on a cold tier).
  if (r->kind != RedisReply::Kind::kString) {
    f.refused = "unexpected reply type";
  } else if (r->str.empty()) {
    const auto exists = run({"EXISTS", rkey}, &why);
    if (!exists) {
      f.unavailable = true;
      return f;
    }
    if (exists->integer != 1) return f;  // a miss
    f.refused = "empty value (0 bytes)";
  } else {
    f.value_bytes = r->str.size();
    if (r->str.size() > opts_.max_value_bytes) {
      f.refused = fmt::format("value is over {} bytes", opts_.max_value_bytes);
    } else if (const auto entry = decode_value(rkey, r->str, nullptr, &f.refused)) {
      auto e = decode_entry(*entry, want.key, &f.refused);
      if (e) {
        const std::string p = want.kernel_name.empty() ? entry_problem(*e) : entry_problem(*e, want);
        if (p.empty()) f.entry = std::move(e);
        else f.refused = p;
      }
    }
  }
  if (!f.entry) {
    count_refusal(Source::kRemote);
    count("refused");
  }
  return f;
}

bool RemoteStore::put_entry(const EntryMeta& meta, const std::string& payload) {
  if (!writes_kernels()) return false;
  const std::string rkey = entry_key(meta.key);
  const std::string value = encode_value(rkey, encode_entry(meta, payload));
  std::string why;
  std::optional<RedisReply> r;
  if (opts_.ttl_s > 0) r = run({"SET", rkey, value, "EX", std::to_string(opts_.ttl_s)}, &why);
  else r = run({"SET", rkey, value}, &why);
  if (r) count("stored");
  return r.has_value();
}

void RemoteStore::touch_entry(const std::string& key) {
  if (!writes_kernels() || opts_.ttl_s <= 0) return;
  std::string why;
  run({"EXPIRE", entry_key(key), std::to_string(opts_.ttl_s)}, &why);
}

bool RemoteStore::remove_entry(const std::string& key) {
  if (!writes_kernels()) return false;
  std::string why;
  return run({"DEL", entry_key(key)}, &why).has_value();
}

RemoteStore::LeaseState RemoteStore::try_lease(const std::string& name, const std::string& token) {
  if (!writes_kernels()) return lease_held(name) ? LeaseState::kHeld : LeaseState::kUnavailable;
  std::string why;
  const auto r = run({"SET", lease_key(name), token, "NX", "PX", std::to_string(opts_.lease_ms)}, &why);
  if (!r) return LeaseState::kUnavailable;
  return r->kind == RedisReply::Kind::kStatus ? LeaseState::kOwned : LeaseState::kHeld;  // nil: someone has it
}

bool RemoteStore::renew_lease(const std::string& name, const std::string& token) {
  std::string why;
  const auto r = run({"EVAL", kRenewScript, "1", lease_key(name), token, std::to_string(opts_.lease_ms)}, &why);
  return r && r->integer == 1;
}

void RemoteStore::release_lease(const std::string& name, const std::string& token) {
  std::string why;
  run({"EVAL", kReleaseScript, "1", lease_key(name), token}, &why);
}

bool RemoteStore::lease_held(const std::string& name) {
  std::string why;
  const auto r = run({"EXISTS", lease_key(name)}, &why);
  return r && r->integer == 1;
}

std::optional<std::string> RemoteStore::get_decision(const std::string& db_key, std::string* refused) {
  const std::string rkey = decision_key(db_key);
  std::string why;
  const auto r = run({"GETRANGE", rkey, "0", std::to_string(1 << 20)}, &why);
  if (!r || r->kind != RedisReply::Kind::kString || r->str.empty()) return std::nullopt;
  std::string w;
  auto text = decode_value(rkey, r->str, nullptr, &w);
  if (!text) {
    count_refusal(Source::kRemote);
    if (refused) *refused = w;
  }
  return text;
}

bool RemoteStore::put_decision(const std::string& db_key, const std::string& text) {
  if (opts_.write != RemoteWrite::kAll) return false;
  const std::string rkey = decision_key(db_key);
  std::string why;
  return run({"SET", rkey, encode_value(rkey, text)}, &why).has_value();
}

void RemoteStore::count(const char* field) {
  if (!writes_kernels()) return;
  std::string why;
  run({"HINCRBY", std::string(kPrefix) + "stats", field, "1"}, &why);
}

std::vector<std::string> RemoteStore::scan(const std::string& kind, size_t limit, bool* truncated) {
  std::vector<std::string> keys;
  std::string cursor = "0", why;
  const std::string pattern = std::string(kPrefix) + kind + ":*";
  // Bounded in rounds as well as in keys: SCAN may return few keys per round on a large database.
  for (int round = 0; round < 100000; ++round) {
    const auto r = run({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, &why);
    if (!r || r->kind != RedisReply::Kind::kArray || r->elements.size() != 2) break;
    cursor = r->elements[0].str;
    for (const auto& k : r->elements[1].elements) {
      if (keys.size() >= limit) {
        if (truncated) *truncated = true;
        return keys;
      }
      keys.push_back(k.str.substr(pattern.size() - 1));
    }
    if (cursor == "0") break;
  }
  if (truncated) *truncated = false;
  return keys;
}

}  // namespace lkjit::cache
