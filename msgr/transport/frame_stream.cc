#include "msgr/transport/frame_stream.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "msgr/base/error.h"

namespace siphon::transport {

std::size_t FrameStream::banner_bytes_wanted() const noexcept {
  if (decoder_) return 0;
  const std::size_t have = banner_buf_.length();
  if (have < proto::Banner::kPrefixSize) return proto::Banner::kPrefixSize - have;
  // The prefix ends with the payload length (le16); feed() has checked its bounds.
  std::array<std::byte, proto::Banner::kPrefixSize> prefix{};
  banner_buf_.copy_out(0, prefix.size(), prefix.data());
  const std::size_t payload = std::to_integer<std::size_t>(prefix[8]) |
                              (std::to_integer<std::size_t>(prefix[9]) << 8);
  const std::size_t whole = proto::Banner::kPrefixSize + payload;
  return whole > have ? whole - have : 0;
}

FrameStream::Fed FrameStream::feed(BufferList&& bytes) {
  if (error_) return Fed::error;
  if (secure_rx_) {
    if (!bytes.empty()) secure_rx_->feed(std::move(bytes));
    return Fed::more;
  }
  if (decoder_) {
    if (!bytes.empty()) decoder_->feed(std::move(bytes));
    return Fed::more;
  }
  banner_buf_.append(std::move(bytes));
  // Checks the magic (naming msgr1 peers) and the payload length bounds.
  const proto::BannerResult r = proto::decode_banner(banner_buf_);
  if (r.error) return fail(r.error, std::string(r.reason));
  if (r.consumed == 0) return Fed::more;
  const auto negotiated = proto::negotiate(mine_, r.banner);
  if (!negotiated) {
    const bool peer_lacks = (mine_.required & r.banner.supported) != mine_.required;
    return fail(errc::unsupported_protocol,
                peer_lacks ? fmt::format("peer lacks required msgr2 features (peer supports "
                                         "{:#x}, we require {:#x})",
                                         r.banner.supported, mine_.required)
                           : fmt::format("peer requires msgr2 features we lack (peer requires "
                                         "{:#x}, we support {:#x})",
                                         r.banner.required, mine_.supported));
  }
  negotiated_ = *negotiated;
  decoder_.emplace(negotiated_.rev, limits_);
  banner_buf_.consume_front(r.consumed);
  BufferList rest = std::exchange(banner_buf_, BufferList{});
  if (!rest.empty()) decoder_->feed(std::move(rest));
  return Fed::established;
}

proto::FrameDecoder::Status FrameStream::next(proto::Frame& out) {
  if (secure_rx_) return secure_rx_->next(out);
  if (!decoder_) return proto::FrameDecoder::Status::need_more;
  return decoder_->next(out);
}

bool FrameStream::encode(const proto::Frame& frame, BufferList& out, std::string& why) {
  if (secure_tx_) return secure_tx_->encode(frame, out, why);
  out.append(proto::encode_frame(frame, negotiated_.rev));
  return true;
}

std::size_t FrameStream::encoded_length(const proto::Frame& frame) const noexcept {
  return secure_tx_ ? auth::SecureFrameEncoder::encoded_length(frame, negotiated_.rev)
                    : proto::encoded_length(frame, negotiated_.rev);
}

std::error_code FrameStream::start_secure(auth::ByteView connection_secret, bool connecting, std::string& why) {
  if (!decoder_) {
    why = "secure mode asked for before the banner exchange";
    return errc::internal_error;
  }
  if (secure_tx_) {
    why = "secure mode asked for twice";
    return errc::internal_error;
  }
  // The frame layout and the nonce steps follow the revision the banners
  // agreed on (msgr2.0 peers: one GCM message a frame, cephx.md §6.3).
  auto keys = auth::SecureKeys::from_secret(connection_secret, connecting, why);
  if (!keys) return errc::auth_failed;
  secure_tx_.emplace(*keys, negotiated_.rev);
  secure_rx_.emplace(*keys, limits_, negotiated_.rev);
  // Bytes already read past the last plaintext frame are ciphertext.
  if (BufferList rest = decoder_->take_rest(); !rest.empty()) secure_rx_->feed(std::move(rest));
  return {};
}

void FrameStream::hold_early(proto::Frame&& frame) {
  early_bytes_ += proto::encoded_length(frame, proto::FrameRev::rev0);
  early_.push_back(std::move(frame));
}

std::vector<proto::Frame> FrameStream::take_early() noexcept {
  early_bytes_ = 0;
  return std::exchange(early_, {});
}

void FrameStream::reset() noexcept {
  banner_buf_.clear();
  decoder_.reset();
  secure_rx_.reset();
  secure_tx_.reset();
  early_.clear();
  early_bytes_ = 0;
}

FrameStream::Fed FrameStream::fail(std::error_code ec, std::string reason) {
  error_ = ec;
  reason_ = std::move(reason);
  banner_buf_.clear();
  return Fed::error;
}

}  // namespace siphon::transport
