// Helpers for messenger tests over TCP loopback: a messenger on its own
// stack bound to 127.0.0.1 (ephemeral port), a recording dispatcher, and
// waits on conditions with deadlines (no sleeps).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "msgr/api/messenger.h"
#include "msgr/base/log.h"
#include "msgr/transport/tcp_stack.h"
#if defined(SIPHON_TEST_RDMA) || defined(SIPHON_TEST_STACK_FROM_ENV)
#define SIPHON_TEST_HAS_RDMA 1
#include <cstdio>
#include <cstdlib>

#include "rdma/soft/soft_provider.h"
#include "rdma/transport/rdma_stack.h"
#include "rdma/verbs/verbs_provider.h"
#endif

namespace siphon::test {

// The messenger's options in tests: fast reconnects.
inline MessengerOptions test_options() {
  MessengerOptions o;
  o.ms_initial_backoff = std::chrono::milliseconds(5);
  o.ms_max_backoff = std::chrono::milliseconds(100);
  return o;
}

// The options of the stack under test (TCP's; the RDMA builds take their
// `common` part): `threads` workers, listening on any free port.
inline transport::TcpOptions test_stack_options(unsigned threads = 1) {
  transport::TcpOptions t;
  t.common.async_op_threads = threads;
  t.bind_port_min = 0;  // any free port
  t.bind_port_max = 0;
  return t;
}

enum class TestStack { posix, rdma, rdma_srq };

// The stack the tests of this binary run on. A source with stack-specific
// code is built once per stack: plain (TCP), SIPHON_TEST_RDMA (the *_rdma
// binaries) and SIPHON_TEST_RDMA_SRQ. A source without any is built once
// with SIPHON_TEST_STACK_FROM_ENV, and ctest runs that one binary per stack
// with SIPHON_TEST_STACK set (siphon_gtest_stacks() in tests/CMakeLists.txt):
// unset or "posix", "rdma", "rdma-srq". Anything else stops the binary with
// exit status 2 and a sentence naming the accepted values.
inline TestStack test_stack() {
#if defined(SIPHON_TEST_STACK_FROM_ENV)
  static const TestStack chosen = [] {
    const char* v = std::getenv("SIPHON_TEST_STACK");
    const std::string_view s = v != nullptr ? v : "posix";
    if (s == "posix") return TestStack::posix;
    if (s == "rdma") return TestStack::rdma;
    if (s == "rdma-srq") return TestStack::rdma_srq;
    std::fprintf(stderr, "SIPHON_TEST_STACK='%s': use posix (or leave it unset), rdma or rdma-srq\n", v);
    std::exit(2);
  }();
  return chosen;
#elif defined(SIPHON_TEST_RDMA_SRQ)
  return TestStack::rdma_srq;
#elif defined(SIPHON_TEST_RDMA)
  return TestStack::rdma;
#else
  return TestStack::posix;
#endif
}

// 127.0.0.1, or inside the rxe guest the address of the Soft-RoCE interface
// (rdma-cm does not work over rxe on lo).
inline EntityAddrVec loopback_any_port() {
  std::string host = "127.0.0.1";
#ifdef SIPHON_TEST_HAS_RDMA
  if (const char* a = std::getenv("SIPHON_RXE_ADDR"); a != nullptr && test_stack() != TestStack::posix) host = a;
#endif
  return EntityAddrVec(EntityAddr(AddrType::msgr2, NetAddress::parse(host + ":0").value()));
}

// The stack under test: TCP, or the RDMA stack on the software fabric (per-QP
// receives or SRQ mode), so the one suite checks that the session layer
// cannot tell the stacks apart.
inline std::shared_ptr<transport::Stack> make_test_stack(const transport::TcpOptions& o = test_stack_options()) {
#ifdef SIPHON_TEST_HAS_RDMA
  if (test_stack() == TestStack::posix) return transport::make_tcp_stack(o);
  // The software fabric, or the verbs provider on rxe0 inside the rxe guest.
  const char* rxe = std::getenv("SIPHON_RXE_DEV");
  static const std::unique_ptr<rdma::Provider> provider =
      rxe != nullptr ? rdma::verbs::make_provider() : rdma::soft::make_provider();
  rdma::RdmaOptions r;
  r.common = o.common;
  r.device_name = rxe != nullptr ? rxe : "soft0";
  r.buffer_size = 16 * 1024;
  r.credits = 8;
  r.receive_buffers = 8192;
  r.polling = std::chrono::microseconds(50);
  if (test_stack() == TestStack::rdma_srq) {
    // SRQ mode (messenger_test_rdma_srq): one 512-receive SRQ per worker,
    // room for 51 connections of 8 credits + 2 update slots on each.
    r.support_srq = true;
    r.receive_queue_len = 512;
  }
  return std::make_shared<rdma::RdmaStack>(*provider, r);
#else
  return transport::make_tcp_stack(o);
#endif
}

// Whether `s` is the stack this binary was asked to test (its type, and for
// RDMA whether SRQ mode is on): the tests of a binary run once per stack
// guard with it that ctest's SIPHON_TEST_STACK reached them, so a
// registration that lost it fails instead of testing TCP twice.
inline ::testing::AssertionResult is_the_stack_under_test(const transport::Stack& s) {
  const TestStack want = test_stack();
  const std::string_view want_type = want == TestStack::posix ? "async+posix" : "async+rdma";
  if (s.type() != want_type)
    return ::testing::AssertionFailure() << "the stack is " << s.type() << ", the binary was asked for " << want_type;
#ifdef SIPHON_TEST_HAS_RDMA
  if (want != TestStack::posix) {
    const bool srq = static_cast<const rdma::RdmaStack&>(s).options().support_srq;
    if (srq != (want == TestStack::rdma_srq))
      return ::testing::AssertionFailure() << "SRQ mode is " << (srq ? "on" : "off") << ", the binary was asked for "
                                           << (want == TestStack::rdma_srq ? "rdma-srq" : "rdma");
  }
#endif
  return ::testing::AssertionSuccess();
}

// A messenger with options `o` on its own stack under test, built with `t`.
inline std::unique_ptr<Messenger> make_messenger(entity_name_t name, const MessengerOptions& o,
                                                 const transport::TcpOptions& t,
                                                 std::optional<std::uint32_t> nonce = std::nullopt) {
  return Messenger::create(make_test_stack(t), name, o, nonce);
}

// The same on a one-worker stack with the test defaults.
inline std::unique_ptr<Messenger> make_messenger(entity_name_t name, const MessengerOptions& o,
                                                 std::optional<std::uint32_t> nonce = std::nullopt) {
  return make_messenger(name, o, test_stack_options(), nonce);
}

// Starts `server` (bound to loopback, any port) dispatching to `sd`, and
// `client` dispatching to `cd`.
inline void start_pair(Messenger& server, Dispatcher& sd, Messenger& client, Dispatcher& cd) {
  server.add_dispatcher_tail(&sd);
  client.add_dispatcher_tail(&cd);
  ASSERT_FALSE(server.bind(loopback_any_port()));
  server.start();
  client.start();
}

// Turns the given subsystems' logs off while it lives (runs that fault
// hundreds of times keep the log short), back to the default level after.
class QuietLogs {
 public:
  QuietLogs(std::initializer_list<log::Subsys> subsystems) : subsystems_(subsystems) {
    for (const auto s : subsystems_) log::set_level(s, 0);
  }
  ~QuietLogs() {
    for (const auto s : subsystems_) log::set_level(s, log::kDefaultLevel);
  }
  QuietLogs(const QuietLogs&) = delete;
  QuietLogs& operator=(const QuietLogs&) = delete;

