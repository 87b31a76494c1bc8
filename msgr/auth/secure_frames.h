// msgr2 secure mode (shared/reference/cephx.md §6): whole frames encrypted
// with AES-128-GCM, the keys and nonces cut from the connection secret
// cephx agreed on.
//
// rev1 (msgr2.1), up to three GCM messages a frame:
//   msg 1 (always)            E(preamble 32 | seg0 padded, first 48 bytes) + tag   = 96 bytes
//   msg 2 (padded seg0 > 48)  E(the rest of padded seg0) + tag
//   msg 3 (segments > 1)      E(seg1 | seg2 | seg3, each padded to 16 | epilogue 16) + tag
// rev0 (msgr2.0), one GCM message a frame (§6.3):
//   E(preamble 32 | each segment padded to 16 | epilogue 16) + tag
//   epilogue: u8 late_flags (0 complete, bit 0 aborted) + 15 zero bytes
//
// Every message takes the next nonce of its direction (rev1: counter + 1,
// rev0: fixed part + 1). The preamble keeps its crc (checked on the
// plaintext) and the logical, unpadded lengths; the segments carry no crcs.
// rev1's receiver trusts no length before the first message's tag and the
// preamble crc check out. rev0 cannot do that -- the tag comes after the
// whole frame -- so its receiver decrypts the preamble unauthenticated
// (GcmStream::peek), checks its crc and the limits, reads that much and then
// checks the tag over everything, the preamble included. Either way nothing
// of a frame is delivered unless all its messages authenticate.
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
  explicit SecureFrameEncoder(const SecureKeys& k, proto::FrameRev rev = proto::FrameRev::rev1);
  // The wire bytes of `frame` appended to `out`; false with `why` when the
  // nonces ran out (the connection must be re-established).
  bool encode(const proto::Frame& frame, BufferList& out, std::string& why);
  // Wire length of `frame` in secure mode.
  static std::size_t encoded_length(const proto::Frame& frame,
                                    proto::FrameRev rev = proto::FrameRev::rev1) noexcept;

 private:
  bool encode_rev0(const proto::Frame& frame, BufferList& out, std::string& why);
  GcmStream tx_;
  proto::FrameRev rev_;
};

// The FrameDecoder of a secure stream: same interface and error rules.
class SecureFrameDecoder {
 public:
  SecureFrameDecoder(const SecureKeys& k, proto::FrameLimits limits, proto::FrameRev rev = proto::FrameRev::rev1);

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
  proto::FrameDecoder::Status next_rev0(proto::Frame& out);

  GcmStream rx_;
  proto::FrameLimits limits_;
  proto::FrameRev rev_;
  BufferList buf_;
  bool have_first_ = false;
  proto::Preamble pre_{};
  std::array<std::uint8_t, 80> first_{};  // msg 1's plaintext: preamble | inline (rev0: preamble)
  std::size_t rest_ = 0;                  // wire bytes of msgs 2 and 3 (rev0: of the whole message)
  std::error_code error_{};
  std::string reason_;
};

}  // namespace siphon::auth
