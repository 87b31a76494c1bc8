// ceph_msg_header2: segment 0 of every MESSAGE frame (msgr2-wire.md §9.1).
//
// 41 bytes, byte-packed, little-endian. The layout is spelled out as offsets
// (no packed C struct: `flags` at 36 and `compat_version` at 37 are
// unaligned, pitfall 15) and the total is static_asserted. The front,
// middle and data lengths are NOT in the header: they are the lengths of
// segments 1..3 in the frame's preamble (pitfall 16).
//
// Flags are the msgr1 footer flags. Ceph sends COMPLETE|NOCRC (3), the
// kernel 0. msgr2 has no message footer and no per-message CRCs (the frame
// CRCs cover every segment), so a receiver must not verify message CRCs
// whatever NOCRC says and must not require COMPLETE; the flags are kept
// verbatim so a re-encoded header is byte-identical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "msgr/base/buffer.h"
#include "msgr/proto/encoding.h"

namespace siphon::proto {

// CEPH_MSG_PRIO_*
inline constexpr std::uint16_t kMsgPrioLow = 64;
inline constexpr std::uint16_t kMsgPrioDefault = 127;
inline constexpr std::uint16_t kMsgPrioHigh = 196;
inline constexpr std::uint16_t kMsgPrioHighest = 255;

// CEPH_MSG_FOOTER_* (header2 `flags`)
inline constexpr std::uint8_t kMsgFlagComplete = 1;
inline constexpr std::uint8_t kMsgFlagNoCrc = 2;
inline constexpr std::uint8_t kMsgFlagSigned = 4;
/// What Siphon sends, as Ceph does.
inline constexpr std::uint8_t kMsgFlagsDefault = kMsgFlagComplete | kMsgFlagNoCrc;

// Message types a minimal mon client uses (§9.2).
inline constexpr std::uint16_t kMsgPing = 2;
inline constexpr std::uint16_t kMsgMonMap = 4;
inline constexpr std::uint16_t kMsgMonGetMap = 5;
inline constexpr std::uint16_t kMsgMonSubscribe = 15;
inline constexpr std::uint16_t kMsgMonSubscribeAck = 16;
inline constexpr std::uint16_t kMsgAuth = 17;
inline constexpr std::uint16_t kMsgAuthReply = 18;
inline constexpr std::uint16_t kMsgMonGetVersion = 19;
inline constexpr std::uint16_t kMsgMonGetVersionReply = 20;

/// MESSAGE segment alignments (§4.1): header/front/middle 8, data 4096.
inline constexpr std::uint16_t kMsgHeaderAlignment = 8;

struct MessageHeader2 {
  // Byte layout (offset of each field).
  static constexpr std::size_t kOffSeq = 0;
  static constexpr std::size_t kOffTid = 8;
  static constexpr std::size_t kOffType = 16;
  static constexpr std::size_t kOffPriority = 18;
  static constexpr std::size_t kOffVersion = 20;
  static constexpr std::size_t kOffDataPrePaddingLen = 22;
  static constexpr std::size_t kOffDataOff = 26;
  static constexpr std::size_t kOffAckSeq = 28;
  static constexpr std::size_t kOffFlags = 36;
  static constexpr std::size_t kOffCompatVersion = 37;
  static constexpr std::size_t kOffReserved = 39;
  static constexpr std::size_t kSize = 41;
  static_assert(kOffTid == kOffSeq + 8 && kOffType == kOffTid + 8 &&
                kOffPriority == kOffType + 2 && kOffVersion == kOffPriority + 2 &&
                kOffDataPrePaddingLen == kOffVersion + 2 &&
                kOffDataOff == kOffDataPrePaddingLen + 4 && kOffAckSeq == kOffDataOff + 2 &&
                kOffFlags == kOffAckSeq + 8 && kOffCompatVersion == kOffFlags + 1 &&
                kOffReserved == kOffCompatVersion + 2 && kSize == kOffReserved + 2,
                "ceph_msg_header2 is 41 packed bytes (msgr2-wire.md §9.1)");

  std::uint64_t seq = 0;            ///< session sequence number, first = 1
  std::uint64_t tid = 0;            ///< transaction id; replies echo it
  std::uint16_t type = 0;           ///< CEPH_MSG_* / MSG_*
  std::uint16_t priority = kMsgPrioDefault;
  std::uint16_t version = 1;        ///< encoding version of front/middle/data
  std::uint32_t data_pre_padding_len = 0;
  std::uint16_t data_off = 0;       ///< sender's logical data offset (alignment hint)
  std::uint64_t ack_seq = 0;        ///< sender's in_seq
  std::uint8_t flags = kMsgFlagsDefault;
  std::uint16_t compat_version = 1; ///< oldest decoder version that can read it
  std::uint16_t reserved = 0;

  friend bool operator==(const MessageHeader2&, const MessageHeader2&) = default;

  /// Writes the 41 bytes.
  void encode_to(std::span<std::byte, kSize> out) const noexcept;
  BufferList encode() const;

  /// Reads the 41 bytes of `in`.
  static MessageHeader2 decode_from(std::span<const std::byte, kSize> in) noexcept;
  /// Decodes MESSAGE segment 0, which must be exactly 41 bytes long.
  static Result<MessageHeader2> decode(const BufferList& segment);

  /// A header for sending: compat_version = version unless the message
  /// defines a lower one (pitfall 14), flags COMPLETE|NOCRC.
  static MessageHeader2 make(std::uint16_t type, std::uint64_t seq, std::uint64_t ack_seq,
                             std::uint16_t version = 1, std::uint16_t compat_version = 0,
                             std::uint16_t priority = kMsgPrioDefault, std::uint64_t tid = 0);

  /// Whether the sender claims a complete message. Informational only:
  /// kernel peers send 0 and are not aborted by it.
  bool flag_complete() const noexcept { return (flags & kMsgFlagComplete) != 0; }
  /// msgr2 never carries message-level CRCs; receivers rely on the frame
  /// CRCs regardless of this bit.
  bool flag_nocrc() const noexcept { return (flags & kMsgFlagNoCrc) != 0; }

  /// "seq 1 tid 0 type 19 prio 127 v 1/1 ack 0 flags 0x3"
  std::string to_string() const;
};

}  // namespace siphon::proto
