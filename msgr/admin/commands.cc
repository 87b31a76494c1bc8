// The standard admin commands: version, git_version, log dump|flush,
// messenger dump and status.
#include "msgr/admin/commands.h"

#include <cerrno>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#ifndef SIPHON_VERSION
#define SIPHON_VERSION "unknown"
#endif
#ifndef SIPHON_GIT_SHA
#define SIPHON_GIT_SHA "unknown"
#endif

namespace siphon::admin {

void MessengerSet::add(std::string name, Messenger* m) {
  std::lock_guard lk(mu_);
  msgrs_.emplace_back(std::move(name), m);
}

void MessengerSet::remove(const Messenger* m) {
  std::lock_guard lk(mu_);
  std::erase_if(msgrs_, [m](const auto& e) { return e.second == m; });
}

std::vector<std::string> MessengerSet::names() const {
  std::lock_guard lk(mu_);
  std::vector<std::string> out;
  for (const auto& e : msgrs_) out.push_back(e.first);
  return out;
}

std::vector<std::pair<std::string, MessengerInfo>> MessengerSet::snapshot(const std::string& only,
                                                                          std::chrono::milliseconds timeout) const {
  // Held while the messengers are asked, so none is removed (and destroyed)
  // meanwhile; introspect() is bounded by `timeout` per messenger.
  std::lock_guard lk(mu_);
  std::vector<std::pair<std::string, MessengerInfo>> out;
  for (const auto& [name, m] : msgrs_)
    if (only.empty() || only == name) out.emplace_back(name, m->introspect(timeout));
  return out;
}

nlohmann::ordered_json to_json(const ConnectionInfo& c) {
  nlohmann::ordered_json j = {
      {"peer_addrs", c.peer_addrs},
      {"peer_entity", c.peer_entity},
      {"state", c.state},
      {"direction", c.outgoing ? "outgoing" : "incoming"},
      {"lossy", c.lossy},
      {"worker", c.worker},
      {"out_seq", c.out_seq},
      {"out_acked", c.out_acked},
      {"in_seq", c.in_seq},
      {"in_acked", c.in_acked},
      {"queued_messages", c.queued_messages},
      {"unacked_messages", c.unacked_messages},
      {"queued_bytes", c.queued_bytes},
      {"transport_queued_bytes", c.transport.queued_bytes},
      {"undispatched_bytes", c.undispatched_bytes},
      {"last_activity_ms_ago", c.last_activity_ms_ago},
      {"last_fault", c.last_fault},
      {"local_address", c.transport.local_address},
      {"peer_address", c.transport.peer_address},
  };
  if (c.transport.rdma) {
    const transport::RdmaInfo& r = *c.transport.rdma;
    j["rdma"] = {
        {"local_qpn", r.local_qpn},
        {"remote_qpn", r.remote_qpn},
        {"local_gid", r.local_gid},
        {"remote_gid", r.remote_gid},
        {"path_mtu", r.path_mtu},
        {"send_credits", r.send_credits},
        {"peer_window", r.peer_window},
        {"credits_owed_to_peer", r.credits_owed},
        {"my_window", r.my_window},
        {"credit_stalled", r.stalled},
        {"outstanding_transfers_out", r.outstanding_transfers_out},
        {"outstanding_transfers_in", r.outstanding_transfers_in},
        {"send_wrs_in_flight", r.send_wrs_in_flight},
        {"posted_recvs", r.posted_recvs},
        {"srq_reserved", r.srq_reserved},
    };
  }
  return j;
}

nlohmann::ordered_json to_json(const std::string& name, const MessengerInfo& m) {
  nlohmann::ordered_json conns = nlohmann::ordered_json::array();
  for (const auto& c : m.connections) conns.push_back(to_json(c));
  return {{"name", name},   {"entity", m.entity},         {"addrs", m.addrs},
          {"stack", m.stack}, {"workers", m.workers}, {"connections", std::move(conns)}};
}

void register_standard_commands(AdminSocket& sock, const StandardCommands& sc) {
  sock.register_command("version", "get ceph version", [](const Request&) {
    return Reply::json({{"version", SIPHON_VERSION}, {"release", "siphon"}, {"release_type", "dev"}});
  });
  sock.register_command("git_version", "get git sha1", [](const Request&) {
    return Reply::json({{"git_version", SIPHON_GIT_SHA}});
  });
  // Siphon's log goes straight to its sink (stderr by default): there are
  // no in-memory entries to dump, so both answer {} as Ceph's do.
  sock.register_command("log dump", "dump recent log entries to log file",
                        [](const Request&) { return Reply::json(nlohmann::ordered_json::object()); });
  sock.register_command("log flush", "flush log entries to log file", [](const Request&) {
    std::fflush(stderr);
    return Reply::json(nlohmann::ordered_json::object());
  });
  if (!sc.messengers) return;
  const auto set = sc.messengers;
  const auto timeout = sc.introspect_timeout;
  sock.register_command(
      "messenger dump name=msgr,type=CephString,req=false",
      "dump every messenger and connection: peer, state, session seqs, queued bytes, RDMA queue pair and credits",
      [set, timeout](const Request& r) {
        const std::string only = r.str("msgr");
        const auto snaps = set->snapshot(only, timeout);
        if (!only.empty()) {
          if (snaps.empty())
            return Reply::error(-ENOENT, fmt::format("no messenger named '{}' (messengers: {})", only,
                                                     fmt::join(set->names(), ", ")));
          return Reply::json(to_json(snaps.front().first, snaps.front().second));
        }
        nlohmann::ordered_json all = nlohmann::ordered_json::array();
        for (const auto& [name, info] : snaps) all.push_back(to_json(name, info));
        return Reply::json({{"messengers", std::move(all)}});
      });
  const std::string entity = sc.entity;
  sock.register_command("status", "show the daemon's entity, messengers and connections by state",
                        [set, timeout, entity](const Request&) {
                          nlohmann::ordered_json msgrs = nlohmann::ordered_json::array();
                          for (const auto& [name, info] : set->snapshot({}, timeout)) {
                            std::map<std::string, std::uint64_t> by_state;
                            for (const auto& c : info.connections) ++by_state[c.state];
                            nlohmann::ordered_json states = nlohmann::ordered_json::object();
                            for (const auto& [s, n] : by_state) states[s] = n;
                            msgrs.push_back({{"name", name},
                                             {"stack", info.stack},
                                             {"addrs", info.addrs},
                                             {"workers", info.workers},
                                             {"connections", info.connections.size()},
                                             {"connections_by_state", std::move(states)}});
                          }
                          return Reply::json({{"entity", entity}, {"messengers", std::move(msgrs)}});
                        });
}

}  // namespace siphon::admin
