#include "msgr/api/messenger_perf.h"

namespace siphon::detail {

std::shared_ptr<perf::Logger> make_messenger_logger(const std::string& entity) {
  using perf::Unit;
  perf::LoggerBuilder b("siphon-messenger-" + entity, l_siphon_msgr_first + 1, l_siphon_msgr_last);
  b.shared();
  b.add_u64_counter(l_siphon_msgr_messages_replayed, "messages_replayed",
                    "MESSAGE frames re-sent after a reconnect", {}, perf::kUseful);
  b.add_u64_counter(l_siphon_msgr_duplicates_dropped, "duplicates_dropped",
                    "Received messages already delivered (seq <= in_seq), dropped", {}, perf::kUseful);
  b.add_u64_counter(l_siphon_msgr_faults, "faults", "Connection faults (any cause)", "flt", perf::kInteresting);
  b.add_u64_counter(l_siphon_msgr_reconnects, "reconnects", "Sessions resumed by SESSION_RECONNECT (either side)",
                    "rcon", perf::kInteresting);
  b.add_u64_counter(l_siphon_msgr_sessions_reset, "sessions_reset",
                    "Sessions discarded by SESSION_RESET or a reset check", {}, perf::kUseful);
  b.add_u64_counter(l_siphon_msgr_protocol_errors, "protocol_errors",
                    "Faults caused by malformed or out-of-state input", {}, perf::kUseful);
  b.add_u64_counter(l_siphon_msgr_crc_errors, "crc_errors", "Faults caused by a frame failing its CRC check", "crc",
                    perf::kInteresting);
  b.add_u64_counter(l_siphon_msgr_session_migrations, "session_migrations",
                    "Sessions moved to another worker with a peer's new connection", {}, perf::kUninteresting);
  b.add_u64_counter(l_siphon_msgr_connections_refused, "connections_refused",
                    "Accepted connections closed at once: ms_max_connections reached", {}, perf::kUseful);
  b.add_u64_counter(l_siphon_msgr_send_queue_full, "send_queue_full",
                    "send_message calls refused: ms_max_queued_send_bytes_per_connection reached", {}, perf::kUseful);
  b.add_u64_counter(l_siphon_msgr_auth_refused, "auth_refused",
                    "Peers' authentication attempts refused or failed (wrong or unknown key, no common method or mode)",
                    {}, perf::kUseful);
  b.add_u64_counter(l_siphon_msgr_auth_accepted, "auth_accepted",
                    "Peers authenticated with cephx by this (accepting) side: proof of key and AUTH_SIGNATURE checked",
                    {}, perf::kUseful);
  b.add_u64_counter(l_siphon_msgr_decrypt_errors, "decrypt_errors",
                    "Secure-mode frames whose AES-GCM tag failed (the connection faulted)", {}, perf::kInteresting);
  b.add_u64_counter(l_siphon_msgr_fallback_switches, "fallback_switches",
                    "Sessions moved from the primary stack to the fallback stack (RDMA path unusable)", "fbk",
                    perf::kInteresting);
  b.add_u64_counter(l_siphon_msgr_primary_switches, "primary_switches",
                    "Sessions moved back from the fallback stack to the primary stack", {}, perf::kInteresting);
  b.add_u64_counter(l_siphon_msgr_idle_timeouts, "idle_timeouts",
                    "Connections faulted because no traffic moved for ms_connection_idle_timeout", {}, perf::kUseful);
  b.add_u64(l_siphon_msgr_connections, "connections", "Connections open or closing (sessions and handshakes)", {},
            perf::kUseful);
  b.add_u64(l_siphon_msgr_undispatched_bytes, "undispatched_bytes",
            "Received message bytes queued for dispatch (bounded by ms_dispatch_throttle_bytes)", {}, perf::kUseful,
            Unit::bytes);
  return b.create();
}

}  // namespace siphon::detail
