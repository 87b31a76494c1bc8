// The transport contract (docs/transport.md §1) as an executable suite.
//
// Written once against transport::Stack / Connection / ConnectionHandler
// only, and built once (the binary transport_contract); ctest runs it per
// stack (tests/conformance/CMakeLists.txt):
//   transport_contract_tcp        async+posix (make_test_stack)
//   transport_contract_rdma       async+rdma on the software fabric, or verbs
//                                 on rxe0 inside the rxe guest
//                                 (SIPHON_TEST_STACK=rdma)
//   transport_contract_rdma_srq   the same in SRQ mode (SIPHON_TEST_STACK=rdma-srq)
//   transport_contract_plugin     the stack of libsiphon-stack-tcpplugin.so
//                                 (SIPHON_CONTRACT_PLUGIN_DIR names its directory)
//
// One test per rule, plus ordering and close. Every handler callback is
// checked by the Probe, in every test: it runs on the connection's worker
// (rule a), never inside a call the test (or the handler) makes into the
// connection (rule b: the Probe sets `inside` around each such call), never
// after close() returned and on_fault at most once (rule c). TearDown fails
// the test on any such violation.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "msgr/base/error.h"
#include "msgr/transport/transport.h"
#include "msgr_test_util.h"

#include <dlfcn.h>

#include "msgr/transport/stack_plugin.h"

namespace siphon::transport {
namespace {

using namespace std::chrono_literals;

// Waits for a condition; long enough for a debug build on a busy 2-core box.
constexpr auto kWait = 30s;
// An absence window: only to check that something does *not* happen.
constexpr auto kQuiet = 100ms;

// Small send-queue water marks keep the backpressure test quick; the TCP
// receive buffer is fixed (no autotuning) so a paused receiver holds back
// the sender's queue after a few hundred KiB.
constexpr std::size_t kHighWater = 1u << 20;
constexpr std::size_t kLowWater = 256u << 10;

transport::TcpOptions contract_options() {
  transport::TcpOptions o = test::test_stack_options(2);  // two workers: affinity is per connection
  o.common.send_queue_high_water = kHighWater;
  o.common.send_queue_low_water = kLowWater;
  o.tcp_rcvbuf = 128u << 10;
  return o;
}

// The directory of libsiphon-stack-tcpplugin.so when this run tests the
// plugin's stack (ctest's transport_contract_plugin sets it), else null.
const char* plugin_dir() { return std::getenv("SIPHON_CONTRACT_PLUGIN_DIR"); }

std::shared_ptr<Stack> make_stack() {
  if (plugin_dir() == nullptr) return test::make_test_stack(contract_options());
  static const siphon_stack_plugin* plugin = [] {
    const std::string path = std::string(plugin_dir()) + "/libsiphon-stack-tcpplugin.so";
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) throw std::runtime_error(fmt::format("cannot load {}: {}", path, ::dlerror()));
    auto entry = reinterpret_cast<const siphon_stack_plugin* (*)()>(::dlsym(h, SIPHON_STACK_PLUGIN_ENTRY));
    if (entry == nullptr) throw std::runtime_error(path + ": no entry point");
    const siphon_stack_plugin* p = entry();
    if (p->abi_version != SIPHON_STACK_PLUGIN_ABI_VERSION) throw std::runtime_error(path + ": other ABI");
    return p;
  }();
  const transport::TcpOptions o = contract_options();
  const siphon_stack_plugin_args args{SIPHON_STACK_PLUGIN_ABI_VERSION, &o, "client.contract"};
  char err[256] = {};
  Stack* s = plugin->create(&args, err, sizeof err);
  if (s == nullptr) throw std::runtime_error(std::string("plugin create failed: ") + err);
  return std::shared_ptr<Stack>(s, [](Stack* st) { plugin->destroy(st); });
}

NetAddress loopback() {
  return test::loopback_any_port().front().addr;
}

// --- frames: index in segment 0, a front segment, `data` bytes of a pattern
// that depends on the index and the offset (byte-exact checks).
std::byte pattern_byte(std::uint64_t i, std::size_t off) {
  return static_cast<std::byte>((i * 131 + off * 7 + (off >> 9)) & 0xff);
}

proto::Frame make_frame(std::uint64_t i, std::size_t data = 0) {
  proto::Frame f;
  f.tag = proto::Tag::message;
  f.segments[0] = BufferList::copy_of(&i, sizeof i);
  f.segments[1] = BufferList::copy_of(fmt::format("front {}", i));
  if (data > 0) {
    std::vector<std::byte> d(data);
    for (std::size_t k = 0; k < data; ++k) d[k] = pattern_byte(i, k);
    f.segments[3] = BufferList::copy_of(d.data(), d.size());
  }
  return f;
}

// The frame's index, or nullopt when its bytes are not what make_frame wrote.
std::optional<std::uint64_t> check_frame(const proto::Frame& f) {
  if (f.tag != proto::Tag::message || f.segments[0].length() != sizeof(std::uint64_t)) return std::nullopt;
  std::uint64_t i = 0;
  f.segments[0].copy_out(0, sizeof i, &i);
  if (f.segments[1].to_string() != fmt::format("front {}", i) || f.segments[2].length() != 0) return std::nullopt;
  const std::string data = f.segments[3].to_string();
  for (std::size_t k = 0; k < data.size(); ++k)
    if (static_cast<std::byte>(data[k]) != pattern_byte(i, k)) return std::nullopt;
  return i;
}

// A handler that records what a connection delivers and checks every
// callback against the rules. Worker-only fields: inside, closed, hooks.
struct Probe final : ConnectionHandler {
  explicit Probe(std::string n) : name(std::move(n)) {}

