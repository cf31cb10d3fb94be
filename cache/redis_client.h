// A blocking Redis connection with millisecond timeouts on connect and on every command (hiredis 0.14,
// redisSetTimeout), AUTH and SELECT from the endpoint. A timed-out or failed connection is marked broken
// and never used again: a reply that arrives late must not answer the next command.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/redis_url.h"

struct redisContext;

namespace lkjit::cache {

struct RedisReply {
  enum class Kind { kNil, kString, kInteger, kStatus, kArray, kError };
  Kind kind = Kind::kNil;
  std::string str;  // string, status or error text
  long long integer = 0;
  std::vector<RedisReply> elements;
};

class RedisClient {
 public:
  // nullptr with *why ("connect to 127.0.0.1:6380: Connection refused", "AUTH: WRONGPASS ...").
  static std::unique_ptr<RedisClient> connect(const RedisEndpoint& ep, int connect_timeout_ms, int command_timeout_ms,
                                              std::string* why);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // nullopt with *why when the connection failed (I/O error, timeout, EOF): the client is broken then.
  // An error reply (-ERR ...) is a reply of kind kError.
  std::optional<RedisReply> command(const std::vector<std::string_view>& argv, std::string* why);
  bool broken() const { return broken_; }

 private:
  RedisClient() = default;
  redisContext* ctx_ = nullptr;
  bool broken_ = false;
  int timeout_ms_ = 0;
};

}  // namespace lkjit::cache
