// Frame codec tests: golden bytes from shared/reference/msgr2-wire.md §3 and
// §4.6 (checked there against a live ceph-mon 16.2.15), decoding under any
// chunking, truncation, and every malformed input the decoder must reject.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "msgr/base/crc32c.h"
#include "msgr/base/error.h"
#include "msgr/proto/frame.h"

namespace siphon::proto {
namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes hex(std::string_view text) {
  Bytes out;
  unsigned v = 0;
  int digits = 0;
  for (char c : text) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) continue;
    v = v * 16 + static_cast<unsigned>(d);
    if (++digits == 2) {
      out.push_back(static_cast<std::uint8_t>(v));
      v = 0;
      digits = 0;
    }
  }
  return out;
}

Bytes bytes_of(const BufferList& bl) {
  Bytes out(bl.length());
  bl.copy_out(0, out.size(), out.data());
  return out;
}

BufferList list_of(const Bytes& b) { return BufferList::copy_of(b.data(), b.size()); }

// §4.6: v2:127.0.0.1:3300/0 preceded by entity type CLIENT (8): the HELLO payload.
const Bytes kHelloPayload = hex(
    "08 01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00"
    "10 00 00 00 02 00 0c e4 7f 00 00 01 00 00 00 00"
    "00 00 00 00");
const Bytes kHelloRev1 = hex(
    "01 01 24 00 00 00 08 00 00 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 00 00 00 3f bd 6b 06"
    "08 01 01 01 1c 00 00 00 02 00 00 00 00 00 00 00"
    "10 00 00 00 02 00 0c e4 7f 00 00 01 00 00 00 00"
    "00 00 00 00 7d 88 3e 07");
const Bytes kHelloRev0 = [] {
  Bytes b(kHelloRev1.begin(), kHelloRev1.begin() + 68);
  const Bytes ep = hex("00 7d 88 3e 07 00 00 00 00 00 00 00 00 00 00 00 00");
  b.insert(b.end(), ep.begin(), ep.end());
  return b;
}();
const Bytes kWaitRev1 = hex(
    "10 01 00 00 00 00 08 00 00 00 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 00 00 00 00 00 c8 e3 aa b0");
const Bytes kWaitRev0 = [] {
  Bytes b = kWaitRev1;
  const Bytes ep = hex("00 ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00");
  b.insert(b.end(), ep.begin(), ep.end());
  return b;
}();
// MMonGetVersion header2 (41 bytes, §10.7) and data "ABCD": 4 segments 41/0/0/4.
const Bytes kHeader2 = hex(
    "01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    "13 00 7f 00 01 00 00 00 00 00 00 00 00 00 00 00"
    "00 00 00 00 03 01 00 00 00");
const Bytes kMessageRev1 = hex(
    "11 04 29 00 00 00 08 00 00 00 00 00 08 00 00 00"
    "00 00 08 00 04 00 00 00 00 10 00 00 b0 03 ac 4d"
    "01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
    "13 00 7f 00 01 00 00 00 00 00 00 00 00 00 00 00"
    "00 00 00 00 03 01 00 00 00 7b d6 cb 4c 41 42 43"
    "44 0e ff ff ff ff ff ff ff ff 8d 77 60 04");
const Bytes kBanner = hex(
    "63 65 70 68 20 76 32 0a 10 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");

Frame hello_frame() { return Frame::control(Tag::hello, list_of(kHelloPayload)); }
Frame wait_frame() { return Frame::control(Tag::wait, {}); }
Frame message_frame() {
  Frame f;
  f.tag = Tag::message;
  f.segments[0] = list_of(kHeader2);
  f.segments[3] = BufferList::copy_of("ABCD");
  return f;
}

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

void expect_same(const Frame& got, const Frame& want) {
  EXPECT_EQ(got.tag, want.tag);
  for (std::size_t i = 0; i < kMaxSegments; ++i) {
    EXPECT_EQ(got.segments[i].to_string(), want.segments[i].to_string()) << "segment " << i;
    if (i < want.num_segments()) {
      EXPECT_EQ(got.alignments[i], want.alignments[i]) << "align " << i;
    }
  }
}

