// The connecting side's auth phase: method choice and fallback, and cephx
// towards a monitor (shared/reference/cephx.md §3, §5, §7):
//
//   AUTH_REQUEST(cephx, modes, 0a | name | global_id 0)
//   <- AUTH_REPLY_MORE(server challenge)
//   AUTH_REQUEST_MORE(client challenge, proof of the key, other_keys)
//   <- AUTH_DONE(global_id, con_mode, session key, tickets, connection secret)
//   AUTH_SIGNATURE = HMAC-SHA256(session key, every byte received so far),
//   and the server's must equal the HMAC of every byte we sent.
//
// Towards an OSD, MGR or MDS, cephx is the authorizer (cephx.md §4): the
// service ticket the monitor handed out (ClientAuth::tickets), challenged
// once by the service:
//
//   AUTH_REQUEST(cephx, modes, 01 | gid | service | ticket | CephXAuthorize)
//   <- AUTH_REPLY_MORE(CephXAuthorizeChallenge, under the ticket's key)
//   AUTH_REQUEST_MORE(the authorizer again, answering challenge + 1)
//   <- AUTH_DONE(CephXAuthorizeReply: nonce + 1, connection secret)
//   AUTH_SIGNATURE = HMAC-SHA256(the ticket's session key, ...), as above.
//
// With no ticket for the peer's type cephx is skipped and the next method
// of the list is tried. ClientAuth::key_based_everywhere asks for the
// monitor's exchange with every peer instead (Siphon daemons that
// authenticate from a keyring).
#include <fmt/format.h>

#include "msgr/auth/cephx.h"
#include "msgr/session/handshake.h"
#include "msgr/session/transcript.h"

