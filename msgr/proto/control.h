// Payloads of the msgr2 control frames (msgr2-wire.md §5), one struct per
// tag, plus the auth-"none" payloads (§7.4).
//
// Each struct has
//   static constexpr Tag kTag;
//   BufferList encode() const;                        the frame's segment 0
//   static Result<T> decode(const BufferList& payload);
//   Frame frame() const;                              Frame::control(kTag, encode())
// Decoders read the fields in order and ignore trailing bytes (newer peers
// may append fields); any missing or inconsistent byte is a DecodeError
// naming the payload and field. Addresses inside frames always use the
// ADDR2 encoding (frames assume MSG_ADDR2 | SERVER_NAUTILUS).
//
// decode_control<T>(frame) additionally checks the tag and that the frame
// has a single segment.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/proto/encoding.h"
#include "msgr/proto/frame.h"
#include "msgr/proto/types.h"

namespace siphon::proto {

#define SIPHON_PROTO_CONTROL_PAYLOAD(Name, TagValue)                          \
  static constexpr Tag kTag = Tag::TagValue;                                  \
  static constexpr std::string_view kName = #TagValue;                        \
  BufferList encode() const;                                                  \
  static Result<Name> decode(const BufferList& payload);                      \
  Frame frame() const { return Frame::control(kTag, encode()); }              \
  friend bool operator==(const Name&, const Name&) = default

/// HELLO (1): the sender's entity type and the address it sees the peer at.
struct Hello {
  std::uint8_t entity_type = kEntityTypeClient;
  EntityAddr peer_addr;
  SIPHON_PROTO_CONTROL_PAYLOAD(Hello, hello);
};

/// AUTH_REQUEST (2).
struct AuthRequest {
  std::uint32_t method = kAuthMethodNone;
  std::vector<std::uint32_t> preferred_modes{kConModeCrc};
  BufferList auth_payload;
  SIPHON_PROTO_CONTROL_PAYLOAD(AuthRequest, auth_request);
};

/// AUTH_BAD_METHOD (3).
struct AuthBadMethod {
  std::uint32_t method = kAuthMethodUnknown;
  std::int32_t result = 0;  // negative errno, e.g. -95 (EOPNOTSUPP)
  std::vector<std::uint32_t> allowed_methods;
  std::vector<std::uint32_t> allowed_modes;
  SIPHON_PROTO_CONTROL_PAYLOAD(AuthBadMethod, auth_bad_method);
};

/// AUTH_REPLY_MORE (4).
struct AuthReplyMore {
  BufferList auth_payload;
  SIPHON_PROTO_CONTROL_PAYLOAD(AuthReplyMore, auth_reply_more);
};

/// AUTH_REQUEST_MORE (5).
struct AuthRequestMore {
  BufferList auth_payload;
  SIPHON_PROTO_CONTROL_PAYLOAD(AuthRequestMore, auth_request_more);
};

/// AUTH_DONE (6).
struct AuthDone {
  std::uint64_t global_id = 0;
  std::uint32_t con_mode = kConModeCrc;
  BufferList auth_payload;
  SIPHON_PROTO_CONTROL_PAYLOAD(AuthDone, auth_done);
};

/// AUTH_SIGNATURE (7): 32 raw bytes, no length prefix (pitfall 24). All
/// zeros when the auth method produced no session key (auth none, §7.3).
struct AuthSignature {
  static constexpr std::size_t kSize = 32;
  std::array<std::uint8_t, kSize> sha256{};
  SIPHON_PROTO_CONTROL_PAYLOAD(AuthSignature, auth_signature);
};

/// CLIENT_IDENT (8).
struct ClientIdent {
  EntityAddrVec addrs;
  EntityAddr target_addr;
  std::int64_t gid = -1;
  std::uint64_t global_seq = 0;
  std::uint64_t supported_features = features::kSupported;
  std::uint64_t required_features = 0;
  std::uint64_t flags = 0;
  std::uint64_t cookie = 0;
  SIPHON_PROTO_CONTROL_PAYLOAD(ClientIdent, client_ident);
};

/// SERVER_IDENT (9).
struct ServerIdent {
  EntityAddrVec addrs;
  std::int64_t gid = -1;
  std::uint64_t global_seq = 0;
  std::uint64_t supported_features = features::kSupported;
  std::uint64_t required_features = features::kRequired;
  std::uint64_t flags = 0;
  std::uint64_t cookie = 0;
  SIPHON_PROTO_CONTROL_PAYLOAD(ServerIdent, server_ident);
};

/// IDENT_MISSING_FEATURES (10).
struct IdentMissingFeatures {
  std::uint64_t features = 0;
  SIPHON_PROTO_CONTROL_PAYLOAD(IdentMissingFeatures, ident_missing_features);
};

/// SESSION_RECONNECT (11).
struct SessionReconnect {
  EntityAddrVec addrs;
  std::uint64_t client_cookie = 0;
  std::uint64_t server_cookie = 0;
  std::uint64_t global_seq = 0;
  std::uint64_t connect_seq = 0;
  std::uint64_t msg_seq = 0;  // the sender's in_seq
  SIPHON_PROTO_CONTROL_PAYLOAD(SessionReconnect, session_reconnect);
};

/// SESSION_RESET (12).
struct SessionReset {
  bool full = false;
  SIPHON_PROTO_CONTROL_PAYLOAD(SessionReset, session_reset);
};

/// SESSION_RETRY (13).
struct SessionRetry {
  std::uint64_t connect_seq = 0;
  SIPHON_PROTO_CONTROL_PAYLOAD(SessionRetry, session_retry);
};

/// SESSION_RETRY_GLOBAL (14).
struct SessionRetryGlobal {
  std::uint64_t global_seq = 0;
  SIPHON_PROTO_CONTROL_PAYLOAD(SessionRetryGlobal, session_retry_global);
};

/// SESSION_RECONNECT_OK (15).
struct SessionReconnectOk {
  std::uint64_t msg_seq = 0;  // the server's in_seq
  SIPHON_PROTO_CONTROL_PAYLOAD(SessionReconnectOk, session_reconnect_ok);
};

/// WAIT (16): empty.
struct Wait {
  SIPHON_PROTO_CONTROL_PAYLOAD(Wait, wait);
};

/// KEEPALIVE2 (18): the sender's timestamp.
struct Keepalive2 {
  UTime timestamp;
  SIPHON_PROTO_CONTROL_PAYLOAD(Keepalive2, keepalive2);
};

/// KEEPALIVE2_ACK (19): the timestamp of the KEEPALIVE2 being answered.
struct Keepalive2Ack {
  UTime timestamp;
  SIPHON_PROTO_CONTROL_PAYLOAD(Keepalive2Ack, keepalive2_ack);
};

/// ACK (20): the highest message seq received.
struct Ack {
  std::uint64_t seq = 0;
  SIPHON_PROTO_CONTROL_PAYLOAD(Ack, ack);
};

#undef SIPHON_PROTO_CONTROL_PAYLOAD

/// Decodes a control frame of the expected type: the tag must be T::kTag and
/// segments 1..3 must be empty.
template <class T>
Result<T> decode_control(const Frame& frame) {
  if (frame.tag != T::kTag) {
    DecodeError e;
    e.reason = "frame tag does not match the expected control payload";
    e.field = "tag";
    e.context[0] = T::kName;
    e.depth = 1;
    e.value = static_cast<std::uint8_t>(frame.tag);
    e.limit = static_cast<std::uint8_t>(T::kTag);
    e.has_numbers = true;
    return e;
  }
  for (std::size_t i = 1; i < kMaxSegments; ++i) {
    if (!frame.segments[i].empty()) {
      DecodeError e;
      e.reason = "control frame has more than one segment";
      e.field = "segments";
      e.context[0] = T::kName;
      e.depth = 1;
      e.value = i;
      e.limit = 0;
      e.has_numbers = true;
      return e;
    }
  }
  return T::decode(frame.segments[0]);
}

// ---------------------------------------------------------------------------
// Auth "none" payloads (§7.4)

/// The auth payload of AUTH_REQUEST for method NONE: `u8 mode` + EntityName
/// + `u64 global_id`. mode is AUTH_MODE_MON (10) towards a monitor and
/// AUTH_MODE_AUTHORIZER (1) towards an OSD/MGR/MDS (the AuthNoneAuthorizer).
struct AuthNonePayload {
  std::uint8_t mode = kAuthModeMon;
  EntityName name;
  std::uint64_t global_id = 0;

  friend bool operator==(const AuthNonePayload&, const AuthNonePayload&) = default;
  BufferList encode() const;
  /// Rejects modes outside AUTHORIZER (1..9) and MON (10..19).
  static Result<AuthNonePayload> decode(const BufferList& payload);
  bool is_mon() const noexcept { return mode >= kAuthModeMon && mode <= kAuthModeMonMax; }
};

/// `u8 10` + name + global_id (to a monitor; global_id 0 for a fresh client).
BufferList auth_none_mon_payload(const EntityName& name, std::uint64_t global_id);
/// `u8 1` + name + global_id (the authorizer sent to OSD/MGR/MDS).
BufferList auth_none_authorizer_payload(const EntityName& name, std::uint64_t global_id);

}  // namespace siphon::proto
