// The msgr2 handshake, client and server side, as pure state machines: they
// take events (the transport is established, a frame arrived, the driver's
// answer to a question) and return a Step (frames to send and an outcome).
// They do no I/O, read no clock and touch no shared state; the driver
// (msgr/api) owns the transport, timers and the session table
// (msgr2-wire.md §7, §8).
//
// Client (connecting side):
//
//   start ──> hello_wait ──HELLO──> auth_wait ──AUTH_DONE──> sig_wait
//                                     │ AUTH_BAD_METHOD        │ AUTH_SIGNATURE (zeros under
//                                     │ (next method, or fault)│ none, the HMAC under cephx)
//                                     │ AUTH_REPLY_MORE        v
//                                     │ (cephx: the proof)  ident_wait  (sent CLIENT_IDENT, or
//                                                       │         SESSION_RECONNECT when a
//                                                       │         server_cookie exists)
//      SESSION_RETRY / RETRY_GLOBAL: resend RECONNECT ──┤
//      SESSION_RESET: reset ids, send CLIENT_IDENT ─────┤
//      IDENT_MISSING_FEATURES: fault                    │ WAIT: outcome wait (back off)
//                                                       v
//                          SERVER_IDENT / SESSION_RECONNECT_OK ──> ready
//
// Server (accepting side):
//
//   start ──> hello_wait ──HELLO──> auth_wait ──AUTH_REQUEST(none, crc)──> sig_wait
//                                     │ other method/mode:                 (sent AUTH_DONE
//                                     │ AUTH_BAD_METHOD, stay              + AUTH_SIGNATURE)
//                                     │                                       │ AUTH_SIGNATURE
//                                     v                                       v
//                                                                   ident_wait
//          CLIENT_IDENT with missing features: IDENT_MISSING_FEATURES, stay ──┤
//          CLIENT_IDENT:      outcome ident_request  ──> driver: accept_new / reuse / wait / close
//          SESSION_RECONNECT: outcome reconnect_request ──> driver: reply(verdict)
//                                                                       │
//                                                                       v
//                                                                     ready
//
// Any frame a state does not expect, or a payload that does not decode,
// ends in outcome fault with a reason; so does every check that fails.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "msgr/auth/cephx.h"
#include "msgr/auth/crypto.h"
#include "msgr/session/client_auth.h"
#include "msgr/base/error.h"
#include "msgr/proto/control.h"
#include "msgr/proto/frame.h"
#include "msgr/proto/message_header.h"
#include "msgr/proto/types.h"

