#include <gtest/gtest.h>

#include <map>

#include "tools/bench/workload.h"

namespace siphon::bench {
namespace {

TEST(ParseSize, SuffixesAndErrors) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("4K"), 4096u);
  EXPECT_EQ(parse_size("4k"), 4096u);
  EXPECT_EQ(parse_size("64KiB"), 65536u);
  EXPECT_EQ(parse_size("1M"), 1u << 20);
  EXPECT_EQ(parse_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_size(" 0 "), 0u);
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("K"));
  EXPECT_FALSE(parse_size("4X"));
  EXPECT_FALSE(parse_size("-1"));
  EXPECT_FALSE(parse_size("99999999999999999999"));
  EXPECT_FALSE(parse_size("17179869184G")) << "overflow";
  EXPECT_EQ(format_size(4096), "4K");
  EXPECT_EQ(format_size(1500), "1500");
}

TEST(SizeDist, FixedRangeAndWeighted) {
  std::mt19937_64 rng(1);
  auto fixed = SizeDist::parse("4K");
  ASSERT_TRUE(fixed);
  EXPECT_EQ(fixed->sample(rng), 4096u);

  auto range = SizeDist::parse("1K-2K");
  ASSERT_TRUE(range);
  for (int i = 0; i < 1000; ++i) {
    const auto v = range->sample(rng);
    ASSERT_GE(v, 1024u);
    ASSERT_LE(v, 2048u);
  }

  auto mix = SizeDist::parse("4K:70,64K:20,4M:10");
  ASSERT_TRUE(mix);
  EXPECT_EQ(mix->max(), 4u << 20);
  EXPECT_EQ(mix->describe(), "4K:70,64K:20,4M:10");
  std::map<std::uint64_t, int> seen;
  for (int i = 0; i < 100000; ++i) seen[mix->sample(rng)]++;
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_NEAR(seen[4096] / 100000.0, 0.70, 0.01);
  EXPECT_NEAR(seen[65536] / 100000.0, 0.20, 0.01);
  EXPECT_NEAR(seen[4u << 20] / 100000.0, 0.10, 0.01);
}

TEST(SizeDist, ErrorsNameTheProblem) {
  std::string err;
  EXPECT_FALSE(SizeDist::parse("4K:0", &err));
  EXPECT_NE(err.find("weight"), std::string::npos);
  EXPECT_FALSE(SizeDist::parse("2K-1K", &err));
  EXPECT_NE(err.find("empty range"), std::string::npos);
  EXPECT_FALSE(SizeDist::parse("lots", &err));
  EXPECT_NE(err.find("bad size"), std::string::npos);
  EXPECT_FALSE(SizeDist::parse("", &err));
}

}  // namespace
}  // namespace siphon::bench
