#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tools/bench/histogram.h"

namespace siphon::bench {
namespace {

TEST(Histogram, BucketsTileTheRange) {
  // Every value maps into a bucket whose bounds contain it, and buckets are
  // contiguous and increasing.
  for (std::uint64_t v : std::initializer_list<std::uint64_t>{0, 1, 127, 128, 129, 255, 256, 1000, 123456789,
                          (1ull << 40) + 12345, UINT64_MAX}) {
    const unsigned i = Histogram::index_of(v);
    EXPECT_LE(Histogram::bucket_low(i), v) << v;
    EXPECT_GE(Histogram::bucket_high(i), v) << v;
  }
  for (unsigned i = 0; i + 1 < 40 * Histogram::kSub; ++i)
    ASSERT_EQ(Histogram::bucket_high(i) + 1, Histogram::bucket_low(i + 1)) << i;
}

TEST(Histogram, BucketWidthBoundsRelativeError) {
  for (unsigned i = Histogram::kSub; i < 50 * Histogram::kSub; i += 37) {
    const double lo = static_cast<double>(Histogram::bucket_low(i));
    const double width = static_cast<double>(Histogram::bucket_high(i) - Histogram::bucket_low(i) + 1);
    EXPECT_LE(width / lo, Histogram::kRelativeError + 1e-12) << i;
  }
}

// The acceptance check of issue 9: percentiles agree with exact percentiles
// of the raw samples within the stated error, on a synthetic input.
TEST(Histogram, PercentilesMatchExactWithinStatedError) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> lat(std::log(20000.0), 0.8);  // ~20 µs median, long tail
  std::vector<std::uint64_t> raw;
  Histogram h;
  for (int i = 0; i < 200000; ++i) {
    const auto v = static_cast<std::uint64_t>(lat(rng)) + (i % 1000 == 0 ? 5000000 : 0);
    raw.push_back(v);
    h.record(v);
  }
  std::sort(raw.begin(), raw.end());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    const std::size_t rank = static_cast<std::size_t>(std::ceil(p / 100.0 * raw.size()));
    const double exact = static_cast<double>(raw[std::max<std::size_t>(rank, 1) - 1]);
    const double got = static_cast<double>(h.percentile(p));
    EXPECT_LE(std::abs(got - exact) / exact, Histogram::kRelativeError) << "p" << p;
  }
  EXPECT_EQ(h.count(), raw.size());
  EXPECT_EQ(h.max(), raw.back());
  EXPECT_EQ(h.min(), raw.front());
}

TEST(Histogram, MergeEqualsRecordingEverything) {
  Histogram a, b, all;
  for (std::uint64_t v = 1; v < 100000; v += 7) {
    (v % 2 ? a : b).record(v);
    all.record(v);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  for (double p : {10.0, 50.0, 99.0}) EXPECT_EQ(a.percentile(p), all.percentile(p));
  EXPECT_EQ(a.buckets().size(), all.buckets().size());
}

TEST(Histogram, EmptyAndSingle) {
  Histogram h;
  EXPECT_EQ(h.percentile(50), 0u);
  h.record(1000);
  EXPECT_EQ(h.percentile(0.001), 1000u);
  EXPECT_EQ(h.percentile(100), 1000u);
}

}  // namespace
}  // namespace siphon::bench
