// libFuzzer target: msgr2 secure mode (msgr/auth/secure_frames, GcmStream),
// msgr2.1 and msgr2.0 layouts, with the connection secrets of the lab
// capture (cephx.md 12.2 connection A, 12.3 connection B) as fixed keys.
//
// Input: byte 0 = mode (bits 0-1) | keyset (bits 2-3); byte 1 = chunk size
// (0: all at once). Keyset k: secret of connection A (k < 2) or B, the
// connecting side receiving (k even) or the accepting side.
//
//   mode 0/1, receive rev1/rev0: the rest is wire bytes, fed in chunks to
//     the secure decoder. Oracles: no crash or sanitizer report; an error
//     is sticky and says why; every frame respects the limits; and the
//     chunking changes nothing: the same frames and the same end state as
//     when the bytes come all at once.
//   mode 2/3, seal and mutate rev1/rev0 (reaches past the GCM tag check):
//     byte 2 = tag - 1 (mod 20); byte 3 = copies - 1 (bits 0-1) | number
//     of mutations (bits 2-4) | tight limits (bit 5); bytes 4-11 = four
//     u16 segment lengths (at most 0x7ff each); then the segments' bytes
//     (a pattern once the input runs out); the mutations are the last
//     4 bytes each: kind (flip, truncate, insert, erase, append), u16
//     offset, value. The frame is sealed `copies` times by the real
//     SecureFrameEncoder, the wire mutated, fed in chunks to the decoder.
//     Oracle: exactly the copies that lie wholly in the unchanged prefix
//     of the wire come out, each equal to the original frame, and nothing
//     else; no error while the wire is only cut short; a frame over the
//     limits is refused with frame_too_large once its preamble is there.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "msgr/auth/secure_frames.h"
#include "msgr/base/error.h"

using namespace siphon;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

const auth::Bytes kSecretA = {
    0x1d, 0x9b, 0xc3, 0x88, 0x24, 0x34, 0xa7, 0xe7, 0xd8, 0x56, 0xf3, 0xec, 0x0f, 0x5f, 0x36, 0x22,
    0x8e, 0xf3, 0x1d, 0xec, 0xff, 0xb7, 0xaa, 0xe4, 0x8a, 0x23, 0x0f, 0x6e, 0x8c, 0x00, 0x4d, 0xcf,
    0xee, 0x6f, 0x13, 0x2b, 0x1d, 0x37, 0x5c, 0xf7, 0xe4, 0x1d, 0x55, 0xb3, 0xd8, 0xbd, 0xe8, 0xd4,
    0x71, 0x40, 0x1b, 0xad, 0xa4, 0x60, 0xe4, 0x9f, 0x33, 0x54, 0xbc, 0x5e, 0x0e, 0x5d, 0x4e, 0x9f};
const auth::Bytes kSecretB = {
    0xf1, 0x70, 0xb3, 0x73, 0x0f, 0x47, 0x00, 0x02, 0x52, 0x30, 0x44, 0xf4, 0x58, 0xd2, 0xec, 0x60,
    0x68, 0xcb, 0xd3, 0x26, 0xd0, 0x78, 0xc8, 0x02, 0x78, 0x2f, 0x37, 0xe2, 0xab, 0x32, 0xdb, 0x83,
    0xdc, 0x5e, 0x82, 0x89, 0xd7, 0x3c, 0x03, 0x92, 0x4c, 0xcc, 0x61, 0x76, 0x88, 0x35, 0xec, 0x0c,
    0xb1, 0x35, 0xf7, 0xd6, 0x67, 0x12, 0x1c, 0x20, 0x7f, 0x9d, 0x6c, 0x2b, 0x1e, 0x01, 0x74, 0x76};

// Up to 4 x 2 KiB a frame, 4 copies: enough for every layout (seg0 inline,
// msg 2, msg 3) while a run stays fast.
constexpr std::size_t kMaxSegmentLen = 0x7ff;
// Bounds the feeds a run makes: a long wire goes in proportionally larger chunks.
constexpr std::size_t kMaxFeeds = 2048;