  std::string name;
  ConnectionRef conn;
  bool inside = false;  // a call into `conn` is on the worker's stack
  bool closed = false;  // close() has returned
  // Run on the worker after the callback is recorded (may call into conn).
  std::function<void(Probe&)> on_established_hook, on_frame_hook, on_writable_hook, on_fault_hook;

  // Recorded, under mu.
  std::mutex mu;
  std::condition_variable cv;
  int established = 0;
  std::vector<std::uint64_t> seen;  // frame indices, in delivery order
  int bad_frames = 0;
  int faults = 0;
  std::optional<Fault> fault;
  int writable = 0;
  std::size_t queued_at_writable = 0;
  std::vector<std::string> violations;

  // Runs `fn(conn)` as a call into the connection (on the worker).
  template <typename F>
  auto call(F&& fn) {
    const bool was = inside;
    inside = true;
    struct Reset {
      bool& b;
      bool v;
      ~Reset() { b = v; }
    } reset{inside, was};
    return fn(*conn);
  }

  void on_established(const proto::Negotiated&) override {
    enter("on_established");
    {
      std::lock_guard lk(mu);
      ++established;
    }
    cv.notify_all();
    if (on_established_hook) on_established_hook(*this);
  }
  void on_frame(proto::Frame&& f) override {
    enter("on_frame");
    const auto i = check_frame(f);
    {
      std::lock_guard lk(mu);
      if (i) seen.push_back(*i);
      else ++bad_frames;
    }
    cv.notify_all();
    if (on_frame_hook) on_frame_hook(*this);
  }
  void on_fault(const Fault& f) override {
    enter("on_fault");
    {
      std::lock_guard lk(mu);
      if (++faults > 1) violations.push_back(name + ": on_fault called a second time");
      fault = f;
    }
    cv.notify_all();
    if (on_fault_hook) on_fault_hook(*this);
  }
  void on_writable() override {
    enter("on_writable");
    {
      std::lock_guard lk(mu);
      ++writable;
      queued_at_writable = conn ? conn->queued_bytes() : 0;
    }
    cv.notify_all();
    if (on_writable_hook) on_writable_hook(*this);
  }

