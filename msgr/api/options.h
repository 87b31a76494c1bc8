// Typed messenger options. Built once at the edge (compat/ parses ceph.conf
// into this struct); nothing below reads a configuration. Each field names
// the Ceph option it mirrors; fields Ceph does not have are marked
// "Siphon extension".
//
// The transport's options (ms_async_op_threads, ms_tcp_*, ms_bind_*, frame
// limits, send-queue water marks, ms_inject_socket_failures, ...) are not
// here: they belong to the stack the messenger is handed, which compat/
// builds with its own option struct (transport::TcpOptions,
// rdma::RdmaOptions); the session asks the stack for what it needs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace siphon {

struct MessengerOptions {
  // --- session ---
  // Time allowed from connect() to READY before the attempt is faulted.
  std::chrono::nanoseconds ms_connection_ready_timeout = std::chrono::seconds(10);  // ms_connection_ready_timeout
  // A READY connection with no traffic either way for this long is faulted.
  std::chrono::nanoseconds ms_connection_idle_timeout = std::chrono::seconds(900);  // ms_connection_idle_timeout
  // Reconnect backoff: starts here and doubles per failed attempt ...
  std::chrono::nanoseconds ms_initial_backoff = std::chrono::milliseconds(200);  // ms_initial_backoff
  // ... up to this (also the delay after a WAIT reply).
  std::chrono::nanoseconds ms_max_backoff = std::chrono::seconds(15);      // ms_max_backoff
  // Send KEEPALIVE2 on a READY connection that has been idle this long
  // (0: never; Ceph daemons do this above the messenger). Siphon extension.
  std::chrono::nanoseconds ms_keepalive_interval{0};
  // Advertise msgr2.1 (banner feature REVISION_1). false makes every
  // connection of this messenger use msgr2.0 frames: a peer only uses rev1
  // when both banners carry the bit. Siphon extension (interop tests).
  bool ms_msgr2_rev1 = true;

  // --- dispatch ---
  // Received bytes not yet dispatched; when exceeded, connections stop
  // reading until dispatch catches up.
  std::uint64_t ms_dispatch_throttle_bytes = 100ull << 20;  // ms_dispatch_throttle_bytes
  // The same bound for the messages of one connection (0: none): a peer
  // over it stops being read (TCP) or stops getting credits (RDMA) while the
  // other connections go on. A message always passes when its connection
  // has nothing undispatched. Siphon extension.
  std::uint64_t ms_max_undispatched_bytes_per_connection = 32ull << 20;

  // --- limits ---
  // Most accepted connections (sockets / QPs from peers) open at once;
  // further ones are closed at accept with a log line naming this option.
  // Connections we dial are not counted. 0: no limit. Siphon extension.
  std::uint64_t ms_max_connections = 0;
  // Bytes of messages a connection has accepted from send_message() and not
  // yet handed to the transport (0: no limit, Ceph's behaviour). Past it
  // send_message() returns errc::queue_full and does not take the message
  // (the caller keeps it); a message always passes when nothing is queued.
  // Off by default: code written for Ceph ignores send_message()'s result,
  // and a refusal it does not see would be a lost message. Siphon extension.
  std::uint64_t ms_max_queued_send_bytes_per_connection = 0;

  // --- RDMA -> TCP failover (Siphon extension; docs/rdma-transport.md, Failover) ---
  // Only with a fallback stack (Messenger::set_fallback_stack). How long a
  // session's dialling over the primary stack may keep failing (from its
  // first fault) before it dials the peer's fallback address over the
  // fallback stack; 0: at the first failure.
  std::chrono::nanoseconds siphon_ms_fallback_after = std::chrono::seconds(5);  // siphon_ms_fallback_after
  // While a session runs on the fallback stack, the primary path to its
  // peer is probed this often; when a probe connects, the session moves
  // back (SESSION_RECONNECT over the primary, unacknowledged messages replayed).
  std::chrono::nanoseconds siphon_ms_fallback_retry_interval = std::chrono::seconds(30);  // siphon_ms_fallback_retry_interval

  // --- observability ---
  // What this messenger is for ("public", "cluster", "client"; compat's
  // create_messenger sets it from its Purpose). Only tells apart the perf
  // loggers of two messengers of one entity name: the second
  // `siphon-messenger-osd.0` becomes `siphon-messenger-osd.0-cluster`
  // instead of Ceph's unstable "-0x<address>" (docs/observability.md). A
  // messenger alone with its entity name keeps Ceph's logger name.
  std::string role;
};

}  // namespace siphon
