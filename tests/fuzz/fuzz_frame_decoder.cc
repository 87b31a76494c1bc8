// libFuzzer target: the incremental msgr2 frame decoder. The first byte picks
// the revision and a chunk size; the rest is fed in those chunks. Oracles:
// the decoder never crashes or reads out of bounds (ASan), an error is
// sticky, and every frame it accepts re-encodes to bytes that decode to the
// same frame.
#include <cstddef>
#include <cstdint>

#include "msgr/proto/frame.h"

using namespace siphon;

namespace {

void check_roundtrip(const proto::Frame& f, proto::FrameRev rev) {
  BufferList wire = proto::encode_frame(f, rev);
  if (wire.length() != proto::encoded_length(f, rev)) __builtin_trap();
  proto::FrameDecoder d(rev, proto::FrameLimits{});
  d.feed(std::move(wire));
  proto::Frame g;
  if (d.next(g) != proto::FrameDecoder::Status::frame) __builtin_trap();
  if (g.tag != f.tag || g.num_segments() != f.num_segments()) __builtin_trap();
  for (std::size_t i = 0; i < proto::kMaxSegments; ++i)
    if (!(g.segments[i] == f.segments[i])) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const proto::FrameRev rev = (data[0] & 1) ? proto::FrameRev::rev1 : proto::FrameRev::rev0;
  const std::size_t chunk = 1 + (data[0] >> 1);
  proto::FrameLimits limits;
  limits.max_control_payload = 4096;
  limits.max_segment = 1 << 20;
  limits.max_frame = 2 << 20;
  proto::FrameDecoder dec(rev, limits);
  bool failed = false;
  for (std::size_t off = 1; off < size; off += chunk) {
    const std::size_t n = size - off < chunk ? size - off : chunk;
    dec.feed(data + off, n);
    for (;;) {
      proto::Frame f;
      const auto st = dec.next(f);
      if (st == proto::FrameDecoder::Status::frame) {
        if (failed) __builtin_trap();  // errors are sticky
        check_roundtrip(f, rev);
        continue;
      }
      if (st == proto::FrameDecoder::Status::error) {
        if (!dec.error()) __builtin_trap();  // an error always says why
        failed = true;
      }
      break;
    }
  }
  return 0;
}
