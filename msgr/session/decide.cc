#include "msgr/session/decide.h"

namespace siphon::session {

ReconnectVerdict decide_reconnect(const ExistingSession* ex, const SessionReconnect& r,
                                  const EntityAddr& my_addr) noexcept {
  using K = ReconnectVerdict::Kind;
  if (ex == nullptr || ex->closed) return {K::reset, true, 0, "1: no existing session"};
  if (ex->replacing) return {K::retry_global, false, ex->peer_global_seq, "2: existing is being replaced"};
  if (ex->client_cookie != r.client_cookie)
    return {K::reset, ex->resetcheck, 0, "3: client cookie changed (peer restarted)"};
  if (ex->server_cookie == 0) return {K::reset, false, 0, "4: session establishment never finished"};
  if (ex->peer_global_seq > r.global_seq)
    return {K::retry_global, false, ex->peer_global_seq, "5: stale global_seq"};
  if (ex->connect_seq > r.connect_seq) return {K::retry, false, ex->connect_seq, "6: stale connect_seq"};
  if (ex->connect_seq == r.connect_seq) {
    // Both sides are reconnecting at once.
    if (compare_for_race(ex->peer_addr, my_addr) > 0 && !ex->server_policy)
      return {K::wait, false, 0, "7: reconnect race, existing wins"};
    return {K::accept, false, 0, "7: reconnect race, this connection wins"};
  }
  return {K::accept, false, 0, "8: reconnect"};
}

IdentVerdict decide_client_ident(const ExistingSession* ex, std::uint64_t peer_global_seq,
                                 std::uint64_t client_cookie, const EntityAddr& peer_addr,
                                 const EntityAddr& my_addr) noexcept {
  using K = IdentVerdict::Kind;
  if (ex == nullptr || ex->closed) return {K::new_session, "no existing session"};
  if (ex->replacing) return {K::wait, "existing is being replaced"};
  if (ex->peer_global_seq > peer_global_seq) return {K::stale, "existing is newer: stale connection"};
  if (ex->lossy) return {K::replace_lossy, "existing is lossy: replace it"};
  if (ex->server_cookie != 0 && ex->client_cookie != 0 && ex->client_cookie != client_cookie)
    return {K::reuse_after_reset, "client cookie changed: peer restarted"};
  if (ex->client_cookie == client_cookie) return {K::reuse, "same client cookie: establishment interrupted"};
  if (ex->ready_or_standby) return {K::reuse, "existing is ready/standby"};
  // Connection race: both sides connected at the same time.
  if (compare_for_race(peer_addr, my_addr) < 0 || ex->server_policy)
    return {K::reuse, "connection race: this connection wins"};
  return {K::wait, "connection race: existing wins"};
}

int compare_for_race(const EntityAddr& a, const EntityAddr& b) noexcept {
  EntityAddr la = a;
  EntityAddr lb = b;
  la.type = AddrType::legacy;
  lb.type = AddrType::legacy;
  const auto c = la <=> lb;
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

std::string_view to_string(ReconnectVerdict::Kind k) noexcept {
  using K = ReconnectVerdict::Kind;
  switch (k) {
    case K::reset: return "reset";
    case K::retry: return "retry";
    case K::retry_global: return "retry_global";
    case K::wait: return "wait";
    case K::accept: return "accept";
  }
  return "?";
}

std::string_view to_string(IdentVerdict::Kind k) noexcept {
  using K = IdentVerdict::Kind;
  switch (k) {
    case K::new_session: return "new_session";
    case K::replace_lossy: return "replace_lossy";
    case K::reuse_after_reset: return "reuse_after_reset";
    case K::reuse: return "reuse";
    case K::stale: return "stale";
    case K::wait: return "wait";
  }
  return "?";
}

}  // namespace siphon::session
