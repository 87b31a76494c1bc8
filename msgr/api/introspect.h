// Snapshots of messengers and connections for operators (the admin socket's
// `messenger dump`, docs/observability.md §2.4): plain values, copied on the
// connection's worker so reading them races with nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "msgr/transport/info.h"

namespace siphon {

struct ConnectionInfo {
  std::string peer_addrs;      // the peer's addresses (or the address dialled)
  std::string peer_entity;     // "osd.3", "client.4123"; "unknown" before the handshake
  std::string state;           // idle connecting accepting ready backoff standby closed; "unknown":
                               // the worker did not answer in time
  bool outgoing = false;       // we dialled
  bool lossy = false;
  std::size_t worker = 0;      // the worker thread's index
  // Session sequence numbers: the last message seq we numbered, the last the
  // peer acknowledged, the last we accepted from the peer, and the last of
  // those we acknowledged to it.
  std::uint64_t out_seq = 0, out_acked = 0, in_seq = 0, in_acked = 0;
  std::uint64_t queued_messages = 0;   // waiting to be sent (ours, not yet on the transport)
  std::uint64_t unacked_messages = 0;  // sent, kept for replay until acknowledged
  std::uint64_t queued_bytes = 0;      // send_message() bytes not yet handed to the transport
  std::uint64_t undispatched_bytes = 0;  // received, waiting for the dispatcher
  std::int64_t last_activity_ms_ago = -1;  // since a frame last went either way; -1: never
  std::string last_fault;              // "" when none
  transport::TransportInfo transport;  // the stack's view (in-flight bytes, RDMA queue pair)
};

struct MessengerInfo {
  std::string entity;   // "osd.0"
  std::string addrs;    // bound or learned addresses
  std::string stack;    // "async+posix", "async+rdma", ...
  std::size_t workers = 0;
  std::vector<ConnectionInfo> connections;
};

}  // namespace siphon
