// siphon-bench's own message format (inside ordinary msgr2 MESSAGEs), and
// the bookkeeping of --verify. Pure code: no messenger, no threads.
//
// Every siphon-bench message carries a 48-byte BenchHeader in its front
// segment and its payload in the data segment:
//
//   offset size field
//        0    4 magic          "SBNC" (0x434e4253 little-endian)
//        4    1 version        1
//        5    1 op             Op below
//        6    2 flags          Flag bits below
//        8    4 conn_id        the client's connection number
//       12    4 think_us       server-side busy time before replying (requests)
//       16    8 seq            per-connection sequence number, from 1
//       24    8 send_ns        client's send time (steady clock), echoed back
//       32    4 reply_size     payload bytes the server sends back (source)
//       36    4 payload_crc    CRC32-C of the data segment (when Flag::verify)
//       40    4 payload_len    length of the data segment
//       44    4 header_crc     CRC32-C of bytes 0..43
//
// The server is stateless: each request says what to answer (echo: the same
// payload; sink: an empty acknowledgement that says whether the payload's
// CRC matched; source: `reply_size` fresh bytes), so a server needs no
// workload flags. Control messages (op ctl_*) mark the client's measurement
// window so that the server can report its CPU time over exactly that window.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string_view>

namespace siphon::bench {

// Message types (an application range, like the docs' ping example).
inline constexpr std::uint16_t kMsgRequest = 0x7f30;
inline constexpr std::uint16_t kMsgReply = 0x7f31;

enum class Op : std::uint8_t {
  echo = 1,       // reply carries the request's payload back
  sink = 2,       // reply is an empty acknowledgement
  source = 3,     // request is empty, reply carries reply_size bytes
  ctl_start = 4,  // the client's measurement window starts (server snapshots its CPU)
  ctl_stop = 5,   // ... and ends; the reply carries ServerStats
  ctl_done = 6,   // the client is finished (a `server --once` exits)
};
std::string_view to_string(Op op) noexcept;

namespace flag {
inline constexpr std::uint16_t verify = 1u << 0;         // payload_crc is set and must be checked
inline constexpr std::uint16_t corrupt_reply = 1u << 1;  // test hook: server damages its reply payload
inline constexpr std::uint16_t payload_bad = 1u << 2;    // (sink reply) the request's CRC did not match
}  // namespace flag

inline constexpr std::uint32_t kMagic = 0x434e4253;  // "SBNC"
inline constexpr std::uint8_t kVersion = 1;

struct BenchHeader {
  static constexpr std::size_t kSize = 48;
  Op op = Op::echo;
  std::uint16_t flags = 0;
  std::uint32_t conn_id = 0;
  std::uint32_t think_us = 0;
  std::uint64_t seq = 0;
  std::uint64_t send_ns = 0;
  std::uint32_t reply_size = 0;
  std::uint32_t payload_crc = 0;
  std::uint32_t payload_len = 0;

  // Writes the 48 bytes, header_crc included.
  std::array<std::byte, kSize> encode() const noexcept;
  enum class DecodeError { none, short_buffer, bad_magic, bad_version, bad_op, bad_header_crc };
  // Parses 48 bytes (more are ignored).
  static std::optional<BenchHeader> decode(std::span<const std::byte> bytes, DecodeError* why = nullptr) noexcept;
};
std::string_view to_string(BenchHeader::DecodeError e) noexcept;

// What the server reports for a ctl_stop: its CPU time over the window.
// Sent as the reply's data segment (16 bytes: two little-endian u64 ns).
struct ServerStats {
  std::uint64_t user_ns = 0;
  std::uint64_t system_ns = 0;
  std::array<std::byte, 16> encode() const noexcept;
  static std::optional<ServerStats> decode(std::span<const std::byte> bytes) noexcept;
};

// Per-connection delivery bookkeeping on the client: which requests are
// still unanswered, in send order. Classifies every reply:
//   in_order     the expected one (no earlier request is still missing, or
//                the missing ones were sent before and are simply later:
//                a reply is in order when its seq exceeds every seq
//                completed before it)
//   reordered    it was outstanding, but a later-sent request was answered first
//   duplicate    its seq was answered already
//   unknown      its seq was never sent (a damaged header)
// Requests still outstanding when the run ends are the lost ones. One lost
// message therefore counts once (not as a reordering of every later one).
class SeqTracker {
 public:
  enum class Outcome { in_order, reordered, duplicate, unknown };
  // The seq for the next request (1, 2, ...), recorded as outstanding.
  std::uint64_t issue();
  Outcome complete(std::uint64_t seq);
  std::size_t outstanding() const noexcept { return outstanding_.size(); }
  std::uint64_t issued() const noexcept { return next_ - 1; }

 private:
  std::deque<std::uint64_t> outstanding_;  // ascending (issue order)
  std::uint64_t next_ = 1;
  std::uint64_t max_completed_ = 0;
};

}  // namespace siphon::bench
