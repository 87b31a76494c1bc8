// What a test prints when a delivery check fails: each messenger's counters
// and every connection's session and transport state (Messenger::introspect,
// what `messenger dump` shows), so a failure seen once in CI says where the
// messages stopped -- queued, unacknowledged, waiting for credits, or
// never received.
#pragma once

#include <cinttypes>
#include <chrono>
#include <cstdio>

#include "msgr/api/messenger.h"
#include "msgr/api/introspect.h"

namespace siphon::test {

inline void print_messenger_state(const char* label, const Messenger& m) {
  const MessengerStats s = m.stats();
  std::printf("[ state ] %s (%s): sent %" PRIu64 " received %" PRIu64 " replayed %" PRIu64 " dup-dropped %" PRIu64
              " faults %" PRIu64 " reconnects %" PRIu64 " resets %" PRIu64 " proto-errors %" PRIu64 " crc %" PRIu64
              " decrypt %" PRIu64 " queue-full %" PRIu64 " connections %" PRIu64 "\n",
              label, m.get_myname().to_string().c_str(), s.messages_sent, s.messages_received, s.messages_replayed,
              s.duplicates_dropped, s.faults, s.reconnects, s.sessions_reset, s.protocol_errors, s.crc_errors,
              s.decrypt_errors, s.send_queue_full, s.connections);
  const MessengerInfo info = m.introspect(std::chrono::seconds(2));
  for (const ConnectionInfo& c : info.connections) {
    std::printf("[ state ]   %s %s %s: out_seq %" PRIu64 " out_acked %" PRIu64 " in_seq %" PRIu64 " in_acked %" PRIu64
                " queued %" PRIu64 " unacked %" PRIu64 " queued_bytes %" PRIu64 " undispatched %" PRIu64
                " idle %" PRId64 " ms; transport queued %zu; fault '%s'\n",
                c.outgoing ? "->" : "<-", c.peer_entity.c_str(), c.state.c_str(), c.out_seq, c.out_acked, c.in_seq,
                c.in_acked, c.queued_messages, c.unacked_messages, c.queued_bytes, c.undispatched_bytes,
                c.last_activity_ms_ago, c.transport.queued_bytes, c.last_fault.c_str());
    if (const auto& r = c.transport.rdma)
      std::printf("[ state ]     qp %u->%u credits %u/%u owed %u window %u transfers out %" PRIu64 " in %" PRIu64
                  " send wrs %u recvs %u stalled %d\n",
                  r->local_qpn, r->remote_qpn, r->send_credits, r->peer_window, r->credits_owed, r->my_window,
                  r->outstanding_transfers_out, r->outstanding_transfers_in, r->send_wrs_in_flight, r->posted_recvs,
                  r->stalled ? 1 : 0);
  }
  std::fflush(stdout);
}

}  // namespace siphon::test