namespace siphon::session {

// --- the payloads, from msgr/proto (no second codec here) ---------------------

using proto::AddrType;
using proto::EntityAddr;
using proto::EntityAddrVec;
using proto::Frame;
using proto::Tag;

using Hello = proto::Hello;
using AuthRequest = proto::AuthRequest;
using AuthBadMethod = proto::AuthBadMethod;
using AuthReplyMore = proto::AuthReplyMore;
using AuthRequestMore = proto::AuthRequestMore;
using AuthDone = proto::AuthDone;
using AuthSignature = proto::AuthSignature;
using ClientIdent = proto::ClientIdent;
using ServerIdent = proto::ServerIdent;
using IdentMissingFeatures = proto::IdentMissingFeatures;
using SessionReconnect = proto::SessionReconnect;
using SessionReset = proto::SessionReset;
using SessionRetry = proto::SessionRetry;
using SessionRetryGlobal = proto::SessionRetryGlobal;
using ReconnectOk = proto::SessionReconnectOk;
using Wait = proto::Wait;
using Keepalive2 = proto::Keepalive2;
using Keepalive2Ack = proto::Keepalive2Ack;
using Ack = proto::Ack;
using MsgHeader2 = proto::MessageHeader2;

inline constexpr std::int32_t kEOPNOTSUPP = -95;
using proto::kConModeCrc;
using proto::kMsgConnectLossy;

template <class T>
Frame encode(const T& payload) {
  return payload.frame();
}

// Decodes `f` as a T (tag and segment layout checked); false with `why` set
// when it is malformed. Never throws.
template <class T>
bool decode(const Frame& f, T& out, std::string& why) {
  proto::Result<T> r = proto::decode_control<T>(f);
  if (!r) {
    why = r.error().message();
    return false;
  }
  out = std::move(r).value();
  return true;
}

// The wall clock as a KEEPALIVE2 stamp.
inline proto::UTime stamp_now() noexcept {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return {static_cast<std::uint32_t>(ns / 1000000000), static_cast<std::uint32_t>(ns % 1000000000)};
}

// --- the handshake ---------------------------------------------------------------

// The local end, as the handshake needs it.
struct LocalIdentity {
  std::uint8_t entity_type = proto::kEntityTypeClient;
  std::int64_t gid = -1;          // our entity_name_t num
  EntityAddrVec addrs;            // bound addresses (empty: not bound)
  std::uint32_t nonce = 0;
  proto::EntityName auth_name;    // who we authenticate as
  ClientAuth auth;                // connecting side only
  ServerAuth server_auth;         // accepting side only
};

// The part of a policy the handshake applies.
struct PolicyView {
  bool lossy = false;
  bool server = false;
  bool resetcheck = true;
  std::uint64_t features_supported = 0;
  std::uint64_t features_required = 0;
};

// Session identity that survives transport connections (msgr2-wire.md §8.1).
struct SessionIds {
  std::uint64_t client_cookie = 0;
  std::uint64_t server_cookie = 0;
  std::uint64_t global_seq = 0;       // ours, from the last CLIENT_IDENT/RECONNECT we sent
  std::uint64_t connect_seq = 0;
  std::uint64_t peer_global_seq = 0;
  std::uint64_t in_seq = 0;           // last message seq accepted from the peer
};

// Services the driver injects (deterministic in tests).
struct HandshakeServices {
  // The messenger's global_seq counter: a value greater than both its
  // current value and `at_least` (the counter advances).
  std::function<std::uint64_t(std::uint64_t at_least)> next_global_seq;
  // A random non-zero u64 (cookies).
  std::function<std::uint64_t()> random_cookie;
  // Server: the policy for a peer entity type (from its HELLO).
  std::function<PolicyView(std::uint8_t peer_type)> policy_for;
  // Server, auth none: a global_id for a peer that asked for 0.
  std::function<std::uint64_t()> new_global_id;
};

// What the peer turned out to be, valid once the handshake is ready.
struct PeerInfo {
  std::uint8_t type = 0;
  std::int64_t gid = -1;
  EntityAddrVec addrs;
  std::uint64_t features = 0;     // negotiated: ours & theirs
  bool lossy = false;             // session flag (server's decision)
  std::uint64_t global_id = 0;    // auth global_id
  std::uint32_t auth_method = proto::kAuthMethodNone;  // what the handshake used
  std::uint32_t con_mode = proto::kConModeCrc;
  proto::EntityName auth_name;    // server: who the peer authenticated as
  std::string caps;               // server, cephx authorizer: the ticket's caps
};

struct Step {
  enum class Outcome {
    none,               // keep going
    ready,              // session established (new, or reconnected: see reconnected)
    fault,              // close this transport connection: error/reason say why
    wait,               // client: the server said WAIT; close and back off
    ident_request,      // server: decide on the CLIENT_IDENT in client_ident()
    reconnect_request,  // server: decide on the SESSION_RECONNECT in reconnect()
  };
  std::vector<Frame> send;  // frames to send first, in order
  Outcome outcome = Outcome::none;
  std::error_code error;
  std::string reason;
  // Client: the server reset our session (SESSION_RESET); the ids were
  // already reset; the driver drops its queues if `reset_full`.
  bool session_reset = false;
  bool reset_full = false;
  // Client: we learned our address from the server's HELLO (not bound).
  bool learned_addr = false;
  // cephx chose secure mode. The driver sends the first `plain_frames` of
  // `send` as they are (the server's AUTH_DONE), then switches the
  // transport to AES-GCM with `connection_secret` (cephx.md §6) for the
  // rest of `send` (the AUTH_SIGNATURE), every later frame, and every frame
  // received after the one that produced this step; a transport that cannot
  // faults the connection.
  bool secure = false;
  std::size_t plain_frames = 0;
  auth::Bytes connection_secret;
  // Server: a peer's authentication attempt was refused (a wrong key, an
  // unknown entity, no common method or mode); the handshake goes on (the
  // peer may try again, as Ceph allows) and the driver logs and counts it.
  std::string auth_refused;
  // Server: the peer just proved its cephx key and its AUTH_SIGNATURE
  // checked out (peer() says who, in which mode); the driver logs and
  // counts it.
  bool authenticated = false;
  // Client ready after SESSION_RECONNECT_OK: the peer's in_seq.
  bool reconnected = false;
  std::uint64_t peer_in_seq = 0;

  static Step fault(errc e, std::string why) {
    Step s;
    s.outcome = Outcome::fault;
    s.error = make_error_code(e);
    s.reason = std::move(why);
    return s;
  }
};

std::string_view to_string(Step::Outcome o) noexcept;

enum class ClientHandshakeState { start, hello_wait, auth_wait, sig_wait, ident_wait, ready, failed };
enum class ServerHandshakeState {
  start, hello_wait, auth_wait, sig_wait, ident_wait, decide, ready, failed
};

namespace detail {
// What both sides of the handshake do alike; State is the side's enum.
template <class State>
class HandshakeCommon {
 public:
  State state() const noexcept { return state_; }

