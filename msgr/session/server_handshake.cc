// The accepting side of the msgr2 handshake (state diagram in handshake.h).
#include <fmt/format.h>

#include <algorithm>

#include "msgr/session/handshake.h"
#include "msgr/session/transcript.h"

namespace siphon::session {

std::string_view to_string(ServerHandshake::State s) noexcept {
  using S = ServerHandshake::State;
  switch (s) {
    case S::start: return "start";
    case S::hello_wait: return "hello_wait";
    case S::auth_wait: return "auth_wait";
    case S::sig_wait: return "sig_wait";
    case S::ident_wait: return "ident_wait";
    case S::decide: return "decide";
    case S::ready: return "ready";
    case S::failed: return "failed";
  }
  return "?";
}

ServerHandshake::ServerHandshake(LocalIdentity me, NetAddress peer_socket_addr,
                                 HandshakeServices services)
    : me_(std::move(me)), peer_socket_addr_(peer_socket_addr), svc_(std::move(services)) {}

Step ServerHandshake::start() { return start(proto::Banner{}, proto::Negotiated{}); }

Step ServerHandshake::start(const proto::Banner& mine, const proto::Negotiated& n) {
  rev_ = n.rev;
  recording_ = true;
  detail::append_bytes(tx_, proto::encode_banner(mine));
  detail::append_bytes(rx_, proto::encode_banner(n.peer));
  EntityAddr seen;  // how we see the peer: its socket address, type MSGR2, nonce 0
  seen.type = AddrType::msgr2;
  seen.addr = peer_socket_addr_;
  Step s = send_hello(me_.entity_type, seen);
  for (const Frame& f : s.send) record(f, tx_);
  return s;
}

Step ServerHandshake::on_frame(const Frame& f) {
  if (recording_ && (state_ == State::hello_wait || state_ == State::auth_wait)) record(f, rx_);
  switch (state_) {
    case State::hello_wait:
      if (f.tag == Tag::hello) return on_hello(f);
      break;
    case State::auth_wait:
      if (f.tag == Tag::auth_request) return on_auth_request(f);
      if (f.tag == Tag::auth_request_more) return on_auth_request_more(f);
      break;
    case State::sig_wait:
      if (f.tag == Tag::auth_signature) return on_signature(f);
      break;
    case State::ident_wait:
      if (f.tag == Tag::client_ident) return on_client_ident(f);
      if (f.tag == Tag::session_reconnect) return on_reconnect(f);
      break;
    case State::start:
    case State::decide:
    case State::ready:
    case State::failed:
      break;
  }
  return fail(errc::unexpected_frame,
              fmt::format("unexpected {} frame in server state {}", proto::to_string(f.tag),
                          to_string(state_)));
}

Step ServerHandshake::on_hello(const Frame& f) {
  Hello h;
  std::string why;
  if (!decode(f, h, why)) return fail(errc::decode_error, std::string(why));
  peer_.type = h.entity_type;
  policy_ = svc_.policy_for(h.entity_type);
  state_ = State::auth_wait;
  return {};
}

Step ServerHandshake::on_auth_request(const Frame& f) {
  AuthRequest req;
  std::string why;
  if (!decode(f, req, why)) return fail(errc::decode_error, std::string(why));
  const ServerAuth& a = me_.server_auth;
  const auto& methods = daemon_peer() ? a.cluster_methods : a.service_methods;
  const auto& modes = daemon_peer() ? a.cluster_modes : a.service_modes;
  challenged_ = false;
  const bool known = req.method == proto::kAuthMethodNone || req.method == proto::kAuthMethodCephx;
  if (!known || std::find(methods.begin(), methods.end(), req.method) == methods.end()) {
    // Name the entity when the payload says it plainly (auth none, or
    // cephx's key-based request); an authorizer's name is inside its ticket.
    std::string who = "the peer";
    if (auto p = proto::AuthNonePayload::decode(req.auth_payload);
        p && known && (req.method == proto::kAuthMethodNone || p->is_mon()))
      who = p->name.to_string();
    const auto name = [](std::uint32_t m) {
      return m == proto::kAuthMethodNone ? std::string("none")
             : m == proto::kAuthMethodCephx ? std::string("cephx")
                                            : fmt::format("method {}", m);
    };
    std::string allowed;
    for (const std::uint32_t m : methods) allowed += (allowed.empty() ? "" : ", ") + name(m);
    return bad_method(req.method, kEOPNOTSUPP,
                      fmt::format("{} asked for auth {}, which is not allowed from a {} peer (allowed: {})", who,
                                  name(req.method), proto::entity_type_name(peer_.type),
                                  allowed.empty() ? std::string("nothing") : allowed));
  }
  // The client's order wins (cephx.md §7): its first mode that we allow.
  // Auth none has no connection secret, so crc only.
  std::optional<std::uint32_t> mode;
  for (const std::uint32_t m : req.preferred_modes)
    if (std::find(modes.begin(), modes.end(), m) != modes.end() &&
        (req.method == proto::kAuthMethodCephx || m == kConModeCrc)) {
      mode = m;
      break;
    }
  if (!mode) return bad_method(req.method, kEOPNOTSUPP, "no connection mode in common with the peer");
  if (req.method == proto::kAuthMethodCephx) return on_cephx_request(req, *mode);
  auto parsed = proto::AuthNonePayload::decode(req.auth_payload);
  if (!parsed) return fail(errc::decode_error, parsed.error().message());
  const proto::AuthNonePayload& none = *parsed;
  peer_.global_id = none.global_id != 0 ? none.global_id : svc_.new_global_id();
  peer_.auth_name = none.name;
  peer_.auth_method = proto::kAuthMethodNone;
  AuthDone done;
  done.global_id = peer_.global_id;
  Step s;
  s.send.push_back(encode(done));
  s.send.push_back(encode(AuthSignature{}));  // right after AUTH_DONE, as Pacific does
  recording_ = false;
  state_ = State::sig_wait;
  return s;
}

Step ServerHandshake::on_signature(const Frame& f) {
  if (method_ == proto::kAuthMethodCephx) {
    AuthSignature sig;
    std::string why;
    if (!decode(f, sig, why)) return fail(errc::decode_error, std::move(why));
    const auth::Sha256 want = auth::hmac_sha256(session_key_, tx_);
    if (!std::equal(want.begin(), want.end(), sig.sha256.begin()))
      return fail(errc::bad_signature, fmt::format("the AUTH_SIGNATURE of {} does not match what we sent "
                                                   "(tampered pre-auth frames?)",
                                                   peer_.auth_name.to_string()));
    tx_.clear();
    rx_.clear();
    state_ = State::ident_wait;
    Step s;
    s.authenticated = true;
    return s;
  }
  if (auto fault = check_signature(f)) return *std::move(fault);
  state_ = State::ident_wait;
  return {};
}

bool ServerHandshake::is_my_addr(const EntityAddr& a) const noexcept {
  for (const auto& mine : me_.addrs.addrs) {
    if (mine == a) return true;
    // Bound to a wildcard IP: any local IP with our port, type and nonce.
    if (mine.addr.is_any() && mine.type == a.type && mine.nonce == a.nonce &&
        mine.addr.port() == a.addr.port() && mine.addr.family() == a.addr.family())
      return true;
  }
  return false;
}

Step ServerHandshake::on_client_ident(const Frame& f) {
  ClientIdent ci;
  std::string why;
  if (!decode(f, ci, why)) return fail(errc::decode_error, std::string(why));
  if (ci.addrs.empty() || ci.addrs.front().is_blank())
    return fail(errc::unexpected_frame, "CLIENT_IDENT without a client address");
  if (!is_my_addr(ci.target_addr))
    return fail(errc::unexpected_frame, fmt::format("CLIENT_IDENT targets {}, which is not us {}",
                                                    ci.target_addr.to_string(), me_.addrs.to_string()));
  const std::uint64_t missing = (policy_.features_required | (1ull << 59)) & ~ci.supported_features;
  if (missing != 0) {
    Step s;
    s.send.push_back(encode(IdentMissingFeatures{missing}));
    return s;  // stay in ident_wait, as Ceph does
  }
  client_ident_ = ci;
  peer_.gid = ci.gid;
  peer_.addrs = ci.addrs;
  peer_.features = ci.supported_features & policy_.features_supported;
  peer_.lossy = policy_.lossy;
  ids_.client_cookie = ci.cookie;
  ids_.peer_global_seq = ci.global_seq;
  state_ = State::decide;
  Step s;
  s.outcome = Step::Outcome::ident_request;
  return s;
}

Step ServerHandshake::on_reconnect(const Frame& f) {
  SessionReconnect r;
  std::string why;
  if (!decode(f, r, why)) return fail(errc::decode_error, std::string(why));
  if (r.addrs.empty() || r.addrs.front().is_blank())
    return fail(errc::unexpected_frame, "SESSION_RECONNECT without a client address");
  reconnect_ = r;
  peer_.addrs = r.addrs;
  ids_.client_cookie = r.client_cookie;
  ids_.server_cookie = r.server_cookie;
  ids_.peer_global_seq = r.global_seq;
  ids_.connect_seq = r.connect_seq;
  state_ = State::decide;
  Step s;
  s.outcome = Step::Outcome::reconnect_request;
  return s;
}

Step ServerHandshake::accept_new_session(std::uint64_t global_seq, std::uint64_t server_cookie) {
  if (state_ != State::decide) return fail(errc::internal_error, "accept_new_session outside decide");
  ids_.global_seq = global_seq;
  ids_.server_cookie = policy_.lossy ? 0 : server_cookie;
  ids_.connect_seq = 0;
  ids_.in_seq = 0;
  ServerIdent si;
  si.addrs = me_.addrs;
  si.gid = me_.gid;
  si.global_seq = global_seq;
  si.supported_features = policy_.features_supported;
  si.required_features = policy_.features_required | (1ull << 59);
  si.flags = policy_.lossy ? kMsgConnectLossy : 0;
  si.cookie = ids_.server_cookie;
  Step s;
  s.send.push_back(encode(si));
  s.outcome = Step::Outcome::ready;
  state_ = State::ready;
  return s;
}

Step ServerHandshake::accept_reconnect(std::uint64_t in_seq) {
  if (state_ != State::decide) return fail(errc::internal_error, "accept_reconnect outside decide");
  ids_.in_seq = in_seq;
  Step s;
  s.send.push_back(encode(ReconnectOk{in_seq}));
  s.outcome = Step::Outcome::ready;
  s.reconnected = true;
  s.peer_in_seq = reconnect_.msg_seq;
  state_ = State::ready;
  return s;
}

Step ServerHandshake::reply(Frame f) {
  if (state_ != State::decide) return fail(errc::internal_error, "reply outside decide");
  Step s;
  s.send.push_back(std::move(f));
  state_ = State::ident_wait;  // after WAIT the client closes; anything else it sends is re-checked
  return s;
}

Step ServerHandshake::reply_reset(bool full) { return reply(encode(SessionReset{full})); }
Step ServerHandshake::reply_retry(std::uint64_t connect_seq) {
  return reply(encode(SessionRetry{connect_seq}));
}
Step ServerHandshake::reply_retry_global(std::uint64_t global_seq) {
  return reply(encode(SessionRetryGlobal{global_seq}));
}
Step ServerHandshake::reply_wait() { return reply(encode(Wait{})); }

Step ServerHandshake::refuse(std::string why) { return fail(errc::connection_reset, std::move(why)); }

}  // namespace siphon::session
