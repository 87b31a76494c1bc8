// The accepting side's cephx: the key-based exchange a monitor runs
// (shared/reference/cephx.md §3, §5, §8.4a), for Siphon daemons that hold a
// keyring of the entities allowed in and no monitor:
//
//   <- AUTH_REQUEST(cephx, modes, 0a | name | global_id)
//   AUTH_REPLY_MORE(server challenge)                 (the name must be in the keyring)
//   <- AUTH_REQUEST_MORE(client challenge, proof of the key, other_keys)
//   AUTH_DONE(new global_id, mode, session key sealed with the entity's key,
//             connection secret sealed with the session key)
//   AUTH_SIGNATURE = HMAC-SHA256(session key, every byte received so far),
//   and the client's must equal the HMAC of every byte we sent.
//
// A refused attempt (unknown entity, wrong key, no common method or mode)
// answers AUTH_BAD_METHOD and keeps the connection in the auth phase, as
// Ceph does; Step::auth_refused tells the driver to log and count it.
// Authorizers (tickets a monitor issued, cephx.md §4) are not validated here.
#include <fmt/format.h>

#include <algorithm>

#include "msgr/auth/cephx.h"
#include "msgr/session/handshake.h"
#include "msgr/session/transcript.h"

namespace siphon::session {
namespace {

constexpr std::int32_t kEACCES = -13;

using detail::bytes_of;

}  // namespace

void ServerHandshake::record(const Frame& f, auth::Bytes& into) const { detail::append_encoded(f, rev_, into); }

Step ServerHandshake::send(Step s, Frame f) {
  if (recording_) record(f, tx_);
  s.send.push_back(std::move(f));
  return s;
}

Step ServerHandshake::bad_method(std::uint32_t method, std::int32_t result, std::string why) {
  const ServerAuth& a = me_.server_auth;
  AuthBadMethod bad;
  bad.method = method;
  bad.result = result;
  for (const std::uint32_t m : daemon_peer() ? a.cluster_methods : a.service_methods)
    if (m == proto::kAuthMethodNone || m == proto::kAuthMethodCephx) bad.allowed_methods.push_back(m);
  bad.allowed_modes = daemon_peer() ? a.cluster_modes : a.service_modes;
  challenged_ = false;
  Step s = send(Step{}, encode(bad));  // stay in auth_wait: the client may try again
  s.auth_refused = std::move(why);
  return s;
}

Step ServerHandshake::on_cephx_request(const AuthRequest& req, std::uint32_t con_mode) {
  const ServerAuth& a = me_.server_auth;
  authorizer_challenged_ = false;
  // A ticket from a monitor: AUTH_MODE_AUTHORIZER (1) in the first byte.
  if (auto payload = bytes_of(req.auth_payload); !payload.empty() && payload[0] == 1)
    return on_authorizer(payload, con_mode, false);
  // Same layout as auth none's: mode | EntityName | global_id (cephx.md §3.1).
  auto parsed = proto::AuthNonePayload::decode(req.auth_payload);
  if (!parsed) return fail(errc::decode_error, "cephx AUTH_REQUEST: " + parsed.error().message());
  const proto::AuthNonePayload& p = *parsed;
  if (!p.is_mon())
    return bad_method(proto::kAuthMethodCephx, kEACCES,
                      fmt::format("{} presented a cephx authorizer (a ticket from a monitor); this daemon "
                                  "authenticates from its keyring only",
                                  p.name.to_string()));
  const auto it = a.keys.find(p.name.to_string());
  if (it == a.keys.end())
    return bad_method(proto::kAuthMethodCephx, kEACCES,
                      fmt::format("{} is not in the keyring ({})", p.name.to_string(),
                                  a.keyring_source.empty() ? std::string("no keyring") : a.keyring_source));
  method_ = proto::kAuthMethodCephx;
  pending_name_ = p.name;
  pending_mode_ = con_mode;
  entity_secret_ = it->second;
  const auto type = a.key_types.find(it->first);
  entity_key_type_ = type == a.key_types.end() ? auth::kCryptoAes : type->second;
  do {
    server_challenge_ = auth::random_u64();  // never 0 (cephx.md §3.2)
  } while (server_challenge_ == 0);
  challenged_ = true;
  const auth::Bytes challenge = auth::server_challenge_payload(server_challenge_);
  AuthReplyMore more;
  more.auth_payload = BufferList::copy_of(challenge.data(), challenge.size());
  return send(Step{}, encode(more));
}

Step ServerHandshake::on_auth_request_more(const Frame& f) {
  if (authorizer_challenged_) {
    AuthRequestMore more;
    std::string why;
    if (!decode(f, more, why)) return fail(errc::decode_error, std::move(why));
    return on_authorizer(bytes_of(more.auth_payload), pending_mode_, true);
  }
  if (!challenged_) return fail(errc::unexpected_frame, "AUTH_REQUEST_MORE without a cephx challenge");
  challenged_ = false;
  AuthRequestMore more;
  std::string why;
  if (!decode(f, more, why)) return fail(errc::decode_error, std::move(why));
  const auth::Bytes payload = bytes_of(more.auth_payload);
  auto req = auth::decode_authenticate(payload, why);
  if (!req) return fail(errc::decode_error, "cephx authenticate request: " + why);
  auto want = auth::challenge_proof(auth::KeyRef(entity_key_type_, entity_secret_), server_challenge_, req->client_challenge, why);
  if (!want) return fail(errc::internal_error, "cephx challenge proof: " + why);
  if (*want != req->key)
    return bad_method(proto::kAuthMethodCephx, kEACCES,
                      fmt::format("{} failed the cephx challenge: its key does not match the {} key in the "
                                  "keyring ({}); a key of another type, or another key",
                                  pending_name_.to_string(), auth::key_type_name(entity_key_type_),
                                  me_.server_auth.keyring_source));
  auth::CryptoKey session;
  const proto::UTime now = stamp_now();
  session.created_sec = now.sec;
  session.created_nsec = now.nsec;
  // The session key takes the client's key type, as Ceph's KeyServer
  // gives the AUTH ticket (build_session_auth_info: the client's type).
  session.type = entity_key_type_;
  session.secret.resize(entity_key_type_ == auth::kCryptoAes256k ? auth::kAes256kKeySize : auth::kAesKeySize);
  auth::random_bytes(session.secret);
  auth::Bytes secret;
  if (pending_mode_ == proto::kConModeSecure) {
    secret.resize(auth::kConnectionSecretSize);
    auth::random_bytes(secret);
  }
  auto done_payload =
      auth::mon_auth_done_payload(auth::KeyRef(entity_key_type_, entity_secret_), session, me_.server_auth.ticket_ttl_sec, secret, why);
  if (!done_payload) return fail(errc::internal_error, "cephx reply: " + why);
  session_key_ = session.secret;
  peer_.global_id = svc_.new_global_id();
  peer_.auth_method = proto::kAuthMethodCephx;
  peer_.con_mode = pending_mode_;
  peer_.auth_name = pending_name_;
  return finish_cephx(*done_payload, std::move(secret));
}

Step ServerHandshake::finish_cephx(const auth::Bytes& payload, auth::Bytes connection_secret) {
  AuthDone done;
  done.global_id = peer_.global_id;
  done.con_mode = pending_mode_;
  done.auth_payload = BufferList::copy_of(payload.data(), payload.size());
  Step s = send(Step{}, encode(done));
  recording_ = false;
  const auth::Sha256 sig = auth::hmac_sha256(session_key_, rx_);
  AuthSignature out;
  std::copy(sig.begin(), sig.end(), out.sha256.begin());
  s.send.push_back(encode(out));
  if (pending_mode_ == proto::kConModeSecure) {
    // AUTH_DONE goes out in the clear, AUTH_SIGNATURE is the first secure frame.
    s.secure = true;
    s.plain_frames = 1;
    s.connection_secret = std::move(connection_secret);
  }
  state_ = State::sig_wait;
  return s;
}

}  // namespace siphon::session