 protected:
  // Ends the handshake: state failed, outcome fault.
  Step fail(errc e, std::string why) {
    state_ = State::failed;
    return Step::fault(e, std::move(why));
  }
  // start(): HELLO with our entity type and the peer's address as we see it.
  Step send_hello(std::uint8_t entity_type, const EntityAddr& peer_seen) {
    if (state_ != State::start) return fail(errc::internal_error, "handshake started twice");
    Step s;
    s.send.push_back(encode(Hello{entity_type, peer_seen}));
    state_ = State::hello_wait;
    return s;
  }
  // The peer's AUTH_SIGNATURE under auth none must be 32 zero bytes: the
  // fault when it is not (or does not decode), nothing when it is.
  std::optional<Step> check_signature(const Frame& f) {
    AuthSignature sig;
    std::string why;
    if (!decode(f, sig, why)) return fail(errc::decode_error, std::move(why));
    for (const std::uint8_t b : sig.sha256)
      if (b != 0) return fail(errc::auth_unsupported, "AUTH_SIGNATURE mismatch (auth none expects zeros)");
    return std::nullopt;
  }

  State state_ = State::start;
};
}  // namespace detail

class ClientHandshake : public detail::HandshakeCommon<ClientHandshakeState> {
 public:
  using State = ClientHandshakeState;

  // `target` is the address dialled (type MSGR2); `peer_type` the entity
  // type we expect (entity type any: accept whatever the peer says).
  ClientHandshake(LocalIdentity me, PolicyView policy, EntityAddr target, std::uint8_t peer_type,
                  SessionIds ids, HandshakeServices services);

  // The transport exchanged banners: sends HELLO. `mine` and `n` are the
  // banners (cephx signs every byte from the first one, cephx.md §5); the
  // overload without them is for auth none only.
  Step start();
  Step start(const proto::Banner& mine, const proto::Negotiated& n);
  Step on_frame(const Frame& f);

  const SessionIds& ids() const noexcept { return ids_; }
  const PeerInfo& peer() const noexcept { return peer_; }
  const LocalIdentity& me() const noexcept { return me_; }
  // cephx with a mon: the session key, tickets and connection secret
  // (valid once AUTH_DONE was accepted).
  const std::optional<auth::MonAuthResult>& cephx() const noexcept { return cephx_; }

 private:
  Step on_hello(const Frame& f);
  Step on_auth_done(const Frame& f);
  // cephx (client_cephx.cc).
  Step send_auth_request(Step s);
  Step on_auth_bad_method(const Frame& f);
  Step on_auth_reply_more(const Frame& f);
  Step on_cephx_done(const AuthDone& d);
  Step on_authorizer_done(const AuthDone& d, const auth::Bytes& payload);
  Step check_cephx_signature(const Frame& f);
  // Appends a frame's wire bytes to the transcript of what we sent/received.
  void record(const Frame& f, auth::Bytes& into) const;
  Step send(Step s, Frame f);
  Step on_signature(const Frame& f);
  Step on_ident_reply(const Frame& f);
  Frame client_ident();
  Frame session_reconnect();

  LocalIdentity me_;
  PolicyView policy_;
  EntityAddr target_;
  std::uint8_t expected_peer_type_;
  SessionIds ids_;
  HandshakeServices svc_;
  PeerInfo peer_;
  bool sent_reconnect_ = false;
  // Auth: the method being tried, those tried, and the cephx state.
  proto::FrameRev rev_ = proto::FrameRev::rev1;
  bool recording_ = false;
  auth::Bytes tx_;  // banner, HELLO, AUTH_REQUEST[_MORE]: what the server signs
  auth::Bytes rx_;  // banner, HELLO, AUTH_* replies: what we sign
  std::vector<std::uint32_t> tried_;
  std::uint32_t method_ = proto::kAuthMethodNone;
  std::uint64_t server_challenge_ = 0;
  bool challenged_ = false;
  auth::Bytes session_key_;
  std::optional<auth::MonAuthResult> cephx_;
  // cephx towards an OSD/MGR/MDS: the service ticket presented and the
  // authorizer's nonce (cephx.md §4).
  std::optional<TicketStore::Entry> authorizer_;
  std::uint64_t authorizer_nonce_ = 0;
  // Whether cephx can be offered to this peer: a key, and a monitor (or the
  // key-based exchange everywhere) or a service ticket for the peer's type.
  bool cephx_usable() const;
};

class ServerHandshake : public detail::HandshakeCommon<ServerHandshakeState> {
 public:
  using State = ServerHandshakeState;

  // `peer_socket_addr` is the accepted socket's remote address.
  ServerHandshake(LocalIdentity me, NetAddress peer_socket_addr, HandshakeServices services);

