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

#include <time.h>

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
  // Siphon extensions (TCP stack, MSG_ZEROCOPY; docs/observability.md).
  l_msgr_tcp_zerocopy_sends,
  l_msgr_tcp_zerocopy_bytes,
  l_msgr_tcp_zerocopy_copied,
  l_msgr_tcp_zerocopy_fallbacks,
  l_msgr_tcp_zerocopy_disabled,
  l_msgr_tcp_zerocopy_held_bytes,
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

  // The monotonic clock read directly (steady_clock is CLOCK_MONOTONIC on
  // Linux; calling clock_gettime ourselves skips libstdc++'s out-of-line
  // wrapper, a measurable share of the counters' cost per message).
  static Clock::time_point read_clock() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
  }

  // now() while counters are compiled in and on, a zero time point otherwise
  // (so a build or a process with counters off reads no clock). Callers
  // treat a zero time point as "not stamped".
  static Clock::time_point now() noexcept {
    if constexpr (perf::kCompiledIn) {
      if (perf::enabled()) return read_clock();
    }
    return {};
  }

  // msgr_send_messages_queue_lat is sampled: every kQueueLatSampleEvery-th
  // message a thread sends is stamped, the others carry a zero stamp and are
  // not measured. The average (sum / avgcount) is that of the samples; its
  // avgcount counts samples, not messages (msgr_send_messages counts those).
  // Stamping every message cost two clock reads per message (~30 ns each on
  // this project's VM), the largest part of what the counters cost a
  // 64-byte message (docs/performance.md, "What the counters cost").
  static constexpr unsigned kQueueLatSampleEvery = 8;
  static Clock::time_point queue_stamp() noexcept {
    if constexpr (perf::kCompiledIn) {
      thread_local unsigned tick = 0;
      if (++tick % kQueueLatSampleEvery == 0) return now();
    }
    return {};
  }

  // Times one section of the worker's work into `idx` and into
  // msgr_running_total_time. Only the outermost section of a nesting is
  // timed: a send flushed while a read is handled (a reply from
  // ms_fast_dispatch) counts as receive time, and a write completion inside
  // a flush as that flush's. So every busy nanosecond is counted once, in
  // the category of the event the worker was handling, send + receive time
  // equals the total, and a nested section reads no clock (two clock reads
  // per message saved on an echo's reply path). Worker thread only.
  class Section {
   public:
    Section(WorkerPerf& p, int idx) noexcept : p_(p), idx_(idx) {
      if constexpr (perf::kCompiledIn) {
        if (p_.depth_++ == 0) t0_ = now();
      }
    }
    ~Section() {
      if constexpr (perf::kCompiledIn) {
        // Not timed when nested or when counters were off at the start
        // (t0_ is zero).
        if (t0_ != Clock::time_point{}) {
          const Clock::duration d = read_clock() - t0_;
          p_.tinc(idx_, d);
          p_.tinc(l_msgr_running_total_time, d);
        }
        --p_.depth_;
      }
    }
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;
    // When the section began (a zero time point when nested or when
    // counters are off).
    Clock::time_point start() const noexcept { return t0_; }

   private:
    WorkerPerf& p_;
    int idx_;
    Clock::time_point t0_{};
  };

 private:
  unsigned id_;
  int depth_ = 0;  // nesting of Sections (worker thread only)
  std::shared_ptr<perf::Logger> logger_;
};

}  // namespace siphon::transport