  template <typename Pred>
  bool wait(Pred pred, std::chrono::milliseconds t = kWait) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, t, [&] { return pred(*this); });
  }
  template <typename F>
  auto get(F fn) {
    std::lock_guard lk(mu);
    return fn(*this);
  }
  std::size_t frame_count() {
    return get([](Probe& p) { return p.seen.size(); });
  }

 private:
  void enter(const char* cb) {
    std::string v;
    if (!conn) v = fmt::format("{}: {} before the connection was known", name, cb);
    else if (!conn->worker().in_worker_thread()) v = fmt::format("{}: {} ran off the connection's worker", name, cb);
    else if (inside) v = fmt::format("{}: {} called back inside a call into the connection (re-entrant)", name, cb);
    else if (closed) v = fmt::format("{}: {} after close() returned", name, cb);
    if (v.empty()) return;
    std::lock_guard lk(mu);
    violations.push_back(std::move(v));
  }
};

// Runs `fn(conn)` on the probe's worker as a call into the connection and
// waits for it.
template <typename F>
auto run(Probe& p, F fn) {
  using R = decltype(fn(*p.conn));
  auto task = std::make_shared<std::packaged_task<R()>>([&p, fn]() mutable { return p.call(fn); });
  auto fut = task->get_future();
  p.conn->worker().post([task] { (*task)(); });
  if (fut.wait_for(kWait) != std::future_status::ready) throw std::runtime_error("worker did not run the call");
  return fut.get();
}

// Sets a worker-only field of the probe on its worker.
template <typename F>
void on_probe_worker(Probe& p, F fn) {
  run(p, [&p, fn](Connection&) {
    fn(p);
    return 0;
  });
}

void close_on_worker(Probe& p) {
  run(p, [&p](Connection& c) {
    c.close();
    p.closed = true;
    return 0;
  });
}

// Polls the connection's queued_bytes() (on its worker) until `pred` holds.
template <typename Pred>
bool queue_eventually(Probe& p, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!pred(run(p, [](Connection& c) { return c.queued_bytes(); }))) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

std::vector<std::uint64_t> iota(std::uint64_t from, std::uint64_t to) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

// Both ends of one connection.
struct Ends {
  Probe c{"client"}, s{"server"};
  bool connect_on_worker = false, accept_on_worker = false;
};

