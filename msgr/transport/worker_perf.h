// WorkerPerf: a transport worker's `AsyncMessenger::Worker-<n>` logger with
// Ceph's 12 messenger counters under Ceph's names, types and descriptions
// (docs/observability.md §Counters). Written only on the worker's own thread
// (one writer: Logger's relaxed load/store, no locked RMW, its own cache
// lines), read by dumps from anywhere.
//
// Worker ids are unique in the process (the lowest id not in use), so two
// stacks alive at once have Worker-0..2 and Worker-3..5, and a stack built
// after another one went away starts at 0 again, as a Ceph daemon's do.
// The logger is in siphon::perf::process_collection() from construction to
// destruction of the worker.
//
// The timing helpers read the monotonic clock once at each end of a section,
// and only while counters are on: with `perf = false` (perf::enabled()) or
// SIPHON_PERF_COUNTERS=OFF they read no clock and update nothing, so turning
// counters off at run time costs one relaxed load per section.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "msgr/perf/compiled.h"
#include "msgr/perf/perf_counters.h"

namespace siphon::transport {

enum WorkerCounter : int {
  l_msgr_first = 94000,  // Ceph's l_msgr_first
  l_msgr_recv_messages,
  l_msgr_send_messages,
  l_msgr_recv_bytes,
  l_msgr_send_bytes,
  l_msgr_created_connections,
  l_msgr_active_connections,
  l_msgr_running_total_time,
  l_msgr_running_send_time,
  l_msgr_running_recv_time,
  l_msgr_running_fast_dispatch_time,
  l_msgr_send_messages_queue_lat,
  l_msgr_handle_ack_lat,
  l_msgr_last,
};

class WorkerPerf {
 public:
  using Clock = std::chrono::steady_clock;

  WorkerPerf();
  ~WorkerPerf();
  WorkerPerf(const WorkerPerf&) = delete;
  WorkerPerf& operator=(const WorkerPerf&) = delete;

  // The process-unique id n of `AsyncMessenger::Worker-<n>`.
  unsigned id() const noexcept { return id_; }
  perf::Logger& logger() noexcept { return *logger_; }
  const std::shared_ptr<perf::Logger>& logger_ref() const noexcept { return logger_; }

  void inc(int idx, std::uint64_t v = 1) noexcept {
    if constexpr (perf::kCompiledIn) logger_->inc(idx, v);
  }
  void set(int idx, std::uint64_t v) noexcept {
    if constexpr (perf::kCompiledIn) logger_->set(idx, v);
  }
  void tinc(int idx, Clock::duration d) noexcept {
    if constexpr (perf::kCompiledIn) logger_->tinc(idx, std::chrono::duration_cast<std::chrono::nanoseconds>(d));
  }

  // now() while counters are compiled in and on, a zero time point otherwise
  // (so a build or a process with counters off reads no clock). Callers
  // treat a zero time point as "not stamped".
  static Clock::time_point now() noexcept {
    if constexpr (perf::kCompiledIn) {
      if (perf::enabled()) return Clock::now();
    }
    return {};
  }

  // Times one section of the worker's work into `idx` and, unless it runs
  // inside another timed section (a send flush inside a read handler), into
  // msgr_running_total_time too, so the total counts every busy nanosecond
  // once. Worker thread only.
  class Section {
   public:
    Section(WorkerPerf& p, int idx) noexcept : p_(p), idx_(idx) {
      if constexpr (perf::kCompiledIn) {
        outer_ = p_.depth_++ == 0;
        t0_ = now();
      }
    }
    ~Section() {
      if constexpr (perf::kCompiledIn) {
        // Not timed when counters were off at the start (t0_ is zero).
        if (t0_ != Clock::time_point{}) {
          const Clock::duration d = Clock::now() - t0_;
          p_.tinc(idx_, d);
          if (outer_) p_.tinc(l_msgr_running_total_time, d);
        }
        --p_.depth_;
      }
    }
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;
    // When the section began (a zero time point when counters are off).
    Clock::time_point start() const noexcept { return t0_; }

   private:
    WorkerPerf& p_;
    int idx_;
    bool outer_ = false;
    Clock::time_point t0_{};
  };

 private:
  unsigned id_;
  int depth_ = 0;  // nesting of Sections (worker thread only)
  std::shared_ptr<perf::Logger> logger_;
};

}  // namespace siphon::transport
