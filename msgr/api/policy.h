// Connection policies (Ceph's Messenger::Policy) and the throttles they carry.
//
// A messenger holds one Policy per peer entity type plus a default. The
// policy of a connection is fixed when the connection is created: for an
// outgoing connection from the peer type given to connect_to(), for an
// accepted one from the entity type in the peer's HELLO.
//
//   lossy       on any fault the session ends: nothing is replayed, the
//               connection is dead and ms_handle_reset() is called. Otherwise
//               (lossless) unacknowledged messages are replayed, exactly once
//               and in order, on a new TCP connection (SESSION_RECONNECT).
//   server      we never initiate a connection to this peer; after a fault we
//               wait for the peer to reconnect.
//   standby     after a fault with nothing to send, do not reconnect until
//               there is something to send.
//   resetcheck  detect a peer restart (a new client_cookie / SESSION_RESET)
//               and report it with ms_handle_remote_reset().
//   features_supported / features_required
//               the CEPH_FEATURE_* mask we advertise and the one we demand
//               from the peer (a peer missing required bits gets
//               IDENT_MISSING_FEATURES).
//   throttler_messages / throttler_bytes
//               shared budgets for messages received from peers under this
//               policy and not yet released by the application (a message
//               releases its share when its last MessageRef goes away). When
//               a budget is exhausted the connection stops reading until
//               budget is returned.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace siphon {

// CEPH_FEATURES_ALL as a Pacific 16.2.15 daemon advertises it
// (msgr2-wire.md §11) and CEPH_FEATURE_MSG_ADDR2 (bit 59), which every msgr2
// peer must support.
inline constexpr std::uint64_t kFeaturesAllPacific = 0x3f01cfbdfffdffffull;
inline constexpr std::uint64_t kFeatureMsgAddr2 = 1ull << 59;

// A counting budget shared by the connections of one policy. Thread-safe.
class Throttle {
 public:
  Throttle(std::string name, std::uint64_t max) : name_(std::move(name)), max_(max) {}
  Throttle(const Throttle&) = delete;
  Throttle& operator=(const Throttle&) = delete;
  const std::string& name() const noexcept { return name_; }
  std::uint64_t max() const noexcept { return max_; }
  // Units currently taken.
  std::uint64_t current() const noexcept { return current_.load(std::memory_order_acquire); }
  // The largest value current() has had (a test and observability aid).
  std::uint64_t peak() const noexcept { return peak_.load(std::memory_order_relaxed); }

  // Takes `n` units if that keeps current() <= max() (or if nothing is taken:
  // a single item larger than the whole budget still passes when alone).
  bool try_take(std::uint64_t n) noexcept;
  // Takes `n` units unconditionally (the items are already in hand);
  // returns false when that leaves the budget exceeded (the caller then stops
  // taking more until full() is false again).
  bool take(std::uint64_t n) noexcept;
  // Returns `n` units.
  void put(std::uint64_t n) noexcept;
  // No room left: current() >= max().
  bool full() const noexcept { return current() >= max_; }

 private:
  std::string name_;
  std::uint64_t max_;
  std::atomic<std::uint64_t> current_{0};
  std::atomic<std::uint64_t> peak_{0};
};

struct Policy {
  bool lossy = false;
  bool server = false;
  bool standby = false;
  bool resetcheck = true;
  // A server keeps lossy clients in its connection table (Ceph's
  // register_lossy_clients); stateless_server() does not.
  bool register_lossy_clients = true;
  std::uint64_t features_supported = kFeaturesAllPacific;
  std::uint64_t features_required = 0;
  std::shared_ptr<Throttle> throttler_messages;  // null: unlimited
  std::shared_ptr<Throttle> throttler_bytes;     // null: unlimited

  // Ceph's named policies.
  static Policy stateful_server(std::uint64_t req = 0) { return make(false, true, true, true, req); }
  static Policy stateless_registered_server(std::uint64_t req = 0) {
    return make(true, true, false, false, req);
  }
  static Policy stateless_server(std::uint64_t req = 0) {
    Policy p = make(true, true, false, false, req);
    p.register_lossy_clients = false;
    return p;
  }
  static Policy lossless_peer(std::uint64_t req = 0) { return make(false, false, true, false, req); }
  static Policy lossless_peer_reuse(std::uint64_t req = 0) { return make(false, false, true, true, req); }
  static Policy lossy_client(std::uint64_t req = 0) { return make(true, false, false, false, req); }
  static Policy lossless_client(std::uint64_t req = 0) { return make(false, false, false, true, req); }

 private:
  static Policy make(bool lossy, bool server, bool standby, bool resetcheck, std::uint64_t req) {
    Policy p;
    p.lossy = lossy;
    p.server = server;
    p.standby = standby;
    p.resetcheck = resetcheck;
    p.features_required = req;
    return p;
  }
};

}  // namespace siphon
