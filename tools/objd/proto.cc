#include "tools/objd/proto.h"

#include <fmt/format.h>

#include <stdexcept>

#include "msgr/proto/encoding.h"

namespace siphon::objd {
namespace {

[[noreturn]] void fail(const proto::Decoder& d, std::string_view what) {
  throw std::runtime_error(fmt::format("{}: {}", what, d.error().message()));
}

}  // namespace

std::string_view to_string(OpCode op) noexcept {
  switch (op) {
    case OpCode::put: return "put";
    case OpCode::get: return "get";
    case OpCode::stat: return "stat";
    case OpCode::remove: return "delete";
  }
  return "unknown";
}

std::string check_object_name(std::string_view name) {
  if (name.empty()) return "the object name is empty";
  if (name.size() > kMaxNameLength)
    return fmt::format("the object name is {} bytes long; the limit is {}", name.size(), kMaxNameLength);
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c > 0x7e)
      return fmt::format("the object name has a non-printable byte 0x{:02x} at offset {} (printable ASCII only)",
                         c, i);
    if (c == '/') return fmt::format("the object name has a '/' at offset {} (not allowed)", i);
  }
  if (name == "." || name == "..") return fmt::format("'{}' is not an object name", name);
  return "";
}

std::uint32_t data_crc(const BufferList& bl) noexcept { return bl.crc32c(0xffffffffu); }

void MObjdOp::encode_payload(std::uint64_t /*features*/) {
  proto::Encoder e;
  e.versioned(1, 1, [&](proto::Encoder& x) {
    x.u8(static_cast<std::uint8_t>(op));
    x.string(name);
    x.u32(crc);
  });
  front().clear();
  e.append_to(front());
}

void MObjdOp::decode_payload() {
  proto::Decoder d(front());
  d.versioned(1, "MObjdOp", [&](const proto::Decoder::StructHeader&) {
    op = static_cast<OpCode>(d.u8("op"));
    name = d.string("name");
    crc = d.u32("data_crc");
  });
  if (!d.ok()) fail(d, "objd_op");
}

void MObjdReply::encode_payload(std::uint64_t /*features*/) {
  proto::Encoder e;
  e.versioned(1, 1, [&](proto::Encoder& x) {
    x.u8(static_cast<std::uint8_t>(op));
    x.string(name);
    x.s32(result);
    x.u64(size);
    x.u32(crc);
    x.string(error);
  });
  front().clear();
  e.append_to(front());
}

void MObjdReply::decode_payload() {
  proto::Decoder d(front());
  d.versioned(1, "MObjdReply", [&](const proto::Decoder::StructHeader&) {
    op = static_cast<OpCode>(d.u8("op"));
    name = d.string("name");
    result = d.s32("result");
    size = d.u64("size");
    crc = d.u32("data_crc");
    error = d.string("error");
  });
  if (!d.ok()) fail(d, "objd_reply");
}

}  // namespace siphon::objd
