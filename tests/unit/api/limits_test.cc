// The messenger's resource limits (docs/security.md), each shown enforced:
// ms_max_connections, the frame and segment sizes, the per-connection and
// total undispatched bytes, the handshake timeout on the accepting side and
// ms_max_queued_send_bytes_per_connection. Built once and run twice, like
// messenger_test (siphon_gtest_stacks): over TCP (limits_test) and over the
// RDMA stack on the software fabric (limits_test_rdma, SIPHON_TEST_STACK=rdma),
// so every limit is checked on both stacks.
#include <atomic>
#include <thread>

#include "msgr/transport/transport.h"
#include "msgr_test_util.h"

namespace siphon::test {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kTypeSlow = 0x7301;  // normal dispatch
constexpr std::uint16_t kTypeFast = 0x7302;  // fast dispatch

MessageRef message(std::uint16_t type, std::size_t data_bytes, std::size_t front_bytes = 0) {
  MessageRef m = make_message<Message>(type);
  if (front_bytes != 0) m->front().append(std::string(front_bytes, 'f'));
  if (data_bytes != 0) m->data().append(std::string(data_bytes, 'd'));
  return m;
}

// A client messenger of its own (its own stack), lossy or lossless.
struct Client {
  RecordingDispatcher d;
  std::unique_ptr<Messenger> m;
  Client(std::int64_t id, const Policy& p, const MessengerOptions& o = test_options()) {
    m = make_messenger({entity_type::client, id}, o);
    m->set_policy(entity_type::osd, p);
    m->add_dispatcher_tail(&d);
    m->start();
  }
  ~Client() {
    m->shutdown();
    m->wait();
  }
};

struct Limits : ::testing::Test {
  MessengerOptions opts = test_options();
  transport::TcpOptions stack_opts = test_stack_options();  // the server's stack
  RecordingDispatcher sd;
  std::unique_ptr<Messenger> server;

  // The server, dispatching to `d` (default: sd); bound, and started unless
  // `start` is false.
  void start_server(const Policy& p = Policy::stateless_server(), Dispatcher* d = nullptr, bool start = true) {
    server = make_messenger({entity_type::osd, 0}, opts, stack_opts);
    server->set_policy(entity_type::client, p);
    server->add_dispatcher_tail(d != nullptr ? d : &sd);
    ASSERT_FALSE(server->bind(loopback_any_port()));
    if (start) server->start();
  }
  void TearDown() override {
    if (server) {
      server->shutdown();
      server->wait();
    }
  }
  ConnectionRef connect(Client& c) { return c.m->connect_to(entity_type::osd, server->get_myaddrs()); }
  // A message from `c` reaches the server.
  void expect_delivered(const ConnectionRef& con) {
    std::uint64_t before = 0;
    {
      std::lock_guard l(sd.w.mu);
      before = sd.messages;
    }
    ASSERT_FALSE(con->send_message(message(kTypeSlow, 100)));
    EXPECT_TRUE(sd.w.wait_for([&] { return sd.messages > before; }));
  }
};

// --- ms_max_connections ------------------------------------------------------

// This binary runs once per stack (SIPHON_TEST_STACK, set by ctest).
TEST(StackUnderTest, IsTheOneThisRunAskedFor) { EXPECT_TRUE(is_the_stack_under_test(*make_test_stack())); }

TEST_F(Limits, MaxConnectionsRefusesAcceptsPastTheLimitAndFreesSlotsOnClose) {
  opts.ms_max_connections = 2;
  start_server();
  Client a(1, Policy::lossy_client()), b(2, Policy::lossy_client());
  ConnectionRef ca = connect(a), cb = connect(b);
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.accepts == 2; }));

  // The third accepted connection is closed at once with a reason naming the
  // option; the client sees a reset (lossy), the two others keep working.
  LogCapture logs;
  Client c(3, Policy::lossy_client());
  connect(c);
  ASSERT_TRUE(c.d.w.wait_for([&] { return c.d.resets == 1; }));
  EXPECT_EQ(c.d.connects, 0);
  EXPECT_GE(server->stats().connections_refused, 1u);
  EXPECT_TRUE(logs.contains("ms_max_connections = 2")) << "the refusal names the option";
  expect_delivered(ca);
  expect_delivered(cb);
  {
    std::lock_guard l(sd.w.mu);
    EXPECT_EQ(sd.accepts, 2);
  }

  // Connections the messenger dials are not counted: the server, at its
  // limit, can still reach a peer of its own.
  RecordingDispatcher pd;
  auto peer = make_messenger({entity_type::osd, 1}, opts);
  peer->set_policy(entity_type::osd, Policy::stateless_server());
  peer->add_dispatcher_tail(&pd);
  ASSERT_FALSE(peer->bind(loopback_any_port()));
  peer->start();
  server->set_policy(entity_type::osd, Policy::lossy_client());  // policies are read per connection
  ConnectionRef out = server->connect_to(entity_type::osd, peer->get_myaddrs());
  ASSERT_FALSE(out->send_message(message(kTypeSlow, 10)));
  EXPECT_TRUE(pd.w.wait_for([&] { return pd.messages == 1; }));

  // Closing one accepted connection frees its slot: a lossless client that
  // keeps retrying gets in.
  ca->mark_down();
  Client d(4, Policy::lossless_client());
  ConnectionRef cd = connect(d);
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.accepts == 3; }));
  expect_delivered(cd);
  peer->shutdown();
  peer->wait();
}

