#include <gtest/gtest.h>

#include <array>

#include "msgr/proto/message_header.h"
#include "proto_test_util.h"

namespace siphon::proto {
namespace {

using namespace test;  // proto_test_util.h

// §10.7: MMonGetVersion from the client (seq 1, tid 0, type 19, prio 127,
// v1/compat 1, flags 3), followed on the wire by crc32c(-1) = 0x4ccbd67b.
constexpr const char* kGetVersion =
    "01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    " 13 00 7f 00 01 00 00 00 00 00 00 00 00 00 00 00"
    " 00 00 00 00 03 01 00 00 00";
// §10.7: the mon's MMonGetVersionReply header (observed), crc 0x1eb0abfb.
constexpr const char* kGetVersionReply =
    "01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    " 14 00 c4 00 02 00 00 00 00 00 00 00 01 00 00 00"
    " 00 00 00 00 03 02 00 00 00";
// §10.8: MPing, seq 2, ack_seq 1, crc 0x756f2950.
constexpr const char* kPing =
    "02 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    " 02 00 7f 00 01 00 00 00 00 00 00 00 01 00 00 00"
    " 00 00 00 00 03 01 00 00 00";

TEST(MessageHeader2, SizeAndLayout) {
  static_assert(MessageHeader2::kSize == 41);
  static_assert(MessageHeader2::kOffFlags == 36 && MessageHeader2::kOffCompatVersion == 37);
  MessageHeader2 h;
  h.seq = 0x0807060504030201ull;
  h.tid = 0x100f0e0d0c0b0a09ull;
  h.type = 0x1211;
  h.priority = 0x1413;
  h.version = 0x1615;
  h.data_pre_padding_len = 0x1a191817;
  h.data_off = 0x1c1b;
  h.ack_seq = 0x24232221201f1e1dull;
  h.flags = 0x25;
  h.compat_version = 0x2726;
  h.reserved = 0x2928;
  const BufferList enc = h.encode();
  ASSERT_EQ(enc.length(), 41u);
  const std::string s = enc.to_string();
  for (std::size_t i = 0; i < s.size(); ++i)
    EXPECT_EQ(static_cast<unsigned char>(s[i]), i + 1) << "byte " << i;
}

TEST(MessageHeader2, MonGetVersionGolden) {
  const MessageHeader2 h = MessageHeader2::make(kMsgMonGetVersion, 1, 0);
  const BufferList enc = h.encode();
  EXPECT_EQ(to_hex(enc), norm_hex(kGetVersion));
  EXPECT_EQ(enc.crc32c(0xffffffffu), 0x4ccbd67bu);
  auto back = MessageHeader2::decode(enc);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, h);
  EXPECT_EQ(back->priority, kMsgPrioDefault);
  EXPECT_EQ(back->flags, kMsgFlagsDefault);
  EXPECT_TRUE(back->flag_complete());
  EXPECT_TRUE(back->flag_nocrc());
}

TEST(MessageHeader2, MonReplyObserved) {
  const BufferList bl = from_hex(kGetVersionReply);
  ASSERT_EQ(bl.crc32c(0xffffffffu), 0x1eb0abfbu);
  auto h = MessageHeader2::decode(bl);
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(h->seq, 1u);
  EXPECT_EQ(h->tid, 0u);
  EXPECT_EQ(h->type, kMsgMonGetVersionReply);
  EXPECT_EQ(h->priority, kMsgPrioHigh);
  EXPECT_EQ(h->version, 2);
  EXPECT_EQ(h->compat_version, 2);
  EXPECT_EQ(h->ack_seq, 1u);
  EXPECT_EQ(h->flags, kMsgFlagComplete | kMsgFlagNoCrc);
  EXPECT_EQ(to_hex(h->encode()), norm_hex(kGetVersionReply));
  EXPECT_EQ(h->to_string(), "seq 1 tid 0 type 20 prio 196 v 2/2 ack 1 flags 0x3 data_off 0");
}

TEST(MessageHeader2, PingGolden) {
  const MessageHeader2 h = MessageHeader2::make(kMsgPing, 2, 1);
  EXPECT_EQ(to_hex(h.encode()), norm_hex(kPing));
  EXPECT_EQ(h.encode().crc32c(0xffffffffu), 0x756f2950u);
}

TEST(MessageHeader2, CompatDefaultsToVersionUnlessLower) {
  EXPECT_EQ(MessageHeader2::make(kMsgMonSubscribe, 1, 0, 3).compat_version, 3);
  EXPECT_EQ(MessageHeader2::make(kMsgMonSubscribe, 1, 0, 3, 1).compat_version, 1);
}

TEST(MessageHeader2, KernelFlagsZeroAreAcceptedAndPreserved) {
  // The kernel sends flags 0 (no COMPLETE, no NOCRC); msgr2 has no message
  // CRCs to check, so the header decodes and re-encodes unchanged.
  std::string bytes = from_hex(kPing).to_string();
  bytes[MessageHeader2::kOffFlags] = 0;
  const BufferList bl = BufferList::copy_of(bytes);
  auto h = MessageHeader2::decode(bl);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->flags, 0);
  EXPECT_FALSE(h->flag_complete());
  EXPECT_FALSE(h->flag_nocrc());
  EXPECT_EQ(h->encode(), bl);
}

TEST(MessageHeader2, WrongLengthIsAnError) {
  const BufferList full = from_hex(kGetVersion);
  for (std::size_t n = 0; n < full.length(); ++n) {
    auto r = MessageHeader2::decode(test::prefix(full, n));
    ASSERT_FALSE(r) << n;
    EXPECT_EQ(r.code(), errc::decode_error);
    EXPECT_EQ(r.error().reason, "segment is shorter than ceph_msg_header2");
    EXPECT_EQ(r.error().value, n);
  }
  BufferList longer = full;
  longer.append("x", 1);
  auto r = MessageHeader2::decode(longer);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().reason, "segment is longer than ceph_msg_header2");
}

TEST(MessageHeader2, DecodesAcrossSegments) {
  auto h = MessageHeader2::decode(test::fragmented(from_hex(kGetVersionReply)));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->type, kMsgMonGetVersionReply);
}

TEST(MessageHeader2, SpanInterface) {
  std::array<std::byte, MessageHeader2::kSize> raw{};
  const MessageHeader2 h = MessageHeader2::make(kMsgMonGetMap, 9, 8, 1, 1, kMsgPrioHighest, 77);
  h.encode_to(raw);
  EXPECT_EQ(MessageHeader2::decode_from(raw), h);
}

}  // namespace
}  // namespace siphon::proto
