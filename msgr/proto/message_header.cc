#include "msgr/proto/message_header.h"

#include <array>
#include <cstdio>

namespace siphon::proto {
namespace {

template <class U>
void put(std::span<std::byte, MessageHeader2::kSize> out, std::size_t off, U v) noexcept {
  for (std::size_t i = 0; i < sizeof(U); ++i)
    out[off + i] = static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
}

template <class U>
U get(std::span<const std::byte, MessageHeader2::kSize> in, std::size_t off) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = sizeof(U); i-- > 0;) v = (v << 8) | std::to_integer<std::uint64_t>(in[off + i]);
  return static_cast<U>(v);
}

}  // namespace

void MessageHeader2::encode_to(std::span<std::byte, kSize> out) const noexcept {
  put(out, kOffSeq, seq);
  put(out, kOffTid, tid);
  put(out, kOffType, type);
  put(out, kOffPriority, priority);
  put(out, kOffVersion, version);
  put(out, kOffDataPrePaddingLen, data_pre_padding_len);
  put(out, kOffDataOff, data_off);
  put(out, kOffAckSeq, ack_seq);
  put(out, kOffFlags, flags);
  put(out, kOffCompatVersion, compat_version);
  put(out, kOffReserved, reserved);
}

BufferList MessageHeader2::encode() const {
  std::array<std::byte, kSize> raw{};
  encode_to(raw);
  return BufferList::copy_of(raw.data(), raw.size());
}

MessageHeader2 MessageHeader2::decode_from(std::span<const std::byte, kSize> in) noexcept {
  MessageHeader2 h;
  h.seq = get<std::uint64_t>(in, kOffSeq);
  h.tid = get<std::uint64_t>(in, kOffTid);
  h.type = get<std::uint16_t>(in, kOffType);
  h.priority = get<std::uint16_t>(in, kOffPriority);
  h.version = get<std::uint16_t>(in, kOffVersion);
  h.data_pre_padding_len = get<std::uint32_t>(in, kOffDataPrePaddingLen);
  h.data_off = get<std::uint16_t>(in, kOffDataOff);
  h.ack_seq = get<std::uint64_t>(in, kOffAckSeq);
  h.flags = get<std::uint8_t>(in, kOffFlags);
  h.compat_version = get<std::uint16_t>(in, kOffCompatVersion);
  h.reserved = get<std::uint16_t>(in, kOffReserved);
  return h;
}

Result<MessageHeader2> MessageHeader2::decode(const BufferList& segment) {
  if (segment.length() != kSize) {
    DecodeError e;
    e.reason = segment.length() < kSize ? "segment is shorter than ceph_msg_header2"
                                        : "segment is longer than ceph_msg_header2";
    e.field = "header2 length";
    e.context[0] = "ceph_msg_header2";
    e.depth = 1;
    e.offset = std::min(segment.length(), kSize);
    e.value = segment.length();
    e.limit = kSize;
    e.has_numbers = true;
    return e;
  }
  std::array<std::byte, kSize> raw{};
  segment.copy_out(0, kSize, raw.data());
  return decode_from(raw);
}

MessageHeader2 MessageHeader2::make(std::uint16_t type, std::uint64_t seq, std::uint64_t ack_seq,
                                    std::uint16_t version, std::uint16_t compat_version,
                                    std::uint16_t priority, std::uint64_t tid) {
  MessageHeader2 h;
  h.type = type;
  h.seq = seq;
  h.ack_seq = ack_seq;
  h.version = version;
  h.compat_version = compat_version == 0 ? version : compat_version;
  h.priority = priority;
  h.tid = tid;
  h.flags = kMsgFlagsDefault;
  return h;
}

std::string MessageHeader2::to_string() const {
  char buf[192];
  std::snprintf(buf, sizeof(buf),
                "seq %llu tid %llu type %u prio %u v %u/%u ack %llu flags 0x%x data_off %u",
                static_cast<unsigned long long>(seq), static_cast<unsigned long long>(tid),
                unsigned{type}, unsigned{priority}, unsigned{version}, unsigned{compat_version},
                static_cast<unsigned long long>(ack_seq), unsigned{flags}, unsigned{data_off});
  return buf;
}

}  // namespace siphon::proto
