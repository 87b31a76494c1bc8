#include "msgr/auth/secure_frames.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "msgr/base/error.h"

namespace siphon::auth {
namespace {

constexpr std::size_t kInline = 48;         // seg0 bytes inside msg 1
constexpr std::size_t kFirstPlain = proto::kPreambleSize + kInline;
constexpr std::size_t kFirstWire = kFirstPlain + kGcmTagSize;  // 96
constexpr std::size_t kEpilogue = 16;
constexpr std::uint8_t kLateStatusMask = 0x0F;
constexpr std::uint8_t kLateStatusComplete = 0x0E;
constexpr std::uint8_t kLateStatusAborted = 0x01;
constexpr std::uint8_t kLateFlagAborted = 0x01;  // rev0's late_flags, bit 0
constexpr std::array<std::uint8_t, kInline> kZeros{};

constexpr std::size_t pad16(std::size_t n) noexcept { return (n + 15) & ~std::size_t{15}; }

// Wire bytes after msg 1 for segment lengths `lens[0..n)`.
std::uint64_t rest_length(const std::array<std::uint32_t, proto::kMaxSegments>& lens, std::size_t n) noexcept {
  std::uint64_t rest = 0;
  const std::uint64_t p0 = pad16(lens[0]);
  if (p0 > kInline) rest += p0 - kInline + kGcmTagSize;
  if (n > 1) {
    for (std::size_t i = 1; i < n; ++i) rest += pad16(lens[i]);
    rest += kEpilogue + kGcmTagSize;
  }
  return rest;
}

// Appends views of bl[off, off + len) to `out`.
void views_of(const BufferList& bl, std::size_t off, std::size_t len, std::vector<ByteView>& out) {
  for (const BufferPtr& p : bl.ptrs()) {
    if (len == 0) return;
    if (off >= p.length()) {
      off -= p.length();
      continue;
    }
    const std::size_t take = std::min(p.length() - off, len);
    out.emplace_back(reinterpret_cast<const std::uint8_t*>(p.data()) + off, take);
    off = 0;
    len -= take;
  }
}

// rev0: the whole GCM message (preamble, padded segments, epilogue, tag).
std::uint64_t rev0_length(const std::array<std::uint32_t, proto::kMaxSegments>& lens, std::size_t n) noexcept {
  std::uint64_t total = proto::kPreambleSize + kEpilogue + kGcmTagSize;
  for (std::size_t i = 0; i < n; ++i) total += pad16(lens[i]);
  return total;
}

void add_padding(std::size_t len, std::vector<ByteView>& out) {
  if (const std::size_t pad = pad16(len) - len; pad > 0) out.emplace_back(kZeros.data(), pad);
}

}  // namespace

std::optional<SecureKeys> SecureKeys::from_secret(ByteView secret, bool connecting, std::string& why) {
  if (secret.size() < kConnectionSecretMin) {
    why = "the connection secret has " + std::to_string(secret.size()) + " bytes; secure mode needs 40";
    return std::nullopt;
  }
  SecureKeys k;
  k.key.assign(secret.begin(), secret.begin() + 16);
  const Bytes a(secret.begin() + 16, secret.begin() + 28);
  const Bytes b(secret.begin() + 28, secret.begin() + 40);
  // The connecting side sends with nonce B and receives with A (cephx.md §6.1).
  k.tx_nonce = connecting ? b : a;
  k.rx_nonce = connecting ? a : b;
  return k;
}

// ---------------------------------------------------------------------------
// Encoder

SecureFrameEncoder::SecureFrameEncoder(const SecureKeys& k, proto::FrameRev rev)
    : tx_(k.key, k.tx_nonce, rev == proto::FrameRev::rev1), rev_(rev) {}

std::size_t SecureFrameEncoder::encoded_length(const proto::Frame& frame, proto::FrameRev rev) noexcept {
  std::array<std::uint32_t, proto::kMaxSegments> lens{};
  for (std::size_t i = 0; i < proto::kMaxSegments; ++i)
    lens[i] = static_cast<std::uint32_t>(frame.segments[i].length());
  if (rev == proto::FrameRev::rev0) return static_cast<std::size_t>(rev0_length(lens, frame.num_segments()));
  return kFirstWire + static_cast<std::size_t>(rest_length(lens, frame.num_segments()));
}

bool SecureFrameEncoder::encode_rev0(const proto::Frame& frame, BufferList& out, std::string& why) {
  const std::size_t n = frame.num_segments();
  const std::size_t total = encoded_length(frame, proto::FrameRev::rev0);
  Segment* seg = Segment::allocate(total);
  BufferPtr wire(seg, 0, total);
  std::vector<ByteView> parts;
  std::array<std::byte, proto::kPreambleSize> pre{};
  proto::encode_preamble(frame, pre.data());
  parts.emplace_back(reinterpret_cast<const std::uint8_t*>(pre.data()), pre.size());
  for (std::size_t i = 0; i < n; ++i) {
    views_of(frame.segments[i], 0, frame.segments[i].length(), parts);
    add_padding(frame.segments[i].length(), parts);
  }
  const std::array<std::uint8_t, kEpilogue> ep{};  // late_flags 0: complete
  parts.emplace_back(ep.data(), ep.size());
  if (!tx_.seal(parts, reinterpret_cast<std::uint8_t*>(wire.mutable_data()), why)) return false;
  out.append(std::move(wire));
  return true;
}

bool SecureFrameEncoder::encode(const proto::Frame& frame, BufferList& out, std::string& why) {
  if (rev_ == proto::FrameRev::rev0) return encode_rev0(frame, out, why);
  const std::size_t n = frame.num_segments();
  const std::size_t total = encoded_length(frame);
  Segment* seg = Segment::allocate(total);
  BufferPtr wire(seg, 0, total);  // holds the segment from here on
  auto* w = reinterpret_cast<std::uint8_t*>(wire.mutable_data());
  std::vector<ByteView> parts;

  // msg 1: preamble | the first 48 bytes of padded seg0.
  std::array<std::byte, proto::kPreambleSize> pre{};
  proto::encode_preamble(frame, pre.data());
  const BufferList& s0 = frame.segments[0];
  const std::size_t in1 = std::min(s0.length(), kInline);
  parts.emplace_back(reinterpret_cast<const std::uint8_t*>(pre.data()), pre.size());
  views_of(s0, 0, in1, parts);
  if (in1 < kInline) parts.emplace_back(kZeros.data(), kInline - in1);
  if (!tx_.seal(parts, w, why)) return false;
  std::size_t at = kFirstWire;
  // msg 2: the rest of padded seg0.
  if (pad16(s0.length()) > kInline) {
    parts.clear();
    views_of(s0, kInline, s0.length() - kInline, parts);
    add_padding(s0.length(), parts);
    if (!tx_.seal(parts, w + at, why)) return false;
    at += pad16(s0.length()) - kInline + kGcmTagSize;
  }
  // msg 3: the other segments, each padded, and the epilogue.
  if (n > 1) {
    parts.clear();
    for (std::size_t i = 1; i < n; ++i) {
      views_of(frame.segments[i], 0, frame.segments[i].length(), parts);
      add_padding(frame.segments[i].length(), parts);
    }
    std::array<std::uint8_t, kEpilogue> ep{};
    ep[0] = kLateStatusComplete;
    parts.emplace_back(ep.data(), ep.size());
    if (!tx_.seal(parts, w + at, why)) return false;
  }
  out.append(std::move(wire));
  return true;
}

// ---------------------------------------------------------------------------
// Decoder

SecureFrameDecoder::SecureFrameDecoder(const SecureKeys& k, proto::FrameLimits limits, proto::FrameRev rev)
    : rx_(k.key, k.rx_nonce, rev == proto::FrameRev::rev1), limits_(limits), rev_(rev) {}

void SecureFrameDecoder::feed(BufferList&& bytes) {
  if (error_) return;
  buf_.append(std::move(bytes));
}

proto::FrameDecoder::Status SecureFrameDecoder::fail(std::error_code ec, std::string reason) {
  error_ = ec;
  reason_ = std::move(reason);
  buf_.clear();
  have_first_ = false;
  return proto::FrameDecoder::Status::error;
}

std::size_t SecureFrameDecoder::bytes_wanted() const noexcept {
  if (error_) return 0;
  const std::size_t first = rev_ == proto::FrameRev::rev0 ? proto::kPreambleSize : kFirstWire;
  const std::size_t need = have_first_ ? rest_ : first;
  return need > buf_.length() ? need - buf_.length() : 0;
}

bool SecureFrameDecoder::open_next(std::size_t len, std::uint8_t* out, std::string& why) {
  std::vector<ByteView> parts;
  views_of(buf_, 0, len - kGcmTagSize, parts);
  std::array<std::uint8_t, kGcmTagSize> tag{};
  buf_.copy_out(len - kGcmTagSize, tag.size(), tag.data());
  const bool ok = rx_.open(parts, tag, out, why);
  buf_.consume_front(len);
  return ok;
}

proto::FrameDecoder::Status SecureFrameDecoder::next(proto::Frame& out) {
  using Status = proto::FrameDecoder::Status;
  if (error_) return Status::error;
  if (rev_ == proto::FrameRev::rev0) return next_rev0(out);
  for (;;) {
    if (!have_first_) {
      if (buf_.length() < kFirstWire) return Status::need_more;
      std::string why;
      if (!open_next(kFirstWire, first_.data(), why))
        return fail(make_error_code(errc::decrypt_failed), "secure frame: " + why);
      // Only now, authenticated, is anything in the preamble looked at.
      if (const std::error_code ec =
              proto::parse_preamble(reinterpret_cast<const std::byte*>(first_.data()), limits_, pre_, why))
        return fail(ec, why);
      rest_ = static_cast<std::size_t>(rest_length(pre_.lens, pre_.nsegs));
      have_first_ = true;
    }
    if (buf_.length() < rest_) return Status::need_more;
    have_first_ = false;  // whatever happens below, this frame is consumed

    // One plaintext block: msg 1 | msg 2 | msg 3, so seg0 is contiguous.
    const std::size_t p0 = pad16(pre_.lens[0]);
    const std::size_t m2 = p0 > kInline ? p0 - kInline : 0;
    const std::size_t m3 = rest_ - (m2 > 0 ? m2 + kGcmTagSize : 0);  // with its tag, if any
    const std::size_t plain = kFirstPlain + m2 + (m3 > 0 ? m3 - kGcmTagSize : 0);
    Segment* seg = Segment::allocate(plain);
    BufferPtr block(seg, 0, plain);
    auto* p = reinterpret_cast<std::uint8_t*>(block.mutable_data());
    std::memcpy(p, first_.data(), kFirstPlain);
    std::string why;
    if (m2 > 0 && !open_next(m2 + kGcmTagSize, p + kFirstPlain, why))
      return fail(make_error_code(errc::decrypt_failed), "secure frame: " + why);
    std::size_t at = kFirstPlain + m2;
    bool aborted = false;
    if (m3 > 0) {
      if (!open_next(m3, p + at, why)) return fail(make_error_code(errc::decrypt_failed), "secure frame: " + why);
      const std::uint8_t status = p[at + m3 - kGcmTagSize - kEpilogue] & kLateStatusMask;
      if (status == kLateStatusAborted) aborted = true;
      else if (status != kLateStatusComplete) return fail(make_error_code(errc::malformed_frame), "bad epilogue late status");
    }
    if (aborted) continue;  // the sender abandoned it: drop silently, as in crc mode

    out.tag = pre_.tag;
    const auto defaults = proto::default_alignments();
    for (std::size_t i = 0; i < proto::kMaxSegments; ++i) {
      out.segments[i].clear();
      out.alignments[i] = i < pre_.nsegs ? pre_.aligns[i] : defaults[i];
    }
    if (pre_.lens[0] > 0) out.segments[0].append(BufferPtr(seg, proto::kPreambleSize, pre_.lens[0]));
    for (std::size_t i = 1; i < pre_.nsegs; ++i) {
      if (pre_.lens[i] > 0) out.segments[i].append(BufferPtr(seg, at, pre_.lens[i]));
      at += pad16(pre_.lens[i]);
    }
    return Status::frame;
  }
}

proto::FrameDecoder::Status SecureFrameDecoder::next_rev0(proto::Frame& out) {
  using Status = proto::FrameDecoder::Status;
  for (;;) {
    std::string why;
    if (!have_first_) {
      if (buf_.length() < proto::kPreambleSize) return Status::need_more;
      // The preamble, decrypted but not yet authenticated: its crc and the
      // limits bound what we wait for; the tag over the whole message,
      // preamble included, decides whether any of it is used.
      std::array<std::uint8_t, proto::kPreambleSize> ct{};
      buf_.copy_out(0, ct.size(), ct.data());
      if (!rx_.peek(ct, first_.data(), why)) return fail(make_error_code(errc::decrypt_failed), "secure frame: " + why);
      if (const std::error_code ec =
              proto::parse_preamble(reinterpret_cast<const std::byte*>(first_.data()), limits_, pre_, why)) {
        // A preamble that does not decrypt to a valid one is, in secure
        // mode, damage or tampering as much as a failed tag.
        return fail(ec == make_error_code(errc::bad_crc) ? make_error_code(errc::decrypt_failed) : ec,
                    "secure frame (msgr2 rev0): " + why);
      }
      rest_ = static_cast<std::size_t>(rev0_length(pre_.lens, pre_.nsegs));
      have_first_ = true;
    }
    if (buf_.length() < rest_) return Status::need_more;
    have_first_ = false;  // whatever happens below, this frame is consumed

    const std::size_t plain = rest_ - kGcmTagSize;
    Segment* seg = Segment::allocate(plain);
    BufferPtr block(seg, 0, plain);
    auto* p = reinterpret_cast<std::uint8_t*>(block.mutable_data());
    if (!open_next(rest_, p, why)) return fail(make_error_code(errc::decrypt_failed), "secure frame: " + why);
    const std::uint8_t late_flags = p[plain - kEpilogue];
    if ((late_flags & kLateFlagAborted) != 0) continue;  // the sender abandoned it: drop silently

    out.tag = pre_.tag;
    const auto defaults = proto::default_alignments();
    std::size_t at = proto::kPreambleSize;
    for (std::size_t i = 0; i < proto::kMaxSegments; ++i) {
      out.segments[i].clear();
      out.alignments[i] = i < pre_.nsegs ? pre_.aligns[i] : defaults[i];
      if (i >= pre_.nsegs) continue;
      if (pre_.lens[i] > 0) out.segments[i].append(BufferPtr(seg, at, pre_.lens[i]));
      at += pad16(pre_.lens[i]);
    }
    return Status::frame;
  }
}

}  // namespace siphon::auth
