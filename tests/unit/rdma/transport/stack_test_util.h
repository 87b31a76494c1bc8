// Helpers for the RDMA stack tests on the software fabric: a handler that
// records what a connection delivers, a queue of accepted connections,
// connected pairs of connections and deterministic frame contents.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/transport/rdma_stack.h"

namespace siphon::rdma::test {

using namespace std::chrono_literals;

// Collects what a connection delivers. Every field under `mu`.
struct Collector : transport::ConnectionHandler {
  std::mutex mu;
  std::condition_variable cv;
  bool established = false;
  std::vector<proto::Frame> frames;
  std::optional<transport::Fault> fault;
  int writable = 0;
  void on_established(const proto::Negotiated&) override {
    std::lock_guard lk(mu);
    established = true;
    cv.notify_all();
  }
  void on_frame(proto::Frame&& f) override {
    std::lock_guard lk(mu);
    frames.push_back(std::move(f));
    cv.notify_all();
  }
  void on_fault(const transport::Fault& f) override {
    std::lock_guard lk(mu);
    fault = f;
    cv.notify_all();
  }
  void on_writable() override {
    std::lock_guard lk(mu);
    ++writable;
    cv.notify_all();
  }
  template <typename Pred>
  bool wait(Pred p, std::chrono::milliseconds t = 20s) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, t, p);
  }
  std::size_t frame_count() {
    std::lock_guard lk(mu);
    return frames.size();
  }
  std::optional<transport::Fault> get_fault() {
    std::lock_guard lk(mu);
    return fault;
  }
  int writable_count() {
    std::lock_guard lk(mu);
    return writable;
  }
  // Drops the delivered frames (zero-copy data holds receive-pool buffers).
  void clear_frames() {
    std::lock_guard lk(mu);
    frames.clear();
  }
};

inline RdmaOptions small_options() {
  RdmaOptions o;
  o.device_name = "soft0";
  o.common.async_op_threads = 2;
  o.buffer_size = 16 * 1024;
  o.credits = 8;
  o.send_buffers = 256;
  o.receive_buffers = 4096;
  o.polling = std::chrono::microseconds(50);
  o.zero_copy_threshold = 64 * 1024;
  return o;
}

inline void debug_logging() {
  if (std::getenv("SIPHON_TEST_DEBUG") != nullptr) log::set_level(log::Subsys::rdma, 20);
}

// Runs `fn` on the connection's worker and waits for it.
template <typename F>
auto on_worker(transport::Connection& c, F fn) {
  std::promise<decltype(fn())> p;
  auto fut = p.get_future();
  c.worker().post([&] { p.set_value(fn()); });
  return fut.get();
}

// Closes on the connection's worker and waits: no callback after this.
inline void close_sync(const transport::ConnectionRef& c) {
  if (c) on_worker(*c, [&] {
      c->close();
      return 0;
    });
}

// Polls `pred` until it holds or `t` passes.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds t = 10s) {
  const auto end = std::chrono::steady_clock::now() + t;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// Accepted connections, in order.
struct AcceptQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<transport::ConnectionRef> q;
  transport::AcceptHandler handler() {
    return [this](transport::ConnectionRef c) {
      std::lock_guard lk(mu);
      q.push_back(std::move(c));
      cv.notify_all();
    };
  }
  transport::ConnectionRef pop(std::chrono::milliseconds t = 20s) {
    std::unique_lock lk(mu);
    if (!cv.wait_for(lk, t, [&] { return !q.empty(); })) return nullptr;
    auto c = std::move(q.front());
    q.pop_front();
    return c;
  }
};

// Both ends of one connection, started, with their handlers.
struct Duplex {
  transport::ConnectionRef c, s;
  Collector ch, sh;
  Duplex() = default;
  Duplex(const Duplex&) = delete;
  Duplex& operator=(const Duplex&) = delete;
  ~Duplex() { close(); }
  // Closes both ends (synchronously: no callbacks after) and drops them.
  void close() {
    close_sync(c);
    close_sync(s);
    c.reset();
    s.reset();
    ch.clear_frames();
    sh.clear_frames();
  }
};

