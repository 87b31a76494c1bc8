// Captured msgr2 byte streams as frames, and frames back as bytes: for
// tests that replay a capture through a handshake and compare what it sends
// with what was captured.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "msgr/proto/frame.h"

namespace siphon::test {

inline std::vector<std::uint8_t> bytes_of(const BufferList& bl) {
  std::vector<std::uint8_t> out;
  for (const auto& p : bl.ptrs()) {
    const auto* d = reinterpret_cast<const std::uint8_t*>(p.data());
    out.insert(out.end(), d, d + p.length());
  }
  return out;
}

// The first `max` rev1 crc-mode frames of a captured stream, after its
// 26-byte banner (decoding stops at the first thing that is not one, e.g.
// where secure mode starts).
inline std::vector<proto::Frame> frames_after_banner(std::span<const std::uint8_t> stream,
                                                     std::size_t max = std::numeric_limits<std::size_t>::max()) {
  proto::FrameDecoder dec(proto::FrameRev::rev1, {});
  std::vector<proto::Frame> out;
  if (stream.size() < 26) return out;
  dec.feed(stream.data() + 26, stream.size() - 26);
  proto::Frame f;
  while (out.size() < max && dec.next(f) == proto::FrameDecoder::Status::frame) out.push_back(std::move(f));
  return out;
}

}  // namespace siphon::test
