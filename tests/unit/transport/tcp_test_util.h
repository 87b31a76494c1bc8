// Helpers for the TCP stack tests: a recording ConnectionHandler, a fixture
// with a server and a client stack, raw sockets for malformed input.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "msgr/base/error.h"
#include "msgr/transport/tcp_connection.h"
#include "msgr/transport/tcp_stack.h"

namespace siphon::transport::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Runs `fn` on worker `w` and returns its result.
template <typename F>
auto run_on(Worker& w, F fn) -> decltype(fn()) {
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto result = task.get_future();
  w.post([&task] { task(); });
  return result.get();
}

inline std::shared_ptr<TcpConnection> tcp(const ConnectionRef& c) {
  return std::dynamic_pointer_cast<TcpConnection>(c);
}

// Records every callback; waits with deadlines, never with sleeps.
class Recorder : public ConnectionHandler {
 public:
  // Optional hooks, run on the worker before the event is recorded.
  std::function<void(proto::Frame&)> frame_hook;
  std::function<void()> writable_hook;
  bool keep_frames = true;

  void on_established(const proto::Negotiated& n) override {
    std::lock_guard lock(mu_);
    established_ = n;
    events_.push_back("established");
    cv_.notify_all();
  }
  void on_frame(proto::Frame&& f) override {
    if (frame_hook) frame_hook(f);
    std::lock_guard lock(mu_);
    ++frame_count_;
    if (keep_frames) frames_.push_back(std::move(f));
    if (events_.empty() || events_.back() != "frame") events_.push_back("frame");
    cv_.notify_all();
  }
  void on_fault(const Fault& f) override {
    std::lock_guard lock(mu_);
    ++fault_count_;
    fault_ = f;
    events_.push_back("fault");
    cv_.notify_all();
  }
  void on_writable() override {
    if (writable_hook) writable_hook();
    std::lock_guard lock(mu_);
    ++writable_count_;
    cv_.notify_all();
  }

  // `pred` runs with the recorder's lock held: it reads members directly.
  template <typename Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = 15s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(); });
  }
  bool wait_established() { return wait([&] { return established_.has_value() || fault_; }) && established_; }
  bool wait_frames(std::size_t n, std::chrono::milliseconds t = 15s) {
    return wait([&] { return frame_count_ >= n || fault_; }, t) && frame_count_ >= n;
  }
  bool wait_fault(std::chrono::milliseconds t = 15s) { return wait([&] { return fault_.has_value(); }, t); }
  bool wait_writable(std::chrono::milliseconds t = 15s) { return wait([&] { return writable_count_ > 0; }, t); }

  std::optional<proto::Negotiated> established() {
    std::lock_guard lock(mu_);
    return established_;
  }
  std::optional<Fault> fault() {
    std::lock_guard lock(mu_);
    return fault_;
  }
  int fault_count() {
    std::lock_guard lock(mu_);
    return fault_count_;
  }
  int writable_count() {
    std::lock_guard lock(mu_);
    return writable_count_;
  }
  std::size_t frame_count() {
    std::lock_guard lock(mu_);
    return frame_count_;
  }
  std::vector<proto::Frame> take_frames() {
    std::lock_guard lock(mu_);
    return std::exchange(frames_, {});
  }
  std::vector<std::string> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<proto::Negotiated> established_;
  std::optional<Fault> fault_;
  int fault_count_ = 0;
  int writable_count_ = 0;
  std::size_t frame_count_ = 0;
  std::vector<proto::Frame> frames_;
  std::vector<std::string> events_;
};

inline TcpOptions test_options(std::size_t threads = 2) {
  TcpOptions o;
  o.common.async_op_threads = threads;
  // Port 0 on both ends: the kernel picks a free ephemeral port, so test
  // processes running in parallel (ctest -j, several build trees) never
  // share a port. A fixed range made a test that connects to a closed
  // listener's port reach another process's listener that had taken it.
  o.bind_port_min = 0;
  o.bind_port_max = 0;
  o.bind_retry_count = 0;
  return o;
}

inline proto::Frame control(proto::Tag tag, std::string_view payload) {
  return proto::Frame::control(tag, BufferList::copy_of(payload));
}

class TcpFixture : public ::testing::Test {
 protected:
  struct Side {
    ConnectionRef conn;
    Recorder* rec = nullptr;
  };
  struct Pair {
    Side client;
    Side server;
  };

  void make_stacks(TcpOptions server_opts = test_options(), TcpOptions client_opts = test_options()) {
    server_ = std::make_unique<TcpStack>(std::move(server_opts));
    client_ = std::make_unique<TcpStack>(std::move(client_opts));
    server_->start();
    client_->start();
  }
  void TearDown() override {
    // Stacks stop before the recorders (fixture members) go away.
    if (client_) client_->stop();
    if (server_) server_->stop();
  }