constexpr FrameRev kRevs[] = {FrameRev::rev0, FrameRev::rev1};

// ---------------------------------------------------------------------------
// Tags and segments

TEST(Frame, TagNames) {
  EXPECT_EQ(to_string(Tag::hello), "HELLO");
  EXPECT_EQ(to_string(Tag::message), "MESSAGE");
  EXPECT_EQ(to_string(Tag::ack), "ACK");
  EXPECT_EQ(to_string(static_cast<Tag>(0)), "UNKNOWN");
  EXPECT_EQ(to_string(static_cast<Tag>(21)), "UNKNOWN");
  for (int t = 1; t <= kMaxKnownTag; ++t) EXPECT_NE(to_string(static_cast<Tag>(t)), "UNKNOWN");
}

TEST(Frame, NumSegmentsDropsOnlyTrailingEmptySegments) {
  Frame f;
  EXPECT_EQ(f.num_segments(), 1u) << "an empty frame still has one segment";
  f.segments[1] = BufferList::copy_of("x");
  EXPECT_EQ(f.num_segments(), 2u);
  f.segments[3] = BufferList::copy_of("yz");
  EXPECT_EQ(f.num_segments(), 4u) << "empty middle segments stay";
  EXPECT_EQ(f.payload_length(), 3u);
  EXPECT_EQ(message_frame().num_segments(), 4u);
  EXPECT_EQ(message_frame().payload_length(), 45u);
}

// ---------------------------------------------------------------------------
// Golden bytes: encoding

// segment_offset() points at each segment's bytes in encode_frame()'s
// output, in both revisions, with segment 0 empty or not (rev1 puts segment
// 0's crc right after it) and with empty segments in between.
TEST(Frame, SegmentOffsetPointsAtEachSegmentsBytes) {
  const char* const fronts[] = {"", "front-bytes"};
  const char* const middles[] = {"", "m"};
  for (const FrameRev rev : kRevs)
    for (const char* front : fronts)
      for (const char* middle : middles) {
        Frame f;
        f.tag = Tag::message;
        if (*front != 0) f.segments[0] = BufferList::copy_of(front);
        if (*middle != 0) f.segments[1] = BufferList::copy_of(middle);
        f.segments[2] = BufferList::copy_of("footer");
        f.segments[3] = BufferList::copy_of("the data segment");
        const std::string wire = encode_frame(f, rev).to_string();
        for (std::size_t i = 0; i < kMaxSegments; ++i) {
          const std::string seg = f.segments[i].to_string();
          const std::size_t at = segment_offset(f, rev, i);
          ASSERT_LE(at + seg.size(), wire.size());
          EXPECT_EQ(wire.substr(at, seg.size()), seg)
              << "rev" << (rev == FrameRev::rev1 ? 1 : 0) << " front '" << front << "' middle '" << middle
              << "' segment " << i;
        }
        EXPECT_EQ(segment_offset(f, rev, 0), kPreambleSize);
      }
}

TEST(FrameGolden, HelloRev1) { EXPECT_EQ(bytes_of(encode_frame(hello_frame(), FrameRev::rev1)), kHelloRev1); }
TEST(FrameGolden, HelloRev0) { EXPECT_EQ(bytes_of(encode_frame(hello_frame(), FrameRev::rev0)), kHelloRev0); }
TEST(FrameGolden, WaitRev1) { EXPECT_EQ(bytes_of(encode_frame(wait_frame(), FrameRev::rev1)), kWaitRev1); }
TEST(FrameGolden, WaitRev0) { EXPECT_EQ(bytes_of(encode_frame(wait_frame(), FrameRev::rev0)), kWaitRev0); }
TEST(FrameGolden, MessageRev1) {
  EXPECT_EQ(bytes_of(encode_frame(message_frame(), FrameRev::rev1)), kMessageRev1);
}
TEST(FrameGolden, MessageRev0Layout) {
  // rev0: preamble (same as rev1) | header2 | data | late_flags | 4 crcs.
  const Bytes wire = bytes_of(encode_frame(message_frame(), FrameRev::rev0));
  ASSERT_EQ(wire.size(), 32u + 41 + 4 + 17);
  EXPECT_TRUE(std::equal(wire.begin(), wire.begin() + 32, kMessageRev1.begin()));
  EXPECT_TRUE(std::equal(wire.begin() + 32, wire.begin() + 73, kHeader2.begin()));
  EXPECT_EQ(Bytes(wire.begin() + 73, wire.begin() + 77), hex("41 42 43 44"));
  EXPECT_EQ(Bytes(wire.begin() + 77, wire.end()),
            hex("00 7b d6 cb 4c ff ff ff ff ff ff ff ff 8d 77 60 04"));
}
TEST(FrameGolden, Banner) { EXPECT_EQ(bytes_of(encode_banner(Banner{})), kBanner); }