// Connects `client` to `to` (a listener of a stack whose accepted
// connections go to `aq`), starts both ends and waits for the banners.
inline ::testing::AssertionResult open_duplex(RdmaStack& client, const NetAddress& to, AcceptQueue& aq,
                                              Duplex& d) {
  std::promise<std::pair<std::error_code, transport::ConnectionRef>> connected;
  client.connect(to, client.pick_worker(), [&](std::error_code ec, transport::ConnectionRef c) {
    connected.set_value({ec, std::move(c)});
  });
  auto cf = connected.get_future();
  if (cf.wait_for(20s) != std::future_status::ready) return ::testing::AssertionFailure() << "connect timed out";
  auto [ec, cc] = cf.get();
  if (ec || !cc) return ::testing::AssertionFailure() << "connect failed: " << ec.message();
  d.c = std::move(cc);
  d.s = aq.pop();
  if (!d.s) return ::testing::AssertionFailure() << "no connection accepted";
  d.s->worker().post([&d] { d.s->start(d.sh, proto::Banner{}); });
  d.c->worker().post([&d] { d.c->start(d.ch, proto::Banner{}); });
  if (!d.ch.wait([&] { return d.ch.established || d.ch.fault.has_value(); }) || !d.ch.established)
    return ::testing::AssertionFailure() << "client side not established";
  if (!d.sh.wait([&] { return d.sh.established || d.sh.fault.has_value(); }) || !d.sh.established)
    return ::testing::AssertionFailure() << "server side not established";
  return ::testing::AssertionSuccess();
}

// A server and a client stack on the soft fabric; the server listens. The
// client shares the server's provider unless it gets its own (to inject
// faults on the client's QPs only: two providers talk over the same wire,
// both made with `fabric`'s options).
struct Pair {
  std::unique_ptr<Provider> provider;
  std::unique_ptr<Provider> client_provider;
  std::unique_ptr<RdmaStack> server, client;
  AcceptQueue accepted;
  NetAddress bound;
  transport::ConnectionRef sconn, cconn;
  Collector shandler, chandler;

  explicit Pair(RdmaOptions o = small_options(), std::optional<soft::FaultPlan> client_faults = std::nullopt,
                const soft::SoftOptions& fabric = {}) {
    debug_logging();
    provider = soft::make_provider(fabric);
    if (client_faults) {
      soft::SoftOptions so = fabric;
      so.faults = *client_faults;
      client_provider = soft::make_provider(so);
    }
    server = std::make_unique<RdmaStack>(*provider, o);
    client = std::make_unique<RdmaStack>(client_provider ? *client_provider : *provider, o);
    server->start();
    client->start();
    EXPECT_FALSE(server->listen(*NetAddress::parse("127.0.0.1:0"), accepted.handler(), bound));
  }
  ~Pair() {
    if (cconn) cconn->worker().post([c = cconn] { c->close(); });
    if (sconn) sconn->worker().post([c = sconn] { c->close(); });
    client->stop();
    server->stop();
  }
  void connect() {
    std::promise<transport::ConnectionRef> connected;
    client->connect(bound, client->pick_worker(), [&](std::error_code ec, transport::ConnectionRef c) {
      EXPECT_FALSE(ec) << ec.message();
      connected.set_value(c);
    });
    auto cf = connected.get_future();
    ASSERT_EQ(cf.wait_for(20s), std::future_status::ready);
    cconn = cf.get();
    sconn = accepted.pop();
    ASSERT_TRUE(cconn && sconn);
    sconn->worker().post([this] { sconn->start(shandler, proto::Banner{}); });
    cconn->worker().post([this] { cconn->start(chandler, proto::Banner{}); });
    ASSERT_TRUE(chandler.wait([&] { return chandler.established; }));
    ASSERT_TRUE(shandler.wait([&] { return shandler.established; }));
  }
  // Closes the main connection's ends synchronously and drops them.
  void close_main() {
    close_sync(cconn);
    close_sync(sconn);
    cconn.reset();
    sconn.reset();
    chandler.clear_frames();
    shandler.clear_frames();
  }
};

