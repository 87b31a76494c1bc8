#include "msgr/proto/control.h"

namespace siphon::proto {
namespace {

// Runs `body(decoder, value)` over `payload` with errors labelled by T's
// name; trailing bytes are ignored (§5: newer peers may append fields).
template <class T, class F>
Result<T> decode_payload(const BufferList& payload, F&& body) {
  Decoder d(payload);
  Decoder::Scope scope(d, T::kName);
  T value{};
  body(d, value);
  if (!d.ok()) return d.error();
  return value;
}

void put_u32_vector(Encoder& e, const std::vector<std::uint32_t>& v) { proto::encode(e, v); }

}  // namespace

// HELLO ----------------------------------------------------------------------

BufferList Hello::encode() const {
  Encoder e;
  e.u8(entity_type);
  peer_addr.encode(e);
  return e.take();
}

Result<Hello> Hello::decode(const BufferList& payload) {
  return decode_payload<Hello>(payload, [](Decoder& d, Hello& v) {
    v.entity_type = d.u8("entity_type");
    proto::decode(d, v.peer_addr);
  });
}

// AUTH_REQUEST ---------------------------------------------------------------

BufferList AuthRequest::encode() const {
  Encoder e;
  e.u32(method);
  put_u32_vector(e, preferred_modes);
  e.blob(auth_payload);
  return e.take();
}

Result<AuthRequest> AuthRequest::decode(const BufferList& payload) {
  return decode_payload<AuthRequest>(payload, [](Decoder& d, AuthRequest& v) {
    v.method = d.u32("method");
    proto::decode(d, v.preferred_modes);
    v.auth_payload = d.blob("auth payload");
  });
}

// AUTH_BAD_METHOD ------------------------------------------------------------

BufferList AuthBadMethod::encode() const {
  Encoder e;
  e.u32(method);
  e.s32(result);
  put_u32_vector(e, allowed_methods);
  put_u32_vector(e, allowed_modes);
  return e.take();
}

Result<AuthBadMethod> AuthBadMethod::decode(const BufferList& payload) {
  return decode_payload<AuthBadMethod>(payload, [](Decoder& d, AuthBadMethod& v) {
    v.method = d.u32("method");
    v.result = d.s32("result");
    proto::decode(d, v.allowed_methods);
    proto::decode(d, v.allowed_modes);
  });
}

// AUTH_REPLY_MORE / AUTH_REQUEST_MORE ----------------------------------------

BufferList AuthReplyMore::encode() const {
  Encoder e;
  e.blob(auth_payload);
  return e.take();
}

Result<AuthReplyMore> AuthReplyMore::decode(const BufferList& payload) {
  return decode_payload<AuthReplyMore>(
      payload, [](Decoder& d, AuthReplyMore& v) { v.auth_payload = d.blob("auth payload"); });
}

BufferList AuthRequestMore::encode() const {
  Encoder e;
  e.blob(auth_payload);
  return e.take();
}

Result<AuthRequestMore> AuthRequestMore::decode(const BufferList& payload) {
  return decode_payload<AuthRequestMore>(
      payload, [](Decoder& d, AuthRequestMore& v) { v.auth_payload = d.blob("auth payload"); });
}

// AUTH_DONE ------------------------------------------------------------------

BufferList AuthDone::encode() const {
  Encoder e;
  e.u64(global_id);
  e.u32(con_mode);
  e.blob(auth_payload);
  return e.take();
}

Result<AuthDone> AuthDone::decode(const BufferList& payload) {
  return decode_payload<AuthDone>(payload, [](Decoder& d, AuthDone& v) {
    v.global_id = d.u64("global_id");
    v.con_mode = d.u32("con_mode");
    v.auth_payload = d.blob("auth payload");
  });
}

// AUTH_SIGNATURE -------------------------------------------------------------

BufferList AuthSignature::encode() const {
  Encoder e;
  e.raw(sha256.data(), sha256.size());
  return e.take();
}

Result<AuthSignature> AuthSignature::decode(const BufferList& payload) {
  return decode_payload<AuthSignature>(payload, [](Decoder& d, AuthSignature& v) {
    d.raw(v.sha256.data(), v.sha256.size(), "signature (32 bytes)");
  });
}

// CLIENT_IDENT ---------------------------------------------------------------

BufferList ClientIdent::encode() const {
  Encoder e;
  addrs.encode(e);
  target_addr.encode(e);
  e.s64(gid);
  e.u64(global_seq);
  e.u64(supported_features);
  e.u64(required_features);
  e.u64(flags);
  e.u64(cookie);
  return e.take();
}

Result<ClientIdent> ClientIdent::decode(const BufferList& payload) {
  return decode_payload<ClientIdent>(payload, [](Decoder& d, ClientIdent& v) {
    proto::decode(d, v.addrs);
    proto::decode(d, v.target_addr);
    v.gid = d.s64("gid");
    v.global_seq = d.u64("global_seq");
    v.supported_features = d.u64("features_supported");
    v.required_features = d.u64("features_required");
    v.flags = d.u64("flags");
    v.cookie = d.u64("client_cookie");
  });
}

// SERVER_IDENT ---------------------------------------------------------------

BufferList ServerIdent::encode() const {
  Encoder e;
  addrs.encode(e);
  e.s64(gid);
  e.u64(global_seq);
  e.u64(supported_features);
  e.u64(required_features);
  e.u64(flags);
  e.u64(cookie);
  return e.take();
}

Result<ServerIdent> ServerIdent::decode(const BufferList& payload) {
  return decode_payload<ServerIdent>(payload, [](Decoder& d, ServerIdent& v) {
    proto::decode(d, v.addrs);
    v.gid = d.s64("gid");
    v.global_seq = d.u64("global_seq");
    v.supported_features = d.u64("features_supported");
    v.required_features = d.u64("features_required");
    v.flags = d.u64("flags");
    v.cookie = d.u64("server_cookie");
  });
}

// IDENT_MISSING_FEATURES -----------------------------------------------------

BufferList IdentMissingFeatures::encode() const {
  Encoder e;
  e.u64(features);
  return e.take();
}

Result<IdentMissingFeatures> IdentMissingFeatures::decode(const BufferList& payload) {
  return decode_payload<IdentMissingFeatures>(
      payload, [](Decoder& d, IdentMissingFeatures& v) { v.features = d.u64("missing_features"); });
}

// SESSION_RECONNECT ----------------------------------------------------------

BufferList SessionReconnect::encode() const {
  Encoder e;
  addrs.encode(e);
  e.u64(client_cookie);
  e.u64(server_cookie);
  e.u64(global_seq);
  e.u64(connect_seq);
  e.u64(msg_seq);
  return e.take();
}

Result<SessionReconnect> SessionReconnect::decode(const BufferList& payload) {
  return decode_payload<SessionReconnect>(payload, [](Decoder& d, SessionReconnect& v) {
    proto::decode(d, v.addrs);
    v.client_cookie = d.u64("client_cookie");
    v.server_cookie = d.u64("server_cookie");
    v.global_seq = d.u64("global_seq");
    v.connect_seq = d.u64("connect_seq");
    v.msg_seq = d.u64("msg_seq");
  });
}

// SESSION_RESET / RETRY / RETRY_GLOBAL / RECONNECT_OK ------------------------

BufferList SessionReset::encode() const {
  Encoder e;
  e.boolean(full);
  return e.take();
}

Result<SessionReset> SessionReset::decode(const BufferList& payload) {
  return decode_payload<SessionReset>(payload,
                                      [](Decoder& d, SessionReset& v) { v.full = d.boolean("full"); });
}

BufferList SessionRetry::encode() const {
  Encoder e;
  e.u64(connect_seq);
  return e.take();
}

Result<SessionRetry> SessionRetry::decode(const BufferList& payload) {
  return decode_payload<SessionRetry>(
      payload, [](Decoder& d, SessionRetry& v) { v.connect_seq = d.u64("connect_seq"); });
}

BufferList SessionRetryGlobal::encode() const {
  Encoder e;
  e.u64(global_seq);
  return e.take();
}

Result<SessionRetryGlobal> SessionRetryGlobal::decode(const BufferList& payload) {
  return decode_payload<SessionRetryGlobal>(
      payload, [](Decoder& d, SessionRetryGlobal& v) { v.global_seq = d.u64("global_seq"); });
}

BufferList SessionReconnectOk::encode() const {
  Encoder e;
  e.u64(msg_seq);
  return e.take();
}

Result<SessionReconnectOk> SessionReconnectOk::decode(const BufferList& payload) {
  return decode_payload<SessionReconnectOk>(
      payload, [](Decoder& d, SessionReconnectOk& v) { v.msg_seq = d.u64("msg_seq"); });
}

// WAIT -----------------------------------------------------------------------

BufferList Wait::encode() const { return {}; }

Result<Wait> Wait::decode(const BufferList& payload) {
  return decode_payload<Wait>(payload, [](Decoder&, Wait&) {});
}

// KEEPALIVE2 / KEEPALIVE2_ACK / ACK ------------------------------------------

BufferList Keepalive2::encode() const {
  Encoder e;
  proto::encode(e, timestamp);
  return e.take();
}

Result<Keepalive2> Keepalive2::decode(const BufferList& payload) {
  return decode_payload<Keepalive2>(payload,
                                    [](Decoder& d, Keepalive2& v) { proto::decode(d, v.timestamp); });
}

BufferList Keepalive2Ack::encode() const {
  Encoder e;
  proto::encode(e, timestamp);
  return e.take();
}

Result<Keepalive2Ack> Keepalive2Ack::decode(const BufferList& payload) {
  return decode_payload<Keepalive2Ack>(
      payload, [](Decoder& d, Keepalive2Ack& v) { proto::decode(d, v.timestamp); });
}

BufferList Ack::encode() const {
  Encoder e;
  e.u64(seq);
  return e.take();
}

Result<Ack> Ack::decode(const BufferList& payload) {
  return decode_payload<Ack>(payload, [](Decoder& d, Ack& v) { v.seq = d.u64("seq"); });
}

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
