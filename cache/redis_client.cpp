#include "cache/redis_client.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <sys/time.h>

namespace lkjit::cache {
namespace {

timeval to_timeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

RedisReply convert(const redisReply* r, int depth = 0) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.kind = RedisReply::Kind::kString; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_STATUS: out.kind = RedisReply::Kind::kStatus; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_ERROR: out.kind = RedisReply::Kind::kError; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_INTEGER: out.kind = RedisReply::Kind::kInteger; out.integer = r->integer; break;
    case REDIS_REPLY_ARRAY:
      out.kind = RedisReply::Kind::kArray;
      if (depth < 4)  // SCAN nests two levels; anything deeper is not ours
        for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i], depth + 1));
      break;
    default: out.kind = RedisReply::Kind::kNil; break;
  }
  return out;
}

std::string where(const RedisEndpoint& ep) {
  return ep.socket.empty() ? fmt::format("{}:{}", ep.host, ep.port) : ep.socket;
}

}  // namespace

std::unique_ptr<RedisClient> RedisClient::connect(const RedisEndpoint& ep, int connect_timeout_ms,
                                                  int command_timeout_ms, std::string* why) {
  std::unique_ptr<RedisClient> c(new RedisClient());
  c->timeout_ms_ = command_timeout_ms;
  const timeval ctv = to_timeval(connect_timeout_ms);
  c->ctx_ = ep.socket.empty() ? redisConnectWithTimeout(ep.host.c_str(), ep.port, ctv)
                              : redisConnectUnixWithTimeout(ep.socket.c_str(), ctv);
  if (!c->ctx_ || c->ctx_->err) {
    if (why) *why = fmt::format("connect to {}: {}", where(ep), c->ctx_ ? c->ctx_->errstr : "out of memory");
    return nullptr;
  }
  if (redisSetTimeout(c->ctx_, to_timeval(command_timeout_ms)) != REDIS_OK) {
    if (why) *why = fmt::format("connect to {}: cannot set the command timeout", where(ep));
    return nullptr;
  }
  std::string w;
  auto checked = [&](const std::vector<std::string_view>& argv, const char* what) {
    const auto r = c->command(argv, &w);
    if (!r || r->kind == RedisReply::Kind::kError) {
      if (why) *why = fmt::format("{} on {}: {}", what, where(ep), r ? r->str : w);
      return false;
    }
    return true;
  };
  if (!ep.password.empty()) {
    const bool ok = ep.user.empty() ? checked({"AUTH", ep.password}, "AUTH") : checked({"AUTH", ep.user, ep.password}, "AUTH");
    if (!ok) return nullptr;
  }
  if (ep.db != 0 && !checked({"SELECT", std::to_string(ep.db)}, "SELECT")) return nullptr;
  return c;
}

RedisClient::~RedisClient() {
  if (ctx_) redisFree(ctx_);
}

std::optional<RedisReply> RedisClient::command(const std::vector<std::string_view>& argv, std::string* why) {
  if (broken_ || !ctx_) {
    if (why) *why = "the connection is broken";
    return std::nullopt;
  }
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
  if (!r) {
    broken_ = true;
    // hiredis reports a command timeout as EAGAIN's message.
    const std::string err = ctx_->errstr;
    if (why)
      *why = err.find("temporarily unavailable") != std::string::npos ? fmt::format("no reply within {} ms", timeout_ms_)
             : err.empty()                                          ? "no reply"
                                                                    : err;
    return std::nullopt;
  }
  RedisReply out = convert(r);
  freeReplyObject(r);
  return out;
}

}  // namespace lkjit::cache
