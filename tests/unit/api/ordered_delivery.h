// Exactly-once, in-order delivery checks shared by the volume tests
// (stress_test.cc over TCP, rdma_lossless_test.cc on the RDMA stack): a
// dispatcher that counts every message by its tid, a paced sender, and the
// one-way run both files make (a client messenger sends 1..count to a server
// messenger that checks them).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "messenger_pair.h"
#include "messenger_state.h"
#include "msgr_test_util.h"

namespace siphon::test {

// splitmix64: message shapes and contents derived from the index.
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Checks every message on the worker (fast dispatch): tids 1, 2, 3, ... each
// exactly once and in order, and each intact by `check` (empty: intact;
// otherwise what differs).
class OrderVerifier : public Dispatcher {
 public:
  using Check = std::function<std::string(const Message&)>;
  explicit OrderVerifier(Check check = nullptr) : check_(std::move(check)) {}

  bool ms_can_fast_dispatch(const Message&) const override { return true; }
  void ms_fast_dispatch(MessageRef m) override {
    const std::uint64_t i = m->get_tid();
    const std::string err = check_ ? check_(*m) : std::string();
    std::lock_guard l(w.mu);
    if (i != next_) {
      if (i < next_)
        ++duplicates;
      else
        ++gaps;
      if (first_error.empty()) first_error = "expected tid " + std::to_string(next_) + ", got " + std::to_string(i);
    }
    if (!err.empty()) {
      ++corrupt;
      if (first_error.empty()) first_error = err;
    }
    next_ = i + 1;
    ++received;
    bytes += m->data().length();
    if (received % 1000 == 0 || received == target) w.notify();
  }
  bool ms_dispatch(MessageRef) override { return false; }

  // Called before sending message i: waits (up to `timeout`) while more than
  // `window` messages are in flight, so the sender's queue and memory stay
  // bounded.
  void pace(std::uint64_t i, std::chrono::seconds timeout, std::uint64_t window = 2000) {
    if (i > window && (i % 500) == 1) {
      std::unique_lock l(w.mu);
      w.cv.wait_for(l, timeout, [&] { return received + window >= i; });
    }
  }
  bool wait_all(std::uint64_t count, std::chrono::seconds timeout) {
    return w.wait_for([&] { return received >= count; }, timeout);
  }
  // All `count` arrived (`done`: wait_all's answer), once, in order, intact.
  void expect_all(std::uint64_t count, bool done) {
    std::lock_guard l(w.mu);
    EXPECT_TRUE(done) << "received " << received << " of " << count;
    EXPECT_EQ(received, count);
    EXPECT_EQ(duplicates, 0u);
    EXPECT_EQ(gaps, 0u);
    EXPECT_EQ(corrupt, 0u);
    EXPECT_TRUE(first_error.empty()) << first_error;
  }

  Waiter w;
  std::uint64_t target = 0;
  std::uint64_t received = 0, duplicates = 0, gaps = 0, corrupt = 0, bytes = 0;
  std::string first_error;

 private:
  Check check_;
  std::uint64_t next_ = 1;
};

// A server messenger (osd.0, policy `sp` for clients) and a client messenger
// (client.7, policy `cp` for osds), each on its own stack: the client sends
// make(1) .. make(count), paced by `v` (`pace` per window), to the server,
// which checks them with `v`; expects them all within `finish`. Leaves both
// messengers running in `run` for the caller's stats.
inline void send_one_way(MessengerPair& run, std::shared_ptr<transport::Stack> server_stack,
                         std::shared_ptr<transport::Stack> client_stack, const MessengerOptions& o,
                         const Policy& sp, const Policy& cp, OrderVerifier& v, std::uint64_t count,
                         const std::function<MessageRef(std::uint64_t)>& make, std::chrono::seconds pace,
                         std::chrono::seconds finish) {
  run.server = Messenger::create(std::move(server_stack), {entity_type::osd, 0}, o);
  run.client = Messenger::create(std::move(client_stack), {entity_type::client, 7}, o);
  run.server->set_policy(entity_type::client, sp);
  run.client->set_policy(entity_type::osd, cp);
  v.target = count;
  run.server->add_dispatcher_tail(&v);
  ASSERT_FALSE(run.server->bind(loopback_any_port()));
  run.server->start();
  run.client->start();
  ConnectionRef con = run.client->connect_to(entity_type::osd, run.server->get_myaddrs());
  for (std::uint64_t i = 1; i <= count; ++i) {
    v.pace(i, pace);
    ASSERT_FALSE(con->send_message(make(i)));
  }
  const bool done = v.wait_all(count, finish);
  if (!done) {
    print_messenger_state("client", *run.client);
    print_messenger_state("server", *run.server);
  }
  v.expect_all(count, done);
}

}  // namespace siphon::test