TEST(FrameEncode, EncodedLengthMatchesTheWire) {
  std::vector<Frame> frames = {hello_frame(), wait_frame(), message_frame()};
  Frame mid;
  mid.tag = Tag::message;
  mid.segments[1] = BufferList::copy_of("front");  // empty segment 0, 2 segments
  frames.push_back(mid);
  Frame big;
  big.tag = Tag::message;
  big.segments[0] = BufferList::copy_of(pattern(41, 1));
  big.segments[1] = BufferList::copy_of(pattern(1000, 2));
  big.segments[2] = BufferList::copy_of(pattern(7, 3));
  big.segments[3] = BufferList::copy_of(pattern(70000, 4));
  frames.push_back(big);
  for (FrameRev rev : kRevs)
    for (const Frame& f : frames)
      EXPECT_EQ(encode_frame(f, rev).length(), encoded_length(f, rev));
  EXPECT_EQ(encoded_length(hello_frame(), FrameRev::rev1), 72u);
  EXPECT_EQ(encoded_length(hello_frame(), FrameRev::rev0), 85u);
  EXPECT_EQ(encoded_length(wait_frame(), FrameRev::rev1), 32u);
  EXPECT_EQ(encoded_length(message_frame(), FrameRev::rev1), 94u);
  // rev1 with an empty segment 0 has no inline crc: 32 + 5 + 13.
  EXPECT_EQ(encoded_length(mid, FrameRev::rev1), 50u);
}

TEST(FrameEncode, SharesPayloadMemory) {
  Frame f = message_frame();
  f.segments[3] = BufferList::copy_of(pattern(8192, 9));
  const std::byte* data = f.segments[3].ptrs()[0].data();
  const BufferList wire = encode_frame(f, FrameRev::rev1);
  bool shared = false;
  for (const BufferPtr& p : wire.ptrs()) shared |= (p.data() == data && p.length() == 8192);
  EXPECT_TRUE(shared) << "the data segment must be referenced, not copied";
  // Appending to the caller's payload afterwards does not alter the wire image.
  const Bytes before = bytes_of(wire);
  f.segments[3].append("tail", 4);
  EXPECT_EQ(bytes_of(wire), before);
}

// ---------------------------------------------------------------------------
// Golden bytes: decoding

Frame decode_one(const Bytes& wire, FrameRev rev) {
  FrameDecoder d(rev, FrameLimits{});
  d.feed(wire.data(), wire.size());
  Frame f;
  EXPECT_EQ(d.next(f), FrameDecoder::Status::frame) << d.error_reason();
  EXPECT_EQ(d.buffered(), 0u);
  Frame again;
  EXPECT_EQ(d.next(again), FrameDecoder::Status::need_more);
  return f;
}

TEST(FrameGolden, DecodeHello) {
  for (const Bytes* wire : {&kHelloRev1, &kHelloRev0}) {
    const Frame f = decode_one(*wire, wire == &kHelloRev1 ? FrameRev::rev1 : FrameRev::rev0);
    EXPECT_EQ(f.tag, Tag::hello);
    EXPECT_EQ(f.num_segments(), 1u);
    EXPECT_EQ(bytes_of(f.segments[0]), kHelloPayload);
    EXPECT_EQ(f.alignments[0], 8);
  }
}

