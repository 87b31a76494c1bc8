#include <gtest/gtest.h>

#include <vector>

#include "msgr/base/error.h"
#include "rdma/transport/wire.h"

namespace siphon::rdma {
namespace {

TEST(Wire, ConnectInfoRoundTripAndGoldenPrefix) {
  ConnectInfo c;
  c.flags = ConnectInfo::kFlagSrq;
  c.update_slots = 2;
  c.credits = 64;
  c.recv_buffer_size = 128 * 1024;
  c.max_inline = 220;
  c.max_frame = 256u << 20;
  c.zero_copy_threshold = 65536;
  c.max_read = 0x12345678;
  const auto b = c.encode();
  // "SPH1" little-endian magic, version 1, flags, slots.
  EXPECT_EQ(std::vector<std::uint8_t>(b.begin(), b.begin() + 8),
            (std::vector<std::uint8_t>{0x53, 0x50, 0x48, 0x31, 1, 1, 2, 0}));
  ConnectInfo d;
  ASSERT_FALSE(ConnectInfo::decode(b, d));
  EXPECT_EQ(d.credits, 64u);
  EXPECT_EQ(d.recv_buffer_size, 128u * 1024);
  EXPECT_EQ(d.zero_copy_threshold, 65536u);
  EXPECT_EQ(d.update_slots, 2u);
  EXPECT_EQ(d.max_read, 0x12345678u);
  EXPECT_EQ(std::vector<std::uint8_t>(b.begin() + 28, b.end()),
            (std::vector<std::uint8_t>{0x78, 0x56, 0x34, 0x12}));
}

TEST(Wire, ConnectInfoRejectsBadInput) {
  ConnectInfo c;
  c.update_slots = 2;
  c.credits = 64;
  c.recv_buffer_size = 4096;
  auto b = c.encode();
  ConnectInfo d;
  std::string_view why;
  EXPECT_EQ(ConnectInfo::decode(std::span(b.data(), 31), d, &why), errc::malformed_frame);
  auto bad = b;
  bad[0] ^= 1;
  EXPECT_EQ(ConnectInfo::decode(bad, d, &why), errc::malformed_frame);
  EXPECT_NE(why.find("magic"), std::string_view::npos);
  bad = b;
  bad[4] = 9;
  EXPECT_EQ(ConnectInfo::decode(bad, d, &why), errc::unsupported_protocol);
  bad = b;
  bad[8] = 1;  // credits = 1
  bad[9] = 0;
  EXPECT_EQ(ConnectInfo::decode(bad, d, &why), errc::malformed_frame);
  bad = b;
  bad[6] = 0;  // no update slots
  EXPECT_TRUE(ConnectInfo::decode(bad, d, &why));
  bad = b;
  bad[12] = bad[13] = bad[14] = bad[15] = 0xff;  // 4 GiB buffers
  EXPECT_TRUE(ConnectInfo::decode(bad, d, &why));
}

TEST(Wire, RejectInfo) {
  RejectInfo r{RejectReason::too_many_connections, 1234};
  RejectInfo d;
  const auto b = r.encode();
  ASSERT_TRUE(RejectInfo::decode(b, d));
  EXPECT_EQ(d.reason, RejectReason::too_many_connections);
  EXPECT_EQ(d.detail, 1234u);
  const std::uint8_t foreign[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_FALSE(RejectInfo::decode(foreign, d));
  EXPECT_EQ(to_string(RejectReason::no_resources), "no resources (buffer pools, QPs or shared receive queue exhausted)");
}

TEST(Wire, SendHeaderValidation) {
  std::vector<std::uint8_t> buf(16 + 5);
  SendHeader h;
  h.type = SendType::stream;
  h.credits_returned = 7;

  h.length = 5;
  h.encode(buf.data());
  SendHeader d;
  ASSERT_FALSE(SendHeader::decode(buf, d));
  EXPECT_EQ(d.credits_returned, 7u);

  // Length disagreeing with what arrived.
  EXPECT_TRUE(SendHeader::decode(std::span(buf.data(), 20), d));
  // Unknown type.
  buf[0] = 99;
  EXPECT_TRUE(SendHeader::decode(buf, d));
  // Control SENDs carry no payload.
  h.type = SendType::credit_update;
  h.length = 0;
  h.encode(buf.data());
  EXPECT_TRUE(SendHeader::decode(buf, d));
  EXPECT_FALSE(SendHeader::decode(std::span(buf.data(), 16), d));
  // A read request needs whole descriptors.
  h.type = SendType::read_request;
  h.length = 1 << 20;
  h.encode(buf.data());
  EXPECT_TRUE(SendHeader::decode(buf, d));
  std::vector<std::uint8_t> rr(16 + 16);
  h.encode(rr.data());
  ReadDescriptor{0x1000, 0xabc, 1 << 20}.encode(rr.data() + 16);
  ASSERT_FALSE(SendHeader::decode(rr, d));
  const ReadDescriptor rd = ReadDescriptor::decode(rr.data() + 16);
  EXPECT_EQ(rd.addr, 0x1000u);
  EXPECT_EQ(rd.rkey, 0xabcu);
  EXPECT_EQ(rd.length, 1u << 20);
  EXPECT_TRUE(SendHeader::decode(std::span(rr.data(), 10), d)) << "short";
}

}  // namespace
}  // namespace siphon::rdma
