#include "tools/bench/workload.h"

#include <algorithm>
#include <charconv>
#include <cctype>

namespace siphon::bench {

std::optional<std::uint64_t> parse_size(std::string_view t) {
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end == t.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<std::size_t>(t.data() + t.size() - end));
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix.front()))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'B': shift = 0; break;
      default: return std::nullopt;
    }
    suffix.remove_prefix(1);
    if (suffix == "iB" || suffix == "ib" || suffix == "B" || suffix == "b") suffix = {};
    if (!suffix.empty()) return std::nullopt;
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

std::string format_size(std::uint64_t b) {
  if (b != 0 && b % (1ull << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b != 0 && b % (1ull << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b != 0 && b % (1ull << 10) == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

SizeDist::SizeDist(std::vector<Entry> e) : entries_(std::move(e)) {
  for (const Entry& x : entries_) total_weight_ += x.weight;
}

std::optional<SizeDist> SizeDist::parse(std::string_view spec, std::string* error) {
  auto fail = [&](std::string msg) -> std::optional<SizeDist> {
    if (error != nullptr) *error = std::move(msg);
    return std::nullopt;
  };
  std::vector<Entry> entries;
  while (!spec.empty()) {
    const auto comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    std::uint64_t weight = 1;
    const auto colon = item.find(':');
    if (colon != std::string_view::npos) {
      const std::string_view w = item.substr(colon + 1);
      const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), weight);
      if (ec != std::errc() || end != w.data() + w.size() || weight == 0)
        return fail("bad weight '" + std::string(w) + "' (a positive integer)");
      item = item.substr(0, colon);
    }
    const auto dash = item.find('-');
    const auto lo = parse_size(item.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : parse_size(item.substr(dash + 1));
    if (!lo || !hi) return fail("bad size '" + std::string(item) + "' (e.g. 4K, 1M, 1K-64K)");
    if (*hi < *lo) return fail("empty range '" + std::string(item) + "'");
    entries.push_back({*lo, *hi, weight});
  }
  if (entries.empty()) return fail("empty size distribution");
  return SizeDist(std::move(entries));
}

std::uint64_t SizeDist::sample(std::mt19937_64& rng) const {
  const Entry* e = &entries_.front();
  if (entries_.size() > 1) {
    std::uint64_t r = std::uniform_int_distribution<std::uint64_t>(0, total_weight_ - 1)(rng);
    for (const Entry& x : entries_) {
      if (r < x.weight) {
        e = &x;
        break;
      }
      r -= x.weight;
    }
  }
  if (e->lo == e->hi) return e->lo;
  return std::uniform_int_distribution<std::uint64_t>(e->lo, e->hi)(rng);
}

std::uint64_t SizeDist::min() const noexcept {
  std::uint64_t m = UINT64_MAX;
  for (const Entry& x : entries_) m = std::min(m, x.lo);
  return m;
}

std::uint64_t SizeDist::max() const noexcept {
  std::uint64_t m = 0;
  for (const Entry& x : entries_) m = std::max(m, x.hi);
  return m;
}

std::string SizeDist::describe() const {
  std::string s;
  for (const Entry& x : entries_) {
    if (!s.empty()) s += ',';
    s += format_size(x.lo);
    if (x.hi != x.lo) s += "-" + format_size(x.hi);
    if (entries_.size() > 1) s += ":" + std::to_string(x.weight);
  }
  return s;
}

}  // namespace siphon::bench
