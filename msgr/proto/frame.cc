// msgr2 frame codec, crc mode, rev0 and rev1 (shared/reference/msgr2-wire.md
// §2-§5, §15). Layout summary:
//
//   preamble (32)  tag u8 | nsegs u8 | 4 x (len u32, align u16) | 2 reserved | crc32c(0) u32
//   rev0           preamble | seg0..segN-1 | epilogue(17): late_flags u8, 4 x crc
//   rev1           preamble | [seg0 | crc(seg0)]   if len0 > 0
//                           | [seg1..segN-1 | epilogue(13): late_status u8, 3 x crc]  if N > 1
//
// Segment crcs are crc32c(0xFFFFFFFF, segment) (raw, no final inversion); an
// empty segment inside num_segments has crc 0xFFFFFFFF, unused slots are 0.
#include "msgr/proto/frame.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "msgr/base/crc32c.h"
#include "msgr/base/error.h"

namespace siphon::proto {
namespace {

constexpr std::uint32_t kPreambleCrcSeed = 0;
constexpr std::uint32_t kSegmentCrcSeed = 0xFFFFFFFFu;
constexpr std::size_t kPreambleCrcOffset = 28;
constexpr std::size_t kSegDescOffset = 2;
constexpr std::size_t kSegDescSize = 6;
constexpr std::size_t kInlineCrcSize = 4;
constexpr std::uint8_t kLateStatusMask = 0x0F;
constexpr std::uint8_t kLateStatusComplete = 0x0E;  // rev1
constexpr std::uint8_t kLateStatusAborted = 0x01;   // rev1
constexpr std::uint8_t kLateFlagAborted = 0x01;     // rev0, bit 0
// Everything encode_frame() generates fits in one small block.
constexpr std::size_t kGeneratedMax = kPreambleSize + kInlineCrcSize + kEpilogueRev0;
static_assert(kGeneratedMax <= 64);

constexpr std::string_view kMagic{"ceph v2\n", 8};
constexpr std::string_view kMsgr1Magic{"ceph v027", 9};
constexpr std::size_t kBannerFeaturesSize = 16;  // u64 supported + u64 required

void put_le16(std::byte* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::byte>(v);
  p[1] = static_cast<std::byte>(v >> 8);
}
void put_le32(std::byte* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
void put_le64(std::byte* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
std::uint16_t get_le16(const std::byte* p) noexcept {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) |
                                    (std::to_integer<unsigned>(p[1]) << 8));
}
std::uint32_t get_le32(const std::byte* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint32_t>(p[i]);
  return v;
}
std::uint64_t get_le64(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}

// Writes the 32-byte preamble of `f` (num_segments `n`) into `p`.
void write_preamble(std::byte* p, const Frame& f, std::size_t n) noexcept {
  std::memset(p, 0, kPreambleSize);
  p[0] = static_cast<std::byte>(f.tag);
  p[1] = static_cast<std::byte>(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::byte* d = p + kSegDescOffset + i * kSegDescSize;
    put_le32(d, static_cast<std::uint32_t>(f.segments[i].length()));
    put_le16(d + 4, f.alignments[i]);
  }
  put_le32(p + kPreambleCrcOffset, crc32c(kPreambleCrcSeed, p, kPreambleCrcOffset));
}

std::uint32_t segment_crc(const BufferList& seg) noexcept { return seg.crc32c(kSegmentCrcSeed); }

// Wire bytes after the preamble for segment lengths `lens[0..n)`.
std::uint64_t body_length(const std::uint32_t* lens, std::size_t n, FrameRev rev) noexcept {
  std::uint64_t total = 0;
  if (rev == FrameRev::rev0) {
    for (std::size_t i = 0; i < n; ++i) total += lens[i];
    return total + kEpilogueRev0;
  }
  if (lens[0] > 0) total += std::uint64_t{lens[0]} + kInlineCrcSize;
  if (n > 1) {
    for (std::size_t i = 1; i < n; ++i) total += lens[i];
    total += kEpilogueRev1;
  }
  return total;
}

constexpr std::array<std::uint16_t, kMaxSegments> kDefaultAlignments = {
    kControlAlignment, kControlAlignment, kControlAlignment, kDataAlignment};

constexpr std::array<std::string_view, kMaxSegments> kBadSegmentCrc = {
    "bad segment 0 crc", "bad segment 1 crc", "bad segment 2 crc", "bad segment 3 crc"};

}  // namespace

std::string_view to_string(Tag t) noexcept {
  switch (t) {
    case Tag::hello: return "HELLO";
    case Tag::auth_request: return "AUTH_REQUEST";
    case Tag::auth_bad_method: return "AUTH_BAD_METHOD";
    case Tag::auth_reply_more: return "AUTH_REPLY_MORE";
    case Tag::auth_request_more: return "AUTH_REQUEST_MORE";
    case Tag::auth_done: return "AUTH_DONE";
    case Tag::auth_signature: return "AUTH_SIGNATURE";
    case Tag::client_ident: return "CLIENT_IDENT";
    case Tag::server_ident: return "SERVER_IDENT";
    case Tag::ident_missing_features: return "IDENT_MISSING_FEATURES";
    case Tag::session_reconnect: return "SESSION_RECONNECT";
    case Tag::session_reset: return "SESSION_RESET";
    case Tag::session_retry: return "SESSION_RETRY";
    case Tag::session_retry_global: return "SESSION_RETRY_GLOBAL";
    case Tag::session_reconnect_ok: return "SESSION_RECONNECT_OK";
    case Tag::wait: return "WAIT";
    case Tag::message: return "MESSAGE";
    case Tag::keepalive2: return "KEEPALIVE2";
    case Tag::keepalive2_ack: return "KEEPALIVE2_ACK";
    case Tag::ack: return "ACK";
  }
  return "UNKNOWN";
}

std::size_t Frame::num_segments() const noexcept {
  for (std::size_t i = kMaxSegments; i > 1; --i)
    if (!segments[i - 1].empty()) return i;
  return 1;
}

std::size_t Frame::payload_length() const noexcept {
  std::size_t total = 0;
  for (const BufferList& s : segments) total += s.length();
  return total;
}

std::size_t encoded_length(const Frame& frame, FrameRev rev) noexcept {
  const std::size_t n = frame.num_segments();
  std::array<std::uint32_t, kMaxSegments> lens{};
  for (std::size_t i = 0; i < n; ++i) lens[i] = static_cast<std::uint32_t>(frame.segments[i].length());
  return kPreambleSize + static_cast<std::size_t>(body_length(lens.data(), n, rev));
}

std::size_t segment_offset(const Frame& frame, FrameRev rev, std::size_t index) noexcept {
  std::size_t at = kPreambleSize;
  for (std::size_t i = 0; i < index && i < kMaxSegments; ++i) {
    const std::size_t len = frame.segments[i].length();
    at += len;
    if (i == 0 && rev == FrameRev::rev1 && len != 0) at += kInlineCrcSize;
  }
  return at;
}

BufferList encode_frame(const Frame& frame, FrameRev rev) {
  const std::size_t n = frame.num_segments();
  // Preamble, inline crc and epilogue share one small heap block; the
  // segments themselves are referenced, never copied.
  Segment* block = Segment::allocate(kGeneratedMax);
  std::byte* p = block->data();
  BufferPtr preamble(block, 0, kPreambleSize);  // holds the block from here on
  write_preamble(p, frame, n);

  BufferList out;
  out.append(std::move(preamble));
  std::size_t at = kPreambleSize;
  if (rev == FrameRev::rev1) {
    if (!frame.segments[0].empty()) {
      out.append(frame.segments[0]);
      put_le32(p + at, segment_crc(frame.segments[0]));
      out.append(BufferPtr(block, at, kInlineCrcSize));
      at += kInlineCrcSize;
    }
    if (n > 1) {
      std::byte* ep = p + at;
      std::memset(ep, 0, kEpilogueRev1);
      ep[0] = static_cast<std::byte>(kLateStatusComplete);
      for (std::size_t i = 1; i < n; ++i) {
        out.append(frame.segments[i]);
        put_le32(ep + 1 + 4 * (i - 1), segment_crc(frame.segments[i]));
      }
      out.append(BufferPtr(block, at, kEpilogueRev1));
    }
    return out;
  }
  std::byte* ep = p + at;
  std::memset(ep, 0, kEpilogueRev0);  // late_flags 0 = complete
  for (std::size_t i = 0; i < n; ++i) {
    out.append(frame.segments[i]);
    put_le32(ep + 1 + 4 * i, segment_crc(frame.segments[i]));
  }
  out.append(BufferPtr(block, at, kEpilogueRev0));
  return out;
}

// ---------------------------------------------------------------------------
// Banner

BufferList encode_banner(const Banner& b) {
  std::array<std::byte, Banner::kPrefixSize + kBannerFeaturesSize> bytes{};
  std::memcpy(bytes.data(), kMagic.data(), kMagic.size());
  put_le16(bytes.data() + kMagic.size(), static_cast<std::uint16_t>(kBannerFeaturesSize));
  put_le64(bytes.data() + Banner::kPrefixSize, b.supported);
  put_le64(bytes.data() + Banner::kPrefixSize + 8, b.required);
  return BufferList::copy_of(bytes.data(), bytes.size());
}

BannerResult decode_banner(const BufferList& stream, std::size_t max_payload) {
  BannerResult r;
  const auto fail = [&r](std::string_view why) {
    r.error = errc::bad_banner;
    r.reason = why;
    return r;
  };
  std::array<char, kMsgr1Magic.size()> head{};
  const std::size_t have = std::min(stream.length(), head.size());
  stream.copy_out(0, have, head.data());
  const std::size_t magic_have = std::min(have, kMagic.size());
  if (std::string_view(head.data(), magic_have) != kMagic.substr(0, magic_have)) {
    // Not msgr2. Say so precisely when it is the legacy protocol.
    if (std::string_view(head.data(), have) == kMsgr1Magic.substr(0, have)) {
      if (have < kMsgr1Magic.size()) return r;  // could still be "ceph v027": need more
      return fail("peer speaks msgr1 (banner \"ceph v027\"), not msgr2");
    }
    return fail("not a msgr2 banner (expected \"ceph v2\\n\")");
  }
  if (stream.length() < Banner::kPrefixSize) return r;
  std::array<std::byte, Banner::kPrefixSize> prefix{};
  stream.copy_out(0, prefix.size(), prefix.data());
  const std::size_t payload = get_le16(prefix.data() + kMagic.size());
  if (payload < kBannerFeaturesSize) return fail("banner payload shorter than 16 bytes");
  if (payload > max_payload) return fail("banner payload longer than the limit");
  if (stream.length() < Banner::kPrefixSize + payload) return r;
  std::array<std::byte, kBannerFeaturesSize> features{};
  stream.copy_out(Banner::kPrefixSize, features.size(), features.data());
  r.banner.supported = get_le64(features.data());
  r.banner.required = get_le64(features.data() + 8);
  r.consumed = Banner::kPrefixSize + payload;  // extra payload bytes: future extensions
  return r;
}

std::optional<Negotiated> negotiate(const Banner& mine, const Banner& peer) noexcept {
  if ((mine.required & peer.supported) != mine.required) return std::nullopt;
  if ((peer.required & mine.supported) != peer.required) return std::nullopt;
  Negotiated n;
  n.peer = peer;
  // Both sides apply the same rule, so both pick the same revision.
  n.rev = (mine.supported & peer.supported & Banner::kRevision1) != 0 ? FrameRev::rev1
                                                                      : FrameRev::rev0;
  return n;
}

// ---------------------------------------------------------------------------
// Preamble (shared with the secure-mode codec, msgr/auth/secure_frames.*)

void encode_preamble(const Frame& frame, std::byte* out) noexcept {
  write_preamble(out, frame, frame.num_segments());
}

std::error_code parse_preamble(const std::byte* pre, const FrameLimits& limits, Preamble& out,
                               std::string& why) {
  // Nothing in the preamble is trusted before its crc checks out.
  if (crc32c(kPreambleCrcSeed, pre, kPreambleCrcOffset) != get_le32(pre + kPreambleCrcOffset)) {
    why = "bad preamble crc";
    return errc::bad_crc;
  }
  const auto tag = std::to_integer<std::uint8_t>(pre[0]);
  const auto nsegs = std::to_integer<std::size_t>(pre[1]);
  if (nsegs < 1 || nsegs > kMaxSegments) {
    why = "num_segments outside 1..4";
    return errc::malformed_frame;
  }
  if (tag < 1 || tag > kMaxKnownTag) {
    why = "unknown frame tag";
    return errc::unknown_tag;
  }
  out.lens.fill(0);
  out.aligns.fill(0);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < nsegs; ++i) {
    const std::byte* d = pre + kSegDescOffset + i * kSegDescSize;
    out.lens[i] = get_le32(d);
    out.aligns[i] = get_le16(d + 4);
    total += out.lens[i];
  }
  if (nsegs > 1 && out.lens[nsegs - 1] == 0) {
    why = "last segment of a multi-segment frame is empty";
    return errc::malformed_frame;
  }
  if (static_cast<Tag>(tag) != Tag::message) {
    // The reasons name the option that sets each limit (compat/ maps
    // them one to one), so an operator knows what to raise.
    if (total > limits.max_control_payload) {
      why = fmt::format("control frame payload over the limit ({} bytes > ms_max_control_frame_size {})", total,
                        limits.max_control_payload);
      return errc::frame_too_large;
    }
  } else {
    for (std::size_t i = 0; i < nsegs; ++i)
      if (out.lens[i] > limits.max_segment) {
        why = fmt::format("message segment over the limit ({} bytes > ms_max_segment_size {})", out.lens[i],
                          limits.max_segment);
        return errc::frame_too_large;
      }
    if (total > limits.max_frame) {
      why = fmt::format("frame over the limit ({} bytes > ms_max_frame_size {})", total, limits.max_frame);
      return errc::frame_too_large;
    }
  }
  out.tag = static_cast<Tag>(tag);
  out.nsegs = nsegs;
  return {};
}

