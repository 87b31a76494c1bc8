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

class FaultInjector {
 public:
  // splitmix64: turns (seed, stream) into a well-mixed state.
  static constexpr std::uint64_t mix(std::uint64_t x) noexcept {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }

  FaultInjector(const InjectOptions& opts, std::uint64_t seed, std::uint64_t stream,
                InjectionCounters* counters) noexcept
      : one_in_(opts.socket_failures),
        delay_probability_(opts.delay_probability),
        delay_max_(std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::duration<double>(opts.delay_max > 0 ? opts.delay_max : 0))),
        delays_on_(!opts.delay_type.empty() && opts.delay_probability > 0 && opts.delay_max > 0),
        corruption_probability_(opts.corruption_probability > 0 ? opts.corruption_probability : 0),
        state_(mix(seed ^ mix(stream)) | 1),
        counters_(counters) {}

  // Rolls for one socket operation; true means "fail it".
  bool socket_failure() noexcept {
    if (one_in_ == 0) return false;
    counters_->socket_ops.fetch_add(1, std::memory_order_relaxed);
    if (next() % one_in_ != 0) return false;
    counters_->socket_failures.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // How long to hold back the MESSAGE frame about to be delivered (zero: no delay).
  std::chrono::nanoseconds message_delay() noexcept {
    if (!delays_on_ || uniform() >= delay_probability_) return {};
    const auto d = std::chrono::nanoseconds(
        static_cast<std::int64_t>(uniform() * static_cast<double>(delay_max_.count())));
    counters_->delays.fetch_add(1, std::memory_order_relaxed);
    counters_->delay_ns.fetch_add(static_cast<std::uint64_t>(d.count()), std::memory_order_relaxed);
    return d;
  }

  // Rolls for one received buffer (`n` bytes just read, not yet decoded);
  // when it fires, flips one random bit of it. True when a bit was flipped.
  bool corrupt(std::byte* p, std::size_t n) noexcept {
    if (corruption_probability_ <= 0 || n == 0 || uniform() >= corruption_probability_) return false;
    const std::uint64_t bit = next() % (static_cast<std::uint64_t>(n) * 8);
    p[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    counters_->corruptions.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  bool enabled() const noexcept { return one_in_ != 0 || delays_on_ || corruption_probability_ > 0; }

 private:
  // xorshift64*: fast, and good enough to pick one operation in N.
  std::uint64_t next() noexcept {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  std::uint32_t one_in_;
  double delay_probability_;
  std::chrono::nanoseconds delay_max_;
  bool delays_on_;
  double corruption_probability_;
  std::uint64_t state_;
  InjectionCounters* counters_;
};

}  // namespace siphon::transport
