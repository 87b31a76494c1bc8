// siphon-objd's messages (docs/embedding.md): the object operations a client
// sends and the replies, as typed Messages with Ceph-style encodings
// (msgr/proto/encoding.h: a versioned struct in the front segment, object
// bytes in the data segment, so that large objects are never copied into
// the front and the RDMA stack can move them zero-copy).
//
//   MObjdOp     (0x7310)  front: ENCODE_START(1, 1) { u8 op; string name;
//                         u32 data_crc } ENCODE_FINISH; data: the object (put)
//   MObjdReply  (0x7311)  front: ENCODE_START(1, 1) { u8 op; string name;
//                         s32 result; u64 size; u32 data_crc; string error }
//                         ENCODE_FINISH; data: the object (get)
//
// data_crc is crc32c(-1, data) of the data segment when there is one (the
// end-to-end check siphon-bench objd --verify uses), 0 otherwise. result is 0
// or a negative errno (ENOENT, EINVAL, EFBIG, ENOSPC, EIO, EOPNOTSUPP) and
// `error` a sentence naming the cause. Both structs may grow: a decoder skips
// fields it does not know (struct_len), and a newer incompatible encoding
// raises struct_compat, which an old decoder refuses (the connection faults,
// as Ceph does for an undecodable message).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "msgr/api/message.h"

namespace siphon::objd {

enum class OpCode : std::uint8_t { put = 1, get = 2, stat = 3, remove = 4 };
std::string_view to_string(OpCode op) noexcept;

inline constexpr std::uint16_t kMsgObjdOp = 0x7310;
inline constexpr std::uint16_t kMsgObjdReply = 0x7311;

// Object names: 1 to kMaxNameLength bytes of printable ASCII other than '/'
// ("a/b" would be ambiguous in a directory store). Returns "" when `name` is
// valid, else a sentence saying what is wrong.
inline constexpr std::size_t kMaxNameLength = 200;
std::string check_object_name(std::string_view name);

// crc32c(-1, bl): the checksum carried in data_crc.
std::uint32_t data_crc(const BufferList& bl) noexcept;

class MObjdOp final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgObjdOp;
  static constexpr std::uint16_t kVersion = 1;
  MObjdOp() noexcept : Message(kType, kVersion, 1) {}
  MObjdOp(OpCode o, std::string n) : Message(kType, kVersion, 1), op(o), name(std::move(n)) {}

  OpCode op = OpCode::stat;  // decoded as sent: an unknown code stays as its number
  std::string name;
  std::uint32_t crc = 0;     // of data(), for put

  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;  // throws std::runtime_error naming the bad field
  std::string_view type_name() const noexcept override { return "objd_op"; }
};

class MObjdReply final : public Message {
 public:
  static constexpr std::uint16_t kType = kMsgObjdReply;
  static constexpr std::uint16_t kVersion = 1;
  MObjdReply() noexcept : Message(kType, kVersion, 1) {}

  OpCode op = OpCode::stat;
  std::string name;
  std::int32_t result = 0;   // 0 or -errno
  std::uint64_t size = 0;    // the object's size (put, get, stat)
  std::uint32_t crc = 0;     // of data(), for get
  std::string error;         // why, when result < 0

  void encode_payload(std::uint64_t features) override;
  void decode_payload() override;
  std::string_view type_name() const noexcept override { return "objd_reply"; }
};

}  // namespace siphon::objd
