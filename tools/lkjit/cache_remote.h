// `lkjit cache`'s remote tier (tools/lkjit/cache_remote.cpp): each prints nothing without LKJIT_REMOTE_CACHE.
#pragma once
#include <string>

namespace lkjit {
class KernelCache;
}

namespace lkjit::tool {

void remote_stat();
void remote_ls();
int remote_verify();  // exit code for the remote part: 5 when some entry was refused
void remote_explain(const std::string& key);
// push: disk -> Redis; pull: Redis -> disk; decisions: the tuning database's decisions too.
int remote_transfer(const KernelCache& c, bool push, bool decisions);

}  // namespace lkjit::tool
