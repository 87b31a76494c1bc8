// Time sources. Code that needs "now" for timeouts takes a Clock so tests can
// drive time explicitly; the default is the monotonic clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace siphon {

using MonoClock = std::chrono::steady_clock;
using Duration = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual MonoClock::time_point now() const noexcept = 0;
};

class SystemClock final : public Clock {
 public:
  MonoClock::time_point now() const noexcept override { return MonoClock::now(); }
  static const SystemClock& instance() noexcept {
    static const SystemClock clock;
    return clock;
  }
};

// A clock that moves only when told to (tests).
class ManualClock final : public Clock {
 public:
  MonoClock::time_point now() const noexcept override { return now_; }
  void advance(Duration d) noexcept { now_ += d; }

 private:
  MonoClock::time_point now_{};
};

// Wall-clock time as Ceph's utime_t (seconds and nanoseconds since the epoch).
struct UTime {
  std::uint32_t sec = 0;
  std::uint32_t nsec = 0;
  static UTime now() noexcept {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
    return {static_cast<std::uint32_t>(ns / 1000000000), static_cast<std::uint32_t>(ns % 1000000000)};
  }
  friend bool operator==(const UTime&, const UTime&) = default;
};

}  // namespace siphon