// Every connection of `s` gone and every pool buffer back.
inline ::testing::AssertionResult no_leaks(const RdmaStack& s, std::chrono::milliseconds t = 10s) {
  if (eventually([&] { return s.connection_count() == 0 && s.buffers_in_use() == 0; }, t))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.connection_count() << " connections, " << s.buffers_in_use()
                                       << " pool buffers still in use";
}

inline BufferList pattern(std::size_t n, std::uint32_t seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return BufferList::copy_of(s);
}

inline proto::Frame message(std::uint32_t i, std::size_t front, std::size_t data) {
  proto::Frame f;
  f.tag = proto::Tag::message;
  f.segments[0] = pattern(41, i);
  f.segments[1] = pattern(front, i + 1);
  f.segments[3] = pattern(data, i + 3);
  return f;
}

// True when `f` is message(i, front, data).
inline bool is_message(const proto::Frame& f, std::uint32_t i, std::size_t front, std::size_t data) {
  return f.tag == proto::Tag::message && f.segments[0] == pattern(41, i) &&
         f.segments[1] == pattern(front, i + 1) && f.segments[3] == pattern(data, i + 3);
}

// Collects log lines while it lives (one at a time; the sink and the
// destructor synchronise on one mutex, as workers may log at any moment).
// Each end of `d` sends `n` frames to the other (message seed + i with a
// front of 1500 B from the client, 700 B from the server, and data(i) bytes
// of data, none by default); succeeds once both ends have them all, intact.
// The frames are dropped then (zero-copy data holds receive-pool buffers).
inline ::testing::AssertionResult exchange(Duplex& d, std::uint32_t n, std::uint32_t seed,
                                           const std::function<std::size_t(std::uint32_t)>& data = nullptr) {
  auto data_of = [&](std::uint32_t i) -> std::size_t { return data ? data(i) : 0; };
  on_worker(*d.c, [&] {
    for (std::uint32_t i = 0; i < n; ++i) EXPECT_FALSE(d.c->send(message(seed + i, 1500, data_of(i))));
    return 0;
  });
  on_worker(*d.s, [&] {
    for (std::uint32_t i = 0; i < n; ++i) EXPECT_FALSE(d.s->send(message(seed + i, 700, data_of(i))));
    return 0;
  });
  if (!d.sh.wait([&] { return d.sh.frames.size() >= n || d.sh.fault; }) ||
      !d.ch.wait([&] { return d.ch.frames.size() >= n || d.ch.fault; }))
    return ::testing::AssertionFailure() << "frames missing";
  if (d.sh.get_fault()) return ::testing::AssertionFailure() << "server end: " << d.sh.get_fault()->reason;
  if (d.ch.get_fault()) return ::testing::AssertionFailure() << "client end: " << d.ch.get_fault()->reason;
  std::scoped_lock lk(d.sh.mu, d.ch.mu);
  for (std::uint32_t i = 0; i < n; ++i)
    if (!is_message(d.sh.frames[i], seed + i, 1500, data_of(i)) ||
        !is_message(d.ch.frames[i], seed + i, 700, data_of(i)))
      return ::testing::AssertionFailure() << "frame " << i << " damaged";
  d.sh.frames.clear();
  d.ch.frames.clear();
  return ::testing::AssertionSuccess();
}

class LogCapture {
 public:
  LogCapture() {
    std::lock_guard l(mu());
    current() = this;
    log::set_sink(&LogCapture::sink);
  }
  ~LogCapture() {
    std::lock_guard l(mu());
    log::set_sink(nullptr);
    current() = nullptr;
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  bool contains(const std::string& needle) {
    std::lock_guard l(mu());
    for (const auto& s : lines_)
      if (s.find(needle) != std::string::npos) return true;
    return false;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static LogCapture*& current() {
    static LogCapture* c = nullptr;
    return c;
  }
  static void sink(log::Subsys, int, std::string_view line) noexcept {
    std::lock_guard l(mu());
    if (LogCapture* c = current()) c->lines_.emplace_back(line);
  }
  std::vector<std::string> lines_;
};

inline std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

}  // namespace siphon::rdma::test
