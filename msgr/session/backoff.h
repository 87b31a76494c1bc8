// Reconnect backoff (Ceph's rule, msgr2-wire.md §8.2/§12): a fault of an
// established session reconnects at once; a failed attempt waits
// ms_initial_backoff, doubling per further failure up to ms_max_backoff; a
// WAIT reply waits ms_max_backoff. A session that reaches READY starts over.
#pragma once

#include <algorithm>
#include <chrono>

namespace siphon::session {

class ReconnectBackoff {
 public:
  enum class Cause { fault_when_ready, attempt_failed, peer_said_wait };

  ReconnectBackoff(std::chrono::nanoseconds initial, std::chrono::nanoseconds max) noexcept
      : initial_(initial), max_(max) {}

  // The delay before the next attempt.
  std::chrono::nanoseconds next(Cause c) noexcept {
    switch (c) {
      case Cause::fault_when_ready: current_ = std::chrono::nanoseconds{0}; break;
      case Cause::attempt_failed:
        current_ = current_.count() == 0 ? initial_ : std::min(current_ * 2, max_);
        break;
      case Cause::peer_said_wait: current_ = max_; break;
    }
    return current_;
  }
  void reset() noexcept { current_ = std::chrono::nanoseconds{0}; }
  std::chrono::nanoseconds current() const noexcept { return current_; }

 private:
  std::chrono::nanoseconds initial_;
  std::chrono::nanoseconds max_;
  std::chrono::nanoseconds current_{0};
};

}  // namespace siphon::session
