#include "cache/redis_url.h"

#include <fmt/format.h>

#include <cctype>

#include "cache/entry.h"
#include "support/parse_int.h"

namespace lkjit::cache {
namespace {

// A decimal integer in [lo, hi] through the one decimal parser (support/parse_int.h): digits only, no sign,
// no base prefix, no spaces.
std::optional<long> decimal(const std::string& s, long lo, long hi) {
  if (!s.empty() && s[0] == '-') return std::nullopt;
  const support::IntParse p = support::parse_decimal(s, lo, hi);
  if (p.status != support::IntStatus::kOk) return std::nullopt;
  return static_cast<long>(p.value);
}

int hex_value(char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; }

// %XX escapes in the user and password (RFC 3986), so that they may hold '@', ':' or '/'.
std::optional<std::string> percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
      return std::nullopt;
    out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
    i += 2;
  }
  return out;
}

}  // namespace

std::string redact_url(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return escape_bytes(url);
  const std::string userinfo = url.substr(scheme + 3, at - scheme - 3);
  const size_t colon = userinfo.find(':');
  const std::string user = colon == std::string::npos ? "" : userinfo.substr(0, colon);
  // "user@" alone could be a password given without a user (redis://secret@host): hidden too.
  return escape_bytes(url.substr(0, scheme + 3) + user + ":***" + url.substr(at));
}

std::optional<RedisEndpoint> parse_redis_url(const std::string& url, std::string* why) {
  RedisEndpoint ep;
  ep.redacted = redact_url(url);
  auto fail = [&](const std::string& w) -> std::optional<RedisEndpoint> {
    if (why) *why = fmt::format("{}: {}; supported: redis://[user:password@]host:port/db or unix:///path/redis.sock",
                                ep.redacted, w);
    return std::nullopt;
  };
  if (url.size() > 4096) return fail(fmt::format("the URL is {} bytes long; at most 4096 are read", url.size()));
  if (url.rfind("unix://", 0) == 0) {
    std::string path = url.substr(7);
    const size_t q = path.find('?');
    if (q != std::string::npos) {
      const std::string query = path.substr(q + 1);
      path.resize(q);
      if (query.rfind("db=", 0) != 0) return fail(fmt::format("query '{}' is not db=N", escape_bytes(query)));
      const auto db = decimal(query.substr(3), 0, 1023);
      if (!db) return fail(fmt::format("db={} is out of range; supported: [0, 1023]", escape_bytes(query.substr(3))));
      ep.db = static_cast<int>(*db);
    }
    if (path.empty() || path[0] != '/') return fail("a Unix socket URL needs an absolute path (unix:///path)");
    ep.socket = path;
    return ep;
  }
  if (url.rfind("redis://", 0) != 0) {
    if (url.rfind("rediss://", 0) == 0) return fail("TLS (rediss://) is not supported by this client; use a local TLS proxy");
    return fail("unknown scheme");
  }
  std::string rest = url.substr(8);
  const size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    const std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = userinfo.find(':');
    const auto user = percent_decode(colon == std::string::npos ? "" : userinfo.substr(0, colon));
    const auto pass = percent_decode(colon == std::string::npos ? userinfo : userinfo.substr(colon + 1));
    if (!user || !pass) return fail("a bad %-escape in the user or password");
    ep.user = *user;
    ep.password = *pass;
  }
  std::string hostport = rest, db;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    db = rest.substr(slash + 1);
  }
  if (!db.empty()) {
    const auto n = decimal(db, 0, 1023);
    if (!n) return fail(fmt::format("db {} is out of range; supported: [0, 1023]", escape_bytes(db)));
    ep.db = static_cast<int>(*n);
  }
  std::string port;
  if (!hostport.empty() && hostport[0] == '[') {  // [::1]:6379
    const size_t close = hostport.find(']');
    if (close == std::string::npos) return fail("an IPv6 address without its closing ']'");
    ep.host = hostport.substr(1, close - 1);
    if (close + 1 < hostport.size()) {
      if (hostport[close + 1] != ':') return fail("junk after the IPv6 address");
      port = hostport.substr(close + 2);
    }
  } else if (const size_t colon = hostport.rfind(':'); colon != std::string::npos) {
    ep.host = hostport.substr(0, colon);
    port = hostport.substr(colon + 1);
  } else {
    ep.host = hostport;
  }
  if (ep.host.empty()) return fail("no host");
  for (char c : ep.host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_'))
      return fail(fmt::format("host '{}' is not a host name or address", escape_bytes(ep.host)));
  if (!port.empty()) {
    const auto n = decimal(port, 1, 65535);
    if (!n) return fail(fmt::format("port {} is out of range; supported: [1, 65535]", escape_bytes(port)));
    ep.port = static_cast<int>(*n);
  }
  return ep;
}

}  // namespace lkjit::cache
