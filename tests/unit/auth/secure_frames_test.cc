// msgr2 secure mode rev1 frames (msgr/auth/secure_frames.*): the captured
// frames of shared/reference/cephx.md §12.2 byte for byte, the sizes of
// §6.2, round trips in every chunking, and tampering caught.
#include "msgr/auth/secure_frames.h"

#include <gtest/gtest.h>

#include <string>

#include "golden.h"
#include "msgr/base/error.h"
#include "msgr/proto/control.h"

namespace siphon::auth {
namespace {

using golden::unhex;
using Status = proto::FrameDecoder::Status;

Bytes bytes_of(const BufferList& bl) {
  Bytes out(bl.length());
  bl.copy_out(0, out.size(), out.data());
  return out;
}

proto::Frame signature_frame(const Bytes& sig) {
  proto::AuthSignature s;
  std::copy(sig.begin(), sig.end(), s.sha256.begin());
  return s.frame();
}

proto::Frame pattern_frame(std::initializer_list<std::size_t> lens, std::uint8_t seed) {
  proto::Frame f;
  f.tag = proto::Tag::message;
  std::size_t i = 0;
  for (const std::size_t n : lens) {
    std::string data(n, '\0');
    for (std::size_t k = 0; k < n; ++k) data[k] = static_cast<char>(seed + 31 * k + i);
    f.segments[i++] = BufferList::copy_of(data);
  }
  return f;
}

SecureKeys keys(bool connecting) {
  std::string why;
  auto k = SecureKeys::from_secret(golden::kConnectionSecret, connecting, why);
  EXPECT_TRUE(k) << why;
  return *k;
}

// §12.2: the client's AUTH_SIGNATURE, its first secure frame, as captured.
TEST(SecureFrames, EncodesTheCapturedFirstFrame) {
  SecureFrameEncoder client_tx(keys(true));
  BufferList wire;
  std::string why;
  ASSERT_TRUE(client_tx.encode(signature_frame(golden::kClientSignature), wire, why)) << why;
  EXPECT_EQ(hex(bytes_of(wire)),
            "a9aef70a15320e9c7457769b67a5659b9e8175ba5944baf2e0b509c838c92577"
            "294e6ae8f7fe2385500c0e24491b13cdfd6233e93c16af61d1edd374afb42a41"
            "eaa58d181ce2029621daf6b4543b0e8b5e1fb421eed5e019a068ba7ac6c1d9b0");
}

TEST(SecureFrames, DecodesTheServersCapturedFirstFrame) {
  SecureFrameDecoder client_rx(keys(true), proto::FrameLimits{});
  const Bytes s2c = unhex(
      "440128ee8c8ab3662780eda350c167445e347b3a8335d82065208cf53adcea18"
      "90f43c468f41b6f23a4ad3149acaeee82b84f01a7db7944676969d0e51eb7182"
      "29cba81f5837393075e338be4b2614c02593c80fb46b874c96a6d332d174352f");
  client_rx.feed(BufferList::copy_of(s2c.data(), 50));
  proto::Frame f;
  EXPECT_EQ(client_rx.next(f), Status::need_more);
  EXPECT_EQ(client_rx.bytes_wanted(), 46u);
  client_rx.feed(BufferList::copy_of(s2c.data() + 50, s2c.size() - 50));
  ASSERT_EQ(client_rx.next(f), Status::frame) << client_rx.error_reason();
  EXPECT_EQ(f.tag, proto::Tag::auth_signature);
  EXPECT_EQ(hex(bytes_of(f.segments[0])), hex(golden::kServerSignature));
}

// §6.2's sizes from the capture.
TEST(SecureFrames, WireLengthsMatchTheCapture) {
  proto::Frame ident;
  ident.tag = proto::Tag::client_ident;
  ident.segments[0] = BufferList::copy_of(std::string(123, 'x'));
  EXPECT_EQ(SecureFrameEncoder::encoded_length(ident), 192u);
  EXPECT_EQ(SecureFrameEncoder::encoded_length(pattern_frame({41, 48}, 1)), 176u);
  EXPECT_EQ(SecureFrameEncoder::encoded_length(pattern_frame({41, 149, 0, 12}, 1)), 304u);
  EXPECT_EQ(SecureFrameEncoder::encoded_length(signature_frame(golden::kClientSignature)), 96u);
}

// Frames of every layout (seg0 inside the first message or spilling into a
// second; 1 to 4 segments, empty ones in between), fed in chunks of 1, 7,
// 96 and everything, come back equal; the encoder's length is exact.
TEST(SecureFrames, RoundTripInAnyChunking) {
  const std::vector<proto::Frame> frames = {
      pattern_frame({0}, 1),          pattern_frame({1}, 2),      pattern_frame({47}, 3),
      pattern_frame({48}, 4),         pattern_frame({49}, 5),     pattern_frame({4099}, 6),
      pattern_frame({41, 149, 0, 12}, 7), pattern_frame({0, 0, 0, 70000}, 8), pattern_frame({200, 1}, 9)};
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{96}, std::size_t{1} << 30}) {
    SecureFrameEncoder tx(keys(true));
    SecureFrameDecoder rx(keys(false), proto::FrameLimits{});
    BufferList wire;
    std::string why;
    for (const auto& f : frames) {
      const std::size_t before = wire.length();
      ASSERT_TRUE(tx.encode(f, wire, why)) << why;
      EXPECT_EQ(wire.length() - before, SecureFrameEncoder::encoded_length(f));
    }
    const Bytes all = bytes_of(wire);
    std::vector<proto::Frame> got;
    for (std::size_t at = 0; at < all.size(); at += chunk) {
      rx.feed(BufferList::copy_of(all.data() + at, std::min(chunk, all.size() - at)));
      proto::Frame f;
      Status st;
      while ((st = rx.next(f)) == Status::frame) got.push_back(f);
      ASSERT_EQ(st, Status::need_more) << rx.error_reason();
    }
    ASSERT_EQ(got.size(), frames.size()) << "chunk " << chunk;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      EXPECT_EQ(got[i].tag, frames[i].tag);
      EXPECT_EQ(got[i].num_segments(), frames[i].num_segments()) << i;
      for (std::size_t s = 0; s < proto::kMaxSegments; ++s)
        EXPECT_EQ(bytes_of(got[i].segments[s]), bytes_of(frames[i].segments[s])) << "frame " << i << " seg " << s;
    }
    EXPECT_EQ(rx.buffered(), 0u);
  }
}

