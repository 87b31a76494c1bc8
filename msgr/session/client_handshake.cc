// The connecting side of the msgr2 handshake (state diagram in handshake.h).
#include <fmt/format.h>

#include "msgr/session/handshake.h"
#include "msgr/session/transcript.h"

namespace siphon::session {

std::string_view to_string(Step::Outcome o) noexcept {
  switch (o) {
    case Step::Outcome::none: return "none";
    case Step::Outcome::ready: return "ready";
    case Step::Outcome::fault: return "fault";
    case Step::Outcome::wait: return "wait";
    case Step::Outcome::ident_request: return "ident_request";
    case Step::Outcome::reconnect_request: return "reconnect_request";
  }
  return "?";
}

std::string_view to_string(ClientHandshake::State s) noexcept {
  using S = ClientHandshake::State;
  switch (s) {
    case S::start: return "start";
    case S::hello_wait: return "hello_wait";
    case S::auth_wait: return "auth_wait";
    case S::sig_wait: return "sig_wait";
    case S::ident_wait: return "ident_wait";
    case S::ready: return "ready";
    case S::failed: return "failed";
  }
  return "?";
}

ClientHandshake::ClientHandshake(LocalIdentity me, PolicyView policy, EntityAddr target,
                                 std::uint8_t peer_type, SessionIds ids, HandshakeServices services)
    : me_(std::move(me)),
      policy_(policy),
      target_(std::move(target)),
      expected_peer_type_(peer_type),
      ids_(ids),
      svc_(std::move(services)) {}

Step ClientHandshake::start() { return start(proto::Banner{}, proto::Negotiated{}); }

Step ClientHandshake::start(const proto::Banner& mine, const proto::Negotiated& n) {
  rev_ = n.rev;
  recording_ = true;
  detail::append_bytes(tx_, proto::encode_banner(mine));
  detail::append_bytes(rx_, proto::encode_banner(n.peer));
  Step s = send_hello(me_.entity_type, target_);
  for (const Frame& f : s.send) record(f, tx_);
  return s;
}

Step ClientHandshake::on_frame(const Frame& f) {
  if (recording_ && (state_ == State::hello_wait || state_ == State::auth_wait)) record(f, rx_);
  switch (state_) {
    case State::hello_wait:
      if (f.tag == Tag::hello) return on_hello(f);
      break;
    case State::auth_wait:
      if (f.tag == Tag::auth_done) return on_auth_done(f);
      if (f.tag == Tag::auth_bad_method) return on_auth_bad_method(f);
      if (f.tag == Tag::auth_reply_more) return on_auth_reply_more(f);
      break;
    case State::sig_wait:
      if (f.tag == Tag::auth_signature) return on_signature(f);
      break;
    case State::ident_wait:
      switch (f.tag) {
        case Tag::server_ident:
        case Tag::ident_missing_features:
        case Tag::wait:
        case Tag::session_reconnect_ok:
        case Tag::session_retry:
        case Tag::session_retry_global:
        case Tag::session_reset:
          return on_ident_reply(f);
        default:
          break;
      }
      break;
    case State::start:
    case State::ready:
    case State::failed:
      break;
  }
  return fail(errc::unexpected_frame,
              fmt::format("unexpected {} frame in client state {}", proto::to_string(f.tag),
                          to_string(state_)));
}

Step ClientHandshake::on_hello(const Frame& f) {
  Hello h;
  std::string why;
  if (!decode(f, h, why)) return fail(errc::decode_error, std::string(why));
  if (expected_peer_type_ != proto::kEntityTypeAny && h.entity_type != expected_peer_type_)
    return fail(errc::unexpected_frame, fmt::format("peer is entity type {:#x}, expected {:#x}",
                                                    h.entity_type, expected_peer_type_));
  peer_.type = h.entity_type;
  Step s;
  if (me_.addrs.empty() && !h.peer_addr.addr.is_unspecified()) {
    // Not bound: we are who the server sees, without a port (Ceph's learned_addr).
    EntityAddr mine;
    mine.type = AddrType::any;
    mine.nonce = me_.nonce;
    mine.addr = h.peer_addr.addr;
    mine.addr.set_port(0);
    me_.addrs.addrs.push_back(mine);
    s.learned_addr = true;
  }
  state_ = State::auth_wait;
  return send_auth_request(std::move(s));
}

Step ClientHandshake::on_auth_done(const Frame& f) {
  AuthDone d;
  std::string why;
  if (!decode(f, d, why)) return fail(errc::decode_error, std::string(why));
  // Secure mode needs cephx's connection secret (on_cephx_done checks the
  // mode against what we offered).
  if (d.con_mode != kConModeCrc && method_ != proto::kAuthMethodCephx)
    return fail(errc::auth_unsupported,
                fmt::format("peer chose connection mode {} with auth none; only crc is possible", d.con_mode));
  peer_.global_id = d.global_id;
  peer_.con_mode = d.con_mode;
  peer_.auth_method = method_;
  recording_ = false;
  if (method_ == proto::kAuthMethodCephx) return on_cephx_done(d);
  Step s;
  s.send.push_back(encode(AuthSignature{}));  // auth none: 32 zero bytes
  state_ = State::sig_wait;
  return s;
}

Step ClientHandshake::on_signature(const Frame& f) {
  if (method_ == proto::kAuthMethodCephx) {
    if (Step bad = check_cephx_signature(f); bad.outcome == Step::Outcome::fault) return bad;
  } else if (auto fault = check_signature(f)) {
    return *std::move(fault);
  }
  ids_.global_seq = svc_.next_global_seq(0);
  Step s;
  if (ids_.server_cookie != 0 && !policy_.lossy) {
    sent_reconnect_ = true;
    s.send.push_back(session_reconnect());
  } else {
    s.send.push_back(client_ident());
  }
  state_ = State::ident_wait;
  return s;
}

Frame ClientHandshake::client_ident() {
  sent_reconnect_ = false;
  if (!policy_.lossy && ids_.client_cookie == 0) ids_.client_cookie = svc_.random_cookie();
  ClientIdent ci;
  ci.addrs = me_.addrs;
  ci.target_addr = target_;
  ci.gid = me_.gid;
  ci.global_seq = ids_.global_seq;
  ci.supported_features = policy_.features_supported;
  ci.required_features = policy_.features_required | (1ull << 59);  // | MSG_ADDR2, as Ceph
  ci.flags = policy_.lossy ? kMsgConnectLossy : 0;
  ci.cookie = ids_.client_cookie;
  return encode(ci);
}

Frame ClientHandshake::session_reconnect() {
  SessionReconnect r;
  r.addrs = me_.addrs;
  r.client_cookie = ids_.client_cookie;
  r.server_cookie = ids_.server_cookie;
  r.global_seq = ids_.global_seq;
  r.connect_seq = ids_.connect_seq;
  r.msg_seq = ids_.in_seq;
  return encode(r);
}

Step ClientHandshake::on_ident_reply(const Frame& f) {
  std::string why;
  Step s;
  switch (f.tag) {
    case Tag::server_ident: {
      if (sent_reconnect_) return fail(errc::unexpected_frame, "SERVER_IDENT in reply to SESSION_RECONNECT");
      ServerIdent si;
      if (!decode(f, si, why)) return fail(errc::decode_error, std::string(why));
      if (!si.addrs.contains(target_))
        return fail(errc::unexpected_frame, fmt::format("peer identifies as {}, which does not include {}",
                                                        si.addrs.to_string(), target_.to_string()));
      if (const auto missing = policy_.features_required & ~si.supported_features; missing != 0)
        return fail(errc::feature_mismatch, fmt::format("peer lacks required features {:#x}", missing));
      if (const auto missing = si.required_features & ~policy_.features_supported; missing != 0)
        return fail(errc::feature_mismatch, fmt::format("peer requires features we lack {:#x}", missing));
      peer_.gid = si.gid;
      peer_.addrs = si.addrs;
      peer_.features = si.supported_features & policy_.features_supported;
      peer_.lossy = (si.flags & kMsgConnectLossy) != 0;
      ids_.server_cookie = si.cookie;
      ids_.peer_global_seq = si.global_seq;
      ids_.in_seq = 0;
      state_ = State::ready;
      s.outcome = Step::Outcome::ready;
      return s;
    }
    case Tag::ident_missing_features: {
      IdentMissingFeatures m;
      if (!decode(f, m, why)) return fail(errc::decode_error, std::string(why));
      return fail(errc::feature_mismatch, fmt::format("peer requires features we lack {:#x}", m.features));
    }
    case Tag::wait:
      state_ = State::failed;
      s.outcome = Step::Outcome::wait;
      return s;
    default:
      break;
  }
  if (!sent_reconnect_)
    return fail(errc::unexpected_frame,
                fmt::format("{} in reply to CLIENT_IDENT", proto::to_string(f.tag)));
  switch (f.tag) {
    case Tag::session_reconnect_ok: {
      ReconnectOk ok;
      if (!decode(f, ok, why)) return fail(errc::decode_error, std::string(why));
      state_ = State::ready;
      s.outcome = Step::Outcome::ready;
      s.reconnected = true;
      s.peer_in_seq = ok.msg_seq;
      return s;
    }
    case Tag::session_retry: {
      SessionRetry r;
      if (!decode(f, r, why)) return fail(errc::decode_error, std::string(why));
      ids_.connect_seq = r.connect_seq + 1;
      s.send.push_back(session_reconnect());
      return s;
    }
    case Tag::session_retry_global: {
      SessionRetryGlobal r;
      if (!decode(f, r, why)) return fail(errc::decode_error, std::string(why));
      ids_.global_seq = svc_.next_global_seq(r.global_seq);
      s.send.push_back(session_reconnect());
      return s;
    }
    case Tag::session_reset: {
      SessionReset r;
      if (!decode(f, r, why)) return fail(errc::decode_error, std::string(why));
      s.session_reset = true;
      s.reset_full = r.full;
      if (r.full) ids_.client_cookie = 0;  // a new session identity (new cookie below)
      ids_.server_cookie = 0;
      ids_.connect_seq = 0;
      ids_.in_seq = 0;
      s.send.push_back(client_ident());
      return s;
    }
    default:
      return fail(errc::unexpected_frame, "unexpected ident reply");
  }
}

}  // namespace siphon::session
