// msgr2 secure mode, rev1 (shared/reference/cephx.md §6): whole frames
// encrypted with AES-128-GCM, the keys and nonces cut from the connection
// secret cephx agreed on.
//
//   msg 1 (always)            E(preamble 32 | seg0 padded, first 48 bytes) + tag   = 96 bytes
//   msg 2 (padded seg0 > 48)  E(the rest of padded seg0) + tag
//   msg 3 (segments > 1)      E(seg1 | seg2 | seg3, each padded to 16 | epilogue 16) + tag
//
// Every message takes the next nonce of its direction. The preamble keeps
// its crc (checked on the plaintext) and the logical, unpadded lengths; the
// segments carry no crcs. The receiver trusts no length before the first
// message's tag and the preamble crc check out, and delivers nothing of a
// frame whose messages do not all authenticate. rev0's layout (one message
// per frame) is not implemented: Siphon and Pacific peers speak rev1.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "msgr/auth/crypto.h"
#include "msgr/base/buffer.h"
#include "msgr/proto/frame.h"

namespace siphon::auth {

inline constexpr std::size_t kConnectionSecretMin = 40;  // key 16 + two nonces of 12

// The two directions of a connection, cut from its connection secret:
// [0,16) key, [16,28) nonce A (accepting side sends), [28,40) nonce B
// (connecting side sends).
struct SecureKeys {
  Bytes key;
  Bytes tx_nonce;
  Bytes rx_nonce;
  // Empty with `why` when the secret is too short.
  static std::optional<SecureKeys> from_secret(ByteView secret, bool connecting, std::string& why);
};

class SecureFrameEncoder {
 public:
  explicit SecureFrameEncoder(const SecureKeys& k);
  // The wire bytes of `frame` appended to `out`; false with `why` when the
  // nonces ran out (the connection must be re-established).
  bool encode(const proto::Frame& frame, BufferList& out, std::string& why);
  // Wire length of `frame` in secure mode.
  static std::size_t encoded_length(const proto::Frame& frame) noexcept;

 private:
  GcmStream tx_;
};

// The FrameDecoder of a secure stream: same interface and error rules.
class SecureFrameDecoder {
 public:
  SecureFrameDecoder(const SecureKeys& k, proto::FrameLimits limits);

  void feed(BufferList&& bytes);
  proto::FrameDecoder::Status next(proto::Frame& out);
  std::error_code error() const noexcept { return error_; }
  std::string_view error_reason() const noexcept { return reason_; }
  std::size_t bytes_wanted() const noexcept;
  std::size_t buffered() const noexcept { return buf_.length(); }

 private:
  proto::FrameDecoder::Status fail(std::error_code ec, std::string reason);
  // Decrypts the next `len` buffered bytes (ciphertext | tag) to `out`.
  bool open_next(std::size_t len, std::uint8_t* out, std::string& why);

  GcmStream rx_;
  proto::FrameLimits limits_;
  BufferList buf_;
  bool have_first_ = false;
  proto::Preamble pre_{};
  std::array<std::uint8_t, 80> first_{};  // msg 1's plaintext: preamble | inline
  std::size_t rest_ = 0;                  // wire bytes of msgs 2 and 3
  std::error_code error_{};
  std::string reason_;
};

}  // namespace siphon::auth
