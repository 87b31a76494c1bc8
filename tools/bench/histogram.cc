#include "tools/bench/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace siphon::bench {

// Group 0 holds values [0, kSub) exactly. Group g >= 1 holds
// [kSub << (g-1), kSub << g) in kSub steps of 2^(g-1).
unsigned Histogram::index_of(std::uint64_t v) noexcept {
  if (v < kSub) return static_cast<unsigned>(v);
  const unsigned msb = 63u - static_cast<unsigned>(std::countl_zero(v));  // >= kSubBits
  const unsigned group = msb - kSubBits + 1;
  const unsigned shift = group - 1;
  const unsigned sub = static_cast<unsigned>((v >> shift) - kSub);  // [0, kSub)
  return group * kSub + sub;
}

std::uint64_t Histogram::bucket_low(unsigned idx) noexcept {
  const unsigned group = idx / kSub, sub = idx % kSub;
  if (group == 0) return sub;
  return (static_cast<std::uint64_t>(kSub) + sub) << (group - 1);
}

std::uint64_t Histogram::bucket_high(unsigned idx) noexcept {
  const unsigned group = idx / kSub;
  if (group == 0) return bucket_low(idx);
  return bucket_low(idx) + ((std::uint64_t{1} << (group - 1)) - 1);
}

void Histogram::record(std::uint64_t v) noexcept {
  ++counts_[index_of(v)];
  ++count_;
  sum_ += v;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
}

void Histogram::merge(const Histogram& o) noexcept {
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
  count_ += o.count_;
  sum_ += o.sum_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
}

void Histogram::reset() noexcept { *this = Histogram(); }

std::uint64_t Histogram::percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  auto rank = static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<std::uint64_t>(rank, 1, count_);
  std::uint64_t seen = 0;
  for (unsigned i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const std::uint64_t lo = bucket_low(i), hi = bucket_high(i);
      return std::clamp(lo + (hi - lo) / 2, min_, max_);
    }
  }
  return max_;
}

std::vector<Histogram::Bucket> Histogram::buckets() const {
  std::vector<Bucket> out;
  for (unsigned i = 0; i < counts_.size(); ++i)
    if (counts_[i] != 0) out.push_back({bucket_low(i), bucket_high(i), counts_[i]});
  return out;
}

}  // namespace siphon::bench