namespace siphon::session {
namespace {

constexpr std::int32_t kEACCES = -13;

std::string method_name(std::uint32_t m) {
  return m == proto::kAuthMethodNone    ? std::string("none")
         : m == proto::kAuthMethodCephx ? std::string("cephx")
         : m == proto::kAuthMethodGss   ? std::string("gss")
                                        : std::to_string(m);
}
std::string mode_name(std::uint32_t m) {
  return m == proto::kConModeCrc ? std::string("crc") : m == proto::kConModeSecure ? std::string("secure")
                                                                                   : std::to_string(m);
}
template <class F>
std::string join(const std::vector<std::uint32_t>& v, F name) {
  std::string out;
  for (const std::uint32_t x : v) out += (out.empty() ? "" : ",") + name(x);
  return out;
}
bool contains(const std::vector<std::uint32_t>& v, std::uint32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
using detail::bytes_of;

}  // namespace

void ClientHandshake::record(const Frame& f, auth::Bytes& into) const { detail::append_encoded(f, rev_, into); }

Step ClientHandshake::send(Step s, Frame f) {
  if (recording_) record(f, tx_);
  s.send.push_back(std::move(f));
  return s;
}

bool ClientHandshake::cephx_usable() const {
  const ClientAuth& a = me_.auth;
  if (a.secret.empty()) return false;
  if (expected_peer_type_ == proto::kEntityTypeMon || a.key_based_everywhere) return true;
  // The service id of a ticket is the peer's entity type (cephx.md §3.4).
  return a.tickets && a.tickets->get(expected_peer_type_).has_value();
}

Step ClientHandshake::send_auth_request(Step s) {
  const bool to_mon = expected_peer_type_ == proto::kEntityTypeMon;
  const bool mon_like = to_mon || expected_peer_type_ == proto::kEntityTypeMgr;
  const ClientAuth& a = me_.auth;
  for (const std::uint32_t m : a.methods) {
    if (contains(tried_, m)) continue;
    if (m == proto::kAuthMethodCephx && !cephx_usable()) continue;
    if (m != proto::kAuthMethodCephx && m != proto::kAuthMethodNone) continue;
    method_ = m;
    tried_.push_back(m);
    challenged_ = false;
    authorizer_.reset();
    AuthRequest req;
    req.method = m;
    if (m == proto::kAuthMethodCephx) {
      req.preferred_modes = mon_like ? a.mon_modes : a.modes;
      if (to_mon || a.key_based_everywhere) {
        req.auth_payload = proto::auth_none_mon_payload(me_.auth_name, 0);  // same layout (cephx.md §3.1)
      } else {
        authorizer_ = a.tickets->get(expected_peer_type_);
        authorizer_nonce_ = svc_.random_cookie();
        std::string why;
        auto body = auth::authorizer_payload(authorizer_->global_id, authorizer_->ticket, authorizer_nonce_,
                                             std::nullopt, why);
        if (!body) return fail(errc::auth_failed, "cephx authorizer: " + why);
        req.auth_payload = BufferList::copy_of(body->data(), body->size());
      }
    } else {
      req.preferred_modes = {kConModeCrc};  // auth none allows crc only
      // The authorizer names the global_id the mon gave us, which is our
      // gid (rados-client.md §3.1); a messenger without one sends 0.
      const std::uint64_t authorizer_id = me_.gid > 0 ? static_cast<std::uint64_t>(me_.gid) : peer_.global_id;
      req.auth_payload = to_mon ? proto::auth_none_mon_payload(me_.auth_name, peer_.global_id)
                                : proto::auth_none_authorizer_payload(me_.auth_name, authorizer_id);
    }
    return send(std::move(s), encode(req));
  }
  std::string why = fmt::format("no usable auth method for {} towards a {} (auth_client_required: {})",
                                me_.auth_name.to_string(), proto::entity_type_name(expected_peer_type_),
                                join(a.methods, method_name));
  if (contains(a.methods, proto::kAuthMethodCephx) && !a.secret.empty() && !to_mon && !a.key_based_everywhere)
    why += fmt::format("; cephx towards a {} needs the service ticket a monitor hands out, and there is none "
                       "(authenticate with a monitor first, with cephx)",
                       proto::entity_type_name(expected_peer_type_));
  return fail(errc::auth_unsupported, std::move(why));
}

Step ClientHandshake::on_auth_bad_method(const Frame& f) {
  AuthBadMethod bad;
  std::string why;
  if (!decode(f, bad, why)) return fail(errc::decode_error, std::move(why));
  const ClientAuth& a = me_.auth;
  if (method_ == proto::kAuthMethodCephx && bad.method == proto::kAuthMethodCephx && bad.result == kEACCES)
    return fail(errc::auth_failed,
                fmt::format("the {} refused the cephx key of {} from {} (EACCES): the key does not "
                            "match the cluster's (check `ceph auth get {}`)",
                            expected_peer_type_ == proto::kEntityTypeMon ? std::string("monitor")
                                                                         : std::string(proto::entity_type_name(expected_peer_type_)),
                            me_.auth_name.to_string(), a.key_source, me_.auth_name.to_string()));
  // The next method of ours that the peer allows (Ceph's client does the same).
  for (const std::uint32_t m : a.methods) {
    if (contains(tried_, m) || !contains(bad.allowed_methods, m)) continue;
    if (m == proto::kAuthMethodCephx && !cephx_usable()) continue;
    return send_auth_request(Step{});
  }
  why = fmt::format("peer rejected auth method {} (result {}); it allows methods [{}] and modes [{}]; "
                    "we offer methods [{}]",
                    method_name(bad.method), bad.result, join(bad.allowed_methods, method_name),
                    join(bad.allowed_modes, mode_name), join(a.methods, method_name));
  if (contains(bad.allowed_methods, proto::kAuthMethodCephx)) {
    if (a.secret.empty())
      why += fmt::format("; cephx needs a key for {}: {}", me_.auth_name.to_string(),
                         a.key_source.empty() ? std::string("none configured (keyring, key or keyfile)")
                                              : a.key_source);
    else if (!contains(a.methods, proto::kAuthMethodCephx))
      why += "; add cephx to auth_client_required";
  }
  if (bad.result == kEOPNOTSUPP && method_ == proto::kAuthMethodCephx)
    why += fmt::format("; no common connection mode (we offer [{}]; check ms_mon_client_mode / ms_client_mode)",
                       join(expected_peer_type_ == proto::kEntityTypeMon || expected_peer_type_ == proto::kEntityTypeMgr
                                ? a.mon_modes
                                : a.modes,
                            mode_name));
  return fail(errc::auth_unsupported, std::move(why));
}

Step ClientHandshake::on_auth_reply_more(const Frame& f) {
  if (method_ != proto::kAuthMethodCephx || challenged_)
    return fail(errc::unexpected_frame, "unexpected AUTH_REPLY_MORE");
  AuthReplyMore more;
  std::string why;
  if (!decode(f, more, why)) return fail(errc::decode_error, std::move(why));
  const auth::Bytes payload = bytes_of(more.auth_payload);
  if (authorizer_) {
    auto c = auth::decode_authorizer_challenge(authorizer_->ticket.session_key, payload, why);
    if (!c) return fail(errc::auth_failed, fmt::format("the {}'s cephx challenge: {}",
                                                       proto::entity_type_name(expected_peer_type_), why));
    challenged_ = true;
    auto body = auth::authorizer_payload(authorizer_->global_id, authorizer_->ticket, authorizer_nonce_, *c, why);
    if (!body) return fail(errc::auth_failed, "cephx authorizer: " + why);
    AuthRequestMore req;
    req.auth_payload = BufferList::copy_of(body->data(), body->size());
    return send(Step{}, encode(req));
  }
  auto challenge = auth::decode_server_challenge(payload, why);
  if (!challenge) return fail(errc::decode_error, "cephx server challenge: " + why);
  challenged_ = true;
  server_challenge_ = *challenge;
  const std::uint64_t client_challenge = svc_.random_cookie();
  auto body = auth::authenticate_payload(auth::KeyRef(me_.auth.key_type, me_.auth.secret), server_challenge_, client_challenge,
                                         me_.auth.want_keys | 0x20, why);
  if (!body) return fail(errc::auth_failed, fmt::format("cephx key of {}: {}", me_.auth_name.to_string(), why));
  AuthRequestMore req;
  req.auth_payload = BufferList::copy_of(body->data(), body->size());
  return send(Step{}, encode(req));
}

Step ClientHandshake::on_cephx_done(const AuthDone& d) {
  if (!challenged_) return fail(errc::unexpected_frame, "cephx AUTH_DONE before the challenge");
  const bool mon_like = expected_peer_type_ == proto::kEntityTypeMon || expected_peer_type_ == proto::kEntityTypeMgr;
  if (!contains(mon_like ? me_.auth.mon_modes : me_.auth.modes, d.con_mode))
    return fail(errc::auth_unsupported, fmt::format("peer chose connection mode {}, which we did not offer",
                                                    mode_name(d.con_mode)));
  const auth::Bytes payload = bytes_of(d.auth_payload);
  std::string why;
  if (authorizer_) return on_authorizer_done(d, payload);
  auto r = auth::decode_mon_auth_done(auth::KeyRef(me_.auth.key_type, me_.auth.secret), payload, why);
  if (!r)
    return fail(errc::auth_failed, fmt::format("cannot read the monitor's cephx reply with the key of {} from "
                                               "{}: {}", me_.auth_name.to_string(), me_.auth.key_source, why));
  session_key_ = r->auth.session_key.secret;
  const auth::Sha256 sig = auth::hmac_sha256(session_key_, rx_);
  AuthSignature out;
  std::copy(sig.begin(), sig.end(), out.sha256.begin());
  Step s;
  if (d.con_mode == proto::kConModeSecure) {
    if (r->connection_secret.size() < 40)
      return fail(errc::auth_failed, fmt::format("secure mode chosen, but the connection secret has {} bytes "
                                                 "(needs 40)", r->connection_secret.size()));
    s.secure = true;
    s.connection_secret = r->connection_secret;
  }
  // The service tickets, for this client's connections to OSDs, MGRs and MDSs.
  // The AUTH ticket too: the MonClient renews the others with it.
  if (me_.auth.tickets) {
    me_.auth.tickets->update(d.global_id, {r->auth});
    if (!r->extra.empty()) me_.auth.tickets->update(d.global_id, r->extra);
  }
  cephx_ = std::move(*r);
  s.send.push_back(encode(out));
  state_ = State::sig_wait;
  return s;
}

Step ClientHandshake::on_authorizer_done(const AuthDone& d, const auth::Bytes& payload) {
  std::string why;
  auto secret = auth::decode_authorize_reply(authorizer_->ticket.session_key, payload, authorizer_nonce_, why);
  if (!secret)
    return fail(errc::auth_failed, fmt::format("cannot accept the {}'s cephx reply: {}",
                                               proto::entity_type_name(expected_peer_type_), why));
  session_key_ = authorizer_->ticket.session_key.secret;
  const auth::Sha256 sig = auth::hmac_sha256(session_key_, rx_);
  AuthSignature out;
  std::copy(sig.begin(), sig.end(), out.sha256.begin());
  Step s;
  if (d.con_mode == proto::kConModeSecure) {
    if (secret->size() < 40)
      return fail(errc::auth_failed, fmt::format("secure mode chosen, but the {}'s connection secret has {} bytes "
                                                 "(needs 40)", proto::entity_type_name(expected_peer_type_),
                                                 secret->size()));
    s.secure = true;
    s.connection_secret = std::move(*secret);
  }
  s.send.push_back(encode(out));
  state_ = State::sig_wait;
  return s;
}

Step ClientHandshake::check_cephx_signature(const Frame& f) {
  AuthSignature sig;
  std::string why;
  if (!decode(f, sig, why)) return fail(errc::decode_error, std::move(why));
  const auth::Sha256 want = auth::hmac_sha256(session_key_, tx_);
  if (!std::equal(want.begin(), want.end(), sig.sha256.begin()))
    return fail(errc::bad_signature,
                "the peer's AUTH_SIGNATURE does not match what we sent (tampered pre-auth frames?)");
  tx_.clear();
  rx_.clear();
  return Step{};
}

}  // namespace siphon::session
