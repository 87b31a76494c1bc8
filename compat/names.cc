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

// The optimal-string-alignment distance, or limit + 1 as soon as it is known
// to exceed `limit` (only a band of width 2 * limit + 1 is computed).
std::size_t bounded_distance(std::string_view a, std::string_view b, std::size_t limit) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  if ((n > m ? n - m : m - n) > limit) return limit + 1;
  const std::size_t inf = limit + 1;
  std::vector<std::size_t> prev2(m + 1, inf), prev(m + 1, inf), cur(m + 1, inf);
  for (std::size_t j = 0; j <= std::min(m, limit); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    std::fill(cur.begin(), cur.end(), inf);
    const std::size_t lo = i > limit ? i - limit : 0;
    const std::size_t hi = std::min(m, i + limit);
    if (lo == 0) cur[0] = i;
    std::size_t row_min = lo == 0 ? cur[0] : inf;
    for (std::size_t j = std::max<std::size_t>(lo, 1); j <= hi; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t v = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) v = std::min(v, prev2[j - 2] + 1);
      cur[j] = std::min(v, inf);
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > limit) return inf;
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return std::min(prev[m], inf);
}

}  // namespace

bool is_ceph_option(std::string_view name) {
  const auto& v = ceph_names();
  return std::binary_search(v.begin(), v.end(), name);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  return bounded_distance(a, b, std::max(a.size(), b.size()));
}

std::optional<std::string> suggest_option(std::string_view name) {
  const std::size_t limit = std::clamp<std::size_t>(name.size() / 4, 1, 3);
  std::size_t best = limit + 1;
  std::string best_name;
  for (const auto& s : all_options()) {
    if (best == 0) break;
    const std::size_t d = bounded_distance(name, s.name, best - 1);
    if (d < best) best = d, best_name = std::string(s.name);
  }
  for (const auto& c : ceph_names()) {
    if (best == 0) break;
    const std::size_t d = bounded_distance(name, c, best - 1);
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
