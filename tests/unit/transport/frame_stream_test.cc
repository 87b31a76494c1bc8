// FrameStream (msgr/transport/frame_stream.h): the byte stream both stacks
// parse. The stacks' own tests cover it end to end; these pin the pieces a
// stack relies on: any chunking, the banner's exact length for a reader that
// must not read past it, the early frames, and failures that name the cause.
#include "msgr/transport/frame_stream.h"

#include <gtest/gtest.h>

#include "msgr/base/error.h"

namespace siphon::transport {
namespace {

proto::Banner banner(std::uint64_t supported, std::uint64_t required = 0) {
  return proto::Banner{supported, required};
}

proto::Frame hello(std::string_view text) {
  return proto::Frame::control(proto::Tag::hello, BufferList::copy_of(text.data(), text.size()));
}

std::string payload(const proto::Frame& f) { return f.segments[0].to_string(); }

TEST(FrameStream, BannerAndFramesInAnyChunking) {
  const proto::Banner mine = banner(proto::Banner::kRevision1);
  BufferList wire = proto::encode_banner(banner(proto::Banner::kRevision1));
  wire.append(proto::encode_frame(hello("one"), proto::FrameRev::rev1));
  wire.append(proto::encode_frame(hello("two"), proto::FrameRev::rev1));
  const std::string bytes = wire.to_string();
  for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{7}, bytes.size()}) {
    SCOPED_TRACE(chunk);
    FrameStream s(proto::FrameLimits{});
    s.set_mine(mine);
    int established = 0;
    for (std::size_t off = 0; off < bytes.size(); off += chunk) {
      const std::size_t n = std::min(chunk, bytes.size() - off);
      const auto r = s.feed(BufferList::copy_of(bytes.data() + off, n));
      ASSERT_NE(r, FrameStream::Fed::error) << s.error_reason();
      if (r == FrameStream::Fed::established) ++established;
    }
    EXPECT_EQ(established, 1);
    EXPECT_TRUE(s.banner_done());
    EXPECT_EQ(s.rev(), proto::FrameRev::rev1);
    proto::Frame f;
    ASSERT_EQ(s.next(f), proto::FrameDecoder::Status::frame);
    EXPECT_EQ(payload(f), "one");
    ASSERT_EQ(s.next(f), proto::FrameDecoder::Status::frame);
    EXPECT_EQ(payload(f), "two");
    EXPECT_EQ(s.next(f), proto::FrameDecoder::Status::need_more);
  }
}

TEST(FrameStream, BannerBytesWantedNeverReadsPastTheBanner) {
  FrameStream s(proto::FrameLimits{});
  s.set_mine(banner(proto::Banner::kRevision1));
  const std::string b = proto::encode_banner(banner(proto::Banner::kRevision1)).to_string();
  std::size_t off = 0;
  FrameStream::Fed r = FrameStream::Fed::more;
  while (r == FrameStream::Fed::more) {
    const std::size_t want = s.banner_bytes_wanted();
    ASSERT_GT(want, 0u);
    ASSERT_LE(off + want, b.size()) << "asked for bytes beyond the banner";
    r = s.feed(BufferList::copy_of(b.data() + off, want));
    off += want;
  }
  EXPECT_EQ(r, FrameStream::Fed::established);
  EXPECT_EQ(off, b.size());
  EXPECT_EQ(s.banner_bytes_wanted(), 0u);
  EXPECT_EQ(s.buffered(), 0u);
}

TEST(FrameStream, EarlyFramesAreHeldInOrderAndCountedAtTheLongerEncoding) {
  FrameStream s(proto::FrameLimits{});
  s.hold_early(hello("a"));
  s.hold_early(hello("bb"));
  EXPECT_EQ(s.early_bytes(), proto::encoded_length(hello("a"), proto::FrameRev::rev0) +
                                 proto::encoded_length(hello("bb"), proto::FrameRev::rev0));
  auto early = s.take_early();
  ASSERT_EQ(early.size(), 2u);
  EXPECT_EQ(payload(early[0]), "a");
  EXPECT_EQ(payload(early[1]), "bb");
  EXPECT_EQ(s.early_bytes(), 0u);
  EXPECT_TRUE(s.take_early().empty());
}

TEST(FrameStream, BadAndIncompatibleBannersFailWithTheCause) {
  {
    FrameStream s(proto::FrameLimits{});
    s.set_mine(banner(proto::Banner::kRevision1));
    const std::string v1 = std::string("ceph v027") + std::string(20, '\x01');
    EXPECT_EQ(s.feed(BufferList::copy_of(v1.data(), v1.size())), FrameStream::Fed::error);
    EXPECT_EQ(s.error(), errc::bad_banner);
    EXPECT_NE(s.error_reason().find("msgr1"), std::string::npos) << s.error_reason();
    EXPECT_EQ(s.feed(BufferList::copy_of("x", 1)), FrameStream::Fed::error) << "a failed stream stays failed";
  }
  {
    FrameStream s(proto::FrameLimits{});
    s.set_mine(banner(proto::Banner::kRevision1));
    EXPECT_EQ(s.feed(proto::encode_banner(banner(3, 2))), FrameStream::Fed::error);
    EXPECT_EQ(s.error(), errc::unsupported_protocol);
    EXPECT_NE(s.error_reason().find("peer requires msgr2 features we lack"), std::string::npos)
        << s.error_reason();
  }
}

}  // namespace
}  // namespace siphon::transport
