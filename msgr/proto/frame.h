// msgr2 frames as the layers above the codec see them (reference:
// shared/reference/msgr2-wire.md §3-§5). A Frame is a tag plus up to four
// segments, each a BufferList; encode_frame() adds the preamble, CRCs and
// epilogue of the negotiated revision, and FrameDecoder takes them off again.
//
// Encoding never copies segment payloads: the wire image is a BufferList
// that shares the segments' memory, with the preamble and CRCs in small
// segments of their own.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "msgr/base/buffer.h"

namespace siphon::proto {

enum class Tag : std::uint8_t {
  hello = 1,
  auth_request = 2,
  auth_bad_method = 3,
  auth_reply_more = 4,
  auth_request_more = 5,
  auth_done = 6,
  auth_signature = 7,
  client_ident = 8,
  server_ident = 9,
  ident_missing_features = 10,
  session_reconnect = 11,
  session_reset = 12,
  session_retry = 13,
  session_retry_global = 14,
  session_reconnect_ok = 15,
  wait = 16,
  message = 17,
  keepalive2 = 18,
  keepalive2_ack = 19,
  ack = 20,
};
std::string_view to_string(Tag t) noexcept;
inline constexpr std::uint8_t kMaxKnownTag = 20;  // Pacific: 1..20

enum class FrameRev : std::uint8_t { rev0 = 0, rev1 = 1 };

inline constexpr std::size_t kMaxSegments = 4;
inline constexpr std::size_t kPreambleSize = 32;
inline constexpr std::size_t kEpilogueRev0 = 17;
inline constexpr std::size_t kEpilogueRev1 = 13;
inline constexpr std::uint16_t kControlAlignment = 8;
inline constexpr std::uint16_t kDataAlignment = 4096;

struct Frame {
  Tag tag = Tag::wait;
  std::array<BufferList, kMaxSegments> segments{};
  std::array<std::uint16_t, kMaxSegments> alignments{kControlAlignment, kControlAlignment,
                                                     kControlAlignment, kDataAlignment};
  // Index of the last non-empty segment + 1, at least 1 (msgr2 rule).
  std::size_t num_segments() const noexcept;
  std::size_t payload_length() const noexcept;

  static Frame control(Tag tag, BufferList payload) {
    Frame f;
    f.tag = tag;
    f.segments[0] = std::move(payload);
    return f;
  }
};

// Bounds the decoder enforces before trusting any length it reads.
struct FrameLimits {
  std::uint32_t max_control_payload = 64 * 1024;      // single-segment control frames
  std::uint32_t max_segment = 256u * 1024 * 1024;     // any one MESSAGE segment
  std::uint64_t max_frame = 256ull * 1024 * 1024;     // sum of segments
};

// The bytes of a frame on the wire, sharing the segments' memory.
BufferList encode_frame(const Frame& frame, FrameRev rev);
// Exact wire length of `frame` in `rev` (msgr2-wire.md §4.5).
std::size_t encoded_length(const Frame& frame, FrameRev rev) noexcept;
// Where segment `index` (0..3) of `frame` starts in encode_frame()'s bytes:
// after the preamble, the segments before it and, in rev1, segment 0's
// inline crc. The RDMA stack cuts a MESSAGE's data segment out there.
std::size_t segment_offset(const Frame& frame, FrameRev rev, std::size_t index) noexcept;

// The 32-byte preamble of `frame` (tag, segment lengths and alignments, crc).
void encode_preamble(const Frame& frame, std::byte* out) noexcept;
// A preamble read back: its crc, tag, segment count and the limits checked
// (the error names the cause, and for a limit the option that sets it).
struct Preamble {
  Tag tag = Tag::wait;
  std::size_t nsegs = 0;
  std::array<std::uint32_t, kMaxSegments> lens{};
  std::array<std::uint16_t, kMaxSegments> aligns{};
};
std::error_code parse_preamble(const std::byte* pre, const FrameLimits& limits, Preamble& out,
                               std::string& why);
// The alignments a frame's unused segment slots carry.
std::array<std::uint16_t, kMaxSegments> default_alignments() noexcept;

// The connection banner (§3): "ceph v2\n", u16 length, u64 supported, u64 required.
struct Banner {
  static constexpr std::uint64_t kRevision1 = 1;   // msgr2 feature bit 0
  static constexpr std::uint64_t kCompression = 2; // bit 1 (Quincy+; we never set it)
  static constexpr std::size_t kPrefixSize = 10;   // magic + u16 length
  std::uint64_t supported = kRevision1;
  std::uint64_t required = 0;
};
BufferList encode_banner(const Banner& b);

// Reads a banner from the stream prefix. Returns the number of bytes consumed
// (0 = need more), or an error (errc::bad_banner, with `reason` telling e.g.
// that the peer speaks msgr1).
struct BannerResult {
  std::size_t consumed = 0;
  Banner banner{};
  std::error_code error{};
  std::string_view reason{};
};
BannerResult decode_banner(const BufferList& stream, std::size_t max_payload = 4096);

// Revision to use with a peer, or an error if the feature masks conflict.
struct Negotiated {
  FrameRev rev = FrameRev::rev1;
  Banner peer{};
};
std::optional<Negotiated> negotiate(const Banner& mine, const Banner& peer) noexcept;

// Incremental frame decoder. Feed it bytes in any chunking; it never trusts a
// length before checking the preamble CRC and the limits, never reads past
// what it was given, and reports each malformed input as an error that names
// the cause. After an error the decoder stays failed.
class FrameDecoder {
 public:
  FrameDecoder(FrameRev rev, FrameLimits limits) noexcept : rev_(rev), limits_(limits) {}

  // Takes ownership of `bytes` (shared, not copied).
  void feed(BufferList&& bytes);
  void feed(const void* data, std::size_t len) { feed(BufferList::copy_of(data, len)); }

  enum class Status { need_more, frame, error };
  // Produces the next complete frame into `out`, or says why it cannot.
  // Aborted frames (late status) are consumed and skipped silently.
  Status next(Frame& out);

  std::error_code error() const noexcept { return error_; }
  std::string_view error_reason() const noexcept { return reason_; }
  // Bytes still needed to finish the frame in progress (a read-size hint).
  std::size_t bytes_wanted() const noexcept;
  std::size_t buffered() const noexcept { return buf_.length(); }
  FrameRev rev() const noexcept { return rev_; }
  // The bytes fed and not yet decoded, taken out, when no frame is half
  // parsed (a stream switching to secure mode after a whole frame): what
  // follows is no longer this decoder's to read.
  BufferList take_rest() noexcept {
    have_preamble_ = false;
    return std::exchange(buf_, BufferList{});
  }

 private:
  Status fail(std::error_code ec, std::string_view reason);
  FrameRev rev_;
  FrameLimits limits_;
  BufferList buf_;
  // Parsed preamble of the frame in progress.
  bool have_preamble_ = false;
  Tag tag_ = Tag::wait;
  std::size_t nsegs_ = 0;
  std::array<std::uint32_t, kMaxSegments> lens_{};
  std::array<std::uint16_t, kMaxSegments> aligns_{};
  std::error_code error_{};
  std::string reason_;  // owned: reasons carry the sizes and limits
};

}  // namespace siphon::proto
