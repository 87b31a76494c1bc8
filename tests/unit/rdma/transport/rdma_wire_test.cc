#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "msgr/base/crc32c.h"
#include "msgr/base/error.h"
#include "rdma/transport/rdma_wire.h"

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
  // "SPH1" little-endian magic, version 2 (the CRC-sealed SEND header),
  // flags, slots.
  EXPECT_EQ(std::vector<std::uint8_t>(b.begin(), b.begin() + 8),
            (std::vector<std::uint8_t>{0x53, 0x50, 0x48, 0x31, 2, 1, 2, 0}));
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
  bad[4] = 1;  // version 1: 16-byte SEND headers without a CRC
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

TEST(Wire, SendHeaderGoldenBytes) {
  SendHeader h;
  h.type = SendType::read_request;
  h.credits_returned = 0x0102;
  h.length = 0x03040506;
  h.id = 0x0708090a0b0c0d0e;
  std::uint8_t b[SendHeader::kSize];
  h.encode(b);
  const std::vector<std::uint8_t> fields{2, 0, 0x02, 0x01, 0x06, 0x05, 0x04, 0x03,
                                         0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07};
  EXPECT_EQ(std::vector<std::uint8_t>(b, b + 16), fields);
  // Bytes 16..19: crc32c(0xFFFFFFFF, bytes 0..15), little-endian.
  const std::uint32_t crc = crc32c(0xFFFFFFFFu, fields.data(), fields.size());
  EXPECT_EQ(std::vector<std::uint8_t>(b + 16, b + 20),
            (std::vector<std::uint8_t>{static_cast<std::uint8_t>(crc), static_cast<std::uint8_t>(crc >> 8),
                                       static_cast<std::uint8_t>(crc >> 16), static_cast<std::uint8_t>(crc >> 24)}));
  // A read_request payload: descriptors, then their CRC.
  std::uint8_t rr[SendHeader::kSize + 2 * ReadDescriptor::kSize + ReadDescriptor::kCrcSize];
  std::memcpy(rr, b, SendHeader::kSize);
  ReadDescriptor{0x1000, 0xabc, 0x03040506 - 100}.encode(rr + SendHeader::kSize);
  ReadDescriptor{0x9000, 0xabc, 100}.encode(rr + SendHeader::kSize + ReadDescriptor::kSize);
  EXPECT_EQ(ReadDescriptor::seal(rr + SendHeader::kSize, 2), 36u);
  const std::uint32_t dcrc = crc32c(0xFFFFFFFFu, rr + SendHeader::kSize, 32);
  EXPECT_EQ(rr[52] | rr[53] << 8 | rr[54] << 16 | static_cast<std::uint32_t>(rr[55]) << 24, dcrc);
  SendHeader d;
  ASSERT_FALSE(SendHeader::decode(rr, d));
  EXPECT_EQ(d.credits_returned, 0x0102u);
  EXPECT_EQ(d.id, 0x0708090a0b0c0d0eu);
}

// Every single-bit flip anywhere in a SEND header, and in a read_request's
// descriptors and their CRC, is caught as a CRC mismatch before any field is
// used: a damaged credits_returned is never applied.
TEST(Wire, EveryBitFlipInAHeaderOrDescriptorIsCaught) {
  for (const SendType t : {SendType::stream, SendType::read_request, SendType::read_done, SendType::credit_update}) {
    SendHeader h;
    h.type = t;
    h.credits_returned = 5;
    h.length = t == SendType::stream ? 3 : t == SendType::read_request ? 4096 : 0;
    h.id = t == SendType::read_request || t == SendType::read_done ? 42 : 0;
    std::vector<std::uint8_t> send(SendHeader::kSize);
    if (t == SendType::stream) send.insert(send.end(), {'a', 'b', 'c'});
    if (t == SendType::read_request) {
      send.resize(SendHeader::kSize + ReadDescriptor::kSize + ReadDescriptor::kCrcSize);
      ReadDescriptor{0x1000, 7, 4096}.encode(send.data() + SendHeader::kSize);
      ReadDescriptor::seal(send.data() + SendHeader::kSize, 1);
    }
    h.encode(send.data());
    SendHeader d;
    ASSERT_FALSE(SendHeader::decode(send, d)) << static_cast<int>(t);
    const std::size_t covered = t == SendType::read_request ? send.size() : SendHeader::kSize;
    for (std::size_t bit = 0; bit < covered * 8; ++bit) {
      auto bad = send;
      bad[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      std::string_view why;
      SendHeader out;
      out.credits_returned = 0xdead;
      EXPECT_EQ(SendHeader::decode(bad, out, &why), errc::bad_crc) << "type " << static_cast<int>(t) << " bit " << bit;
      EXPECT_NE(why.find("CRC mismatch"), std::string_view::npos) << why;
      EXPECT_EQ(out.credits_returned, 0xdead) << "nothing decoded from a damaged header";
    }
  }
}

TEST(Wire, SendHeaderValidation) {
  std::vector<std::uint8_t> buf(SendHeader::kSize + 5);
  SendHeader h;
  h.type = SendType::stream;
  h.credits_returned = 7;

  h.length = 5;
  h.encode(buf.data());
  SendHeader d;
  ASSERT_FALSE(SendHeader::decode(buf, d));
  EXPECT_EQ(d.credits_returned, 7u);

  // Length disagreeing with what arrived.
  EXPECT_TRUE(SendHeader::decode(std::span(buf.data(), SendHeader::kSize + 4), d));
  // Unknown type (with a good CRC, so the type check is what refuses it).
  h.type = static_cast<SendType>(99);
  h.encode(buf.data());
  EXPECT_EQ(SendHeader::decode(buf, d), errc::malformed_frame);
  h.type = SendType::stream;
  // Control SENDs carry no payload.
  h.type = SendType::credit_update;
  h.length = 0;
  h.encode(buf.data());
  EXPECT_TRUE(SendHeader::decode(buf, d));
  EXPECT_FALSE(SendHeader::decode(std::span(buf.data(), SendHeader::kSize), d));
  // A read request needs whole descriptors.
  h.type = SendType::read_request;
  h.length = 1 << 20;
  h.encode(buf.data());
  EXPECT_TRUE(SendHeader::decode(buf, d));
  std::vector<std::uint8_t> rr(SendHeader::kSize + 16);
  h.encode(rr.data());
  ReadDescriptor{0x1000, 0xabc, 1 << 20}.encode(rr.data() + SendHeader::kSize);
  EXPECT_EQ(SendHeader::decode(rr, d), errc::malformed_frame) << "descriptors without their CRC";
  rr.resize(SendHeader::kSize + 16 + ReadDescriptor::kCrcSize);
  ReadDescriptor::seal(rr.data() + SendHeader::kSize, 1);
  ASSERT_FALSE(SendHeader::decode(rr, d));
  const ReadDescriptor rd = ReadDescriptor::decode(rr.data() + SendHeader::kSize);
  EXPECT_EQ(rd.addr, 0x1000u);
  EXPECT_EQ(rd.rkey, 0xabcu);
  EXPECT_EQ(rd.length, 1u << 20);
  EXPECT_TRUE(SendHeader::decode(std::span(rr.data(), 10), d)) << "short";
}

}  // namespace
}  // namespace siphon::rdma
