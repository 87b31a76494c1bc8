#include "tools/bench/bench_wire.h"

#include <algorithm>
#include <cstring>

#include "msgr/base/crc32c.h"

namespace siphon::bench {
namespace {

template <typename T>
void put(std::byte* p, T v) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
}

template <typename T>
T get(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

constexpr std::size_t kCrcOffset = 44;

}  // namespace

std::string_view to_string(Op op) noexcept {
  switch (op) {
    case Op::echo: return "echo";
    case Op::sink: return "sink";
    case Op::source: return "source";
    case Op::ctl_start: return "ctl_start";
    case Op::ctl_stop: return "ctl_stop";
    case Op::ctl_done: return "ctl_done";
  }
  return "?";
}

std::string_view to_string(BenchHeader::DecodeError e) noexcept {
  switch (e) {
    case BenchHeader::DecodeError::none: return "ok";
    case BenchHeader::DecodeError::short_buffer: return "shorter than a siphon-bench header";
    case BenchHeader::DecodeError::bad_magic: return "not a siphon-bench message (bad magic)";
    case BenchHeader::DecodeError::bad_version: return "unknown siphon-bench header version";
    case BenchHeader::DecodeError::bad_op: return "unknown siphon-bench op";
    case BenchHeader::DecodeError::bad_header_crc: return "siphon-bench header CRC mismatch";
  }
  return "?";
}

std::array<std::byte, BenchHeader::kSize> BenchHeader::encode() const noexcept {
  std::array<std::byte, kSize> b{};
  put<std::uint32_t>(&b[0], kMagic);
  put<std::uint8_t>(&b[4], kVersion);
  put<std::uint8_t>(&b[5], static_cast<std::uint8_t>(op));
  put<std::uint16_t>(&b[6], flags);
  put<std::uint32_t>(&b[8], conn_id);
  put<std::uint32_t>(&b[12], think_us);
  put<std::uint64_t>(&b[16], seq);
  put<std::uint64_t>(&b[24], send_ns);
  put<std::uint32_t>(&b[32], reply_size);
  put<std::uint32_t>(&b[36], payload_crc);
  put<std::uint32_t>(&b[40], payload_len);
  put<std::uint32_t>(&b[kCrcOffset], crc32c(0, b.data(), kCrcOffset));
  return b;
}

std::optional<BenchHeader> BenchHeader::decode(std::span<const std::byte> b, DecodeError* why) noexcept {
  auto fail = [&](DecodeError e) -> std::optional<BenchHeader> {
    if (why != nullptr) *why = e;
    return std::nullopt;
  };
  if (b.size() < kSize) return fail(DecodeError::short_buffer);
  if (get<std::uint32_t>(&b[0]) != kMagic) return fail(DecodeError::bad_magic);
  if (get<std::uint8_t>(&b[4]) != kVersion) return fail(DecodeError::bad_version);
  if (get<std::uint32_t>(&b[kCrcOffset]) != crc32c(0, b.data(), kCrcOffset))
    return fail(DecodeError::bad_header_crc);
  const auto op = get<std::uint8_t>(&b[5]);
  if (op < static_cast<std::uint8_t>(Op::echo) || op > static_cast<std::uint8_t>(Op::ctl_done))
    return fail(DecodeError::bad_op);
  BenchHeader h;
  h.op = static_cast<Op>(op);
  h.flags = get<std::uint16_t>(&b[6]);
  h.conn_id = get<std::uint32_t>(&b[8]);
  h.think_us = get<std::uint32_t>(&b[12]);
  h.seq = get<std::uint64_t>(&b[16]);
  h.send_ns = get<std::uint64_t>(&b[24]);
  h.reply_size = get<std::uint32_t>(&b[32]);
  h.payload_crc = get<std::uint32_t>(&b[36]);
  h.payload_len = get<std::uint32_t>(&b[40]);
  if (why != nullptr) *why = DecodeError::none;
  return h;
}

std::array<std::byte, 16> ServerStats::encode() const noexcept {
  std::array<std::byte, 16> b{};
  put<std::uint64_t>(&b[0], user_ns);
  put<std::uint64_t>(&b[8], system_ns);
  return b;
}

std::optional<ServerStats> ServerStats::decode(std::span<const std::byte> b) noexcept {
  if (b.size() != 16) return std::nullopt;
  return ServerStats{get<std::uint64_t>(&b[0]), get<std::uint64_t>(&b[8])};
}

std::uint64_t SeqTracker::issue() {
  outstanding_.push_back(next_);
  return next_++;
}

SeqTracker::Outcome SeqTracker::complete(std::uint64_t seq) {
  if (seq == 0 || seq >= next_) return Outcome::unknown;
  const auto it = std::lower_bound(outstanding_.begin(), outstanding_.end(), seq);
  if (it == outstanding_.end() || *it != seq) return Outcome::duplicate;
  outstanding_.erase(it);
  if (seq < max_completed_) return Outcome::reordered;
  max_completed_ = seq;
  return Outcome::in_order;
}

}  // namespace siphon::bench