class TransportContract : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = make_stack();
    client_ = make_stack();
    if (plugin_dir() != nullptr) {
      ASSERT_EQ(server_->type(), "async+tcpplugin") << "the plugin's stack, not the built-in one";
    }
    server_->start();
    client_->start();
    ASSERT_FALSE(server_->listen(loopback(),
                                 [this](ConnectionRef c) {
                                   const bool on = c->worker().in_worker_thread();
                                   std::lock_guard lk(mu_);
                                   accepted_.emplace_back(std::move(c), on);
                                   cv_.notify_all();
                                 },
                                 bound_));
  }

  void TearDown() override {
    for (auto& e : ends_)
      for (Probe* p : {&e->c, &e->s})
        if (p->conn) {
          try {
            close_on_worker(*p);  // idempotent
          } catch (const std::exception& ex) {
            ADD_FAILURE() << p->name << ": " << ex.what();
          }
        }
    for (auto& e : ends_)
      for (Probe* p : {&e->c, &e->s})
        EXPECT_TRUE(p->get([](Probe& q) { return q.violations; }).empty())
            << ::testing::PrintToString(p->get([](Probe& q) { return q.violations; }));
    client_->stop();
    server_->stop();
  }

  // Connects and accepts; `start_client`/`start_server` run on the end's
  // worker as one call: they must start() the connection (and may send
  // before or after). Null: just start().
  using Starter = std::function<void(Probe&, Connection&)>;
  Ends& open(Starter start_client = {}, Starter start_server = {}, bool wait_established = true) {
    ends_.push_back(std::make_unique<Ends>());
    Ends& e = *ends_.back();
    std::promise<ConnectionRef> connected;
    client_->connect(bound_, client_->pick_worker(), [&](std::error_code ec, ConnectionRef c) {
      EXPECT_FALSE(ec) << ec.message();
      if (c) e.connect_on_worker = c->worker().in_worker_thread();
      connected.set_value(std::move(c));
    });
    auto cf = connected.get_future();
    if (cf.wait_for(kWait) != std::future_status::ready) throw std::runtime_error("connect timed out");
    e.c.conn = cf.get();
    if (!e.c.conn) throw std::runtime_error("connect failed");
    {
      std::unique_lock lk(mu_);
      if (!cv_.wait_for(lk, kWait, [&] { return !accepted_.empty(); })) throw std::runtime_error("no accept");
      e.s.conn = std::move(accepted_.front().first);
      e.accept_on_worker = accepted_.front().second;
      accepted_.pop_front();
    }
    auto starter = [](Starter st) {
      return [st](Probe& p) {
        run(p, [&p, st](Connection& c) {
          if (st) st(p, c);
          else c.start(p, proto::Banner{});
          return 0;
        });
      };
    };
    starter(start_server)(e.s);
    starter(start_client)(e.c);
    if (wait_established) {
      EXPECT_TRUE(e.c.wait([](Probe& p) { return p.established > 0 || p.faults > 0; }));
      EXPECT_TRUE(e.s.wait([](Probe& p) { return p.established > 0 || p.faults > 0; }));
      EXPECT_EQ(e.c.get([](Probe& p) { return p.established; }), 1);
      EXPECT_EQ(e.s.get([](Probe& p) { return p.established; }), 1);
    }
    return e;
  }

  // Sends frames [from, to) with `data` bytes each, in one call.
  static void send_frames(Probe& p, std::uint64_t from, std::uint64_t to, std::size_t data = 0) {
    run(p, [&](Connection& c) {
      for (std::uint64_t i = from; i < to; ++i) EXPECT_FALSE(c.send(make_frame(i, data)));
      return 0;
    });
  }

  static ::testing::AssertionResult got(Probe& p, std::size_t n) {
    auto enough = [n](Probe& q) { return q.seen.size() + static_cast<std::size_t>(q.bad_frames) >= n; };
    if (p.wait([&](Probe& q) { return enough(q) || q.faults > 0; }) && p.get(enough))
      return ::testing::AssertionSuccess();
    const auto fault = p.get([](Probe& q) { return q.fault; });
    return ::testing::AssertionFailure() << p.name << " received " << p.frame_count() << " of " << n << " frames"
                                         << (fault ? " and faulted: " + fault->reason : std::string());
  }

  std::shared_ptr<Stack> server_, client_;
  NetAddress bound_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<ConnectionRef, bool>> accepted_;
  std::deque<std::unique_ptr<Ends>> ends_;
};

// ----------------------------------------------------------------- ordering

// ctest runs this binary once per stack (SIPHON_TEST_STACK): a run that lost
// the variable fails here rather than testing TCP twice.
TEST(StackUnderTest, IsTheOneThisRunAskedFor) { EXPECT_TRUE(test::is_the_stack_under_test(*test::make_test_stack())); }

TEST_F(TransportContract, FramesArriveInSendOrderByteExact) {
  Ends& e = open();
  // Sizes from empty to past the RDMA zero-copy threshold (64 KiB), in
  // several calls, both ways at once.
  const std::size_t sizes[] = {0, 1, 100, 4096, 16 * 1024 + 3, 70000, 200000};
  std::uint64_t n = 0;
  for (int round = 0; round < 4; ++round) {
    run(e.c, [&](Connection& c) {
      for (std::size_t k = 0; k < 25; ++k, ++n) EXPECT_FALSE(c.send(make_frame(n, sizes[(n * 5 + k) % 7])));
      return 0;
    });
  }
  send_frames(e.s, 0, 100, 512);
  ASSERT_TRUE(got(e.s, n));
  ASSERT_TRUE(got(e.c, 100));
  EXPECT_EQ(e.s.get([](Probe& p) { return p.seen; }), iota(0, n));
  EXPECT_EQ(e.c.get([](Probe& p) { return p.seen; }), iota(0, 100));
  EXPECT_EQ(e.s.get([](Probe& p) { return p.bad_frames; }), 0);
  EXPECT_EQ(e.c.get([](Probe& p) { return p.bad_frames; }), 0);
}

// ------------------------------------------------------ (a) thread affinity

