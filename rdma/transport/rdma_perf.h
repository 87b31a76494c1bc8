// The RDMA stack's perf loggers (docs/observability.md §Counters), which are
// the storage of its counters (counters.h):
//
//   Siphon::RDMAWorker-<n>  one per worker, n the worker's id in
//                           AsyncMessenger::Worker-<n>; the data path's
//                           counters, written only by that worker's thread.
//   Siphon::RDMAStack       one per stack (a second stack alive at the same
//                           time gets Ceph's "-0x<address>" suffix); the
//                           control path's counters (any thread, fetch_add)
//                           and the stack's gauges: pinned bytes, pool use,
//                           SRQ receives.
//
// Both are in siphon::perf::process_collection() from the stack's
// construction to its destruction. The call sites keep the shape they had
// with RdmaCounters (`worker_.counters().tx_bytes.add(n)`, `shared_.counters
// .qps_active.fetch_add(1, ...)`): each name below is a reference to one
// counter of one logger.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "msgr/perf/perf_counters.h"
#include "rdma/transport/counters.h"

namespace siphon::rdma {

enum RdmaWorkerPerfIdx : int {
  l_rdmaw_first = 95000,
#define SIPHON_COUNTER(n) l_rdmaw_##n,
  SIPHON_RDMA_DATA_COUNTERS(SIPHON_COUNTER)
  SIPHON_RDMA_DATA_TIMES(SIPHON_COUNTER)
#undef SIPHON_COUNTER
  l_rdmaw_last,
};

enum RdmaStackPerfIdx : int {
  l_rdmas_first = 95500,
#define SIPHON_COUNTER(n) l_rdmas_##n,
  SIPHON_RDMA_CONTROL_COUNTERS(SIPHON_COUNTER)
#undef SIPHON_COUNTER
  l_rdmas_pinned_bytes,
  l_rdmas_send_buffers_total,
  l_rdmas_send_buffers_in_use,
  l_rdmas_recv_buffers_total,
  l_rdmas_recv_buffers_in_use,
  l_rdmas_srq_posted,
  l_rdmas_srq_reserved,
  l_rdmas_last,
};

// One monotonic counter of a logger.
class PerfCounterRef {
 public:
  PerfCounterRef(perf::Logger& l, int idx) noexcept : l_(&l), idx_(idx) {}
  void add(std::uint64_t n = 1) noexcept { l_->inc(idx_, n); }
  void fetch_add(std::uint64_t n, std::memory_order = std::memory_order_relaxed) noexcept { l_->inc(idx_, n); }
  std::uint64_t load() const { return l_->get(idx_).u64; }

 private:
  perf::Logger* l_;
  int idx_;
};

// A time average (credit_stall_ns -> credit_stall_time): add(ns) is one
// sample; load() is the sum in ns, as the RdmaCounters field was.
class PerfTimeRef {
 public:
  PerfTimeRef(perf::Logger& l, int idx) noexcept : l_(&l), idx_(idx) {}
  void add(std::uint64_t ns) noexcept { l_->tinc(idx_, std::chrono::nanoseconds(ns)); }
  std::uint64_t load() const { return l_->get(idx_).u64; }

 private:
  perf::Logger* l_;
  int idx_;
};

// A level (connections_active, qps_active): its own atomic is the value
// (tests and RdmaStack rely on it with counters off too); the logger's gauge
// is set to it after each change, never incremented, so neither a
// `perf reset` nor updates skipped while `perf` was off can make it wrap.
class PerfGaugeRef {
 public:
  PerfGaugeRef(perf::Logger& l, int idx) noexcept : l_(&l), idx_(idx) {}
  void fetch_add(std::uint64_t n, std::memory_order = std::memory_order_relaxed) noexcept {
    l_->set(idx_, v_.fetch_add(n, std::memory_order_relaxed) + n);
  }
  void fetch_sub(std::uint64_t n, std::memory_order = std::memory_order_relaxed) noexcept {
    l_->set(idx_, v_.fetch_sub(n, std::memory_order_relaxed) - n);
  }
  std::uint64_t load() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
  perf::Logger* l_;
  int idx_;
};

// The control path's counters (RdmaShared::counters).
class RdmaStackCounters {
 public:
  RdmaStackCounters();
  ~RdmaStackCounters();
  RdmaStackCounters(const RdmaStackCounters&) = delete;
  RdmaStackCounters& operator=(const RdmaStackCounters&) = delete;

  perf::Logger& logger() noexcept { return *logger_; }
  // Sets the stack's gauges (any thread; stack start, connection setup and
  // teardown, RdmaStack::counters()).
  void set_gauges(std::uint64_t pinned, std::uint64_t send_total, std::uint64_t send_in_use,
                  std::uint64_t recv_total, std::uint64_t recv_in_use, std::uint64_t srq_posted,
                  std::uint64_t srq_reserved) noexcept;
  // Adds these counters' values into `sum`.
  void add_to(RdmaCounters& sum) const;

 private:
  std::shared_ptr<perf::Logger> logger_;

 public:
  PerfCounterRef connections_created{*logger_, l_rdmas_connections_created};
  PerfGaugeRef connections_active{*logger_, l_rdmas_connections_active};
  PerfCounterRef connections_rejected{*logger_, l_rdmas_connections_rejected};
  PerfCounterRef qps_created{*logger_, l_rdmas_qps_created};
  PerfGaugeRef qps_active{*logger_, l_rdmas_qps_active};
  PerfCounterRef srq_refusals{*logger_, l_rdmas_srq_refusals};
  PerfCounterRef transfer_timeouts{*logger_, l_rdmas_transfer_timeouts};
  PerfCounterRef device_removals{*logger_, l_rdmas_device_removals};
  PerfCounterRef device_reopens{*logger_, l_rdmas_device_reopens};
};

// A worker's data-path counters (RdmaWorker::counters()); `id` is the
// worker's AsyncMessenger::Worker id.
class RdmaWorkerCounters {
 public:
  explicit RdmaWorkerCounters(unsigned id);
  ~RdmaWorkerCounters();
  RdmaWorkerCounters(const RdmaWorkerCounters&) = delete;
  RdmaWorkerCounters& operator=(const RdmaWorkerCounters&) = delete;

  perf::Logger& logger() noexcept { return *logger_; }
  void add_to(RdmaCounters& sum) const;

 private:
  std::shared_ptr<perf::Logger> logger_;

 public:
#define SIPHON_COUNTER(n) PerfCounterRef n{*logger_, l_rdmaw_##n};
  SIPHON_RDMA_DATA_COUNTERS(SIPHON_COUNTER)
#undef SIPHON_COUNTER
#define SIPHON_COUNTER(n) PerfTimeRef n{*logger_, l_rdmaw_##n};
  SIPHON_RDMA_DATA_TIMES(SIPHON_COUNTER)
#undef SIPHON_COUNTER
};

}  // namespace siphon::rdma
