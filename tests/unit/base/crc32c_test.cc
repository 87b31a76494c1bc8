// Vectors from reference/msgr2-wire.md §2 (Ceph's own unit test, plus the
// standard CRC-32C check value).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/base/crc32c.h"

namespace siphon {
namespace {

std::uint32_t crc(std::uint32_t seed, std::string_view s) { return crc32c(seed, s.data(), s.size()); }

TEST(Crc32c, CephVectors) {
  EXPECT_EQ(crc(0, "foo bar baz"), 4119623852u);
  EXPECT_EQ(crc(0, "foo bar baz"), 0xF58C78ACu);
  EXPECT_EQ(crc(1234, "foo bar baz"), 881700046u);
  EXPECT_EQ(crc(0, "whiz bang boom"), 2360230088u);
  EXPECT_EQ(crc(5678, "whiz bang boom"), 3743019208u);
  EXPECT_EQ(crc(0xFFFFFFFFu, "123456789"), 0x1CF96D7Cu);
  EXPECT_EQ(crc(0, "123456789"), 0x58E3FA20u);
  EXPECT_EQ(crc(0xFFFFFFFFu, ""), 0xFFFFFFFFu);
  const std::string zeros(32, '\0');
  EXPECT_EQ(crc(0xFFFFFFFFu, zeros), 0x756EC955u);
  EXPECT_EQ(crc32c_zeros(0xFFFFFFFFu, 32), 0x756EC955u);
}

TEST(Crc32c, RelationToStandardCrc) {
  // ceph_crc32c(0xFFFFFFFF, d) == ~std_crc32c(d); the standard check value of
  // "123456789" is 0xE3069283.
  EXPECT_EQ(~crc(0xFFFFFFFFu, "123456789"), 0xE3069283u);
}

TEST(Crc32c, ChainingEqualsWhole) {
  std::string data(100000, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  const std::uint32_t whole = crc(0xFFFFFFFFu, data);
  for (std::size_t split : {0ul, 1ul, 63ul, 4096ul, 99999ul}) {
    const std::uint32_t a = crc(0xFFFFFFFFu, std::string_view(data).substr(0, split));
    EXPECT_EQ(crc(a, std::string_view(data).substr(split)), whole) << split;
  }
  // A buffer list spread over many segments gives the same CRC.
  BufferList bl;
  for (std::size_t off = 0; off < data.size(); off += 777) {
    const std::size_t n = std::min<std::size_t>(777, data.size() - off);
    bl.append(BufferPtr(data.data() + off, n));
  }
  EXPECT_GT(bl.segment_count(), 100u);
  EXPECT_EQ(bl.crc32c(0xFFFFFFFFu), whole);
}

TEST(Crc32c, ZerosMatchesExplicitZeros) {
  for (std::size_t n : {0ul, 1ul, 4095ul, 4096ul, 10000ul}) {
    const std::vector<char> z(n, 0);
    EXPECT_EQ(crc32c_zeros(0x12345678u, n), crc32c(0x12345678u, z.data(), n)) << n;
  }
}

}  // namespace
}  // namespace siphon
