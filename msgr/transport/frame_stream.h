// FrameStream: the msgr2 byte stream of one connection as every stack sees
// it, whatever carries the bytes (a TCP socket, RDMA SENDs and READs).
//
// Inbound: the peer's banner, then frames. Bytes go in in any chunking
// (feed); until the peer's banner is whole they are buffered, then it is
// negotiated against ours, and what follows goes to the FrameDecoder, which
// checks frame boundaries, limits and CRCs. A reader that must not read past
// the banner (TCP reads the rest straight into frame segments) asks
// banner_bytes_wanted() first.
//
// Outbound: frames sent before the banners decided the revision wait here
// unencoded (hold_early) and go out first, in order, once it is known
// (take_early); early_bytes() is their rev0 length, the longer encoding, so a
// queue estimate never under-reports.
//
// Secure mode (cephx.md §6): once the session layer agreed on it, the
// stream switches, between two frames, to AES-GCM both ways (start_secure):
// encode() encrypts every frame from then on, and the bytes after the last
// plaintext frame go to a secure decoder. The stacks call encode() for every
// frame, so neither knows which mode it carries.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "msgr/auth/secure_frames.h"
#include "msgr/base/buffer.h"
#include "msgr/proto/frame.h"

namespace siphon::transport {

class FrameStream {
 public:
  explicit FrameStream(const proto::FrameLimits& limits) noexcept : limits_(limits) {}

  // Our banner, before any bytes are fed (negotiation needs it).
  void set_mine(const proto::Banner& mine) noexcept { mine_ = mine; }
  const proto::Banner& mine() const noexcept { return mine_; }

  // --- inbound
  enum class Fed {
    more,         // nothing new: the banner is not whole yet, or frames were queued
    established,  // the banner just completed: negotiated() is set, frames follow
    error,        // a bad or incompatible banner: error() and error_reason() say why
  };
  Fed feed(BufferList&& bytes);
  bool banner_done() const noexcept { return decoder_.has_value(); }
  // Bytes the peer's banner still needs, at least as far as its length field:
  // 0 once it is done.
  std::size_t banner_bytes_wanted() const noexcept;
  const proto::Negotiated& negotiated() const noexcept { return negotiated_; }
  proto::FrameRev rev() const noexcept { return negotiated_.rev; }
  std::error_code error() const noexcept { return error_; }
  const std::string& error_reason() const noexcept { return reason_; }

  // The next whole frame (after the banner). need_more before it.
  proto::FrameDecoder::Status next(proto::Frame& out);
  std::error_code decoder_error() const noexcept {
    return secure_rx_ ? secure_rx_->error() : decoder_ ? decoder_->error() : std::error_code{};
  }
  std::string_view decoder_error_reason() const noexcept {
    return secure_rx_ ? secure_rx_->error_reason() : decoder_ ? decoder_->error_reason() : std::string_view{};
  }
  // Read-size hint and bytes buffered inside a frame (0 before the banner).
  std::size_t bytes_wanted() const noexcept {
    return secure_rx_ ? secure_rx_->bytes_wanted() : decoder_ ? decoder_->bytes_wanted() : 0;
  }
  std::size_t buffered() const noexcept {
    return secure_rx_ ? secure_rx_->buffered() : decoder_ ? decoder_->buffered() : 0;
  }

  // --- outbound, after the banner exchange
  // The wire bytes of `frame` (encrypted in secure mode) appended to `out`;
  // false with `why` when secure mode ran out of nonces.
  bool encode(const proto::Frame& frame, BufferList& out, std::string& why);
  std::size_t encoded_length(const proto::Frame& frame) const noexcept;

  // --- secure mode
  // From the next frame on, both ways: AES-GCM with keys cut from
  // `connection_secret` (the connecting side sends with nonce B). Call it
  // between frames: after the last plaintext frame was taken from next()
  // and sent with encode(). rev1 or rev0 frames, as the banners decided.
  // Fails (with why) before the banner, with a short secret, or when
  // already secure.
  std::error_code start_secure(auth::ByteView connection_secret, bool connecting, std::string& why);
  bool secure() const noexcept { return secure_tx_.has_value(); }

  // --- outbound, before the banner exchange
  void hold_early(proto::Frame&& frame);
  std::size_t early_bytes() const noexcept { return early_bytes_; }
  std::vector<proto::Frame> take_early() noexcept;

  // Drops everything buffered (the connection closed).
  void reset() noexcept;

 private:
  Fed fail(std::error_code ec, std::string reason);

  proto::FrameLimits limits_;
  proto::Banner mine_{};
  BufferList banner_buf_;
  proto::Negotiated negotiated_{};
  std::optional<proto::FrameDecoder> decoder_;
  std::optional<auth::SecureFrameDecoder> secure_rx_;
  std::optional<auth::SecureFrameEncoder> secure_tx_;
  std::error_code error_{};
  std::string reason_;
  std::vector<proto::Frame> early_;
  std::size_t early_bytes_ = 0;
};

}  // namespace siphon::transport