auth::SecureKeys keys(unsigned keyset, bool receiver) {
  std::string why;
  const bool connecting = (keyset % 2 == 0) == receiver;
  auto k = auth::SecureKeys::from_secret(keyset < 2 ? kSecretA : kSecretB, connecting, why);
  check(k.has_value());
  return *k;
}

struct Outcome {
  std::vector<proto::Frame> frames;
  proto::FrameDecoder::Status last = proto::FrameDecoder::Status::need_more;
  std::error_code error;
};

bool same_frame(const proto::Frame& a, const proto::Frame& b) {
  if (a.tag != b.tag || a.num_segments() != b.num_segments()) return false;
  for (std::size_t i = 0; i < proto::kMaxSegments; ++i) {
    if (!(a.segments[i] == b.segments[i])) return false;
    if (i < a.num_segments() && a.alignments[i] != b.alignments[i]) return false;
  }
  return true;
}

bool within(const proto::Frame& f, const proto::FrameLimits& l) {
  std::uint64_t total = 0;
  for (const BufferList& s : f.segments) {
    if (f.tag == proto::Tag::message && s.length() > l.max_segment) return false;
    total += s.length();
  }
  return total <= (f.tag == proto::Tag::message ? l.max_frame : l.max_control_payload);
}

// Feeds `wire` in chunks of `chunk` (0: at once), draining frames after
// each feed as the transport does.
Outcome decode(const auth::SecureKeys& k, const proto::FrameLimits& limits, proto::FrameRev rev,
               const std::uint8_t* wire, std::size_t len, std::size_t chunk) {
  auth::SecureFrameDecoder dec(k, limits, rev);
  Outcome o;
  if (chunk == 0) chunk = len == 0 ? 1 : len;
  chunk *= 1 + len / (kMaxFeeds * chunk + 1);
  for (std::size_t off = 0; off < len; off += chunk) {
    dec.feed(BufferList::copy_of(wire + off, std::min(chunk, len - off)));
    for (;;) {
      proto::Frame f;
      const auto st = dec.next(f);
      if (st == proto::FrameDecoder::Status::frame) {
        check(!o.error);  // errors are sticky
        check(within(f, limits));
        o.frames.push_back(std::move(f));
        continue;
      }
      if (st == proto::FrameDecoder::Status::error) {
        check(dec.error() && !dec.error_reason().empty());
        check(!o.error || o.error == dec.error());
        o.error = dec.error();
        check(dec.bytes_wanted() == 0);
      }
      o.last = st;
      break;
    }
  }
  return o;
}

void receive(unsigned keyset, proto::FrameRev rev, std::size_t chunk, const std::uint8_t* wire, std::size_t len) {
  proto::FrameLimits limits;
  limits.max_control_payload = 4096;
  limits.max_segment = 1 << 20;
  limits.max_frame = 2 << 20;
  const auth::SecureKeys k = keys(keyset, true);
  const Outcome chunked = decode(k, limits, rev, wire, len, chunk);
  const Outcome whole = decode(k, limits, rev, wire, len, 0);
  check(chunked.frames.size() == whole.frames.size());
  for (std::size_t i = 0; i < whole.frames.size(); ++i) check(same_frame(chunked.frames[i], whole.frames[i]));
  check(chunked.error == whole.error);
}

// Reads the input front to back, then a pattern once it runs out.
struct Reader {
  const std::uint8_t* p;
  std::size_t n;
  std::size_t at = 0;
  std::uint8_t next() { return at < n ? p[at++] : static_cast<std::uint8_t>(at++ * 131 + 7); }
};

