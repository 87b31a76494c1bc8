// The server's decisions when a handshake meets an existing session for the
// same peer (msgr2-wire.md §8.2, §8.3), as pure functions of a snapshot of
// that session. The order of the rules is Ceph's (ProtocolV2's
// handle_reconnect and handle_existing_connection); the first that matches
// decides.
#pragma once

#include <cstdint>
#include <string_view>

#include "msgr/session/handshake.h"

namespace siphon::session {

// A snapshot of the existing session for the peer, taken on its worker.
struct ExistingSession {
  bool closed = false;          // marked down / dead
  bool replacing = false;       // another connection is taking it over right now
  bool lossy = false;           // its policy
  bool server_policy = false;   // its policy is "server"
  bool resetcheck = true;
  bool ready_or_standby = false;
  std::uint64_t client_cookie = 0;
  std::uint64_t server_cookie = 0;
  std::uint64_t peer_global_seq = 0;
  std::uint64_t connect_seq = 0;
  EntityAddr peer_addr;         // the peer's msgr2 address as the session knows it
};

struct ReconnectVerdict {
  enum class Kind { reset, retry, retry_global, wait, accept };
  Kind kind = Kind::reset;
  bool full = false;            // reset: full reset
  std::uint64_t value = 0;      // retry: connect_seq; retry_global: global_seq
  std::string_view rule;        // which rule matched (for logs and tests)
};

// SESSION_RECONNECT from a peer; `existing` null when there is none.
ReconnectVerdict decide_reconnect(const ExistingSession* existing, const SessionReconnect& r,
                                  const EntityAddr& my_addr) noexcept;

struct IdentVerdict {
  enum class Kind {
    new_session,       // no usable existing session: SERVER_IDENT on a new session
    replace_lossy,     // existing is lossy: drop it (reset callback), new session
    reuse_after_reset, // peer restarted (cookie changed): reset existing (if resetcheck), reuse
    reuse,             // continue the existing session object on this connection
    stale,             // this connection is older than the existing one: close it
    wait,              // connection race lost: WAIT (and keepalive on the existing one)
  };
  Kind kind = Kind::new_session;
  std::string_view rule;
};

// CLIENT_IDENT from `peer_addr` with `peer_global_seq`/`client_cookie` when a
// session for that peer exists (`existing` null when none).
IdentVerdict decide_client_ident(const ExistingSession* existing, std::uint64_t peer_global_seq,
                                 std::uint64_t client_cookie, const EntityAddr& peer_addr,
                                 const EntityAddr& my_addr) noexcept;

// Ceph's ordering for race resolution: it compares legacy_addr() of both
// sides, i.e. entity_addr_t memcmp order with the type taken as LEGACY.
int compare_for_race(const EntityAddr& a, const EntityAddr& b) noexcept;

std::string_view to_string(ReconnectVerdict::Kind k) noexcept;
std::string_view to_string(IdentVerdict::Kind k) noexcept;

}  // namespace siphon::session
