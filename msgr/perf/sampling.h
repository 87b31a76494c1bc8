// Sampled time counters. A counter that would need a clock read per message
// (~30-40 ns each on this project's VM, as much as a hundred simple
// instructions) times a random sample of the events instead and counts each
// sampled duration `every` times, so its sum is right in expectation.
// Random, not every n-th event: a workload whose kinds of message alternate
// with a period that divides n must not be sampled on one kind only.
// docs/observability.md says which counters are sampled; docs/performance.md
// ("Perf counters: overhead") measures what it saves.
#pragma once

#include <cstdint>

#include "msgr/perf/compiled.h"
#include "msgr/perf/perf_counters.h"

namespace siphon::perf {

// msgr_running_fast_dispatch_time: one fast dispatch in 8 is timed (one
// clock read at its end; the message's receive stamp, read anyway, is its
// start) and counted 8 times. Over a short window the estimate may exceed
// msgr_running_recv_time, which contains the dispatches.
inline constexpr unsigned kFastDispatchSampleEvery = 8;

// True for about one call in `Every` on each thread, chosen by a per-thread
// xorshift32 generator; false when counters are compiled out or off
// (perf::enabled()). The state is constant-initialised: no TLS guard on the
// hot path.
template <unsigned Every>
inline bool sample_at_random() noexcept {
  static_assert(Every >= 1);
  if constexpr (kCompiledIn) {
    thread_local std::uint32_t x = 2463534242u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x < UINT32_MAX / Every && enabled();
  }
  return false;
}

}  // namespace siphon::perf