void seal_and_mutate(unsigned keyset, proto::FrameRev rev, std::size_t chunk, const std::uint8_t* data,
                     std::size_t size) {
  if (size < 10) return;
  const auto tag = static_cast<proto::Tag>(1 + data[0] % proto::kMaxKnownTag);
  const std::size_t copies = 1 + (data[1] & 3);
  const std::size_t nops = std::min<std::size_t>((data[1] >> 2) & 7, (size - 10) / 4);
  const bool tight = (data[1] & 0x20) != 0;
  std::size_t lens[proto::kMaxSegments];
  for (std::size_t i = 0; i < proto::kMaxSegments; ++i)
    lens[i] = (data[2 + 2 * i] | std::size_t{data[3 + 2 * i]} << 8) & kMaxSegmentLen;
  const std::uint8_t* ops = data + size - nops * 4;
  Reader r{data + 10, size - 10 - nops * 4};

  proto::Frame f;
  f.tag = tag;
  for (std::size_t i = 0; i < proto::kMaxSegments; ++i) {
    std::vector<std::uint8_t> seg(lens[i]);
    for (auto& b : seg) b = r.next();
    f.segments[i] = BufferList::copy_of(seg.data(), seg.size());
  }
  // Default limits take every frame built here (4 x 0x7ff < 64 KiB);
  // tight ones refuse some, after authentication in rev1, before in rev0.
  proto::FrameLimits limits;
  if (tight) {
    limits.max_control_payload = 512;
    limits.max_segment = 1024;
    limits.max_frame = 2048;
  }
  const bool fits = within(f, limits);

  auth::SecureFrameEncoder enc(keys(keyset, false), rev);
  BufferList sealed;
  std::string why;
  for (std::size_t c = 0; c < copies; ++c) check(enc.encode(f, sealed, why));
  const std::size_t one = auth::SecureFrameEncoder::encoded_length(f, rev);
  check(sealed.length() == one * copies);
  std::vector<std::uint8_t> orig(sealed.length());
  sealed.copy_out(0, orig.size(), orig.data());

  std::vector<std::uint8_t> wire = orig;
  for (std::size_t i = 0; i < nops; ++i) {
    const std::uint8_t* op = ops + 4 * i;
    const std::size_t off = op[1] | std::size_t{op[2]} << 8;
    const std::uint8_t v = op[3];
    switch (op[0] % 5) {
      case 0:  // flip bits
        if (!wire.empty()) wire[off % wire.size()] ^= v == 0 ? 1 : v;
        break;
      case 1:  // cut short
        wire.resize(std::min(wire.size(), off % (wire.size() + 1)));
        break;
      case 2:  // insert a byte
        wire.insert(wire.begin() + static_cast<std::ptrdiff_t>(off % (wire.size() + 1)), v);
        break;
      case 3:  // erase a byte
        if (!wire.empty()) wire.erase(wire.begin() + static_cast<std::ptrdiff_t>(off % wire.size()));
        break;
      default:  // append a byte
        wire.push_back(v);
        break;
    }
  }
  const std::size_t same = static_cast<std::size_t>(
      std::mismatch(wire.begin(), wire.end(), orig.begin(), orig.end()).first - wire.begin());

  const Outcome o = decode(keys(keyset, true), limits, rev, wire.data(), wire.size(), chunk);
  if (!fits) {
    check(o.frames.empty());
    // rev1 reads the preamble once msg 1 (96 bytes) authenticates; rev0
    // from its first 32 bytes, before the tag.
    const std::size_t pre = rev == proto::FrameRev::rev1 ? 96 : proto::kPreambleSize;
    if (same >= pre) check(o.error == make_error_code(errc::frame_too_large));
    return;
  }
  const std::size_t expect = std::min(copies, same / one);
  check(o.frames.size() == expect);
  for (const proto::Frame& g : o.frames) check(same_frame(g, f));
  // Only cut short (or untouched): nothing is wrong yet, the rest may come.
  if (same == wire.size()) check(!o.error);
  // Anything else is refused as tampering or damage, never read as a frame.
  if (o.error)
    check(o.error == make_error_code(errc::decrypt_failed) || o.error == make_error_code(errc::malformed_frame) ||
          o.error == make_error_code(errc::unknown_tag) || o.error == make_error_code(errc::frame_too_large) ||
          o.error == make_error_code(errc::bad_crc));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const unsigned mode = data[0] & 3;
  const unsigned keyset = (data[0] >> 2) & 3;
  const std::size_t chunk = data[1];
  const proto::FrameRev rev = mode % 2 == 0 ? proto::FrameRev::rev1 : proto::FrameRev::rev0;
  if (mode < 2) receive(keyset, rev, chunk, data + 2, size - 2);
  else seal_and_mutate(keyset, rev, chunk, data + 2, size - 2);
  return 0;
}
