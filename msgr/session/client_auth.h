// How the connecting side of a handshake authenticates (shared/reference/
// cephx.md §3, §7). compat/ fills it from auth_client_required, the keyring
// (key, keyfile) and ms_mon_client_mode / ms_client_mode; the messenger
// hands it to every handshake it starts (Messenger::set_client_auth).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "msgr/auth/cephx.h"
#include "msgr/proto/types.h"
#include "msgr/session/rotating_keys.h"

namespace siphon::session {

// The service tickets a monitor handed out with the AUTH ticket (cephx.md
// §3.4: other_keys), which the authorizer towards OSDs, MGRs and MDSs
// presents (§4). Copies of one ClientAuth share one store: the mon
// session's handshake fills it, every other connection of the client reads
// it. A reconnect to a monitor replaces the tickets.
//
// Service tickets last auth_service_ticket_ttl (1 h by default); like Ceph's
// client, the MonClient renews them (MAuth GET_PRINCIPAL_SESSION_KEY) once
// three quarters of that have passed: due() says which.
class TicketStore {
 public:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::uint64_t global_id = 0;  // ours, as the tickets name it
    auth::ServiceTicket ticket;
    Clock::time_point renew_after;
  };
  void update(std::uint64_t global_id, const std::vector<auth::ServiceTicket>& tickets,
              Clock::time_point now = Clock::now()) {
    std::lock_guard l(mu_);
    for (const auth::ServiceTicket& t : tickets) {
      const auto validity = std::chrono::seconds(t.validity_sec) + std::chrono::nanoseconds(t.validity_nsec);
      by_service_[t.service_id] =
          Entry{global_id, t, now + std::chrono::duration_cast<Clock::duration>(validity * 3 / 4)};
    }
    ++generation_;
  }
  std::optional<Entry> get(std::uint32_t service_id) const {
    std::lock_guard l(mu_);
    const auto it = by_service_.find(service_id);
    if (it == by_service_.end()) return std::nullopt;
    return it->second;
  }
  // The services (a bit mask of ids) whose tickets are due for renewal at
  // `now`; the AUTH ticket itself is renewed by authenticating again.
  std::uint32_t due(Clock::time_point now = Clock::now()) const {
    std::lock_guard l(mu_);
    std::uint32_t mask = 0;
    for (const auto& [id, e] : by_service_)
      if (id != auth::kServiceAuth && e.renew_after <= now) mask |= id;
    return mask;
  }
  // Bumped by every update (tests and logs see renewals).
  std::uint64_t generation() const {
    std::lock_guard l(mu_);
    return generation_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::uint32_t, Entry> by_service_;
  std::uint64_t generation_ = 0;
};

// How the connecting side authenticates (cephx.md §3, §7). compat/ fills
// it from auth_client_required, the keyring and ms_*_mode.
struct ClientAuth {
  // Methods to try, in order (auth_client_required; cephx only when a key
  // was found, as Ceph drops cephx when it finds no keyring).
  std::vector<std::uint32_t> methods{proto::kAuthMethodNone};
  std::vector<std::uint8_t> secret;  // the entity's key (needed for cephx)
  std::uint16_t key_type = auth::kCryptoAes;  // its type: aes, or aes256k (Ceph 19.2.6+)
  std::string key_source;          // where the key came from, for errors ("keyring /etc/ceph/...")
  // Connection modes offered, in order: to monitors and managers
  // (ms_mon_client_mode) and to everyone else (ms_client_mode).
  std::vector<std::uint32_t> mon_modes{proto::kConModeCrc};
  std::vector<std::uint32_t> modes{proto::kConModeCrc};
  // Service tickets asked for with the AUTH ticket (other_keys; must not be
  // 0, or the mon sends no connection secret).
  std::uint32_t want_keys = 0x35;
  // cephx's key-based exchange (the monitor's, cephx.md §8.4a) with peers of
  // every type, not only monitors: for Siphon daemons that authenticate
  // their peers from a keyring (ServerAuth), with no monitor in between.
  bool key_based_everywhere = false;
  // Where the service tickets for the authorizer come from (shared by
  // copies: the MonClient's and the Objecter's ClientAuth are one store).
  std::shared_ptr<TicketStore> tickets = std::make_shared<TicketStore>();
};

// How the accepting side authenticates its peers (cephx.md §7, §8.4a).
// The defaults accept auth none in crc mode, as before cephx existed here.
struct ServerAuth {
  // Methods allowed from clients (auth_service_required) and from daemons
  // (auth_cluster_required); the peer's HELLO entity type decides which.
  std::vector<std::uint32_t> service_methods{proto::kAuthMethodNone};
  std::vector<std::uint32_t> cluster_methods{proto::kAuthMethodNone};
  // Connection modes allowed, same split (ms_service_mode, ms_cluster_mode).
  std::vector<std::uint32_t> service_modes{proto::kConModeCrc};
  std::vector<std::uint32_t> cluster_modes{proto::kConModeCrc};
  // cephx: the entities allowed in and their keys ("client.admin" -> the
  // secret: 16 bytes for aes, 32 for aes256k), from a keyring;
  // `keyring_source` names it in logs.
  std::map<std::string, std::vector<std::uint8_t>> keys;
  // The type of each key that is not AES (aes256k: "client.admin" -> 2);
  // a name missing here holds an AES key.
  std::map<std::string, std::uint16_t> key_types;
  std::string keyring_source;
  // Validity given to the session keys handed out (auth_mon_ticket_ttl).
  std::uint32_t ticket_ttl_sec = 259200;
  // cephx authorizers: tickets a monitor issued to clients for this
  // daemon's service (cephx.md §8.1), opened with the rotating keys its
  // MonClient fetched (shared by copies). Null: the daemon has no monitor
  // session; an authorizer is then refused unless its ticket names the
  // long-term key (secret_id -1) and `keys` holds "<type>." (§8.4b).
  std::shared_ptr<RotatingKeys> rotating;
};

}  // namespace siphon::session
