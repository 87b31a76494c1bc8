// The admin commands every Siphon process answers (docs/observability.md
// §2), registered on an AdminSocket:
//
//   version, git_version          Siphon's version and commit
//   log dump, log flush           Ceph's log commands
//   perf dump|schema|reset, perf histogram dump|schema, counter dump|schema
//                                 the perf counters (siphon::perf::Collection)
//   messenger dump [msgr]         every messenger and connection (MessengerSet)
//   status                        entity, stacks, addresses, connections by state
//
// The configuration commands (config show|get|set|diff) need the
// configuration layer and live in compat/admin.h.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "msgr/admin/admin_socket.h"
#include "msgr/api/messenger.h"

namespace siphon::perf {
class Collection;
}

namespace siphon::admin {

// The messengers a daemon shows in `messenger dump` and `status`, by name
// ("public", "cluster", ...). The owner removes a messenger before it is
// destroyed.
class MessengerSet {
 public:
  void add(std::string name, Messenger* m);
  void remove(const Messenger* m);
  // Snapshots of every messenger (or the one named), each taken on its
  // connections' workers; a connection whose worker does not answer within
  // `timeout` is listed with state "unknown".
  std::vector<std::pair<std::string, MessengerInfo>> snapshot(const std::string& only,
                                                              std::chrono::milliseconds timeout) const;
  std::vector<std::string> names() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, Messenger*>> msgrs_;
};

// A connection snapshot as `messenger dump` prints it.
nlohmann::ordered_json to_json(const ConnectionInfo& c);
nlohmann::ordered_json to_json(const std::string& name, const MessengerInfo& m);

struct StandardCommands {
  std::string entity;  // "osd.0"
  std::shared_ptr<MessengerSet> messengers;  // may be null: no messenger dump
  std::chrono::milliseconds introspect_timeout{2000};
};

// version, git_version, log dump, log flush, messenger dump, status.
void register_standard_commands(AdminSocket& sock, const StandardCommands& sc);
// The perf and counter commands over `c` (the process collection by
// default).
void register_perf_commands(AdminSocket& sock, perf::Collection* c = nullptr);

}  // namespace siphon::admin
