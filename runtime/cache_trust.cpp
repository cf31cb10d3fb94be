#include "runtime/cache_trust.h"

#include <mutex>
#include <string>
#include <vector>

#include "runtime/env.h"

namespace lkjit::rt {
namespace {

std::vector<std::string> split_paths(const std::string& v) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : v + ",") {
    if (c == ':' || c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

// One loaded value per variable, reloaded when the variable changes (tests set it per case).
template <class T, class Load>
std::shared_ptr<const T> cached(const char* var, Load load) {
  static std::mutex mu;
  static std::string seen;
  static std::shared_ptr<const T> value;
  const std::string now = env(var);
  std::lock_guard<std::mutex> lock(mu);
  if (!value || now != seen) {
    value = load(now);  // throws: nothing cached, the next call tries again
    seen = now;
  }
  return value;
}

}  // namespace

std::shared_ptr<const cache::Signer> cache_signer() {
  if (env("LKJIT_CACHE_SIGNING_KEY").empty()) return nullptr;
  return cached<cache::Signer>("LKJIT_CACHE_SIGNING_KEY", [](const std::string& path) {
    return std::make_shared<const cache::Signer>(cache::Signer::load(path));
  });
}

std::shared_ptr<const cache::TrustedKeys> cache_trusted_keys() {
  return cached<cache::TrustedKeys>("LKJIT_CACHE_TRUSTED_KEYS", [](const std::string& v) {
    if (v.empty()) return std::make_shared<const cache::TrustedKeys>();
    return std::make_shared<const cache::TrustedKeys>(cache::TrustedKeys::load(split_paths(v)));
  });
}

}  // namespace lkjit::rt
