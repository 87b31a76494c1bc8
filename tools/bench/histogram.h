// Latency histogram with bounded relative error (log-linear buckets, in the
// manner of HdrHistogram). Values are nanoseconds. Each power of two is split
// into 2^kSubBits linear sub-buckets, so any recorded value v is reported as a
// value within v * 2^-kSubBits of it: the relative error of every percentile
// is at most 1/128 = 0.78%. Fixed size (no allocation while recording), so
// it can sit on the measurement path; merge() combines per-thread histograms.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace siphon::bench {

class Histogram {
 public:
  static constexpr unsigned kSubBits = 7;
  static constexpr unsigned kSub = 1u << kSubBits;       // 128 sub-buckets
  static constexpr unsigned kGroups = 64 - kSubBits + 1;  // covers all of uint64
  static constexpr double kRelativeError = 1.0 / kSub;

  void record(std::uint64_t v) noexcept;
  void merge(const Histogram& o) noexcept;
  void reset() noexcept;

  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t min() const noexcept { return count_ ? min_ : 0; }
  std::uint64_t max() const noexcept { return max_; }
  double mean() const noexcept { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0; }
  // The value at percentile p (0 < p <= 100): the midpoint of the bucket that
  // holds the ceil(p% * count)-th smallest value, clamped to [min, max].
  std::uint64_t percentile(double p) const noexcept;

  struct Bucket {
    std::uint64_t low;    // inclusive
    std::uint64_t high;   // inclusive
    std::uint64_t count;
  };
  // The non-empty buckets in increasing order.
  std::vector<Bucket> buckets() const;

  static unsigned index_of(std::uint64_t v) noexcept;
  static std::uint64_t bucket_low(unsigned idx) noexcept;
  static std::uint64_t bucket_high(unsigned idx) noexcept;

 private:
  std::array<std::uint64_t, kGroups * kSub> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
};

}  // namespace siphon::bench