TEST(FrameGolden, DecodeWait) {
  for (const Bytes* wire : {&kWaitRev1, &kWaitRev0}) {
    const Frame f = decode_one(*wire, wire == &kWaitRev1 ? FrameRev::rev1 : FrameRev::rev0);
    EXPECT_EQ(f.tag, Tag::wait);
    EXPECT_EQ(f.payload_length(), 0u);
  }
}

TEST(FrameGolden, DecodeMessage) {
  const Frame f = decode_one(kMessageRev1, FrameRev::rev1);
  EXPECT_EQ(f.tag, Tag::message);
  EXPECT_EQ(f.num_segments(), 4u);
  EXPECT_EQ(bytes_of(f.segments[0]), kHeader2);
  EXPECT_TRUE(f.segments[1].empty());
  EXPECT_TRUE(f.segments[2].empty());
  EXPECT_EQ(f.segments[3].to_string(), "ABCD");
  EXPECT_EQ(f.alignments[0], 8);
  EXPECT_EQ(f.alignments[1], 8);
  EXPECT_EQ(f.alignments[3], 4096);
}

TEST(FrameGolden, DecodeBanner) {
  const BannerResult r = decode_banner(list_of(kBanner));
  EXPECT_FALSE(r.error);
  EXPECT_EQ(r.consumed, 26u);
  EXPECT_EQ(r.banner.supported, 1u);
  EXPECT_EQ(r.banner.required, 0u);
}

// ---------------------------------------------------------------------------
// Round trips and chunking

// A stream of frames covering both layouts' special cases.
std::vector<Frame> mixed_frames() {
  std::vector<Frame> v = {hello_frame(), wait_frame(), message_frame()};
  Frame mid;
  mid.tag = Tag::message;
  mid.segments[2] = BufferList::copy_of("middle only");
  v.push_back(mid);
  Frame all;
  all.tag = Tag::message;
  all.alignments = {16, 32, 64, 512};
  for (std::size_t i = 0; i < kMaxSegments; ++i)
    all.segments[i] = BufferList::copy_of(pattern(100 + 37 * i, static_cast<unsigned>(i)));
  v.push_back(all);
  v.push_back(Frame::control(Tag::keepalive2, BufferList::copy_of("12345678")));
  return v;
}