  // The transport exchanged banners: sends HELLO. `mine` and `n` are the
  // banners, which start the transcript cephx signs; the overload without
  // them is for auth none only.
  Step start();
  Step start(const proto::Banner& mine, const proto::Negotiated& n);
  Step on_frame(const Frame& f);

  // --- the driver's answers (state decide) ---
  // A new session: sends SERVER_IDENT with our fresh `global_seq` and
  // `server_cookie` (0 for lossy) -> ready. `ids` are the session's ids for
  // this connection (the handshake fills in the peer's values).
  Step accept_new_session(std::uint64_t global_seq, std::uint64_t server_cookie);
  // An existing session resumes on this connection after SESSION_RECONNECT:
  // sends SESSION_RECONNECT_OK(`in_seq`) -> ready.
  Step accept_reconnect(std::uint64_t in_seq);
  // Replies and keeps waiting for the client's next CLIENT_IDENT or
  // SESSION_RECONNECT (SESSION_RESET, RETRY, RETRY_GLOBAL).
  Step reply_reset(bool full);
  Step reply_retry(std::uint64_t connect_seq);
  Step reply_retry_global(std::uint64_t global_seq);
  // Sends WAIT; the client will close and come back later.
  Step reply_wait();
  // Closes without a reply (stale connection, bad identity).
  Step refuse(std::string why);

  const PeerInfo& peer() const noexcept { return peer_; }
  const PolicyView& policy() const noexcept { return policy_; }
  const ClientIdent& client_ident() const noexcept { return client_ident_; }
  const SessionReconnect& reconnect() const noexcept { return reconnect_; }
  // Ids for the session this connection establishes (valid in decide/ready).
  const SessionIds& ids() const noexcept { return ids_; }
  SessionIds& ids() noexcept { return ids_; }

 private:
  Step on_hello(const Frame& f);
  Step on_auth_request(const Frame& f);
  Step on_signature(const Frame& f);
  // cephx's key-based exchange (server_auth.cc).
  Step on_cephx_request(const AuthRequest& req, std::uint32_t con_mode);
  Step on_auth_request_more(const Frame& f);
  Step bad_method(std::uint32_t method, std::int32_t result, std::string why);
  // The cephx exchange's last server step, shared by the key-based exchange
  // and the authorizer: AUTH_DONE carrying `payload`, then AUTH_SIGNATURE
  // over what the peer sent (the first secure frame in secure mode, keyed
  // by `connection_secret`).
  Step finish_cephx(const auth::Bytes& payload, auth::Bytes connection_secret);
  bool daemon_peer() const noexcept { return peer_.type != proto::kEntityTypeClient; }
  void record(const Frame& f, auth::Bytes& into) const;
  Step send(Step s, Frame f);
  Step on_client_ident(const Frame& f);
  Step on_reconnect(const Frame& f);
  bool is_my_addr(const EntityAddr& a) const noexcept;
  // A driver's reply in decide that keeps waiting for the next ident.
  Step reply(Frame f);

  LocalIdentity me_;
  NetAddress peer_socket_addr_;
  HandshakeServices svc_;
  PolicyView policy_;
  PeerInfo peer_;
  SessionIds ids_;
  ClientIdent client_ident_;
  SessionReconnect reconnect_;
  // Auth: the transcripts cephx signs, and the exchange in progress.
  proto::FrameRev rev_ = proto::FrameRev::rev1;
  bool recording_ = false;
  auth::Bytes tx_;  // banner, HELLO, AUTH_REPLY_MORE/BAD_METHOD, AUTH_DONE: what the client signs
  auth::Bytes rx_;  // banner, HELLO, AUTH_REQUEST[_MORE]: what we sign
  std::uint32_t method_ = proto::kAuthMethodNone;
  bool challenged_ = false;
  std::uint64_t server_challenge_ = 0;
  std::uint32_t pending_mode_ = kConModeCrc;
  std::uint64_t pending_global_id_ = 0;
  proto::EntityName pending_name_;
  auth::Bytes entity_secret_;
  std::uint16_t entity_key_type_ = auth::kCryptoAes;
  auth::Bytes session_key_;
  // cephx authorizers (server_authorizer.cc): the challenge sent, awaiting
  // the client's answer in AUTH_REQUEST_MORE (cephx.md §4.2, §8.1).
  Step on_authorizer(const auth::Bytes& payload, std::uint32_t con_mode, bool answer);
  Step refuse_authorizer(std::string why);
  bool authorizer_challenged_ = false;
  std::uint64_t authorizer_challenge_ = 0;
};

std::string_view to_string(ClientHandshake::State s) noexcept;
std::string_view to_string(ServerHandshake::State s) noexcept;

}  // namespace siphon::session