// --- frame and segment sizes -------------------------------------------------

// `big` exceeds the server's frame limits; the server closes that
// connection with `reason` logged; another client goes on.
void oversize_closes_only_that_connection(Limits& t, MessageRef big, const std::string& reason) {
  t.start_server();
  Client a(1, Policy::lossy_client()), b(2, Policy::lossy_client());
  ConnectionRef ca = t.connect(a), cb = t.connect(b);
  t.expect_delivered(ca);
  LogCapture logs;
  std::uint64_t before = 0;
  {
    std::lock_guard l(t.sd.w.mu);
    before = t.sd.messages;
  }
  ASSERT_FALSE(ca->send_message(std::move(big)));
  ASSERT_TRUE(a.d.w.wait_for([&] { return a.d.resets == 1; })) << "the server closed the connection";
  EXPECT_TRUE(eventually([&] { return logs.contains(reason); }, 10s)) << "logged reason: " << reason << "\nlogged:\n"
                                                                     << [&] {
                                                                          std::string all;
                                                                          for (const auto& l : logs.lines()) all += l + "\n";
                                                                          return all;
                                                                        }();
  {
    std::lock_guard l(t.sd.w.mu);
    EXPECT_EQ(t.sd.messages, before) << "nothing of the oversized message was delivered";
  }
  t.expect_delivered(cb);
}

TEST_F(Limits, OversizedSegmentClosesTheConnection) {
  stack_opts.common.frame_limits.max_segment = 64 * 1024;
  oversize_closes_only_that_connection(*this, message(kTypeSlow, 128 * 1024),
                                       "message segment over the limit (131072 bytes > ms_max_segment_size 65536)");
}

TEST_F(Limits, OversizedFrameClosesTheConnection) {
  stack_opts.common.frame_limits.max_segment = 64 * 1024;
  stack_opts.common.frame_limits.max_frame = 96 * 1024;
  // Each segment is within ms_max_segment_size, the sum is not.
  oversize_closes_only_that_connection(*this, message(kTypeSlow, 60 * 1024, 48 * 1024),
                                       "bytes > ms_max_frame_size 98304)");
}

// --- undispatched bytes --------------------------------------------------------