 private:
  std::vector<log::Subsys> subsystems_;
};

// Waits for `pred` (checked under `mu`) with a deadline.
class Waiter {
 public:
  template <typename Pred>
  bool wait_for(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock l(mu);
    return cv.wait_for(l, timeout, pred);
  }
  void notify() { cv.notify_all(); }
  std::mutex mu;
  std::condition_variable cv;
};

// Polls `pred` every millisecond until it holds or the deadline passes (for
// state that has no notification of its own).
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Records events and hands messages to an optional callback.
class RecordingDispatcher : public Dispatcher {
 public:
  bool ms_dispatch(MessageRef m) override {
    {
      std::lock_guard l(w.mu);
      if (on_message) on_message(m);
      ++messages;
    }
    w.notify();
    return true;
  }
  void ms_handle_connect(ConnectionRef c) override { bump(connects, c); }
  void ms_handle_accept(ConnectionRef c) override { bump(accepts, c); }
  bool ms_handle_reset(ConnectionRef c) override {
    bump(resets, c);
    return true;
  }
  void ms_handle_remote_reset(ConnectionRef c) override { bump(remote_resets, c); }
  bool ms_handle_refused(ConnectionRef c) override {
    bump(refused, c);
    return true;
  }

  Waiter w;
  std::function<void(const MessageRef&)> on_message;  // called under w.mu
  std::uint64_t messages = 0;
  int connects = 0, accepts = 0, resets = 0, remote_resets = 0, refused = 0;
  ConnectionRef last_con;

  // The counters read under the lock: for a check made while the messengers
  // still run (a dispatch thread may bump one at any moment, e.g. the reset
  // of a connection that the test's end closes).
  struct Counts {
    std::uint64_t messages;
    int connects, accepts, resets, remote_resets, refused;
  };
  Counts counts() {
    std::lock_guard l(w.mu);
    return {messages, connects, accepts, resets, remote_resets, refused};
  }

 private:
  void bump(int& n, const ConnectionRef& c) {
    {
      std::lock_guard l(w.mu);
      ++n;
      last_con = c;
    }
    w.notify();
  }
};

// Collects log lines (thread-safe) while it lives. Workers may log at any
// moment, so the sink and the destructor synchronise on one global mutex.
class LogCapture {
 public:
  LogCapture() {
    std::lock_guard l(global_mu());
    instance() = this;
    log::set_sink(&LogCapture::sink);
  }
  ~LogCapture() {
    std::lock_guard l(global_mu());
    log::set_sink(nullptr);
    instance() = nullptr;
  }
  bool contains(const std::string& needle) {
    std::lock_guard l(global_mu());
    for (const auto& s : lines_)
      if (s.find(needle) != std::string::npos) return true;
    return false;
  }
  std::vector<std::string> lines() {
    std::lock_guard l(global_mu());
    return lines_;
  }

 private:
  static std::mutex& global_mu() {
    static std::mutex m;
    return m;
  }
  static LogCapture*& instance() {
    static LogCapture* p = nullptr;
    return p;
  }
  static void sink(log::Subsys, int, std::string_view line) noexcept {
    std::lock_guard l(global_mu());
    if (LogCapture* c = instance()) c->lines_.emplace_back(line);
  }
  std::vector<std::string> lines_;
};

}  // namespace siphon::test
