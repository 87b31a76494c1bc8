// Typed messenger options. Built once at the edge (compat/ parses ceph.conf
// into this struct); nothing below reads a configuration. Each field names
// the Ceph option it mirrors; fields Ceph does not have are marked
// "Siphon extension".
#pragma once

#include <chrono>
#include <cstdint>

#include "msgr/proto/frame.h"

namespace siphon {

// Options of the transport stack. The messenger does not create its stack
// (it is handed a transport::Stack), so these travel with the messenger's
// options for whoever builds the stack (compat/, or make_tcp_stack()).
struct TransportOptions {
  unsigned ms_async_op_threads = 3;            // ms_async_op_threads: workers per stack
  bool ms_tcp_nodelay = true;                  // ms_tcp_nodelay
  std::uint32_t ms_tcp_rcvbuf = 0;             // ms_tcp_rcvbuf (0: kernel default)
  std::uint16_t ms_bind_port_min = 6800;       // ms_bind_port_min
  std::uint16_t ms_bind_port_max = 7568;       // ms_bind_port_max
  // Fault injection: close the socket on average once every N socket
  // operations (0: off). ms_inject_socket_failures.
  std::uint64_t ms_inject_socket_failures = 0;
  // Seed for the injection's random generator (Siphon extension; 0: random).
  std::uint64_t ms_inject_seed = 0;
  // msgr2 crc mode always carries frame CRCs; when false the receiver does
  // not verify the data segment's CRC (Ceph's ms_crc_data).
  bool ms_crc_data = true;  // ms_crc_data
};

struct MessengerOptions {
  TransportOptions transport;

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
  // Bounds the decoder enforces on every frame (Siphon extension; Ceph's
  // limits are implicit in its allocator).
  proto::FrameLimits frame_limits{};

  // --- dispatch ---
  // Received bytes not yet dispatched; when exceeded, connections stop
  // reading until dispatch catches up.
  std::uint64_t ms_dispatch_throttle_bytes = 100ull << 20;  // ms_dispatch_throttle_bytes
};

}  // namespace siphon