// Slow messages block in ms_dispatch until the gate opens; fast ones are
// counted on the worker (they never wait behind the slow ones).
struct GateDispatcher : Dispatcher {
  std::atomic<bool> gate{false};
  std::atomic<std::uint64_t> slow{0}, fast{0};
  bool ms_can_fast_dispatch(const Message& m) const override { return m.get_type() == kTypeFast; }
  void ms_fast_dispatch(MessageRef) override { fast.fetch_add(1); }
  bool ms_dispatch(MessageRef) override {
    while (!gate.load()) std::this_thread::sleep_for(1ms);
    slow.fetch_add(1);
    return true;
  }
};

TEST_F(Limits, PerConnectionUndispatchedBytesHoldAFloodingPeerWhileOthersGoOn) {
  opts.ms_max_undispatched_bytes_per_connection = 128 * 1024;  // the total stays 100 MiB
  GateDispatcher g;
  ASSERT_NO_FATAL_FAILURE(start_server(Policy::stateful_server(), &g));
  Client flood(1, Policy::lossless_client()), other(2, Policy::lossless_client());
  ConnectionRef cf = connect(flood), co = connect(other);
  constexpr int kFlood = 32;
  for (int i = 0; i < kFlood; ++i) ASSERT_FALSE(cf->send_message(message(kTypeSlow, 32 * 1024)));
  // Let the flooder fill its share, then give it time to overshoot if it would.
  ASSERT_TRUE(eventually([&] { return server->stats().messages_received >= 4; }));
  std::this_thread::sleep_for(300ms);
  // The other connection keeps working meanwhile (same worker, same messenger).
  constexpr int kOther = 20;
  for (int i = 0; i < kOther; ++i) ASSERT_FALSE(co->send_message(message(kTypeFast, 32 * 1024)));
  ASSERT_TRUE(eventually([&] { return g.fast.load() == kOther; }));
  // The flooder: one message in ms_dispatch, 128 KiB (4 x 32 KiB) queued, one
  // more that crossed the bound. Without the bound all 32 would be in.
  const std::uint64_t flood_in = server->stats().messages_received - g.fast.load();
  EXPECT_LE(flood_in, 7u) << "the flooding connection was not held at its bound";
  g.gate = true;
  ASSERT_TRUE(eventually([&] { return g.slow.load() == kFlood; })) << "nothing lost once dispatch catches up";
}

TEST_F(Limits, TotalUndispatchedBytesBoundEveryConnectionTogether) {
  opts.ms_dispatch_throttle_bytes = 128 * 1024;
  opts.ms_max_undispatched_bytes_per_connection = 0;  // only the total applies
  GateDispatcher g;
  ASSERT_NO_FATAL_FAILURE(start_server(Policy::stateful_server(), &g));
  Client a(1, Policy::lossless_client()), b(2, Policy::lossless_client());
  ConnectionRef ca = connect(a), cb = connect(b);
  constexpr int kEach = 16;
  for (int i = 0; i < kEach; ++i) {
    ASSERT_FALSE(ca->send_message(message(kTypeSlow, 32 * 1024)));
    ASSERT_FALSE(cb->send_message(message(kTypeSlow, 32 * 1024)));
  }
  ASSERT_TRUE(eventually([&] { return server->stats().messages_received >= 4; }));
  std::this_thread::sleep_for(300ms);
  // 128 KiB queued in total plus, per connection, the message in ms_dispatch
  // and the one that crossed the bound.
  EXPECT_LE(server->stats().messages_received, 9u) << "the two connections together exceeded the total bound";
  g.gate = true;
  ASSERT_TRUE(eventually([&] { return g.slow.load() == 2 * kEach; }));
}

// --- handshake and idle timeouts -------------------------------------------------

// A peer that completes the banner exchange (on either stack) and then says
// nothing: the accepting side's ms_connection_ready_timeout closes it.
struct Mute : transport::ConnectionHandler {
  std::atomic<bool> established{false}, faulted{false};
  void on_established(const proto::Negotiated&) override { established = true; }
  void on_frame(proto::Frame&&) override {}
  void on_fault(const transport::Fault&) override { faulted = true; }
};