// One flipped bit anywhere in a frame (each of its three GCM messages, the
// tags included) fails the decoder with decrypt_failed, and nothing of the
// frame is delivered.
TEST(SecureFrames, AnyTamperedByteFailsTheFrame) {
  const proto::Frame f = pattern_frame({100, 3000, 0, 17}, 3);
  SecureFrameEncoder tx0(keys(true));
  BufferList wire;
  std::string why;
  ASSERT_TRUE(tx0.encode(f, wire, why));
  const Bytes clean = bytes_of(wire);
  for (std::size_t at = 0; at < clean.size(); at += 37) {
    Bytes bad = clean;
    bad[at] ^= 0x10;
    SecureFrameDecoder rx(keys(false), proto::FrameLimits{});
    rx.feed(BufferList::copy_of(bad.data(), bad.size()));
    proto::Frame out;
    ASSERT_EQ(rx.next(out), Status::error) << "byte " << at;
    EXPECT_EQ(rx.error(), make_error_code(errc::decrypt_failed)) << rx.error_reason();
    EXPECT_EQ(rx.next(out), Status::error);  // failed for good
  }
}

// The wrong direction's nonce (both sides "connecting") fails at once.
TEST(SecureFrames, SwappedNoncesFail) {
  SecureFrameEncoder tx(keys(true));
  SecureFrameDecoder rx(keys(true), proto::FrameLimits{});
  BufferList wire;
  std::string why;
  ASSERT_TRUE(tx.encode(pattern_frame({10}, 1), wire, why));
  rx.feed(std::move(wire));
  proto::Frame out;
  EXPECT_EQ(rx.next(out), Status::error);
}

TEST(SecureFrames, ShortSecretIsRefused) {
  std::string why;
  const Bytes short_secret(39, 1);
  EXPECT_FALSE(SecureKeys::from_secret(short_secret, true, why));
  EXPECT_NE(why.find("40"), std::string::npos) << why;
}

// Limits are checked on the authenticated preamble, as in crc mode.
TEST(SecureFrames, LimitsApplyAfterDecryption) {
  SecureFrameEncoder tx(keys(true));
  proto::FrameLimits small;
  small.max_control_payload = 100;
  SecureFrameDecoder rx(keys(false), small);
  proto::Frame big;
  big.tag = proto::Tag::client_ident;
  big.segments[0] = BufferList::copy_of(std::string(200, 'a'));
  BufferList wire;
  std::string why;
  ASSERT_TRUE(tx.encode(big, wire, why));
  rx.feed(std::move(wire));
  proto::Frame out;
  ASSERT_EQ(rx.next(out), Status::error);
  EXPECT_EQ(rx.error(), make_error_code(errc::frame_too_large));
}

}  // namespace
}  // namespace siphon::auth
