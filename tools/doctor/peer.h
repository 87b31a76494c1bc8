// siphon-doctor --peer / --listen (docs/doctor.md, "Active check"): round
// trips and a short bulk transfer over the configured stack, through
// siphon-bench's client and server runs (the messenger, msgr2 handshake and
// stack the daemon would use).
#pragma once

#include <string>
#include <vector>

#include "compat/config.h"
#include "tools/doctor/checks.h"

namespace siphon::doctor {

struct PeerOptions {
  std::string address;        // IP:PORT of a siphon-bench server or siphon-doctor --listen
  unsigned round_trips = 200;  // 64-byte echoes, one at a time
  unsigned bulk_messages = 32; // 1 MiB echoes, 4 in flight
  double connect_timeout = 30;
};

// The "peer" check(s): RTT percentiles, throughput, errors, RNR and error
// completions, and the path the RDMA stack applied to its connections.
std::vector<Check> run_peer(const compat::Config& cfg, const PeerOptions& options);

// Serves echoes at `address` until SIGINT/SIGTERM; returns the exit status.
int run_listen(const compat::Config& cfg, const std::string& address);

}  // namespace siphon::doctor
