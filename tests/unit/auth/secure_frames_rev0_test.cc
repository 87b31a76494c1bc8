// msgr2 secure mode over msgr2.0 (rev0) frames (msgr/auth/secure_frames.*,
// shared/reference/cephx.md §6.3): one GCM message a frame over preamble |
// padded segments | 16-byte epilogue, the nonce's fixed part + 1 per frame.
// The layout is checked by opening the encoder's output with a GcmStream
// keyed by hand (the nonce of frame k written out, not stepped), round trips
// in every chunking, and every kind of damage -- a flipped bit anywhere, a
// preamble that lies, a truncated frame, the wrong direction -- fails the
// decoder with nothing delivered. The end-to-end proof against a real
// ceph-mon is MonInterop.CephxSecureModeOverMsgr2Rev0.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "golden.h"
#include "msgr/auth/secure_frames.h"
#include "msgr/base/error.h"
#include "msgr/proto/control.h"

namespace siphon::auth {
namespace {

using golden::unhex;
using proto::FrameRev;
using Status = proto::FrameDecoder::Status;

Bytes bytes_of(const BufferList& bl) {
  Bytes out(bl.length());
  bl.copy_out(0, out.size(), out.data());
  return out;
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

// The connecting side's nonce for its k-th frame under rev0: the u32 fixed
// part (LE, the first 4 bytes) + k, the counter bytes unchanged.
Bytes client_nonce_rev0(std::uint32_t k) {
  Bytes n = keys(true).tx_nonce;
  std::uint32_t fixed = 0;
  std::memcpy(&fixed, n.data(), 4);
  fixed += k;
  std::memcpy(n.data(), &fixed, 4);
  return n;
}

// The plaintext a rev0 secure frame must carry.
Bytes rev0_plaintext(const proto::Frame& f, std::uint8_t late_flags = 0) {
  Bytes p(proto::kPreambleSize);
  proto::encode_preamble(f, reinterpret_cast<std::byte*>(p.data()));
  for (std::size_t i = 0; i < f.num_segments(); ++i) {
    const Bytes s = bytes_of(f.segments[i]);
    p.insert(p.end(), s.begin(), s.end());
    p.resize(p.size() + (16 - s.size() % 16) % 16, 0);
  }
  p.push_back(late_flags);
  p.resize(p.size() + 15, 0);
  return p;
}

TEST(SecureFramesRev0, WireLengths) {
  proto::Frame sig = proto::AuthSignature{}.frame();
  EXPECT_EQ(SecureFrameEncoder::encoded_length(sig, FrameRev::rev0), 32u + 32 + 16 + 16);
  proto::Frame ident;
  ident.tag = proto::Tag::client_ident;
  ident.segments[0] = BufferList::copy_of(std::string(123, 'x'));
  EXPECT_EQ(SecureFrameEncoder::encoded_length(ident, FrameRev::rev0), 32u + 128 + 16 + 16);
  EXPECT_EQ(SecureFrameEncoder::encoded_length(pattern_frame({41, 149, 0, 12}, 1), FrameRev::rev0),
            32u + 48 + 160 + 0 + 16 + 16 + 16);
  EXPECT_EQ(SecureFrameEncoder::encoded_length(pattern_frame({0}, 1), FrameRev::rev0), 32u + 16 + 16);
}

// Frame k is one GCM message under nonce (fixed + k | counter), over
// exactly preamble | padded segments | epilogue 0.
TEST(SecureFramesRev0, OneGcmMessageAFrameWithTheFixedPartStepping) {
  const std::vector<proto::Frame> frames = {pattern_frame({32}, 1), pattern_frame({123}, 2),
                                            pattern_frame({41, 149, 0, 12}, 3)};
  SecureFrameEncoder tx(keys(true), FrameRev::rev0);
  for (std::uint32_t k = 0; k < frames.size(); ++k) {
    BufferList wire;
    std::string why;
    ASSERT_TRUE(tx.encode(frames[k], wire, why)) << why;
    const Bytes w = bytes_of(wire);
    ASSERT_EQ(w.size(), SecureFrameEncoder::encoded_length(frames[k], FrameRev::rev0));
    GcmStream by_hand(keys(true).key, client_nonce_rev0(k), true);
    Bytes plain;
    ASSERT_TRUE(by_hand.open(w, plain, why)) << "frame " << k << ": " << why;
    EXPECT_EQ(hex(plain), hex(rev0_plaintext(frames[k]))) << "frame " << k;
  }
}

TEST(SecureFramesRev0, RoundTripInAnyChunking) {
  const std::vector<proto::Frame> frames = {
      pattern_frame({0}, 1),  pattern_frame({1}, 2),     pattern_frame({47}, 3),
      pattern_frame({48}, 4), pattern_frame({4099}, 6),  pattern_frame({41, 149, 0, 12}, 7),
      pattern_frame({0, 0, 0, 70000}, 8), pattern_frame({200, 1}, 9)};
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{32}, std::size_t{1} << 30}) {
    SecureFrameEncoder tx(keys(true), FrameRev::rev0);
    SecureFrameDecoder rx(keys(false), proto::FrameLimits{}, FrameRev::rev0);
    BufferList wire;
    std::string why;
    for (const auto& f : frames) ASSERT_TRUE(tx.encode(f, wire, why)) << why;
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

// A flipped bit anywhere -- in the preamble (which rev0 decrypts before it
// can check the tag), a segment, the epilogue or the tag -- fails the frame
// with decrypt_failed and for good; nothing of it is delivered.
TEST(SecureFramesRev0, AnyTamperedByteFailsTheFrame) {
  const proto::Frame f = pattern_frame({100, 3000, 0, 17}, 3);
  SecureFrameEncoder tx(keys(true), FrameRev::rev0);
  BufferList wire;
  std::string why;
  ASSERT_TRUE(tx.encode(f, wire, why));
  const Bytes clean = bytes_of(wire);
  std::vector<std::size_t> spots;
  for (std::size_t at = 0; at < 40; ++at) spots.push_back(at);  // every preamble byte and then some
  for (std::size_t at = 40; at < clean.size(); at += 37) spots.push_back(at);
  spots.push_back(clean.size() - 1);  // the tag's last byte
  for (const std::size_t at : spots) {
    Bytes bad = clean;
    bad[at] ^= 0x10;
    SecureFrameDecoder rx(keys(false), proto::FrameLimits{}, FrameRev::rev0);
    rx.feed(BufferList::copy_of(bad.data(), bad.size()));
    proto::Frame out;
    const Status st = rx.next(out);
    // A flipped length bit may make the frame look longer than what came:
    // then the decoder waits, and the tag fails once the rest arrives.
    if (st == Status::need_more) {
      rx.feed(BufferList::copy_of(std::string(rx.bytes_wanted(), '\0')));
      ASSERT_EQ(rx.next(out), Status::error) << "byte " << at;
    } else {
      ASSERT_EQ(st, Status::error) << "byte " << at;
    }
    EXPECT_EQ(rx.error(), make_error_code(errc::decrypt_failed)) << "byte " << at << ": " << rx.error_reason();
    EXPECT_EQ(rx.next(out), Status::error);
  }
}

// A frame cut short is not delivered until its last byte comes; the
// decoder says how much it still needs.
TEST(SecureFramesRev0, TruncatedFrameWaits) {
  const proto::Frame f = pattern_frame({300, 20}, 5);
  SecureFrameEncoder tx(keys(true), FrameRev::rev0);
  BufferList wire;
  std::string why;
  ASSERT_TRUE(tx.encode(f, wire, why));
  const Bytes all = bytes_of(wire);
  SecureFrameDecoder rx(keys(false), proto::FrameLimits{}, FrameRev::rev0);
  rx.feed(BufferList::copy_of(all.data(), 20));
  proto::Frame out;
  EXPECT_EQ(rx.next(out), Status::need_more);
  EXPECT_EQ(rx.bytes_wanted(), 12u);  // the rest of the preamble
  rx.feed(BufferList::copy_of(all.data() + 20, all.size() - 21));
  EXPECT_EQ(rx.next(out), Status::need_more);
  EXPECT_EQ(rx.bytes_wanted(), 1u);
  rx.feed(BufferList::copy_of(all.data() + all.size() - 1, 1));
  ASSERT_EQ(rx.next(out), Status::frame) << rx.error_reason();
  EXPECT_EQ(bytes_of(out.segments[1]), bytes_of(f.segments[1]));
}

// The preamble's lengths are held to the limits before anything else is
// read: a frame over them fails with 32 bytes in hand.
TEST(SecureFramesRev0, LimitsApplyToThePreamble) {
  proto::Frame big;
  big.tag = proto::Tag::client_ident;
  big.segments[0] = BufferList::copy_of(std::string(200, 'a'));
  SecureFrameEncoder tx(keys(true), FrameRev::rev0);
  BufferList wire;
  std::string why;
  ASSERT_TRUE(tx.encode(big, wire, why));
  const Bytes all = bytes_of(wire);
  proto::FrameLimits small;
  small.max_control_payload = 100;
  SecureFrameDecoder rx(keys(false), small, FrameRev::rev0);
  rx.feed(BufferList::copy_of(all.data(), proto::kPreambleSize));
  proto::Frame out;
  ASSERT_EQ(rx.next(out), Status::error);
  EXPECT_EQ(rx.error(), make_error_code(errc::frame_too_large)) << rx.error_reason();
}

// A frame whose epilogue says "aborted" (late_flags bit 0) is dropped
// whole and the next one is delivered, as in crc mode.
TEST(SecureFramesRev0, AbortedFrameIsDropped) {
  const proto::Frame aborted = pattern_frame({10, 10}, 1);
  const proto::Frame next = pattern_frame({5}, 2);
  GcmStream by_hand(keys(true).key, client_nonce_rev0(0), true);
  Bytes wire;
  std::string why;
  ASSERT_TRUE(by_hand.seal(rev0_plaintext(aborted, 0x01), wire, why));
  GcmStream second(keys(true).key, client_nonce_rev0(1), true);
  ASSERT_TRUE(second.seal(rev0_plaintext(next), wire, why));
  SecureFrameDecoder rx(keys(false), proto::FrameLimits{}, FrameRev::rev0);
  rx.feed(BufferList::copy_of(wire.data(), wire.size()));
  proto::Frame out;
  ASSERT_EQ(rx.next(out), Status::frame) << rx.error_reason();
  EXPECT_EQ(bytes_of(out.segments[0]), bytes_of(next.segments[0]));
  EXPECT_EQ(rx.next(out), Status::need_more);
}

// rev1 frames fed to a rev0 decoder, the wrong direction's nonce, or a
// rev0 frame under rev1's nonce step: each fails, nothing is delivered.
TEST(SecureFramesRev0, MismatchesFail) {
  const proto::Frame f = pattern_frame({64}, 4);
  std::string why;
  {
    SecureFrameEncoder tx(keys(true), FrameRev::rev1);
    SecureFrameDecoder rx(keys(false), proto::FrameLimits{}, FrameRev::rev0);
    BufferList wire;
    ASSERT_TRUE(tx.encode(f, wire, why));
    rx.feed(std::move(wire));
    proto::Frame out;
    EXPECT_NE(rx.next(out), Status::frame);
  }
  {
    SecureFrameEncoder tx(keys(true), FrameRev::rev0);
    SecureFrameDecoder rx(keys(true), proto::FrameLimits{}, FrameRev::rev0);  // both "connecting"
    BufferList wire;
    ASSERT_TRUE(tx.encode(f, wire, why));
    rx.feed(std::move(wire));
    proto::Frame out;
    EXPECT_EQ(rx.next(out), Status::error);
  }
  {
    // The second frame is where the revisions' nonce steps part.
    SecureFrameEncoder tx(keys(true), FrameRev::rev0);
    SecureFrameDecoder rx(keys(false), proto::FrameLimits{}, FrameRev::rev1);
    BufferList wire;
    ASSERT_TRUE(tx.encode(pattern_frame({32}, 1), wire, why));
    ASSERT_TRUE(tx.encode(f, wire, why));
    rx.feed(std::move(wire));
    proto::Frame out;
    Status st = rx.next(out);
    if (st == Status::frame) st = rx.next(out);
    EXPECT_EQ(st, Status::error);
  }
}

}  // namespace
}  // namespace siphon::auth
