// The RDMA loggers' schema: names as in RdmaCounters (so `perf dump`,
// RdmaStack::counters().snapshot() and siphon-bench --json agree), types per
// docs/observability.md §Counters (levels are gauges), priorities 8 with a
// nick for the headline set `ceph daemonperf` shows, 5 for what Prometheus
// and the mgr take by default, 2 or 0 for debugging.
#include "rdma/transport/rdma_perf.h"

#include <fmt/format.h>

namespace siphon::rdma {

namespace {

using perf::kDebugOnly;
using perf::kInteresting;
using perf::kUninteresting;
using perf::kUseful;
using perf::Unit;

std::shared_ptr<perf::Logger> build_worker(unsigned id) {
  perf::LoggerBuilder b(fmt::format("Siphon::RDMAWorker-{}", id), l_rdmaw_first + 1, l_rdmaw_last);
  b.add_u64_counter(l_rdmaw_tx_messages, "tx_messages", "msgr2 frames sent on RDMA connections", {}, kUseful);
  b.add_u64_counter(l_rdmaw_tx_bytes, "tx_bytes", "Stream bytes sent (frames, before RDMA framing)", "txb",
                    kInteresting, Unit::bytes);
  b.add_u64_counter(l_rdmaw_rx_messages, "rx_messages", "msgr2 frames received on RDMA connections", {}, kUseful);
  b.add_u64_counter(l_rdmaw_rx_bytes, "rx_bytes", "Stream bytes received", "rxb", kInteresting, Unit::bytes);
  b.add_u64_counter(l_rdmaw_tx_sends, "tx_sends", "RDMA SEND work requests posted", {}, kUninteresting);
  b.add_u64_counter(l_rdmaw_rx_sends, "rx_sends", "RDMA SENDs received", {}, kUninteresting);
  b.add_u64_counter(l_rdmaw_credits_granted, "credits_granted", "Receive credits the peers returned to us", {},
                    kUninteresting);
  b.add_u64_counter(l_rdmaw_credits_spent, "credits_spent", "Receive credits spent on data SENDs", {},
                    kUninteresting);
  b.add_u64_counter(l_rdmaw_credits_returned, "credits_returned", "Receive credits we returned to the peers", {},
                    kUninteresting);
  b.add_u64_counter(l_rdmaw_credit_updates_sent, "credit_updates_sent",
                    "Explicit credit_update SENDs (credits not piggybacked on data)", {}, kUninteresting);
  b.add_u64_counter(l_rdmaw_credit_stalls, "credit_stalls", "Sends deferred for lack of peer receive credits",
                    "cstl", kInteresting);
  b.add_u64_counter(l_rdmaw_rnr_events, "rnr_events",
                    "Completions with RNR retry exceeded (the peer had no receive posted)", "rnr", kInteresting);
  b.add_u64_counter(l_rdmaw_wc_errors, "wc_errors", "Work completions with an error status (flushes excluded)",
                    "wce", kInteresting);
  b.add_u64_counter(l_rdmaw_wc_flushed, "wc_flushed", "Work requests flushed (expected during teardown)", {},
                    kUninteresting);
  b.add_u64_counter(l_rdmaw_wc_retry_exceeded, "wc_retry_exceeded", "Completions with transport retries exhausted",
                    {}, kUseful);
  b.add_u64_counter(l_rdmaw_wc_remote_access, "wc_remote_access", "Completions with a remote access error", {},
                    kUseful);
  b.add_u64_counter(l_rdmaw_wc_other_errors, "wc_other_errors", "Completions with any other error status", {},
                    kUseful);
  b.add_u64_counter(l_rdmaw_zero_copy_transfers, "zero_copy_transfers",
                    "Large segments offered to the peer for an RDMA READ (zero-copy send)", {}, kUseful);
  b.add_u64_counter(l_rdmaw_zero_copy_bytes, "zero_copy_bytes", "Bytes sent by zero-copy transfers", {}, kUseful,
                    Unit::bytes);
  b.add_u64_counter(l_rdmaw_tx_copied_bytes, "tx_copied_bytes", "Bytes copied into registered send buffers", {},
                    kUseful, Unit::bytes);
  b.add_u64_counter(l_rdmaw_rdma_reads, "rdma_reads", "RDMA READs issued to pull a peer's zero-copy segment", {},
                    kUseful);
  b.add_u64_counter(l_rdmaw_transfer_registrations, "transfer_registrations",
                    "Memory regions registered for zero-copy transfers", {}, kUninteresting);
  b.add_u64_counter(l_rdmaw_transfer_windows, "transfer_windows",
                    "Memory windows bound for zero-copy transfers (connection-scoped rkeys)", {}, kUninteresting);
  b.add_u64_counter(l_rdmaw_zero_copy_pool_copies, "zero_copy_pool_copies",
                    "Zero-copy sends whose data sat in the receive pool, copied out of it first", {}, kUseful);
  b.add_u64_counter(l_rdmaw_send_buffer_stalls, "send_buffer_stalls",
                    "Sends deferred for lack of a registered send buffer", {}, kUseful);
  b.add_u64_counter(l_rdmaw_credit_violations, "credit_violations",
                    "Connections faulted because the peer broke the credit protocol", {}, kUseful);
  b.add_u64_counter(l_rdmaw_header_crc_errors, "header_crc_errors", "SENDs whose RDMA header failed its CRC32C", {},
                    kUseful);
  b.add_u64_counter(l_rdmaw_cq_polls, "cq_polls", "Completion queue polls", {}, kDebugOnly);
  b.add_u64_counter(l_rdmaw_cq_polls_empty, "cq_polls_empty", "Completion queue polls that found nothing", {},
                    kDebugOnly);
  b.add_u64_counter(l_rdmaw_cq_completions, "cq_completions", "Work completions reaped", {}, kUninteresting);
  b.add_u64_counter(l_rdmaw_cq_events, "cq_events", "Completion channel wakeups (the worker slept, then was woken)",
                    {}, kUseful);
  b.add_u64_counter(l_rdmaw_cq_events_missed, "cq_events_missed",
                    "Times the rescue poll found completions on an armed CQ that raised no event (a lost "
                    "notification)",
                    {}, kUseful);
  b.add_u64_counter(l_rdmaw_connection_faults, "connection_faults",
                    "RDMA connections faulted (errors, not clean closes by the peer)", "flt", kInteresting);
  b.add_time_avg(l_rdmaw_credit_stall_ns, "credit_stall_time",
                 "Time sends waited for peer receive credits (per stall)", {}, kUseful);
  return b.create();
}

std::shared_ptr<perf::Logger> build_stack() {
  perf::LoggerBuilder b("Siphon::RDMAStack", l_rdmas_first + 1, l_rdmas_last);
  b.shared();
  b.add_u64_counter(l_rdmas_connections_created, "connections_created", "RDMA connections created", {}, kUseful);
  b.add_u64(l_rdmas_connections_active, "connections_active", "RDMA connections established and not closed", {},
            kUseful);
  b.add_u64_counter(l_rdmas_connections_rejected, "connections_rejected",
                    "Connection requests rejected (bad parameters, resources)", {}, kUseful);
  b.add_u64_counter(l_rdmas_qps_created, "qps_created", "Queue pairs created", {}, kUninteresting);
  b.add_u64(l_rdmas_qps_active, "qps_active", "Queue pairs alive", {}, kUseful);
  b.add_u64_counter(l_rdmas_srq_refusals, "srq_refusals",
                    "Connections refused: their worker's shared receive queue was fully reserved", {}, kUseful);
  b.add_u64_counter(l_rdmas_transfer_timeouts, "transfer_timeouts",
                    "Connections faulted by ms_async_rdma_transfer_timeout", {}, kUseful);
  b.add_u64_counter(l_rdmas_device_removals, "device_removals",
                    "Times the RDMA device went away and the stack released it", {}, kUseful);
  b.add_u64_counter(l_rdmas_device_reopens, "device_reopens",
                    "Times a removed RDMA device came back and the stack reopened it", {}, kUseful);
  b.add_u64(l_rdmas_pinned_bytes, "pinned_bytes", "Bytes registered (pinned) by the send and receive pools", "pin",
            kInteresting, Unit::bytes);
  b.add_u64(l_rdmas_send_buffers_total, "send_buffers_total", "Registered send buffers in the pool", {}, kUseful);
  b.add_u64(l_rdmas_send_buffers_in_use, "send_buffers_in_use", "Send buffers handed out", {}, kUseful);
  b.add_u64(l_rdmas_recv_buffers_total, "recv_buffers_total", "Registered receive buffers in the pool", {}, kUseful);
  b.add_u64(l_rdmas_recv_buffers_in_use, "recv_buffers_in_use", "Receive buffers handed out (posted or holding data)",
            {}, kUseful);
  b.add_u64(l_rdmas_srq_posted, "srq_posted", "Receives posted on the workers' shared receive queues", {},
            kUninteresting);
  b.add_u64(l_rdmas_srq_reserved, "srq_reserved", "Shared receive queue receives reserved by connections", {},
            kUninteresting);
  return b.create();
}

}  // namespace

RdmaStackCounters::RdmaStackCounters() : logger_(build_stack()) { perf::process_collection().add(logger_); }
RdmaStackCounters::~RdmaStackCounters() { perf::process_collection().remove(logger_.get()); }

void RdmaStackCounters::set_gauges(std::uint64_t pinned, std::uint64_t send_total, std::uint64_t send_in_use,
                                   std::uint64_t recv_total, std::uint64_t recv_in_use, std::uint64_t srq_posted,
                                   std::uint64_t srq_reserved) noexcept {
  logger_->set(l_rdmas_pinned_bytes, pinned);
  logger_->set(l_rdmas_send_buffers_total, send_total);
  logger_->set(l_rdmas_send_buffers_in_use, send_in_use);
  logger_->set(l_rdmas_recv_buffers_total, recv_total);
  logger_->set(l_rdmas_recv_buffers_in_use, recv_in_use);
  logger_->set(l_rdmas_srq_posted, srq_posted);
  logger_->set(l_rdmas_srq_reserved, srq_reserved);
}

void RdmaStackCounters::add_to(RdmaCounters& sum) const {
#define SIPHON_COUNTER(n) sum.n.add(n.load());
  SIPHON_RDMA_CONTROL_COUNTERS(SIPHON_COUNTER)
#undef SIPHON_COUNTER
}

RdmaWorkerCounters::RdmaWorkerCounters(unsigned id) : logger_(build_worker(id)) {
  perf::process_collection().add(logger_);
}
RdmaWorkerCounters::~RdmaWorkerCounters() { perf::process_collection().remove(logger_.get()); }

void RdmaWorkerCounters::add_to(RdmaCounters& sum) const {
#define SIPHON_COUNTER(n) sum.n.add(n.load());
  SIPHON_RDMA_DATA_COUNTERS(SIPHON_COUNTER)
  SIPHON_RDMA_DATA_TIMES(SIPHON_COUNTER)
#undef SIPHON_COUNTER
}

}  // namespace siphon::rdma