std::array<std::uint16_t, kMaxSegments> default_alignments() noexcept { return kDefaultAlignments; }

// ---------------------------------------------------------------------------
// Decoder

void FrameDecoder::feed(BufferList&& bytes) {
  if (error_) return;  // failed decoders keep nothing
  buf_.append(std::move(bytes));
}

FrameDecoder::Status FrameDecoder::fail(std::error_code ec, std::string_view reason) {
  error_ = ec;
  reason_ = reason;
  buf_.clear();
  have_preamble_ = false;
  return Status::error;
}

std::size_t FrameDecoder::bytes_wanted() const noexcept {
  if (error_) return 0;
  const std::size_t have = buf_.length();
  if (!have_preamble_) return have < kPreambleSize ? kPreambleSize - have : 0;
  const std::uint64_t need = body_length(lens_.data(), nsegs_, rev_);
  return need > have ? static_cast<std::size_t>(need - have) : 0;
}

FrameDecoder::Status FrameDecoder::next(Frame& out) {
  if (error_) return Status::error;
  for (;;) {
    if (!have_preamble_) {
      if (buf_.length() < kPreambleSize) return Status::need_more;
      std::array<std::byte, kPreambleSize> pre{};
      buf_.copy_out(0, pre.size(), pre.data());
      Preamble parsed;
      std::string why;
      if (const std::error_code ec = parse_preamble(pre.data(), limits_, parsed, why)) return fail(ec, why);
      lens_ = parsed.lens;
      aligns_ = parsed.aligns;
      const auto tag = static_cast<std::uint8_t>(parsed.tag);
      const std::size_t nsegs = parsed.nsegs;
      tag_ = static_cast<Tag>(tag);
      nsegs_ = nsegs;
      have_preamble_ = true;
      buf_.consume_front(kPreambleSize);
    }

    if (buf_.length() < body_length(lens_.data(), nsegs_, rev_)) return Status::need_more;
    have_preamble_ = false;  // whatever happens below, this frame is consumed

    std::array<BufferList, kMaxSegments> segs;
    bool aborted = false;
    if (rev_ == FrameRev::rev1) {
      if (lens_[0] > 0) {
        segs[0] = buf_.split_front(lens_[0]);
        std::array<std::byte, kInlineCrcSize> crc{};
        buf_.copy_out(0, crc.size(), crc.data());
        buf_.consume_front(crc.size());
        if (segment_crc(segs[0]) != get_le32(crc.data()))
          return fail(errc::bad_crc, kBadSegmentCrc[0]);
      }
      if (nsegs_ > 1) {
        for (std::size_t i = 1; i < nsegs_; ++i) segs[i] = buf_.split_front(lens_[i]);
        std::array<std::byte, kEpilogueRev1> ep{};
        buf_.copy_out(0, ep.size(), ep.data());
        buf_.consume_front(ep.size());
        const auto status = std::to_integer<std::uint8_t>(ep[0]) & kLateStatusMask;
        if (status == kLateStatusAborted) {
          aborted = true;
        } else if (status != kLateStatusComplete) {
          return fail(errc::malformed_frame, "bad epilogue late status");
        } else {
          for (std::size_t i = 1; i < nsegs_; ++i)
            if (segment_crc(segs[i]) != get_le32(ep.data() + 1 + 4 * (i - 1)))
              return fail(errc::bad_crc, kBadSegmentCrc[i]);
        }
      }
    } else {
      for (std::size_t i = 0; i < nsegs_; ++i) segs[i] = buf_.split_front(lens_[i]);
      std::array<std::byte, kEpilogueRev0> ep{};
      buf_.copy_out(0, ep.size(), ep.data());
      buf_.consume_front(ep.size());
      if ((std::to_integer<std::uint8_t>(ep[0]) & kLateFlagAborted) != 0) {
        aborted = true;  // late_flags is not covered by any crc (rev0 weakness)
      } else {
        for (std::size_t i = 0; i < nsegs_; ++i)
          if (segment_crc(segs[i]) != get_le32(ep.data() + 1 + 4 * i))
            return fail(errc::bad_crc, kBadSegmentCrc[i]);
      }
    }
    if (aborted) continue;  // the sender abandoned it: drop silently

    out.tag = tag_;
    for (std::size_t i = 0; i < kMaxSegments; ++i) {
      out.segments[i] = std::move(segs[i]);
      out.alignments[i] = i < nsegs_ ? aligns_[i] : kDefaultAlignments[i];
    }
    return Status::frame;
  }
}

}  // namespace siphon::proto