TEST_F(TransportContract, EveryCallbackRunsOnTheConnectionsWorker) {
  // Four connections over two workers per stack; each end's callbacks must
  // run on its own worker, not merely on some worker of the stack.
  std::vector<Ends*> all;
  for (int k = 0; k < 4; ++k) all.push_back(&open());
  for (Ends* e : all) {
    EXPECT_TRUE(e->connect_on_worker) << "connect's handler ran off the new connection's worker";
    EXPECT_TRUE(e->accept_on_worker) << "the accept handler ran off the new connection's worker";
    on_probe_worker(e->s, [](Probe& p) {
      p.on_frame_hook = [](Probe& q) {
        if (q.frame_count() == 20) q.call([](Connection& c) { return c.send(make_frame(1000)); });
      };
    });
  }
  for (Ends* e : all) send_frames(e->c, 0, 20, 3000);
  for (Ends* e : all) {
    ASSERT_TRUE(got(e->s, 20));
    ASSERT_TRUE(got(e->c, 1));
  }
  for (Ends* e : all) close_on_worker(e->c);
  for (Ends* e : all) ASSERT_TRUE(e->s.wait([](Probe& p) { return p.faults > 0; }));
  std::size_t workers_used = 0;
  for (std::size_t w = 0; w < client_->worker_count(); ++w)
    for (Ends* e : all)
      if (&e->c.conn->worker() == &client_->worker(w)) {
        ++workers_used;
        break;
      }
  EXPECT_EQ(workers_used, client_->worker_count()) << "the connections should spread over the workers";
  // The Probe checked every callback (TearDown reports violations).
}

#ifndef NDEBUG
// Debug builds assert that Connection methods run on the worker.
TEST_F(TransportContract, DebugBuildsAssertConnectionCallsOffTheWorker) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  Ends& e = open();
  EXPECT_DEATH((void)e.c.conn->send(make_frame(1)), "must run on the connection's worker");
}
#endif

// -------------------------------------------------- (b) no re-entrancy

TEST_F(TransportContract, HandlersMayCallBackInFromEveryCallback) {
  // From on_frame the server pauses, resumes and replies; from on_writable
  // nothing special. Nothing may be delivered inside those calls: the Probe
  // flags a callback that arrives while one of them is on the stack.
  Ends& e = open();
  on_probe_worker(e.s, [](Probe& s) {
    s.on_frame_hook = [](Probe& p) {
      p.call([](Connection& c) {
        c.pause_receive(true);
        c.pause_receive(false);
        return 0;
      });
      const std::uint64_t i = p.get([](Probe& q) { return q.seen.back(); });
      p.call([i](Connection& c) { return c.send(make_frame(i, 64)); });
    };
  });
  send_frames(e.c, 0, 50, 2000);
  ASSERT_TRUE(got(e.s, 50));
  ASSERT_TRUE(got(e.c, 50));
  EXPECT_EQ(e.s.get([](Probe& p) { return p.seen; }), iota(0, 50));
  EXPECT_EQ(e.c.get([](Probe& p) { return p.seen; }), iota(0, 50));
}

TEST_F(TransportContract, NoCallbackInsideSendOfAFrameOverTheHighWaterMark) {
  // One frame larger than the high-water mark: on_writable follows, from the
  // event loop (the RDMA stack's zero-copy path can drain it inside send()).
  Ends& e = open();
  const std::size_t after = run(e.c, [&](Connection& c) {
    EXPECT_FALSE(c.send(make_frame(0, kHighWater + 4096)));
    return c.queued_bytes();
  });
  ASSERT_TRUE(got(e.s, 1));
  EXPECT_EQ(e.s.get([](Probe& p) { return p.bad_frames; }), 0);
  if (after > kHighWater) {  // (a stack may hand the frame to the network inside send())
    ASSERT_TRUE(e.c.wait([](Probe& p) { return p.writable > 0; })) << "no on_writable after the queue drained";
  }
  // The Probe flags an on_writable that ran inside send().
}

