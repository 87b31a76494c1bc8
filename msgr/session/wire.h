// The control-frame payloads and the MESSAGE header (ceph_msg_header2) as the
// session layer uses them, with their mapping to and from proto::Frame
// (msgr2-wire.md §5, §6, §9). Decoding never trusts a length: every read is
// bounds-checked, and a malformed payload yields an error with a reason; it
// never throws or aborts.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/base/clock.h"
#include "msgr/proto/frame.h"
#include "msgr/proto/types.h"

namespace siphon::session {

using proto::EntityAddr;
using proto::EntityAddrVec;
using proto::Frame;
using proto::Tag;

inline constexpr std::uint32_t kAuthNone = 1;         // CEPH_AUTH_NONE
inline constexpr std::uint32_t kConModeCrc = 1;       // CEPH_CON_MODE_CRC
inline constexpr std::uint8_t kAuthModeAuthorizer = 1;  // first byte of an authorizer payload
inline constexpr std::uint8_t kAuthModeMon = 10;        // first byte of a mon auth payload
inline constexpr std::uint64_t kMsgConnectLossy = 1;    // CEPH_MSG_CONNECT_LOSSY
inline constexpr std::uint8_t kMsgFlagsCeph = 3;        // header2 flags Ceph sends (COMPLETE|NOCRC)
inline constexpr std::int32_t kEOPNOTSUPP = -95;

struct Hello {
  std::uint8_t entity_type = 0;
  EntityAddr peer_addr;
};
struct AuthRequest {
  std::uint32_t method = kAuthNone;
  std::vector<std::uint32_t> preferred_modes{kConModeCrc};
  BufferList payload;
};
struct AuthBadMethod {
  std::uint32_t method = 0;
  std::int32_t result = kEOPNOTSUPP;
  std::vector<std::uint32_t> allowed_methods{kAuthNone};
  std::vector<std::uint32_t> allowed_modes{kConModeCrc};
};
struct AuthDone {
  std::uint64_t global_id = 0;
  std::uint32_t con_mode = kConModeCrc;
  BufferList payload;
};
struct AuthSignature {
  std::array<std::uint8_t, 32> sig{};  // all zero for auth none
};
struct ClientIdent {
  EntityAddrVec addrs;
  EntityAddr target_addr;
  std::int64_t gid = -1;
  std::uint64_t global_seq = 0;
  std::uint64_t features_supported = 0;
  std::uint64_t features_required = 0;
  std::uint64_t flags = 0;
  std::uint64_t client_cookie = 0;
};
struct ServerIdent {
  EntityAddrVec addrs;
  std::int64_t gid = -1;
  std::uint64_t global_seq = 0;
  std::uint64_t features_supported = 0;
  std::uint64_t features_required = 0;
  std::uint64_t flags = 0;
  std::uint64_t server_cookie = 0;
};
struct IdentMissingFeatures {
  std::uint64_t features = 0;
};
struct SessionReconnect {
  EntityAddrVec addrs;
  std::uint64_t client_cookie = 0;
  std::uint64_t server_cookie = 0;
  std::uint64_t global_seq = 0;
  std::uint64_t connect_seq = 0;
  std::uint64_t msg_seq = 0;
};
struct SessionReset {
  bool full = false;
};
struct SessionRetry {
  std::uint64_t connect_seq = 0;
};
struct SessionRetryGlobal {
  std::uint64_t global_seq = 0;
};
struct ReconnectOk {
  std::uint64_t msg_seq = 0;
};
struct Wait {};
struct Keepalive2 {
  UTime stamp;
};
struct Keepalive2Ack {
  UTime stamp;
};
struct Ack {
  std::uint64_t seq = 0;
};

// ceph_msg_header2, 41 bytes packed (msgr2-wire.md §9.1).
struct MsgHeader2 {
  static constexpr std::size_t kSize = 41;
  std::uint64_t seq = 0;
  std::uint64_t tid = 0;
  std::uint16_t type = 0;
  std::uint16_t priority = 127;
  std::uint16_t version = 1;
  std::uint32_t data_pre_padding_len = 0;
  std::uint16_t data_off = 0;
  std::uint64_t ack_seq = 0;
  std::uint8_t flags = kMsgFlagsCeph;
  std::uint16_t compat_version = 1;
  std::uint16_t reserved = 0;
};

// Payload encoders: each returns the whole frame.
Frame encode(const Hello& v);
Frame encode(const AuthRequest& v);
Frame encode(const AuthBadMethod& v);
Frame encode(const AuthDone& v);
Frame encode(const AuthSignature& v);
Frame encode(const ClientIdent& v);
Frame encode(const ServerIdent& v);
Frame encode(const IdentMissingFeatures& v);
Frame encode(const SessionReconnect& v);
Frame encode(const SessionReset& v);
Frame encode(const SessionRetry& v);
Frame encode(const SessionRetryGlobal& v);
Frame encode(const ReconnectOk& v);
Frame encode(const Wait& v);
Frame encode(const Keepalive2& v);
Frame encode(const Keepalive2Ack& v);
Frame encode(const Ack& v);

// Payload decoders: false (and `why` set to a static reason) when the
// payload of `f` (whose tag the caller checked) is malformed. Trailing bytes
// are ignored (msgr2 rule).
bool decode(const Frame& f, Hello& v, std::string_view& why);
bool decode(const Frame& f, AuthRequest& v, std::string_view& why);
bool decode(const Frame& f, AuthBadMethod& v, std::string_view& why);
bool decode(const Frame& f, AuthDone& v, std::string_view& why);
bool decode(const Frame& f, AuthSignature& v, std::string_view& why);
bool decode(const Frame& f, ClientIdent& v, std::string_view& why);
bool decode(const Frame& f, ServerIdent& v, std::string_view& why);
bool decode(const Frame& f, IdentMissingFeatures& v, std::string_view& why);
bool decode(const Frame& f, SessionReconnect& v, std::string_view& why);
bool decode(const Frame& f, SessionReset& v, std::string_view& why);
bool decode(const Frame& f, SessionRetry& v, std::string_view& why);
bool decode(const Frame& f, SessionRetryGlobal& v, std::string_view& why);
bool decode(const Frame& f, ReconnectOk& v, std::string_view& why);
bool decode(const Frame& f, Keepalive2& v, std::string_view& why);
bool decode(const Frame& f, Keepalive2Ack& v, std::string_view& why);
bool decode(const Frame& f, Ack& v, std::string_view& why);

// MESSAGE frames: segment 0 = header2, then front, middle, data.
void encode_header2(const MsgHeader2& h, BufferList& out);
bool decode_header2(const BufferList& seg0, MsgHeader2& h, std::string_view& why);

// The auth "none" payload (msgr2-wire.md §7.4): AUTH_MODE_MON (10) to a
// monitor, AUTH_MODE_AUTHORIZER (1) to anyone else; then EntityName and
// global_id.
BufferList auth_none_payload(bool to_monitor, const proto::EntityName& name,
                             std::uint64_t global_id);
struct AuthNoneRequest {
  std::uint8_t mode = 0;
  proto::EntityName name;
  std::uint64_t global_id = 0;
};
bool decode_auth_none(const BufferList& payload, AuthNoneRequest& out, std::string_view& why);

// Ceph's ordering of addresses for race resolution: memcmp over the
// in-memory entity_addr_t (type, nonce, sockaddr) with the type taken as
// LEGACY (Ceph compares legacy_addr()).
int compare_for_race(const EntityAddr& a, const EntityAddr& b) noexcept;
// Address equality as msgr2 checks target_addr (type, nonce, sockaddr).
bool same_addr(const EntityAddr& a, const EntityAddr& b) noexcept;
bool contains(const EntityAddrVec& v, const EntityAddr& a) noexcept;
std::string to_string(const EntityAddr& a);
std::string to_string(const EntityAddrVec& v);

}  // namespace siphon::session
