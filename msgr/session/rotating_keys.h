// The rotating service keys a daemon in a cephx cluster validates its
// clients' tickets with (shared/reference/cephx.md §3.8, §8.2). The monitor
// keeps three per service type (previous, current, next), each valid for
// auth_service_ticket_ttl, and rolls them; the daemon's MonClient fetches
// them (CEPHX_GET_ROTATING_KEY) and stores them here, and every accepting
// handshake of the daemon reads them (ServerAuth::rotating, shared by copies
// as ClientAuth::tickets is).
//
// Freshness: the MonClient refetches when refresh_due() says so -- never
// fetched yet (retried until it works), `refresh_interval` after the last
// fetch (ttl / 4 by default, as cephx.md §8.2 advises), or at once when a
// handshake met a secret_id newer than the newest held (want_newer(); rate-
// limited by `min_refetch`). Until the first fetch succeeded the daemon
// refuses every authorizer: it has nothing to check them with.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "msgr/auth/cephx.h"

namespace siphon::session {

class RotatingKeys {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RotatingKeys(std::uint32_t service_id = auth::kServiceOsd,
                        Clock::duration refresh_interval = std::chrono::seconds(900),
                        Clock::duration min_refetch = std::chrono::seconds(1))
      : service_id_(service_id), refresh_interval_(refresh_interval), min_refetch_(min_refetch) {}

  // The service these keys are for (the daemon's entity type).
  std::uint32_t service_id() const noexcept { return service_id_; }

  // A fetch succeeded: its secrets replace those held (the mon always sends
  // the whole set).
  void update(const auth::RotatingSecrets& s, Clock::time_point now = Clock::now()) {
    std::lock_guard l(mu_);
    keys_.clear();
    for (const auth::RotatingSecret& k : s.secrets) keys_[k.secret_id] = k;
    fetched_ = true;
    last_fetch_ = now;
    wanted_newer_ = false;
    ++generation_;
  }

  struct Lookup {
    std::optional<auth::RotatingSecret> key;
    bool ready = false;  // a fetch has succeeded
    std::uint64_t oldest = 0, newest = 0;  // the ids held (when ready and not empty)
  };
  Lookup get(std::uint64_t secret_id) const {
    std::lock_guard l(mu_);
    Lookup out;
    out.ready = fetched_;
    if (!keys_.empty()) {
      out.oldest = keys_.begin()->first;
      out.newest = keys_.rbegin()->first;
    }
    if (const auto it = keys_.find(secret_id); it != keys_.end()) out.key = it->second;
    return out;
  }

  // A client presented `secret_id`, newer than every key held: the mon has
  // rotated since the last fetch. Asks for a fetch at the next tick.
  void want_newer(std::uint64_t secret_id) {
    std::lock_guard l(mu_);
    if (keys_.empty() || secret_id > keys_.rbegin()->first) wanted_newer_ = true;
  }

  // Whether the MonClient should fetch now; a true answer counts as a
  // request sent at `now` (so the next true comes after min_refetch at the
  // earliest).
  bool refresh_due(Clock::time_point now = Clock::now()) {
    std::lock_guard l(mu_);
    if (requested_ && now - last_request_ < min_refetch_) return false;
    const bool due = !fetched_ || wanted_newer_ || now - last_fetch_ >= refresh_interval_;
    if (due) {
      requested_ = true;
      last_request_ = now;
    }
    return due;
  }

  bool ready() const {
    std::lock_guard l(mu_);
    return fetched_;
  }
  // Bumped by every successful fetch (tests and logs see refreshes).
  std::uint64_t generation() const {
    std::lock_guard l(mu_);
    return generation_;
  }

 private:
  mutable std::mutex mu_;
  const std::uint32_t service_id_;
  const Clock::duration refresh_interval_;
  const Clock::duration min_refetch_;
  std::map<std::uint64_t, auth::RotatingSecret> keys_;
  bool fetched_ = false;
  bool wanted_newer_ = false;
  bool requested_ = false;
  Clock::time_point last_fetch_{};
  Clock::time_point last_request_{};
  std::uint64_t generation_ = 0;
};

}  // namespace siphon::session