TEST_F(TransportContract, StartDeliversNothingInsideTheCall) {
  // The server is started only after the client's banner was handed to the
  // network, so it may be waiting when start() is called: on_established
  // (and what follows) must come from the event loop, not from inside start().
  ends_.push_back(std::make_unique<Ends>());
  Ends& e = *ends_.back();
  std::promise<ConnectionRef> connected;
  client_->connect(bound_, client_->pick_worker(), [&](std::error_code ec, ConnectionRef c) {
    EXPECT_FALSE(ec);
    connected.set_value(std::move(c));
  });
  auto cf = connected.get_future();
  ASSERT_EQ(cf.wait_for(kWait), std::future_status::ready);
  e.c.conn = cf.get();
  ASSERT_TRUE(e.c.conn);
  {
    std::unique_lock lk(mu_);
    ASSERT_TRUE(cv_.wait_for(lk, kWait, [&] { return !accepted_.empty(); }));
    e.s.conn = std::move(accepted_.front().first);
    accepted_.pop_front();
  }
  run(e.c, [&](Connection& c) {
    c.start(e.c, proto::Banner{});
    return 0;
  });
  // The client's queue empties once the stack handed its banner on; a
  // condition, not a delay (if the bytes are still in flight when start()
  // runs, this test can miss a bug but cannot fail wrongly).
  ASSERT_TRUE(queue_eventually(e.c, [](std::size_t q) { return q == 0; }));
  run(e.s, [&](Connection& c) {
    c.start(e.s, proto::Banner{});
    return 0;
  });
  ASSERT_TRUE(e.s.wait([](Probe& p) { return p.established > 0; }));
  send_frames(e.c, 0, 5, 100);
  ASSERT_TRUE(got(e.s, 5));
  EXPECT_EQ(e.s.get([](Probe& p) { return p.seen; }), iota(0, 5));
}

// ----------------------------- (c) on_fault once, nothing after close()

TEST_F(TransportContract, CloseIsIdempotentAndThePeerSeesOneFault) {
  Ends& e = open();
  send_frames(e.c, 0, 3);
  ASSERT_TRUE(got(e.s, 3));
  run(e.c, [&](Connection& c) {
    c.close();
    e.c.closed = true;
    c.close();
    EXPECT_TRUE(c.send(make_frame(99))) << "send() after close() must fail";
    c.pause_receive(true);
    c.pause_receive(false);
    return 0;
  });
  close_on_worker(e.c);  // again, in another call
  ASSERT_TRUE(e.s.wait([](Probe& p) { return p.faults > 0; })) << "the peer never heard of the close";
  // The faulted side: calls fail or do nothing, and no second on_fault.
  run(e.s, [](Connection& c) {
    EXPECT_TRUE(c.send(make_frame(1))) << "send() after a fault must fail";
    c.pause_receive(true);
    c.pause_receive(false);
    return 0;
  });
  std::this_thread::sleep_for(kQuiet);  // absence window: nothing more may arrive
  EXPECT_EQ(e.s.get([](Probe& p) { return p.faults; }), 1);
  EXPECT_TRUE(e.s.get([](Probe& p) { return p.fault->code; })) << "a fault carries an error code";
  EXPECT_EQ(e.c.get([](Probe& p) { return p.faults; }), 0) << "close() is not a fault of its own side";
  close_on_worker(e.s);
}

TEST_F(TransportContract, NothingIsDeliveredAfterCloseFromInsideOnFrame) {
  // The server sends a burst; the client closes from inside its 10th
  // on_frame. Frames decoded in the same batch must not follow.
  Ends& e = open();
  on_probe_worker(e.c, [](Probe& c) {
    c.on_frame_hook = [](Probe& p) {
      if (p.frame_count() != 10) return;
      p.call([&p](Connection& conn) {
        conn.close();
        p.closed = true;
        return 0;
      });
    };
  });
  send_frames(e.s, 0, 200, 100);
  ASSERT_TRUE(e.s.wait([](Probe& p) { return p.faults > 0; })) << "the peer never heard of the close";
  std::this_thread::sleep_for(kQuiet);  // absence window
  EXPECT_EQ(e.c.frame_count(), 10u);
  EXPECT_EQ(e.c.get([](Probe& p) { return p.faults; }), 0);
  EXPECT_EQ(e.s.get([](Probe& p) { return p.faults; }), 1);
}

