// Counters of the RDMA stack (docs/rdma-transport.md §Counters), named after
// Ceph's perf counters where one exists.
//
// The storage is the stack's perf loggers (rdma_perf.h): the data path's
// counters are in each worker's `Siphon::RDMAWorker-<n>` logger, written only
// by that worker's thread (a relaxed load and store, on the logger's own
// cache lines), the control path's in the stack's `Siphon::RDMAStack` logger
// (shared: fetch_add from any thread). RdmaCounters is the value
// RdmaStack::counters() returns: their sum, read with relaxed loads.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace siphon::rdma {

// One counter. Copyable (a copy is a relaxed read), so a sum can be returned
// by value.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter& o) noexcept : v_(o.load()) {}
  Counter& operator=(const Counter& o) noexcept {
    v_.store(o.load(), std::memory_order_relaxed);
    return *this;
  }
  std::uint64_t load(std::memory_order = std::memory_order_relaxed) const noexcept {
    return v_.load(std::memory_order_relaxed);
  }
  // Any thread (the shared control-path block).
  std::uint64_t fetch_add(std::uint64_t n, std::memory_order = std::memory_order_relaxed) noexcept {
    return v_.fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t fetch_sub(std::uint64_t n, std::memory_order = std::memory_order_relaxed) noexcept {
    return v_.fetch_sub(n, std::memory_order_relaxed);
  }
  // The block's one writer only (a worker's own block): no locked RMW.
  void add(std::uint64_t n = 1) noexcept { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

// Every counter, once: the fields below, snapshot() and operator+= use it.
// The control path (connection setup and teardown, any thread) writes the
// first list, the data path (a worker's own thread) the second.
#define SIPHON_RDMA_CONTROL_COUNTERS(X)                                                                      \
  X(connections_created) X(connections_active) X(connections_rejected) X(qps_created) X(qps_active)        \
  X(srq_refusals) X(transfer_timeouts) X(device_removals) X(device_reopens)
#define SIPHON_RDMA_DATA_COUNTERS(X)                                                                         \
  X(tx_messages) X(tx_bytes) X(rx_messages) X(rx_bytes) X(tx_sends) X(rx_sends) X(credits_granted)         \
  X(credits_spent) X(credits_returned) X(credit_updates_sent) X(credit_stalls)                             \
  X(rnr_events) X(wc_errors) X(wc_flushed) X(wc_retry_exceeded) X(wc_remote_access) X(wc_other_errors)     \
  X(zero_copy_transfers) X(zero_copy_bytes) X(tx_copied_bytes) X(rdma_reads) X(transfer_registrations)     \
  X(transfer_windows) X(zero_copy_pool_copies) X(send_buffer_stalls) X(credit_violations) X(header_crc_errors) X(cq_polls)          \
  X(cq_polls_empty) X(cq_completions) X(cq_events) X(cq_events_missed) X(connection_faults)
// Data path, a time: the sum of the stalls' durations in ns.
#define SIPHON_RDMA_DATA_TIMES(X) X(credit_stall_ns)
#define SIPHON_RDMA_COUNTERS(X) \
  SIPHON_RDMA_CONTROL_COUNTERS(X) SIPHON_RDMA_DATA_COUNTERS(X) SIPHON_RDMA_DATA_TIMES(X)

// Padded, not alignas(64): over-aligned new trips a TSan (clang 14)
// allocator CHECK. 64 bytes either side keep other objects off the lines the
// counters are on.
struct RdmaCounters {
  using C = Counter;
  char pad_front[64] = {};
  C connections_created, connections_active, connections_rejected;
  C qps_created, qps_active;
  C tx_messages, tx_bytes, rx_messages, rx_bytes;  // msgr2 frames and stream bytes
  C tx_sends, rx_sends;                            // RDMA SENDs
  C credits_granted, credits_spent, credits_returned, credit_updates_sent;
  C credit_stalls, credit_stall_ns;
  C rnr_events;
  C wc_errors, wc_flushed, wc_retry_exceeded, wc_remote_access, wc_other_errors;
  C zero_copy_transfers, zero_copy_bytes, tx_copied_bytes;
  C rdma_reads, transfer_registrations;
  C transfer_windows;  // memory windows bound for zero-copy sends (connection-scoped rkeys)
  // Zero-copy sends whose data was in our own receive pool (sent on as
  // received, e.g. an echo): copied out of the pool first (queue_bulk).
  C zero_copy_pool_copies;
  C send_buffer_stalls;
  C srq_refusals;  // connections refused: their worker's SRQ was fully reserved
  // Connections faulted because the peer broke the credit protocol: a data
  // SEND without a credit, or more explicit updates than its update slots.
  C credit_violations;
  // SENDs whose header (or read_request descriptors) failed their CRC32C.
  C header_crc_errors;
  C transfer_timeouts;  // connections faulted by ms_async_rdma_transfer_timeout
  // The device went away (DEVICE_REMOVAL, or no longer listed) and the stack
  // released it; the device came back and the stack reopened it.
  C device_removals, device_reopens;
  C cq_polls, cq_polls_empty, cq_completions;  // poll_cq calls, those that found nothing, CQEs reaped
  C cq_events;                                 // completion-channel wakeups (the worker slept, then was woken)
  // The worker slept on an armed CQ, and its rescue poll (rdma_worker.cc,
  // kCqRescueInterval) found completions that raised no event: each is a
  // completion notification the device or driver lost.
  C cq_events_missed;
  C connection_faults;                         // connections faulted (not a clean close by the peer)
  char pad_back[64] = {};

  // Adds `o`'s values (o is read with relaxed loads; this must not be shared).
  RdmaCounters& operator+=(const RdmaCounters& o) noexcept;
  // name -> value, for logging and tests.
  std::map<std::string, std::uint64_t> snapshot() const;
};

}  // namespace siphon::rdma
