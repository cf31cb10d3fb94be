// LKJIT_REMOTE_CACHE (cache/redis_url.cpp): redis://[user:password@]host:port/db and unix:///path?db=N from the
// environment. parse_redis_url never throws; what it accepts has a port in [1, 65535] and a db in [0, 1023];
// a URL with a password is shown redacted ("***").
#include "cache/redis_url.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  const std::string url = fuzz::text(data, size);
  std::string why;
  const auto ep = cache::parse_redis_url(url, &why);  // any exception is a finding
  (void)cache::redact_url(url);
  if (!ep) {
    fuzz::require(!why.empty(), "a refused URL says why");
    return 0;
  }
  fuzz::require(ep->db >= 0 && ep->db <= 1023, "db in [0, 1023]");
  fuzz::require(ep->socket.empty() ? ep->port >= 1 && ep->port <= 65535 && !ep->host.empty() : ep->host.empty(),
                "a TCP host with a port in range, or a socket");
  if (!ep->password.empty()) fuzz::require(ep->redacted.find("***") != std::string::npos, "the password is redacted");
  return 0;
}
