#include "rdma/transport/rdma_wire.h"

#include <cstring>

#include "msgr/base/crc32c.h"
#include "msgr/base/error.h"

namespace siphon::rdma {
namespace {

void put16(std::uint8_t* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
void put32(std::uint8_t* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put64(std::uint8_t* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint16_t get16(const std::uint8_t* p) noexcept { return static_cast<std::uint16_t>(p[0] | p[1] << 8); }
std::uint32_t get32(const std::uint8_t* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
std::uint64_t get64(const std::uint8_t* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

std::error_code bad(std::string_view* reason, std::string_view why) noexcept {
  if (reason != nullptr) *reason = why;
  return errc::malformed_frame;
}

constexpr std::size_t kHeaderFields = 16;  // SendHeader bytes the CRC covers
static_assert(SendHeader::kSize == kHeaderFields + 4);

std::uint32_t wire_crc(const std::uint8_t* p, std::size_t n) noexcept { return crc32c(0xFFFFFFFFu, p, n); }

}  // namespace

std::array<std::uint8_t, ConnectInfo::kSize> ConnectInfo::encode() const noexcept {
  std::array<std::uint8_t, kSize> b{};
  put32(&b[0], kWireMagic);
  b[4] = version;
  b[5] = flags;
  put16(&b[6], update_slots);
  put32(&b[8], credits);
  put32(&b[12], recv_buffer_size);
  put32(&b[16], max_inline);
  put32(&b[20], max_frame);
  put32(&b[24], zero_copy_threshold);
  put32(&b[28], max_read);
  return b;
}

std::error_code ConnectInfo::decode(std::span<const std::uint8_t> b, ConnectInfo& out,
                                    std::string_view* reason) noexcept {
  if (b.size() < kSize) return bad(reason, "connect private data shorter than 32 bytes");
  if (get32(&b[0]) != kWireMagic) return bad(reason, "connect private data has no Siphon magic (not a Siphon peer?)");
  ConnectInfo c;
  c.version = b[4];
  if (c.version != kWireVersion) {
    if (reason != nullptr) *reason = "unsupported Siphon RDMA wire version";
    return errc::unsupported_protocol;
  }
  c.flags = b[5];
  c.update_slots = get16(&b[6]);
  c.credits = get32(&b[8]);
  c.recv_buffer_size = get32(&b[12]);
  c.max_inline = get32(&b[16]);
  c.max_frame = get32(&b[20]);
  c.zero_copy_threshold = get32(&b[24]);
  c.max_read = get32(&b[28]);
  // The texts spell out the constants of wire.h (wire_test checks each bound).
  static_assert(kMinWireCredits == 2 && kMaxWireCredits == 65535 && kMinUpdateSlots == 1 &&
                kMaxUpdateSlots == 64 && kMinRecvBufferSize == 1024 && kMaxRecvBufferSize == (64u << 20));
  if (c.credits < kMinWireCredits || c.credits > kMaxWireCredits) return bad(reason, "credits outside [2, 65535]");
  if (c.update_slots < kMinUpdateSlots || c.update_slots > kMaxUpdateSlots)
    return bad(reason, "update slots outside [1, 64]");
  if (c.recv_buffer_size < kMinRecvBufferSize || c.recv_buffer_size > kMaxRecvBufferSize)
    return bad(reason, "receive buffer size outside [1 KiB, 64 MiB]");
  out = c;
  return {};
}

std::string_view to_string(RejectReason r) noexcept {
  switch (r) {
    case RejectReason::unknown: return "unknown reason";
    case RejectReason::version_unsupported: return "wire version not supported";
    case RejectReason::bad_parameters: return "bad connection parameters";
    case RejectReason::no_resources: return "no resources (buffer pools, QPs or shared receive queue exhausted)";
    case RejectReason::too_many_connections: return "too many connections";
    case RejectReason::shutting_down: return "peer is shutting down";
    case RejectReason::not_listening: return "peer is not accepting connections";
  }
  return "unknown reason";
}

std::array<std::uint8_t, RejectInfo::kSize> RejectInfo::encode() const noexcept {
  std::array<std::uint8_t, kSize> b{};
  put32(&b[0], kWireMagic ^ 0xffffffffu);
  b[4] = static_cast<std::uint8_t>(reason);
  b[5] = static_cast<std::uint8_t>(detail);
  put16(&b[6], static_cast<std::uint16_t>(detail >> 8));
  return b;
}

bool RejectInfo::decode(std::span<const std::uint8_t> b, RejectInfo& out) noexcept {
  if (b.size() < kSize || get32(&b[0]) != (kWireMagic ^ 0xffffffffu)) return false;
  out.reason = b[4] <= static_cast<std::uint8_t>(RejectReason::not_listening)
                   ? static_cast<RejectReason>(b[4])
                   : RejectReason::unknown;
  out.detail = b[5] | static_cast<std::uint32_t>(get16(&b[6])) << 8;
  return true;
}

void SendHeader::encode(std::uint8_t* p) const noexcept {
  p[0] = static_cast<std::uint8_t>(type);
  p[1] = flags;
  put16(p + 2, credits_returned);
  put32(p + 4, length);
  put64(p + 8, id);
  put32(p + kHeaderFields, wire_crc(p, kHeaderFields));
}

std::error_code SendHeader::decode(std::span<const std::uint8_t> b, SendHeader& out,
                                   std::string_view* reason) noexcept {
  if (b.size() < kSize) return bad(reason, "SEND shorter than its 20-byte header");
  // The CRC first: nothing of a damaged header is looked at.
  if (get32(&b[kHeaderFields]) != wire_crc(b.data(), kHeaderFields)) {
    if (reason != nullptr) *reason = "SEND header CRC mismatch";
    return errc::bad_crc;
  }
  const std::uint8_t t = b[0];
  if (t < static_cast<std::uint8_t>(SendType::stream) || t > static_cast<std::uint8_t>(SendType::credit_update))
    return bad(reason, "unknown SEND type");
  SendHeader h;
  h.type = static_cast<SendType>(t);
  h.flags = b[1];
  h.credits_returned = get16(&b[2]);
  h.length = get32(&b[4]);
  h.id = get64(&b[8]);
  const std::size_t payload = b.size() - kSize;
  switch (h.type) {
    case SendType::stream:
      if (h.length != payload) return bad(reason, "stream SEND length disagrees with bytes received");
      if (h.length == 0) return bad(reason, "empty stream SEND");
      break;
    case SendType::read_request: {
      if (payload <= ReadDescriptor::kCrcSize || (payload - ReadDescriptor::kCrcSize) % ReadDescriptor::kSize != 0)
        return bad(reason, "read request without whole descriptors");
      const std::size_t n = payload - ReadDescriptor::kCrcSize;
      if (get32(&b[kSize + n]) != wire_crc(&b[kSize], n)) {
        if (reason != nullptr) *reason = "read request descriptors CRC mismatch";
        return errc::bad_crc;
      }
      if (h.length == 0) return bad(reason, "read request for zero bytes");
      break;
    }
    case SendType::read_done:
    case SendType::credit_update:
      if (payload != 0 || h.length != 0) return bad(reason, "control SEND with a payload");
      break;
  }
  out = h;
  return {};
}

void ReadDescriptor::encode(std::uint8_t* p) const noexcept {
  put64(p, addr);
  put32(p + 8, rkey);
  put32(p + 12, length);
}

ReadDescriptor ReadDescriptor::decode(const std::uint8_t* p) noexcept {
  return {get64(p), get32(p + 8), get32(p + 12)};
}

std::size_t ReadDescriptor::seal(std::uint8_t* first, std::size_t n) noexcept {
  put32(first + n * kSize, wire_crc(first, n * kSize));
  return n * kSize + kCrcSize;
}

}  // namespace siphon::rdma
