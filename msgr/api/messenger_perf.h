// The `siphon-messenger-<entity>` logger: what one messenger counts beyond
// Ceph's per-worker messenger counters (MessengerStats in messenger.h shows
// the same values). Shared by the messenger's connections on every worker
// (LoggerBuilder::shared()), so updates are fetch_adds -- all of them on
// rare events (faults, reconnects, refusals...), none per message, except
// the undispatched-bytes gauge on the non-fast-dispatch path.
//
// One MessengerCounter holds both the MessengerStats value (always counted:
// it is API, not a perf counter, so the `perf` option and
// SIPHON_PERF_COUNTERS=OFF leave it alone) and the logger update, so the call
// sites stay `counters.faults.fetch_add(1, ...)` and the two never disagree
// while perf counters are on.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "msgr/perf/compiled.h"
#include "msgr/perf/perf_counters.h"

namespace siphon::detail {

enum MessengerPerfIdx : int {
  l_siphon_msgr_first = 94100,
  l_siphon_msgr_messages_replayed,
  l_siphon_msgr_duplicates_dropped,
  l_siphon_msgr_faults,
  l_siphon_msgr_reconnects,
  l_siphon_msgr_sessions_reset,
  l_siphon_msgr_protocol_errors,
  l_siphon_msgr_crc_errors,
  l_siphon_msgr_session_migrations,
  l_siphon_msgr_connections_refused,
  l_siphon_msgr_send_queue_full,
  l_siphon_msgr_auth_refused,
  l_siphon_msgr_auth_accepted,
  l_siphon_msgr_decrypt_errors,
  l_siphon_msgr_fallback_switches,
  l_siphon_msgr_primary_switches,
  l_siphon_msgr_idle_timeouts,
  l_siphon_msgr_connections,
  l_siphon_msgr_undispatched_bytes,
  l_siphon_msgr_last,
};

// The logger of a messenger named `entity` (e.g. "osd.0"); not registered.
std::shared_ptr<perf::Logger> make_messenger_logger(const std::string& entity);

class MessengerCounter {
 public:
  MessengerCounter(perf::Logger& l, int idx) noexcept : l_(l), idx_(idx) {}
  std::uint64_t fetch_add(std::uint64_t n, std::memory_order mo = std::memory_order_relaxed) noexcept {
    if constexpr (perf::kCompiledIn) l_.inc(idx_, n);
    return v_.fetch_add(n, mo);
  }
  std::uint64_t load(std::memory_order mo = std::memory_order_relaxed) const noexcept { return v_.load(mo); }

 private:
  std::atomic<std::uint64_t> v_{0};
  perf::Logger& l_;
  int idx_;
};

// A gauge of the messenger's logger, set to an absolute value (never inc/dec:
// an update skipped while `perf` was off cannot make it drift or wrap).
inline void set_gauge(perf::Logger& l, int idx, std::uint64_t v) noexcept {
  if constexpr (perf::kCompiledIn) l.set(idx, v);
}

}  // namespace siphon::detail