TEST_F(TransportContract, PeerCloseFaultsOnceAndTheFaultedSideMayCallIn) {
  Ends& e = open();
  // From inside on_fault the handler may call in: send() fails, close() is
  // fine, and neither calls back.
  std::error_code send_in_fault;
  on_probe_worker(e.c, [&send_in_fault](Probe& c) {
    c.on_fault_hook = [&send_in_fault](Probe& p) {
      p.call([&](Connection& conn) {
        send_in_fault = conn.send(make_frame(1));
        conn.pause_receive(true);
        conn.pause_receive(false);
        conn.close();
        p.closed = true;
        return 0;
      });
    };
  });
  send_frames(e.s, 0, 20, 100);
  close_on_worker(e.s);
  ASSERT_TRUE(e.c.wait([](Probe& p) { return p.faults > 0; })) << "the client never heard of the close";
  std::this_thread::sleep_for(kQuiet);  // absence window: no second fault, nothing after close
  EXPECT_EQ(e.c.get([](Probe& p) { return p.faults; }), 1);
  EXPECT_TRUE(run(e.c, [&](Connection&) { return send_in_fault; })) << "send() inside on_fault must fail";
}

// -------------------------------------- (d) frames sent before the banners

TEST_F(TransportContract, FramesSentBeforeTheBannerExchangeGoFirstInOrder) {
  // Client: frames 0-4 before start(), 5-9 right after it (one call, so
  // before the banners can have been exchanged), 10-14 from on_established,
  // 15-19 once established. Server: 0-9 in its start call.
  std::size_t early_queued = 0;
  Ends& e = open(
      [&](Probe& p, Connection& c) {
        for (std::uint64_t i = 0; i < 5; ++i) EXPECT_FALSE(c.send(make_frame(i, 300)));
        p.on_established_hook = [](Probe& q) {
          q.call([](Connection& cc) {
            for (std::uint64_t i = 10; i < 15; ++i) EXPECT_FALSE(cc.send(make_frame(i, 300)));
            return 0;
          });
        };
        c.start(p, proto::Banner{});
        for (std::uint64_t i = 5; i < 10; ++i) EXPECT_FALSE(c.send(make_frame(i, 300)));
        early_queued = c.queued_bytes();
      },
      [](Probe& p, Connection& c) {
        c.start(p, proto::Banner{});
        for (std::uint64_t i = 0; i < 10; ++i) EXPECT_FALSE(c.send(make_frame(i, 70000)));
      });
  EXPECT_GT(early_queued, 10u * 300) << "frames waiting for the banners count in queued_bytes()";
  send_frames(e.c, 15, 20, 300);
  ASSERT_TRUE(got(e.s, 20));
  ASSERT_TRUE(got(e.c, 10));
  EXPECT_EQ(e.s.get([](Probe& p) { return p.seen; }), iota(0, 20));
  EXPECT_EQ(e.c.get([](Probe& p) { return p.seen; }), iota(0, 10));
  EXPECT_EQ(e.s.get([](Probe& p) { return p.bad_frames; }), 0);
  EXPECT_EQ(e.c.get([](Probe& p) { return p.bad_frames; }), 0);
}

// --------------------------------------------- (e) high- and low-water marks

// The session above reads its backpressure mark from the stack (it keeps no
// copy of the transport's options), so a stack must report the marks it was
// built with, the ones its connections apply.
TEST_F(TransportContract, TheStackReportsTheWaterMarksItWasBuiltWith) {
  for (const std::shared_ptr<Stack>& st : {server_, client_}) {
    EXPECT_EQ(st->send_queue_marks().high_water, kHighWater) << st->type();
    EXPECT_EQ(st->send_queue_marks().low_water, kLowWater) << st->type();
  }
}