  // Listens on the server stack; accepted connections queue up for accept_next().
  std::optional<NetAddress> listen(std::string_view ip = "127.0.0.1") {
    NetAddress bound;
    const auto ec = server_->listen(*NetAddress::parse(ip), [this](ConnectionRef c) {
      std::lock_guard lock(accept_mu_);
      accepted_.push_back(std::move(c));
      accept_cv_.notify_all();
    }, bound);
    if (ec) return std::nullopt;
    return bound;
  }
  ConnectionRef accept_next(std::chrono::milliseconds timeout = 15s) {
    std::unique_lock lock(accept_mu_);
    if (!accept_cv_.wait_for(lock, timeout, [&] { return !accepted_.empty(); })) return nullptr;
    ConnectionRef c = std::move(accepted_.front());
    accepted_.pop_front();
    return c;
  }
  Recorder& recorder() {
    recorders_.push_back(std::make_unique<Recorder>());
    return *recorders_.back();
  }
  ConnectionRef start_accepted(Recorder& rec, proto::Banner banner = {}) {
    ConnectionRef c = accept_next();
    if (c) run_on(c->worker(), [&] { c->start(rec, banner); });
    return c;
  }
  // Connects from `stack` to `addr`; `after_start` runs on the worker right
  // after start() (to send before the banners are exchanged).
  std::pair<std::error_code, ConnectionRef> connect(
      TcpStack& stack, const NetAddress& addr, Recorder* rec, proto::Banner banner = {},
      std::function<void(Connection&)> after_start = {}) {
    std::promise<std::pair<std::error_code, ConnectionRef>> done;
    stack.connect(addr, stack.pick_worker(), [&](std::error_code ec, ConnectionRef c) {
      if (c && rec != nullptr) {
        c->start(*rec, banner);
        if (after_start) after_start(*c);
      }
      done.set_value({ec, c});
    });
    return done.get_future().get();
  }
  // Connects and starts the client; accepts the server side without
  // starting it, so a test can install hooks (or pause) first.
  Pair connect_unstarted(const NetAddress& addr, proto::Banner client_banner = {}) {
    Pair p;
    p.client.rec = &recorder();
    p.server.rec = &recorder();
    const auto connected = connect(*client_, addr, p.client.rec, client_banner);
    EXPECT_FALSE(connected.first) << connected.first.message();
    p.client.conn = connected.second;
    p.server.conn = accept_next();
    EXPECT_TRUE(p.server.conn);
    return p;
  }
  // A listener and one connection to it, neither end started.
  void open_unstarted(Pair& p) {
    const auto addr = listen();
    ASSERT_TRUE(addr);
    p = connect_unstarted(*addr);
    ASSERT_TRUE(p.client.conn && p.server.conn);
  }
  static void start(const Side& side, proto::Banner banner = {}) {
    run_on(side.conn->worker(), [&] { side.conn->start(*side.rec, banner); });
  }
  Pair connect_pair(const NetAddress& addr, proto::Banner client_banner = {},
                    proto::Banner server_banner = {}) {
    Pair p = connect_unstarted(addr, client_banner);
    if (p.server.conn) start(p.server, server_banner);
    return p;
  }
  static std::error_code send(const ConnectionRef& c, proto::Frame f) {
    return run_on(c->worker(), [&] { return c->send(std::move(f)); });
  }

  std::unique_ptr<TcpStack> server_;
  std::unique_ptr<TcpStack> client_;
  std::vector<std::unique_ptr<Recorder>> recorders_;

 private:
  std::mutex accept_mu_;
  std::condition_variable accept_cv_;
  std::deque<ConnectionRef> accepted_;
};

// A plain blocking socket, for feeding the stack bytes no peer should send.
class RawSocket {
 public:
  explicit RawSocket(const NetAddress& to) : fd_(::socket(to.family(), SOCK_STREAM, 0)) {
    connected_ = fd_ >= 0 && ::connect(fd_, to.sockaddr_ptr(), to.sockaddr_len()) == 0;
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;
  bool connected() const { return connected_; }

  bool write(const void* data, std::size_t len) {
    const auto* p = static_cast<const char*>(data);
    while (len > 0) {
      const ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
      if (n <= 0) return false;
      p += n;
      len -= static_cast<std::size_t>(n);
    }
    return true;
  }
  bool write(std::string_view s) { return write(s.data(), s.size()); }
  bool write(const BufferList& bl) { return write(bl.to_string()); }

  // Reads exactly `len` bytes (false on timeout, error or close).
  bool read_exact(void* out, std::size_t len, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = Clock::now() + timeout;
    auto* p = static_cast<char*>(out);
    while (len > 0 && Clock::now() < deadline) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd_, p, len, 0);
      if (n <= 0) return false;
      p += n;
      len -= static_cast<std::size_t>(n);
    }
    return len == 0;
  }

  // Reads until the peer closes (true) or the deadline passes (false).
  bool wait_closed(std::chrono::milliseconds timeout = 10s) {
    const auto deadline = Clock::now() + timeout;
    char buf[4096];
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
  bool connected_ = false;
};

}  // namespace siphon::transport::test