TEST_F(Limits, HalfOpenHandshakeHitsTheServersReadyTimeout) {
  opts.ms_connection_ready_timeout = 300ms;
  start_server();
  auto stack = make_test_stack();
  stack->start();
  Mute mute;
  std::mutex mu;
  transport::ConnectionRef raw;
  LogCapture logs;
  stack->connect(server->get_myaddrs().front().addr, stack->worker(0),
                 [&](std::error_code ec, transport::ConnectionRef c) {
                   ASSERT_FALSE(ec) << ec.message();
                   std::lock_guard l(mu);
                   raw = c;
                   raw->start(mute, proto::Banner{});
                 });
  ASSERT_TRUE(eventually([&] { return mute.established.load(); }, 30s));
  ASSERT_TRUE(eventually([&] { return mute.faulted.load(); }, 30s)) << "the server closed the half-open connection";
  EXPECT_TRUE(logs.contains("ms_connection_ready_timeout"));
  EXPECT_GE(server->stats().faults, 1u);
  std::atomic<bool> closed{false};
  stack->worker(0).post([&] {
    std::lock_guard l(mu);
    if (raw) raw->close();
    closed = true;
  });
  ASSERT_TRUE(eventually([&] { return closed.load(); }));
  stack->stop();
}

TEST_F(Limits, IdleConnectionIsClosedByTheServersIdleTimeout) {
  opts.ms_connection_idle_timeout = 300ms;
  start_server();
  MessengerOptions copt = test_options();  // the client would wait 900 s
  Client a(1, Policy::lossy_client(), copt);
  LogCapture logs;
  ConnectionRef ca = connect(a);
  expect_delivered(ca);
  ASSERT_TRUE(a.d.w.wait_for([&] { return a.d.resets == 1; }, 30s)) << "the server's idle timeout closed it";
  EXPECT_TRUE(logs.contains("ms_connection_idle_timeout"));
}

// --- queued outgoing bytes ------------------------------------------------------------

TEST_F(Limits, SendQueueBoundRefusesWithQueueFullAndRecovers) {
  // The server is bound but not started: it closes every connection at
  // accept, so the client's messages stay queued (lossless: it retries).
  ASSERT_NO_FATAL_FAILURE(start_server(Policy::stateful_server(), &sd, /*start=*/false));
  MessengerOptions copt = test_options();
  copt.ms_max_queued_send_bytes_per_connection = 256 * 1024;
  Client a(1, Policy::lossless_client(), copt);
  ConnectionRef ca = connect(a);
  LogCapture logs;
  for (int i = 0; i < 4; ++i) ASSERT_FALSE(ca->send_message(message(kTypeSlow, 64 * 1024))) << i;
  MessageRef fifth = message(kTypeSlow, 64 * 1024);
  EXPECT_EQ(ca->send_message(fifth), make_error_code(errc::queue_full));
  EXPECT_EQ(a.m->stats().send_queue_full, 1u);
  EXPECT_TRUE(logs.contains("ms_max_queued_send_bytes_per_connection = 262144"));
  // A message larger than the bound passes when it is alone (fresh session).
  Client b(2, Policy::lossless_client(), copt);
  EXPECT_FALSE(connect(b)->send_message(message(kTypeSlow, 512 * 1024)));

  // The peer comes up: the queue drains, the refused message can be sent
  // again, and every accepted message arrives exactly once.
  server->start();
  ASSERT_TRUE(eventually([&] { return !ca->send_message(fifth); }));
  // 4 + the one refused at first + b's.
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 6; }));
  std::this_thread::sleep_for(100ms);
  std::lock_guard l(sd.w.mu);
  EXPECT_EQ(sd.messages, 6u);
}

}  // namespace
}  // namespace siphon::test
