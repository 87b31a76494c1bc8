// A daemon's accepting side inside a cephx Ceph cluster (shared/reference/
// cephx.md §8.2), composed from the configuration:
//
//   mon_host set, cephx required of peers, and the keyring holding the
//   daemon's own key (osd.N, mgr.X, mds.X)
//     -> the daemon authenticates to the monitors as cfg.name() with that
//        key (a MonClient of its own, on a TCP stack), fetches the rotating
//        keys of its type (CEPHX_GET_ROTATING_KEY) and keeps them fresh
//        (every auth_service_ticket_ttl / 4, and at once when a client
//        presents a newer one); its ServerAuth then validates the tickets
//        clients got from those monitors (cephx authorizers);
//   otherwise (or `standalone`)
//     -> server_auth(cfg) as it is: the keyring lists the entities allowed
//        in (the key-based exchange, docs/security.md 5b).
//
// Both can hold at once: a cluster daemon still admits the keyring's other
// entities with the key-based exchange.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "compat/config.h"
#include "msgr/api/messenger.h"
#include "msgr/mon/mon_client.h"

namespace siphon::compat {

class DaemonAuth {
 public:
  ~DaemonAuth();
  DaemonAuth(const DaemonAuth&) = delete;
  DaemonAuth& operator=(const DaemonAuth&) = delete;

  /// Builds the daemon's accepting side. In a cluster (see above) it
  /// connects to the monitors and waits, up to `timeout`, for the first
  /// rotating keys. Throws SetupError naming the cause and the fix: those of
  /// server_auth(), a monitor that cannot be reached or refuses the key, or
  /// one that gives no rotating keys (an entity type without them).
  static std::unique_ptr<DaemonAuth> start(const Config& cfg, bool standalone, std::chrono::nanoseconds timeout);

  /// What the messengers get (set_server_auth); its rotating store is the
  /// MonClient's.
  const ServerAuth& server_auth() const noexcept { return server_; }
  /// Whether the daemon has a monitor session (cluster mode).
  bool in_cluster() const noexcept { return mon_ != nullptr; }
  mon::MonClient* mon_client() noexcept { return mon_.get(); }
  /// One line for the daemon's startup output (describe(ServerAuth) plus
  /// the monitor session).
  std::string describe() const;
  /// Ends the monitor session (the rotating keys stop being refreshed).
  void shutdown();

 private:
  DaemonAuth() = default;
  ServerAuth server_;
  std::string mon_host_;
  std::shared_ptr<transport::Stack> stack_;
  std::unique_ptr<mon::MonClient> mon_;
};

}  // namespace siphon::compat
