// Bytes for cephx's AUTH_SIGNATURE transcripts, shared by both sides of the
// handshake (client_auth.cc, server_auth.cc): a buffer list flattened, and a
// frame appended as it goes on the wire.
#pragma once

#include <cstdint>

#include "msgr/auth/cephx.h"
#include "msgr/base/buffer.h"
#include "msgr/proto/frame.h"

namespace siphon::session::detail {

inline auth::Bytes bytes_of(const BufferList& bl) {
  auth::Bytes out;
  out.reserve(bl.length());
  for (const auto& p : bl.ptrs()) {
    const auto* d = reinterpret_cast<const std::uint8_t*>(p.data());
    out.insert(out.end(), d, d + p.length());
  }
  return out;
}

inline void append_bytes(auth::Bytes& to, const BufferList& bl) {
  for (const auto& p : bl.ptrs()) {
    const auto* d = reinterpret_cast<const std::uint8_t*>(p.data());
    to.insert(to.end(), d, d + p.length());
  }
}

inline void append_encoded(const proto::Frame& f, proto::FrameRev rev, auth::Bytes& into) {
  const auth::Bytes b = bytes_of(proto::encode_frame(f, rev));
  into.insert(into.end(), b.begin(), b.end());
}

}  // namespace siphon::session::detail
