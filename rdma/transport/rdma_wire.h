// Wire formats of the RDMA stack (docs/rdma-transport.md §Wire):
//
//   ConnectInfo  the rdma-cm private data exchanged at connect and accept
//                (versioned, 32 bytes; RC private data holds at most 56);
//   RejectInfo   the private data of a reject, carrying a reason code;
//   SendHeader   the 20-byte header at the start of every SEND, sealed by a
//                CRC32C; a read_request's descriptors carry their own.
//
// All integers little-endian. Decoders validate everything a peer sends and
// return an error naming the problem; they never trust a length, and they
// check the CRCs before reading any field (a damaged header is never acted
// on: its credits are not applied, its lengths not trusted).
//
// Version 2 added the CRCs (version 1 had a 16-byte header and bare
// descriptors); a version-1 peer is refused at connect.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <system_error>

namespace siphon::rdma {

inline constexpr std::uint32_t kWireMagic = 0x31485053;  // "SPH1"
inline constexpr std::uint8_t kWireVersion = 2;

struct ConnectInfo {
  static constexpr std::size_t kSize = 32;
  std::uint8_t version = kWireVersion;
  std::uint8_t flags = 0;               // kFlagSrq
  std::uint16_t update_slots = 0;       // receives reserved for credit updates (credits.h)
  std::uint32_t credits = 0;            // data receive buffers granted to the peer
  std::uint32_t recv_buffer_size = 0;   // bytes of each of those buffers
  std::uint32_t max_inline = 0;         // informational: the sender's inline limit
  std::uint32_t max_frame = 0;          // largest msgr2 frame accepted, bytes (0 = no limit)
  std::uint32_t zero_copy_threshold = 0;
  // Largest zero-copy transfer, bytes, the sender of this info pulls by RDMA
  // READ (it must fit its receive pool); larger data goes through SENDs.
  // 0 = none.
  std::uint32_t max_read = 0;
  static constexpr std::uint8_t kFlagSrq = 1;

  std::array<std::uint8_t, kSize> encode() const noexcept;
  // Validates magic, version and sizes (credits >= 2, buffers >= 1 KiB, ...).
  static std::error_code decode(std::span<const std::uint8_t> bytes, ConnectInfo& out,
                                std::string_view* reason = nullptr) noexcept;
};

enum class RejectReason : std::uint8_t {
  unknown = 0,
  version_unsupported = 1,
  bad_parameters = 2,
  no_resources = 3,         // pools or QP limits exhausted
  too_many_connections = 4,
  shutting_down = 5,
  not_listening = 6,
};
std::string_view to_string(RejectReason r) noexcept;

struct RejectInfo {
  static constexpr std::size_t kSize = 8;
  RejectReason reason = RejectReason::unknown;
  std::uint32_t detail = 0;  // e.g. the version we support
  std::array<std::uint8_t, kSize> encode() const noexcept;
  // False when the bytes are not a Siphon reject (e.g. a non-Siphon peer).
  static bool decode(std::span<const std::uint8_t> bytes, RejectInfo& out) noexcept;
};

// What a SEND carries after its header.
enum class SendType : std::uint8_t {
  stream = 1,        // msgr2 stream bytes (banner, frames), possibly part of a frame
  read_request = 2,  // the next `length` stream bytes are to be pulled by RDMA READ:
                     // payload = ReadDescriptor[n], then crc32c of them (u32)
  read_done = 3,     // transfer `id` has been pulled; the sender may release it
  credit_update = 4, // header only; uses an update slot, not a data credit
};

// Bytes 0..15 are the fields below, 16..19 crc32c(0xFFFFFFFF, bytes 0..15).
// The CRC covers the header only (stream bytes are msgr2's, under its own
// CRCs or AEAD): its coverage does not depend on any field it protects, so
// every single-bit (and every burst of up to 32 bits) error in the header is
// detected.
struct SendHeader {
  static constexpr std::size_t kSize = 20;
  SendType type = SendType::stream;
  std::uint8_t flags = 0;  // reserved, 0
  std::uint16_t credits_returned = 0;
  std::uint32_t length = 0;  // payload bytes after the header (read_request: stream bytes pulled)
  std::uint64_t id = 0;      // read_request / read_done: transfer id

  // Writes the header and its CRC.
  void encode(std::uint8_t* out) const noexcept;
  // errc::bad_crc when the header's (or a read_request's descriptors') CRC
  // does not match; errc::malformed_frame for anything else.
  static std::error_code decode(std::span<const std::uint8_t> bytes, SendHeader& out,
                                std::string_view* reason = nullptr) noexcept;
};

// One remote region to pull, in a read_request payload. The payload is n
// descriptors followed by kCrcSize bytes: crc32c(0xFFFFFFFF, the n * kSize
// descriptor bytes), checked by SendHeader::decode.
struct ReadDescriptor {
  static constexpr std::size_t kSize = 16;
  static constexpr std::size_t kCrcSize = 4;
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
  std::uint32_t length = 0;
  void encode(std::uint8_t* out) const noexcept;
  static ReadDescriptor decode(const std::uint8_t* in) noexcept;
  // Writes the CRC of the `n` descriptors at `first` right after them;
  // returns the payload size, n * kSize + kCrcSize.
  static std::size_t seal(std::uint8_t* first, std::size_t n) noexcept;
};

// --- Limits of the wire format: what a decoder accepts from a peer. The
// stack's own configuration ranges (options.h) sit inside them.

// Receive buffers a peer may advertise (ConnectInfo::recv_buffer_size).
inline constexpr std::uint32_t kMinRecvBufferSize = 1024;
inline constexpr std::uint32_t kMaxRecvBufferSize = 64u << 20;
// Data credits a peer may grant (ConnectInfo::credits).
inline constexpr std::uint32_t kMinWireCredits = 2;
inline constexpr std::uint32_t kMaxWireCredits = 65535;
// Receives a peer may reserve for credit updates (ConnectInfo::update_slots).
inline constexpr std::uint16_t kMinUpdateSlots = 1;
inline constexpr std::uint16_t kMaxUpdateSlots = 64;
// Descriptors in one read_request: as many as fit the smallest receive buffer
// a peer may have, after the header and before the descriptors' CRC (so a
// read_request is always one SEND): (1024 - 20 - 4) / 16 = 62.
inline constexpr std::size_t kMaxReadDescriptors =
    (kMinRecvBufferSize - SendHeader::kSize - ReadDescriptor::kCrcSize) / ReadDescriptor::kSize;

static_assert(kMaxReadDescriptors >= 1);
static_assert(SendHeader::kSize + kMaxReadDescriptors * ReadDescriptor::kSize + ReadDescriptor::kCrcSize <=
                  kMinRecvBufferSize,
              "a read_request with the most descriptors must fit the smallest receive buffer");
static_assert(kMinRecvBufferSize > SendHeader::kSize, "a stream SEND must carry at least one byte");
static_assert(kMinRecvBufferSize <= kMaxRecvBufferSize && kMinWireCredits <= kMaxWireCredits &&
              kMinUpdateSlots <= kMaxUpdateSlots);
static_assert(kMaxWireCredits <= UINT16_MAX, "credits are returned in SendHeader::credits_returned (16 bits)");

}  // namespace siphon::rdma
