// The embedded headers one kernel's translation unit reaches through #include "...": what NVRTC is given
// and what its cache key hashes, so that adding or editing another family's templates leaves the key alone.
#include <fmt/format.h>

#include <mutex>
#include <set>

#include "generator/family.h"
#include "lkjit/error.h"

namespace lkjit::gen {
namespace {

// The quoted includes of one header's text, in order. Only `#include "name"` lines count: templates use
// no system headers (NVRTC gets every header it needs from the table).
std::vector<std::string> quoted_includes(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    size_t i = text.find_first_not_of(" \t", pos);
    if (i < end && text[i] == '#') {
      i = text.find_first_not_of(" \t", i + 1);
      if (i < end && text.compare(i, 7, "include") == 0) {
        const size_t q = text.find('"', i + 7), q2 = q < end ? text.find('"', q + 1) : std::string::npos;
        if (q < end && q2 < end) out.push_back(text.substr(q + 1, q2 - q - 1));
      }
    }
    pos = end + 1;
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> include_closure(const std::map<std::string, std::string>& table,
                                                   const std::string& root) {
  std::map<std::string, std::string> out;
  std::vector<std::string> todo{root};
  while (!todo.empty()) {
    const std::string name = todo.back();
    todo.pop_back();
    if (out.count(name)) continue;
    const auto it = table.find(name);
    if (it == table.end())
      throw SpecError(fmt::format("lkjit: error: generator: template '{}' is not embedded (included from the "
                                  "closure of '{}')", name, root));
    out.emplace(name, it->second);
    for (auto& inc : quoted_includes(it->second)) todo.push_back(std::move(inc));
  }
  return out;
}

const std::map<std::string, std::string>& kernel_headers(const std::string& template_header) {
  static std::mutex mu;
  static std::map<std::string, std::map<std::string, std::string>> closures;  // node addresses are stable
  std::lock_guard<std::mutex> lock(mu);
  auto it = closures.find(template_header);
  if (it == closures.end())
    it = closures.emplace(template_header, include_closure(embedded_template_table(), template_header)).first;
  return it->second;
}

}  // namespace lkjit::gen
