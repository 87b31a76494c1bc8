#include "compat/names.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

#include "compat/options.h"
#include "compat/values.h"

namespace siphon::compat {
namespace {

constexpr std::string_view kCephNames =
#include "compat/ceph_option_names.inc"
    ;

const std::vector<std::string_view>& ceph_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    std::size_t pos = 0;
    while (pos < kCephNames.size()) {
      const std::size_t end = std::min(kCephNames.find(' ', pos), kCephNames.size());
      if (end > pos) v.push_back(kCephNames.substr(pos, end - pos));
      pos = end + 1;
    }
    std::sort(v.begin(), v.end());
    return v;
  }();
  return names;
}

bool is_known(std::string_view name) { return find_option(name).has_value() || is_ceph_option(name); }

}  // namespace

bool is_ceph_option(std::string_view name) {
  const auto& v = ceph_names();
  return std::binary_search(v.begin(), v.end(), name);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::optional<std::string> suggest_option(std::string_view name) {
  const std::size_t limit = std::clamp<std::size_t>(name.size() / 4, 1, 3);
  std::size_t best = limit + 1;
  std::string best_name;
  for (const auto& s : all_options()) {
    const std::size_t d = edit_distance(name, s.name);
    if (d < best) best = d, best_name = std::string(s.name);
  }
  for (const auto& c : ceph_names()) {
    if (c.size() + limit < name.size() || name.size() + limit < c.size()) continue;
    const std::size_t d = edit_distance(name, c);
    if (d < best) best = d, best_name = std::string(c);
  }
  if (best > limit) return std::nullopt;
  return best_name;
}

std::string unknown_option_message(std::string_view name) {
  std::string fixed(name);
  std::replace(fixed.begin(), fixed.end(), '-', '_');
  if (fixed != name && is_known(fixed))
    return fmt::format("unknown option '{}': in a file, dashes are not underscores (they are only on "
                       "the command line); write '{}'", name, fixed);
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower != name && is_known(lower))
    return fmt::format("unknown option '{}': option names are case-sensitive; write '{}'", name, lower);
  std::string squeezed;
  for (char c : name)
    if (c != '_' || squeezed.empty() || squeezed.back() != '_') squeezed += c;
  if (squeezed != name && is_known(squeezed))
    return fmt::format("unknown option '{}': a space next to an underscore counts as a second "
                       "underscore; write '{}'", name, squeezed);
  if (const auto s = suggest_option(name))
    return fmt::format("unknown option '{}'; did you mean '{}'?", name, *s);
  return fmt::format("unknown option '{}' (neither Siphon nor Ceph has it)", name);
}

}  // namespace siphon::compat
