// Seeded fault injection for the transport stacks (Ceph's ms_inject_*).
//
// Each connection owns a FaultInjector whose pseudo-random stream is derived
// from the stack's seed and the connection's serial number, so a given seed
// reproduces the same decisions. Counters are shared by the whole stack.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "msgr/transport/options.h"

namespace siphon::transport {

// What the injector did, summed over a stack's connections. Plain atomics,
// readable from any thread; only updated while injection is enabled.
struct InjectionCounters {
  std::atomic<std::uint64_t> socket_ops{0};       // socket operations rolled for
  std::atomic<std::uint64_t> socket_failures{0};  // of which failed
  std::atomic<std::uint64_t> delays{0};           // MESSAGE frames held back
  std::atomic<std::uint64_t> delay_ns{0};         // total time held back
  std::atomic<std::uint64_t> corruptions{0};      // received bits flipped
};

// The ms_inject_* settings a stack's connections read at every decision, so
// that `config set` (compat/admin.cc) changes them while the stack runs (the
// seed cannot change: each connection's stream is drawn from it when the
// connection starts). Relaxed atomics: a decision that races a change sees
// the old or the new value, and either is right.
struct LiveInjection {
  explicit LiveInjection(const InjectOptions& o) noexcept
      : socket_failures(o.socket_failures),
        delay_typed(!o.delay_type.empty()),
        delay_max(o.delay_max),
        delay_probability(o.delay_probability),
        corruption_probability(o.corruption_probability) {}
  std::atomic<std::uint32_t> socket_failures;
  std::atomic<bool> delay_typed;  // ms_inject_delay_type is not empty
  std::atomic<double> delay_max;  // seconds
  std::atomic<double> delay_probability;
  std::atomic<double> corruption_probability;
};

// Every running stack's LiveInjection, for `config set ms_inject_*`. A TCP
// stack registers its own for its lifetime (the registry holds weak
// references). Like Ceph's process-wide configuration, a change applies to
// every stack of the process.
void register_live_injection(const std::shared_ptr<LiveInjection>& live);
// Takes `live` out of the registry (the stack is destroyed; its connections
// may still hold the settings a little longer, in handlers being drained).
void unregister_live_injection(const LiveInjection* live);
// Calls `change` on every registered stack's settings that is still alive;
// returns how many.
std::size_t for_each_live_injection(const std::function<void(LiveInjection&)>& change);

class FaultInjector {
 public:
  // splitmix64: turns (seed, stream) into a well-mixed state.
  static constexpr std::uint64_t mix(std::uint64_t x) noexcept {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }

  // With settings of its own, fixed at `opts`.
  FaultInjector(const InjectOptions& opts, std::uint64_t seed, std::uint64_t stream,
                InjectionCounters* counters)
      : own_(std::make_unique<LiveInjection>(opts)), live_(own_.get()),
        state_(mix(seed ^ mix(stream)) | 1), counters_(counters) {}
  // Reading the stack's settings at each decision (`live` outlives it).
  FaultInjector(const LiveInjection* live, std::uint64_t seed, std::uint64_t stream,
                InjectionCounters* counters) noexcept
      : live_(live), state_(mix(seed ^ mix(stream)) | 1), counters_(counters) {}

  // Rolls for one socket operation; true means "fail it".
  bool socket_failure() noexcept {
    const std::uint32_t one_in = live_->socket_failures.load(std::memory_order_relaxed);
    if (one_in == 0) return false;
    counters_->socket_ops.fetch_add(1, std::memory_order_relaxed);
    if (next() % one_in != 0) return false;
    counters_->socket_failures.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // How long to hold back the MESSAGE frame about to be delivered (zero: no delay).
  std::chrono::nanoseconds message_delay() noexcept {
    if (!delays_on()) return {};
    if (uniform() >= live_->delay_probability.load(std::memory_order_relaxed)) return {};
    const auto max = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(live_->delay_max.load(std::memory_order_relaxed)));
    const auto d = std::chrono::nanoseconds(static_cast<std::int64_t>(uniform() * static_cast<double>(max.count())));
    counters_->delays.fetch_add(1, std::memory_order_relaxed);
    counters_->delay_ns.fetch_add(static_cast<std::uint64_t>(d.count()), std::memory_order_relaxed);
    return d;
  }

  // Rolls for one received buffer (`n` bytes just read, not yet decoded);
  // when it fires, flips one random bit of it. True when a bit was flipped.
  bool corrupt(std::byte* p, std::size_t n) noexcept {
    const double probability = live_->corruption_probability.load(std::memory_order_relaxed);
    if (probability <= 0 || n == 0 || uniform() >= probability) return false;
    const std::uint64_t bit = next() % (static_cast<std::uint64_t>(n) * 8);
    p[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    counters_->corruptions.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  bool enabled() const noexcept {
    return live_->socket_failures.load(std::memory_order_relaxed) != 0 || delays_on() ||
           live_->corruption_probability.load(std::memory_order_relaxed) > 0;
  }

 private:
  bool delays_on() const noexcept {
    return live_->delay_typed.load(std::memory_order_relaxed) &&
           live_->delay_probability.load(std::memory_order_relaxed) > 0 &&
           live_->delay_max.load(std::memory_order_relaxed) > 0;
  }
  // xorshift64*: fast, and good enough to pick one operation in N.
  std::uint64_t next() noexcept {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  std::unique_ptr<LiveInjection> own_;  // the first constructor's settings
  const LiveInjection* live_;
  std::uint64_t state_;
  InjectionCounters* counters_;
};

}  // namespace siphon::transport
