// siphon-bench's authentication, taken from the configuration as Ceph's
// tools take it (-k/--keyring, -n/--name, auth_*_required, ms_*_mode), and
// what each connection really negotiated, for the reports.
//
// The load modes (loopback, client, server, compare) have no monitor: the
// bench server authenticates its peers from the keyring it finds (the
// key-based exchange, docs/security.md 5b), as siphon-objd --standalone
// does, and the client proves its identity with its key the same way.
// siphon-bench objd can also go through the monitors (objd_run.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compat/config.h"
#include "msgr/api/connection.h"
#include "msgr/api/messenger.h"
#include "msgr/proto/types.h"
#include "tools/bench/report.h"

namespace siphon::bench {

struct BenchClientAuth {
  ClientAuth auth;                        // for Messenger::set_client_auth
  std::optional<proto::EntityName> name;  // cfg.name() (-n/--name), for set_auth_name
  bool cephx = false;                     // auth_client_required lists cephx and a key was found
};

// compat::client_auth(cfg) and the entity name. With `key_based`, cephx
// runs the key-based exchange with peers of every type (a peer holding a
// keyring, no monitor in between). Throws SetupError as client_auth does
// (a keyring that cannot be used, no method left).
BenchClientAuth bench_client_auth(const compat::Config& cfg, bool key_based);

// The bench server's accepting side: compat::server_auth(cfg) (the
// keyring's entities allowed in, auth_service_required for clients,
// ms_service_mode). With no keyring anywhere and every auth_*_required at
// its default, the server runs as before cephx existed here (auth none,
// crc), without server_auth's warning: a benchmark left unconfigured is
// not a daemon left open. Throws SetupError as server_auth does.
ServerAuth bench_server_auth(const compat::Config& cfg);

// One line for the run's startup output: who we are and how we prove it.
std::string describe_client_auth(const compat::Config& cfg, const BenchClientAuth& a);

// "none", "cephx", "crc", "secure" (or the number, for a value this build
// does not know; "-" for 0: not negotiated).
std::string auth_method_name(std::uint32_t method);
std::string con_mode_name(std::uint32_t mode);
SessionAuth session_auth(const Connection::AuthInfo& info);

}  // namespace siphon::bench
