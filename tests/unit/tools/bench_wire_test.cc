// siphon-bench's message header and --verify bookkeeping.
#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "tools/bench/bench_wire.h"

namespace siphon::bench {
namespace {

BenchHeader sample() {
  BenchHeader h;
  h.op = Op::source;
  h.flags = flag::verify | flag::corrupt_reply;
  h.conn_id = 7;
  h.think_us = 250;
  h.seq = 0x0102030405060708ull;
  h.send_ns = 123456789012345ull;
  h.reply_size = 65536;
  h.payload_crc = 0xdeadbeef;
  h.payload_len = 4096;
  return h;
}

TEST(BenchHeader, RoundTripsEveryField) {
  const BenchHeader h = sample();
  const auto b = h.encode();
  ASSERT_EQ(b.size(), 48u);
  BenchHeader::DecodeError why{};
  const auto d = BenchHeader::decode(b, &why);
  ASSERT_TRUE(d) << to_string(why);
  EXPECT_EQ(d->op, h.op);
  EXPECT_EQ(d->flags, h.flags);
  EXPECT_EQ(d->conn_id, h.conn_id);
  EXPECT_EQ(d->think_us, h.think_us);
  EXPECT_EQ(d->seq, h.seq);
  EXPECT_EQ(d->send_ns, h.send_ns);
  EXPECT_EQ(d->reply_size, h.reply_size);
  EXPECT_EQ(d->payload_crc, h.payload_crc);
  EXPECT_EQ(d->payload_len, h.payload_len);
  // Little-endian layout as documented: magic "SBNC", version 1, op, seq at 16.
  EXPECT_EQ(std::memcmp(b.data(), "SBNC", 4), 0);
  EXPECT_EQ(b[4], std::byte{1});
  EXPECT_EQ(b[5], std::byte{3});
  EXPECT_EQ(b[16], std::byte{0x08});
  EXPECT_EQ(b[23], std::byte{0x01});
}

TEST(BenchHeader, EveryFlippedBitIsCaught) {
  const auto good = sample().encode();
  for (std::size_t i = 0; i < good.size() * 8; ++i) {
    auto b = good;
    b[i / 8] ^= static_cast<std::byte>(1u << (i % 8));
    EXPECT_FALSE(BenchHeader::decode(b)) << "bit " << i;
  }
}

TEST(BenchHeader, NamesWhatIsWrong) {
  BenchHeader::DecodeError why{};
  std::array<std::byte, 10> shortb{};
  EXPECT_FALSE(BenchHeader::decode(shortb, &why));
  EXPECT_EQ(why, BenchHeader::DecodeError::short_buffer);
  auto b = sample().encode();
  b[0] = std::byte{'X'};
  EXPECT_FALSE(BenchHeader::decode(b, &why));
  EXPECT_EQ(why, BenchHeader::DecodeError::bad_magic);
  b = sample().encode();
  b[30] ^= std::byte{1};
  EXPECT_FALSE(BenchHeader::decode(b, &why));
  EXPECT_EQ(why, BenchHeader::DecodeError::bad_header_crc);
  EXPECT_EQ(to_string(why), "siphon-bench header CRC mismatch");
  BenchHeader h = sample();
  h.op = static_cast<Op>(9);
  EXPECT_FALSE(BenchHeader::decode(h.encode(), &why));
  EXPECT_EQ(why, BenchHeader::DecodeError::bad_op);
}

TEST(ServerStats, RoundTrips) {
  const ServerStats s{1234567890123ull, 42};
  const auto d = ServerStats::decode(s.encode());
  ASSERT_TRUE(d);
  EXPECT_EQ(d->user_ns, s.user_ns);
  EXPECT_EQ(d->system_ns, s.system_ns);
  std::array<std::byte, 15> wrong{};
  EXPECT_FALSE(ServerStats::decode(wrong));
}

using O = SeqTracker::Outcome;

TEST(SeqTracker, InOrderDelivery) {
  SeqTracker t;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.issue(), static_cast<std::uint64_t>(i + 1));
  for (std::uint64_t s = 1; s <= 5; ++s) EXPECT_EQ(t.complete(s), O::in_order);
  EXPECT_EQ(t.outstanding(), 0u);
  EXPECT_EQ(t.issued(), 5u);
}

TEST(SeqTracker, ReorderedDuplicatedUnknown) {
  SeqTracker t;
  for (int i = 0; i < 4; ++i) t.issue();
  EXPECT_EQ(t.complete(2), O::in_order);   // 1 may still come
  EXPECT_EQ(t.complete(1), O::reordered);  // overtaken by 2
  EXPECT_EQ(t.complete(2), O::duplicate);
  EXPECT_EQ(t.complete(9), O::unknown);    // never sent
  EXPECT_EQ(t.complete(0), O::unknown);
  EXPECT_EQ(t.outstanding(), 2u);
}

TEST(SeqTracker, OneLossCountsOnceNotAsReorderings) {
  SeqTracker t;
  for (int i = 0; i < 100; ++i) t.issue();
  for (std::uint64_t s = 1; s <= 100; ++s) {
    if (s != 10) {
      EXPECT_EQ(t.complete(s), O::in_order) << s;
    }
  }
  EXPECT_EQ(t.outstanding(), 1u);  // seq 10: lost
}

}  // namespace
}  // namespace siphon::bench
