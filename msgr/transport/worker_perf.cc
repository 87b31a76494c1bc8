// The `AsyncMessenger::Worker-<n>` logger: Ceph 16.2.15's 12 counters, with
// msgr_active_connections a gauge (Ceph registers it as a counter, so a
// `perf reset` makes it wrap when connections close). Newer Ceph's
// msgr_{recv,send}_encrypted_bytes are not registered: the transport does
// not see which frames are encrypted.
#include "msgr/transport/worker_perf.h"

#include <fmt/format.h>

#include <mutex>
#include <set>

namespace siphon::transport {

namespace {

// Ids in use in this process; a new worker takes the lowest free one.
std::mutex ids_mu;
std::set<unsigned>& ids_in_use() {
  static std::set<unsigned> ids;
  return ids;
}

unsigned take_id() {
  std::lock_guard l(ids_mu);
  auto& ids = ids_in_use();
  unsigned n = 0;
  while (ids.count(n)) ++n;
  ids.insert(n);
  return n;
}

void give_id(unsigned n) {
  std::lock_guard l(ids_mu);
  ids_in_use().erase(n);
}

std::shared_ptr<perf::Logger> build(unsigned id) {
  using perf::Unit;
  perf::LoggerBuilder b(fmt::format("AsyncMessenger::Worker-{}", id), l_msgr_first + 1, l_msgr_last);
  // Descriptions verbatim from Ceph (AsyncMessenger's Stack.h); priority 0
  // and no nick, as there.
  b.add_u64_counter(l_msgr_recv_messages, "msgr_recv_messages", "Network received messages");
  b.add_u64_counter(l_msgr_send_messages, "msgr_send_messages", "Network sent messages");
  b.add_u64_counter(l_msgr_recv_bytes, "msgr_recv_bytes", "Network received bytes", {}, perf::kDebugOnly,
                    Unit::bytes);
  b.add_u64_counter(l_msgr_send_bytes, "msgr_send_bytes", "Network sent bytes", {}, perf::kDebugOnly, Unit::bytes);
  b.add_u64_counter(l_msgr_created_connections, "msgr_created_connections", "Created connection number");
  b.add_u64(l_msgr_active_connections, "msgr_active_connections", "Active connection number");
  b.add_time(l_msgr_running_total_time, "msgr_running_total_time", "The total time of thread running");
  b.add_time(l_msgr_running_send_time, "msgr_running_send_time", "The total time of message sending");
  b.add_time(l_msgr_running_recv_time, "msgr_running_recv_time", "The total time of message receiving");
  b.add_time(l_msgr_running_fast_dispatch_time, "msgr_running_fast_dispatch_time", "The total time of fast dispatch");
  b.add_time_avg(l_msgr_send_messages_queue_lat, "msgr_send_messages_queue_lat", "Network sent messages lat");
  b.add_time_avg(l_msgr_handle_ack_lat, "msgr_handle_ack_lat", "Connection handle ack lat");
  // Siphon extensions: the TCP stack's zero-copy sends (siphon_ms_tcp_zerocopy_threshold).
  b.add_u64_counter(l_msgr_tcp_zerocopy_sends, "msgr_tcp_zerocopy_sends", "sendmsg calls made with MSG_ZEROCOPY");
  b.add_u64_counter(l_msgr_tcp_zerocopy_bytes, "msgr_tcp_zerocopy_bytes", "Bytes sent with MSG_ZEROCOPY", {},
                    perf::kDebugOnly, Unit::bytes);
  b.add_u64_counter(l_msgr_tcp_zerocopy_copied, "msgr_tcp_zerocopy_copied",
                    "MSG_ZEROCOPY sends the kernel completed with a copy (SO_EE_CODE_ZEROCOPY_COPIED)");
  b.add_u64_counter(l_msgr_tcp_zerocopy_fallbacks, "msgr_tcp_zerocopy_fallbacks",
                    "Write batches sent with a copy although they qualified for MSG_ZEROCOPY (ENOBUFS, no SO_ZEROCOPY)");
  b.add_u64_counter(l_msgr_tcp_zerocopy_disabled, "msgr_tcp_zerocopy_disabled",
                    "Connections that stopped using MSG_ZEROCOPY because the kernel copied anyway");
  b.add_u64(l_msgr_tcp_zerocopy_held_bytes, "msgr_tcp_zerocopy_held_bytes",
            "Bytes of sent buffers held until the kernel's zero-copy completion", {}, perf::kDebugOnly, Unit::bytes);
  return b.create();
}

}  // namespace

WorkerPerf::WorkerPerf() : id_(take_id()), logger_(build(id_)) { perf::process_collection().add(logger_); }

WorkerPerf::~WorkerPerf() {
  perf::process_collection().remove(logger_.get());
  give_id(id_);
}

}  // namespace siphon::transport