TEST_F(TransportContract, OneOnWritableAfterTheQueueFallsToTheLowWaterMark) {
  Ends& e = open();
  run(e.s, [](Connection& c) {
    c.pause_receive(true);  // builds the client's queue
    return 0;
  });
  // 8 MiB in one call: over the high-water mark however much the network
  // takes at once.
  constexpr std::size_t kFrame = 48 * 1024;
  constexpr std::uint64_t kFrames = (8u << 20) / kFrame;
  std::size_t after_send = 0;
  run(e.c, [&](Connection& c) {
    for (std::uint64_t i = 0; i < kFrames; ++i) EXPECT_FALSE(c.send(make_frame(i, kFrame)));
    after_send = c.queued_bytes();
    return 0;
  });
  EXPECT_GT(after_send, kHighWater);
  // While the receiver is paused it reads nothing: the queue stays above the
  // low-water mark and no on_writable comes (an absence window).
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(e.c.get([](Probe& p) { return p.writable; }), 0);
  EXPECT_GT(run(e.c, [](Connection& c) { return c.queued_bytes(); }), kLowWater)
      << "a paused receiver still read (the sender's queue drained)";
  EXPECT_EQ(e.s.frame_count(), 0u) << "a paused receiver delivered frames";
  run(e.s, [](Connection& c) {
    c.pause_receive(false);
    return 0;
  });
  ASSERT_TRUE(got(e.s, kFrames));
  ASSERT_TRUE(e.c.wait([](Probe& p) { return p.writable > 0; })) << "no on_writable after the queue drained";
  EXPECT_LE(e.c.get([](Probe& p) { return p.queued_at_writable; }), kLowWater)
      << "on_writable before the queue fell to the low-water mark";
  ASSERT_TRUE(queue_eventually(e.c, [](std::size_t q) { return q == 0; }));
  std::this_thread::sleep_for(kQuiet);  // absence window: exactly one
  EXPECT_EQ(e.c.get([](Probe& p) { return p.writable; }), 1);
  EXPECT_EQ(e.s.get([](Probe& p) { return p.seen; }), iota(0, kFrames));
  // Below the high-water mark: no on_writable.
  send_frames(e.c, kFrames, kFrames + 10, 1000);
  ASSERT_TRUE(got(e.s, kFrames + 10));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ(e.c.get([](Probe& p) { return p.writable; }), 1);
}

// ------------------------------------------------------- (f) pause/resume

TEST_F(TransportContract, PauseStopsDeliveryAndResumeKeepsOrder) {
  Ends& e = open();
  // Round 1: paused before the frames arrive.
  run(e.s, [](Connection& c) {
    c.pause_receive(true);
    return 0;
  });
  send_frames(e.c, 0, 60, 1500);
  std::this_thread::sleep_for(kQuiet);  // absence window
  EXPECT_EQ(e.s.frame_count(), 0u) << "frames delivered while paused";
  run(e.s, [](Connection& c) {
    c.pause_receive(false);  // the Probe flags a frame delivered inside this call
    return 0;
  });
  ASSERT_TRUE(got(e.s, 60));
  // Round 2: paused from inside on_frame, with more frames behind it.
  on_probe_worker(e.s, [](Probe& s) {
    s.on_frame_hook = [](Probe& p) {
      if (p.frame_count() == 90) p.call([](Connection& c) {
          c.pause_receive(true);
          return 0;
        });
    };
  });
  send_frames(e.c, 60, 150, 1500);
  ASSERT_TRUE(got(e.s, 90));
  std::this_thread::sleep_for(kQuiet);  // absence window
  EXPECT_EQ(e.s.frame_count(), 90u) << "frames delivered after pause_receive(true) in on_frame";
  run(e.s, [&e](Connection& c) {
    e.s.on_frame_hook = nullptr;
    c.pause_receive(false);
    return 0;
  });
  ASSERT_TRUE(got(e.s, 150));
  EXPECT_EQ(e.s.get([](Probe& p) { return p.seen; }), iota(0, 150));
  EXPECT_EQ(e.s.get([](Probe& p) { return p.bad_frames; }), 0);
}

}  // namespace
}  // namespace siphon::transport
