#include "msgr/proto/control.h"

namespace siphon::proto {

// Each payload's fields are listed once, in wire order (FieldWriter encodes
// the list, FieldReader decodes it; see encoding.h). Decoding labels errors
// with the payload's name and ignores trailing bytes (§5: newer peers may
// append fields).

namespace {

template <class T>
BufferList encode_fields(const T& value) {
  Encoder e;
  FieldWriter w(e);
  fields(w, value);
  return e.take();
}

template <class T>
Result<T> decode_fields(const BufferList& payload) {
  Decoder d(payload);
  Decoder::Scope scope(d, T::kName);
  T value{};
  FieldReader r(d);
  fields(r, value);
  if (!d.ok()) return d.error();
  return value;
}

}  // namespace

#define SIPHON_CONTROL_CODEC(T)                                                      \
  BufferList T::encode() const { return encode_fields(*this); }                      \
  Result<T> T::decode(const BufferList& payload) { return decode_fields<T>(payload); }

template <class Io>
void fields(Io& io, FieldRef<Io, Hello> v) {
  io.u8(v.entity_type, "entity_type");
  io.value(v.peer_addr);
}
SIPHON_CONTROL_CODEC(Hello)

template <class Io>
void fields(Io& io, FieldRef<Io, AuthRequest> v) {
  io.u32(v.method, "method");
  io.value(v.preferred_modes);
  io.blob(v.auth_payload, "auth payload");
}
SIPHON_CONTROL_CODEC(AuthRequest)

template <class Io>
void fields(Io& io, FieldRef<Io, AuthBadMethod> v) {
  io.u32(v.method, "method");
  io.s32(v.result, "result");
  io.value(v.allowed_methods);
  io.value(v.allowed_modes);
}
SIPHON_CONTROL_CODEC(AuthBadMethod)

template <class Io>
void fields(Io& io, FieldRef<Io, AuthReplyMore> v) {
  io.blob(v.auth_payload, "auth payload");
}
SIPHON_CONTROL_CODEC(AuthReplyMore)

template <class Io>
void fields(Io& io, FieldRef<Io, AuthRequestMore> v) {
  io.blob(v.auth_payload, "auth payload");
}
SIPHON_CONTROL_CODEC(AuthRequestMore)

template <class Io>
void fields(Io& io, FieldRef<Io, AuthDone> v) {
  io.u64(v.global_id, "global_id");
  io.u32(v.con_mode, "con_mode");
  io.blob(v.auth_payload, "auth payload");
}
SIPHON_CONTROL_CODEC(AuthDone)

template <class Io>
void fields(Io& io, FieldRef<Io, AuthSignature> v) {
  io.raw(v.sha256, "signature (32 bytes)");
}
SIPHON_CONTROL_CODEC(AuthSignature)

// The feature/flags/cookie tail CLIENT_IDENT and SERVER_IDENT share.
template <class Io, class Ident>
void ident_tail(Io& io, Ident& v, std::string_view cookie_name) {
  io.s64(v.gid, "gid");
  io.u64(v.global_seq, "global_seq");
  io.u64(v.supported_features, "features_supported");
  io.u64(v.required_features, "features_required");
  io.u64(v.flags, "flags");
  io.u64(v.cookie, cookie_name);
}

template <class Io>
void fields(Io& io, FieldRef<Io, ClientIdent> v) {
  io.value(v.addrs);
  io.value(v.target_addr);
  ident_tail(io, v, "client_cookie");
}
SIPHON_CONTROL_CODEC(ClientIdent)

template <class Io>
void fields(Io& io, FieldRef<Io, ServerIdent> v) {
  io.value(v.addrs);
  ident_tail(io, v, "server_cookie");
}
SIPHON_CONTROL_CODEC(ServerIdent)

template <class Io>
void fields(Io& io, FieldRef<Io, IdentMissingFeatures> v) {
  io.u64(v.features, "missing_features");
}
SIPHON_CONTROL_CODEC(IdentMissingFeatures)

template <class Io>
void fields(Io& io, FieldRef<Io, SessionReconnect> v) {
  io.value(v.addrs);
  io.u64(v.client_cookie, "client_cookie");
  io.u64(v.server_cookie, "server_cookie");
  io.u64(v.global_seq, "global_seq");
  io.u64(v.connect_seq, "connect_seq");
  io.u64(v.msg_seq, "msg_seq");
}
SIPHON_CONTROL_CODEC(SessionReconnect)

template <class Io>
void fields(Io& io, FieldRef<Io, SessionReset> v) {
  io.boolean(v.full, "full");
}
SIPHON_CONTROL_CODEC(SessionReset)

template <class Io>
void fields(Io& io, FieldRef<Io, SessionRetry> v) {
  io.u64(v.connect_seq, "connect_seq");
}
SIPHON_CONTROL_CODEC(SessionRetry)

template <class Io>
void fields(Io& io, FieldRef<Io, SessionRetryGlobal> v) {
  io.u64(v.global_seq, "global_seq");
}
SIPHON_CONTROL_CODEC(SessionRetryGlobal)

template <class Io>
void fields(Io& io, FieldRef<Io, SessionReconnectOk> v) {
  io.u64(v.msg_seq, "msg_seq");
}
SIPHON_CONTROL_CODEC(SessionReconnectOk)

template <class Io>
void fields(Io&, FieldRef<Io, Wait>) {}
SIPHON_CONTROL_CODEC(Wait)

template <class Io>
void fields(Io& io, FieldRef<Io, Keepalive2> v) {
  io.value(v.timestamp);
}
SIPHON_CONTROL_CODEC(Keepalive2)

template <class Io>
void fields(Io& io, FieldRef<Io, Keepalive2Ack> v) {
  io.value(v.timestamp);
}
SIPHON_CONTROL_CODEC(Keepalive2Ack)

template <class Io>
void fields(Io& io, FieldRef<Io, Ack> v) {
  io.u64(v.seq, "seq");
}
SIPHON_CONTROL_CODEC(Ack)

#undef SIPHON_CONTROL_CODEC

// Auth none ------------------------------------------------------------------

BufferList AuthNonePayload::encode() const {
  Encoder e;
  e.u8(mode);
  proto::encode(e, name);
  e.u64(global_id);
  return e.take();
}

Result<AuthNonePayload> AuthNonePayload::decode(const BufferList& payload) {
  Decoder d(payload);
  Decoder::Scope scope(d, "auth none payload");
  AuthNonePayload v;
  v.mode = d.u8("auth mode");
  if (d.ok() && (v.mode < kAuthModeAuthorizer || v.mode > kAuthModeMonMax))
    d.fail_at(0, "auth mode is neither AUTHORIZER (1..9) nor MON (10..19)", "auth mode", v.mode,
              kAuthModeMonMax);
  proto::decode(d, v.name);
  v.global_id = d.u64("global_id");
  if (!d.ok()) return d.error();
  return v;
}

BufferList auth_none_mon_payload(const EntityName& name, std::uint64_t global_id) {
  return AuthNonePayload{kAuthModeMon, name, global_id}.encode();
}

BufferList auth_none_authorizer_payload(const EntityName& name, std::uint64_t global_id) {
  return AuthNonePayload{kAuthModeAuthorizer, name, global_id}.encode();
}

}  // namespace siphon::proto
