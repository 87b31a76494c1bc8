// Workload parameters of siphon-bench that are pure parsing: byte sizes with
// K/M/G suffixes and message-size distributions.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace siphon::bench {

// "4096", "4K", "4k", "64KiB", "1M", "2G" (binary multiples). nullopt if bad.
std::optional<std::uint64_t> parse_size(std::string_view text);
std::string format_size(std::uint64_t bytes);  // "4K", "1M", "1500"

// A message-size distribution:
//   "4K"                    fixed
//   "1K-64K"                uniform over the closed range
//   "4K:70,64K:20,4M:10"    weighted list (weights are relative)
class SizeDist {
 public:
  static std::optional<SizeDist> parse(std::string_view spec, std::string* error = nullptr);
  static SizeDist fixed(std::uint64_t size) { return SizeDist({{size, size, 1}}); }
  std::uint64_t sample(std::mt19937_64& rng) const;
  std::uint64_t min() const noexcept;
  std::uint64_t max() const noexcept;
  std::string describe() const;

 private:
  struct Entry {
    std::uint64_t lo, hi;  // uniform in [lo, hi]
    std::uint64_t weight;
  };
  explicit SizeDist(std::vector<Entry> e);
  std::vector<Entry> entries_;
  std::uint64_t total_weight_ = 0;
};

}  // namespace siphon::bench
