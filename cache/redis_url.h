// Where the cluster tier lives: LKJIT_REMOTE_CACHE's URL, parsed and checked, with the password kept out
// of every message (redacted()).
//   redis://[[user]:password@]host[:port][/db]      TCP; port 6379 and db 0 by default
//   unix:///path/to/redis.sock[?db=N]                a Unix socket
// No TLS: the client is hiredis 0.14 (Debian 12); TLS goes through a local proxy (README).
#pragma once
#include <optional>
#include <string>

namespace lkjit::cache {

struct RedisEndpoint {
  std::string host;       // TCP host name or address (empty for a Unix socket)
  int port = 6379;
  std::string socket;     // Unix socket path (empty for TCP)
  int db = 0;             // SELECT index, [0, 1023]
  std::string user;       // AUTH user (Redis 6 ACL); empty: the default user
  std::string password;   // AUTH password; empty: no AUTH
  std::string redacted;   // the URL as given, with the password replaced by "***"
};

// nullopt with *why naming what is wrong ("redis://h:99999: port 99999 is out of range; supported: [1,
// 65535]"); the message shows the URL redacted.
std::optional<RedisEndpoint> parse_redis_url(const std::string& url, std::string* why);

// The URL with any password replaced by "***" (also for URLs that do not parse).
std::string redact_url(const std::string& url);

}  // namespace lkjit::cache