Bytes stream_of(const std::vector<Frame>& frames, FrameRev rev) {
  Bytes out;
  for (const Frame& f : frames) {
    const Bytes b = bytes_of(encode_frame(f, rev));
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

// Feeds `wire` in pieces cut at `cuts` and checks that exactly `want` comes out.
void decode_chunked(const Bytes& wire, const std::vector<std::size_t>& cuts, FrameRev rev,
                    const std::vector<Frame>& want) {
  FrameDecoder d(rev, FrameLimits{});
  std::vector<Frame> got;
  std::size_t at = 0;
  auto drain = [&] {
    for (;;) {
      Frame f;
      const auto st = d.next(f);
      ASSERT_NE(st, FrameDecoder::Status::error) << d.error_reason();
      if (st == FrameDecoder::Status::need_more) return;
      got.push_back(std::move(f));
    }
  };
  for (std::size_t cut : cuts) {
    d.feed(wire.data() + at, cut - at);
    at = cut;
    drain();
  }
  d.feed(wire.data() + at, wire.size() - at);
  drain();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) expect_same(got[i], want[i]);
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(FrameDecode, EveryTwoWaySplit) {
  const auto frames = mixed_frames();
  for (FrameRev rev : kRevs) {
    const Bytes wire = stream_of(frames, rev);
    for (std::size_t cut = 0; cut <= wire.size(); ++cut) decode_chunked(wire, {cut}, rev, frames);
  }
}

TEST(FrameDecode, ByteByByte) {
  const auto frames = mixed_frames();
  for (FrameRev rev : kRevs) {
    const Bytes wire = stream_of(frames, rev);
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < wire.size(); ++i) cuts.push_back(i);
    decode_chunked(wire, cuts, rev, frames);
  }
}

TEST(FrameDecode, RandomChunkings) {
  const auto frames = mixed_frames();
  std::mt19937 rng(42);
  for (FrameRev rev : kRevs) {
    const Bytes wire = stream_of(frames, rev);
    for (int round = 0; round < 200; ++round) {
      std::vector<std::size_t> cuts;
      for (std::size_t at = 0;;) {
        at += 1 + rng() % 64;
        if (at >= wire.size()) break;
        cuts.push_back(at);
      }
      decode_chunked(wire, cuts, rev, frames);
    }
  }
}

TEST(FrameDecode, SharedBufferListInput) {
  // feed(BufferList&&) keeps the caller's memory: segments come out as slices.
  const Bytes wire = bytes_of(encode_frame(message_frame(), FrameRev::rev1));
  BufferList in = list_of(wire);
  const std::byte* base = in.ptrs()[0].data();
  FrameDecoder d(FrameRev::rev1, FrameLimits{});
  d.feed(std::move(in));
  Frame f;
  ASSERT_EQ(d.next(f), FrameDecoder::Status::frame);
  EXPECT_EQ(f.segments[3].ptrs()[0].data(), base + 32 + 41 + 4);
}

TEST(FrameDecode, LargeSegmentsRoundTrip) {
  Frame f;
  f.tag = Tag::message;
  f.segments[0] = BufferList::copy_of(pattern(41, 1));
  f.segments[1] = BufferList::copy_of(pattern(4 << 20, 2));
  f.segments[3] = BufferList::copy_of(pattern(4 << 20, 3));
  for (FrameRev rev : kRevs) {
    const BufferList wire = encode_frame(f, rev);
    FrameDecoder d(rev, FrameLimits{});
    // 64 KiB reads, as a socket would deliver them.
    for (std::size_t at = 0; at < wire.length(); at += 65536)
      d.feed(wire.slice(at, std::min<std::size_t>(65536, wire.length() - at)));
    Frame got;
    ASSERT_EQ(d.next(got), FrameDecoder::Status::frame) << d.error_reason();
    expect_same(got, f);
  }
}

TEST(FrameDecode, TruncatedInputOnlyNeedsMore) {
  const auto frames = mixed_frames();
  for (FrameRev rev : kRevs) {
    for (const Frame& frame : frames) {
      const Bytes wire = bytes_of(encode_frame(frame, rev));
      for (std::size_t len = 0; len < wire.size(); ++len) {
        FrameDecoder d(rev, FrameLimits{});
        d.feed(wire.data(), len);
        Frame f;
        ASSERT_EQ(d.next(f), FrameDecoder::Status::need_more) << "prefix " << len;
        EXPECT_FALSE(d.error());
        const std::size_t want = len < kPreambleSize ? kPreambleSize - len : wire.size() - len;
        EXPECT_EQ(d.bytes_wanted(), want) << "prefix " << len;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Malformed input

// A preamble with a valid crc over arbitrary fields.
Bytes preamble(std::uint8_t tag, std::uint8_t nsegs, std::array<std::uint32_t, 4> lens,
               std::array<std::uint16_t, 4> aligns = {8, 8, 8, 8}) {
  Bytes p(32, 0);
  p[0] = tag;
  p[1] = nsegs;
  for (std::size_t i = 0; i < 4; ++i) {
    for (int b = 0; b < 4; ++b) p[2 + 6 * i + b] = static_cast<std::uint8_t>(lens[i] >> (8 * b));
    p[2 + 6 * i + 4] = static_cast<std::uint8_t>(aligns[i]);
    p[2 + 6 * i + 5] = static_cast<std::uint8_t>(aligns[i] >> 8);
  }
  const std::uint32_t crc = crc32c(0, p.data(), 28);
  for (int b = 0; b < 4; ++b) p[28 + b] = static_cast<std::uint8_t>(crc >> (8 * b));
  return p;
}

struct Failure {
  std::error_code code;
  std::string reason;
};

Failure expect_error(const Bytes& wire, FrameRev rev, FrameLimits limits = {}) {
  FrameDecoder d(rev, limits);
  d.feed(wire.data(), wire.size());
  Frame f;
  EXPECT_EQ(d.next(f), FrameDecoder::Status::error);
  EXPECT_TRUE(d.error());
  EXPECT_FALSE(d.error_reason().empty());
  // A failed decoder stays failed, whatever it is fed next.
  d.feed(kWaitRev1.data(), kWaitRev1.size());
  EXPECT_EQ(d.next(f), FrameDecoder::Status::error);
  EXPECT_EQ(d.bytes_wanted(), 0u);
  return {d.error(), std::string(d.error_reason())};
}

TEST(FrameMalformed, BadPreambleCrc) {
  for (FrameRev rev : kRevs) {
    for (std::size_t i = 0; i < 32; ++i) {
      Bytes wire = bytes_of(encode_frame(hello_frame(), rev));
      wire[i] ^= 0x40;
      const Failure e = expect_error(wire, rev);
      EXPECT_EQ(e.code, errc::bad_crc) << "byte " << i;
      EXPECT_EQ(e.reason, "bad preamble crc");
    }
  }
}

TEST(FrameMalformed, BadPreambleCrcIsCheckedBeforeLengths) {
  // A huge length with a wrong crc is a crc error, not a length error, and
  // the decoder does not wait for the announced bytes.
  Bytes p = preamble(17, 1, {0xFFFFFFF0u, 0, 0, 0});
  p[28] ^= 1;
  EXPECT_EQ(expect_error(p, FrameRev::rev1).code, errc::bad_crc);
}

TEST(FrameMalformed, BadSegmentCrc) {
  Frame all;
  all.tag = Tag::message;
  for (std::size_t i = 0; i < kMaxSegments; ++i)
    all.segments[i] = BufferList::copy_of(pattern(10 + i, static_cast<unsigned>(i)));
  for (FrameRev rev : kRevs) {
    const Bytes good = bytes_of(encode_frame(all, rev));
    std::size_t at = 32;
    for (std::size_t i = 0; i < kMaxSegments; ++i) {
      Bytes wire = good;
      wire[at] ^= 0x01;  // first byte of segment i
      const Failure e = expect_error(wire, rev);
      EXPECT_EQ(e.code, errc::bad_crc);
      EXPECT_EQ(e.reason, "bad segment " + std::to_string(i) + " crc");
      at += 10 + i + ((rev == FrameRev::rev1 && i == 0) ? 4 : 0);
    }
    // A corrupted crc field is caught just the same.
    Bytes wire = good;
    wire.back() ^= 0x80;
    EXPECT_EQ(expect_error(wire, rev).reason, "bad segment 3 crc");
  }
  Bytes hello = kHelloRev1;
  hello[40] ^= 0xff;
  EXPECT_EQ(expect_error(hello, FrameRev::rev1).reason, "bad segment 0 crc");
}

TEST(FrameMalformed, NumSegmentsOutOfRange) {
  for (std::uint8_t n : {0, 5, 255}) {
    const Failure e = expect_error(preamble(1, n, {4, 0, 0, 0}), FrameRev::rev1);
    EXPECT_EQ(e.code, errc::malformed_frame) << int(n);
    EXPECT_EQ(e.reason, "num_segments outside 1..4");
  }
}

TEST(FrameMalformed, EmptyLastSegment) {
  const Failure e = expect_error(preamble(17, 3, {41, 5, 0, 0}), FrameRev::rev1);
  EXPECT_EQ(e.code, errc::malformed_frame);
  EXPECT_EQ(e.reason, "last segment of a multi-segment frame is empty");
}

TEST(FrameMalformed, UnknownTag) {
  for (std::uint8_t tag : {0, 21, 22, 0xff}) {
    const Failure e = expect_error(preamble(tag, 1, {0, 0, 0, 0}), FrameRev::rev1);
    EXPECT_EQ(e.code, errc::unknown_tag) << int(tag);
    EXPECT_EQ(e.reason, "unknown frame tag");
  }
}

TEST(FrameMalformed, OversizeLengths) {
  FrameLimits limits;
  limits.max_control_payload = 1000;
  limits.max_segment = 1 << 20;
  limits.max_frame = 3 << 20;
  // Control frame: one byte over.
  Failure e = expect_error(preamble(1, 1, {1001, 0, 0, 0}), FrameRev::rev1, limits);
  EXPECT_EQ(e.code, errc::frame_too_large);
  EXPECT_EQ(e.reason, "control frame payload over the limit (1001 bytes > ms_max_control_frame_size 1000)");
  // Control frames count every segment.
  e = expect_error(preamble(7, 2, {600, 401, 0, 0}), FrameRev::rev1, limits);
  EXPECT_EQ(e.code, errc::frame_too_large);
  // MESSAGE: the control limit does not apply, the segment limit does.
  e = expect_error(preamble(17, 4, {41, 0, 0, (1 << 20) + 1}), FrameRev::rev1, limits);
  EXPECT_EQ(e.reason, "message segment over the limit (1048577 bytes > ms_max_segment_size 1048576)");
  e = expect_error(preamble(17, 4, {1 << 20, 1 << 20, 1 << 20, 1}), FrameRev::rev0, limits);
  EXPECT_EQ(e.reason, "frame over the limit (3145729 bytes > ms_max_frame_size 3145728)");
  // The largest u32 lengths do not overflow the sum.
  e = expect_error(preamble(17, 4, {~0u, ~0u, ~0u, ~0u}), FrameRev::rev1, FrameLimits{});
  EXPECT_EQ(e.code, errc::frame_too_large);
  // At the limit is fine (only the preamble is fed: need_more, no error).
  FrameDecoder d(FrameRev::rev1, limits);
  const Bytes ok = preamble(1, 1, {1000, 0, 0, 0});
  d.feed(ok.data(), ok.size());
  Frame f;
  EXPECT_EQ(d.next(f), FrameDecoder::Status::need_more);
  EXPECT_EQ(d.bytes_wanted(), 1004u);
}

// A rev1 frame of two segments with the given late_status byte.
Bytes rev1_two_segments(std::uint8_t late_status) {
  Frame f;
  f.tag = Tag::message;
  f.segments[0] = BufferList::copy_of("header");
  f.segments[1] = BufferList::copy_of("front");
  Bytes wire = bytes_of(encode_frame(f, FrameRev::rev1));
  wire[wire.size() - 13] = late_status;
  return wire;
}

TEST(FrameMalformed, BadLateStatus) {
  for (std::uint8_t s : {0x00, 0x0F, 0x02, 0x0D, 0xE0}) {
    const Failure e = expect_error(rev1_two_segments(s), FrameRev::rev1);
    EXPECT_EQ(e.code, errc::malformed_frame) << int(s);
    EXPECT_EQ(e.reason, "bad epilogue late status");
  }
}

TEST(FrameLateStatus, HighNibbleIsReserved) {
  const Bytes wire = rev1_two_segments(0xAE);
  const Frame f = decode_one(wire, FrameRev::rev1);
  EXPECT_EQ(f.segments[1].to_string(), "front");
}

TEST(FrameLateStatus, AbortedFramesAreSkipped) {
  // rev1: late_status 0x01 (any high nibble); rev0: late_flags bit 0.
  Frame f;
  f.tag = Tag::message;
  f.segments[0] = BufferList::copy_of("header");
  f.segments[3] = BufferList::copy_of("data");
  for (FrameRev rev : kRevs) {
    Bytes aborted = bytes_of(encode_frame(f, rev));
    const std::size_t ep = aborted.size() - (rev == FrameRev::rev1 ? 13 : 17);
    aborted[ep] = rev == FrameRev::rev1 ? 0x51 : 0x01;
    aborted[aborted.size() - 1] ^= 0xff;  // crcs of an aborted frame are not checked
    Bytes wire = bytes_of(encode_frame(hello_frame(), rev));
    wire.insert(wire.end(), aborted.begin(), aborted.end());
    const Bytes tail = bytes_of(encode_frame(wait_frame(), rev));
    wire.insert(wire.end(), tail.begin(), tail.end());
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < wire.size(); ++i) cuts.push_back(i);
    decode_chunked(wire, cuts, rev, {hello_frame(), wait_frame()});
    decode_chunked(wire, {}, rev, {hello_frame(), wait_frame()});
  }
}

// ---------------------------------------------------------------------------
// Banner

TEST(Banner, NeedsMoreUntilComplete) {
  for (std::size_t len = 0; len < kBanner.size(); ++len) {
    const BannerResult r = decode_banner(BufferList::copy_of(kBanner.data(), len));
    EXPECT_FALSE(r.error) << len;
    EXPECT_EQ(r.consumed, 0u) << len;
  }
}

TEST(Banner, ConsumesExtensionBytesAndNoMore) {
  Bytes b = kBanner;
  b[8] = 24;  // payload 24: 8 bytes of future extensions
  b.insert(b.end(), 8, 0xAB);
  b.insert(b.end(), {0x01, 0x01});  // the first bytes of the next frame
  const BannerResult r = decode_banner(list_of(b));
  EXPECT_FALSE(r.error);
  EXPECT_EQ(r.consumed, 34u);
}

TEST(Banner, Msgr1IsNamed) {
  const std::string v1 = "ceph v027\x01\x02\x03";
  for (std::size_t len = 0; len < 9; ++len)
    EXPECT_FALSE(decode_banner(BufferList::copy_of(v1.data(), len)).error) << len;
  const BannerResult r = decode_banner(BufferList::copy_of(v1));
  EXPECT_EQ(r.error, errc::bad_banner);
  EXPECT_NE(r.reason.find("msgr1"), std::string_view::npos) << r.reason;
}

TEST(Banner, Garbage) {
  for (std::string_view junk : {"GET / HTTP/1.1\r\n", "x", "ceph v3\nxxxxxxxxx", "ceph v0x"}) {
    const BannerResult r = decode_banner(BufferList::copy_of(junk));
    EXPECT_EQ(r.error, errc::bad_banner) << junk;
    EXPECT_EQ(r.reason.find("msgr1"), std::string_view::npos) << junk;
  }
}

TEST(Banner, PayloadLengthBounds) {
  Bytes b = kBanner;
  b[8] = 15;
  EXPECT_EQ(decode_banner(list_of(b)).reason, "banner payload shorter than 16 bytes");
  b[8] = 0x00;
  b[9] = 0x20;  // 8192
  EXPECT_EQ(decode_banner(list_of(b)).reason, "banner payload longer than the limit");
  EXPECT_EQ(decode_banner(list_of(b), 8192).consumed, 0u) << "allowed, but needs more bytes";
}

TEST(Banner, Negotiate) {
  const Banner pacific{1, 0}, kernel{1, 1}, quincy{3, 0}, old{0, 0};
  EXPECT_EQ(negotiate(pacific, pacific)->rev, FrameRev::rev1);
  EXPECT_EQ(negotiate(pacific, kernel)->rev, FrameRev::rev1);
  EXPECT_EQ(negotiate(pacific, quincy)->rev, FrameRev::rev1);
  EXPECT_EQ(negotiate(pacific, quincy)->peer.supported, 3u);
  EXPECT_EQ(negotiate(pacific, old)->rev, FrameRev::rev0);
  EXPECT_EQ(negotiate(old, pacific)->rev, FrameRev::rev0) << "both sides pick the same";
  EXPECT_FALSE(negotiate(old, kernel)) << "peer requires rev1, we lack it";
  EXPECT_FALSE(negotiate(kernel, old)) << "we require rev1, peer lacks it";
  EXPECT_FALSE(negotiate(pacific, Banner{3, 2})) << "peer requires compression";
}

}  // namespace
}  // namespace siphon::proto
