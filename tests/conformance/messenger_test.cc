// Two Siphon messengers on the stack under test: handshake, events, typed
// messages, keepalive, mark_down, lossy resets, peer restart, throttles,
// timeouts, the connection race, clean shutdown. One binary, run by ctest on
// TCP (messenger_test), on the soft fabric (messenger_test_rdma), in SRQ mode
// (messenger_test_rdma_srq) and over verbs in the rxe guest, each chosen by
// SIPHON_TEST_STACK (siphon_gtest_stacks in tests/CMakeLists.txt).
#include <atomic>
#include <mutex>
#include <thread>

#include "msgr/transport/transport.h"
#include "msgr_test_util.h"

namespace siphon::test {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kTypeTest = 0x7001;

// A typed message: a u32 counter in the front.
struct MCounter : Message {
  static constexpr std::uint16_t kType = 0x7002;
  MCounter() : Message(kType, /*version=*/2, /*compat=*/1) {}
  explicit MCounter(std::uint32_t v) : MCounter() { value = v; }
  std::uint32_t value = 0;
  bool decoded = false;
  void encode_payload(std::uint64_t) override { front().append(&value, sizeof(value)); }
  void decode_payload() override {
    if (front().length() != sizeof(value)) throw std::runtime_error("bad MCounter front");
    front().copy_out(0, sizeof(value), &value);
    decoded = true;
  }
};

struct Pair : ::testing::Test {
  MessengerOptions opts = test_options();
  // Dispatchers outlive the messengers (TearDown shuts them down first).
  RecordingDispatcher sd, cd, sd2, cd2;
  std::unique_ptr<Messenger> server, client;

  void start(const Policy& server_policy, const Policy& client_policy, MessengerOptions o) {
    server = make_messenger({entity_type::osd, 0}, o);
    client = make_messenger({entity_type::client, 4100}, o);
    server->set_policy(entity_type::client, server_policy);
    client->set_policy(entity_type::osd, client_policy);
    ASSERT_NO_FATAL_FAILURE(start_pair(*server, sd, *client, cd));
  }
  void TearDown() override {
    if (client) client->shutdown();
    if (server) server->shutdown();
    if (client) client->wait();
    if (server) server->wait();
  }
  ConnectionRef connect() { return client->connect_to(entity_type::osd, server->get_myaddrs()); }
};

// This binary runs once per stack (SIPHON_TEST_STACK, set by ctest).
TEST(StackUnderTest, IsTheOneThisRunAskedFor) { EXPECT_TRUE(is_the_stack_under_test(*make_test_stack())); }

TEST_F(Pair, HandshakeReportsConnectAndAcceptWithPeerIdentity) {
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  ConnectionRef con = connect();
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.connects == 1; }));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.accepts == 1; }));
  EXPECT_TRUE(con->is_connected());
  EXPECT_FALSE(con->is_lossy());
  EXPECT_EQ(con->get_peer_type(), entity_type::osd);
  EXPECT_EQ(con->get_peer_name().num, 0);
  EXPECT_EQ(con->get_features(), kFeaturesAllPacific);
  EXPECT_EQ(con->get_peer_addrs(), server->get_myaddrs());
  ConnectionRef in = sd.last_con;
  EXPECT_EQ(in->get_peer_type(), entity_type::client);
  EXPECT_EQ(in->get_peer_name().num, 4100);
  // connect_to again returns the same session.
  EXPECT_EQ(connect().get(), con.get());
  // The client learned its address from the server's HELLO.
  ASSERT_EQ(client->get_myaddrs().size(), 1u);
  EXPECT_EQ(client->get_myaddrs().front().nonce, client->get_nonce());
}

TEST_F(Pair, MessagesCarryHeaderFieldsAndSourceBothWays) {
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  std::vector<MessageRef> got;
  sd.on_message = [&](const MessageRef& m) {
    got.push_back(m);
    // Reply on the same connection from the dispatch thread.
    MessageRef r = make_message<Message>(kTypeTest);
    r->set_tid(m->get_tid());
    r->front().append("pong");
    m->get_connection()->send_message(r);
  };
  ConnectionRef con = connect();
  MessageRef m = make_message<Message>(kTypeTest, 3, 2);
  m->set_tid(77);
  m->set_priority(msg_priority::high);
  m->front().append("front");
  m->middle().append("mid");
  m->data().append("data!");
  ASSERT_FALSE(con->send_message(m));
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.messages == 1; }));
  std::lock_guard l(sd.w.mu);
  ASSERT_EQ(got.size(), 1u);
  const MessageRef& r = got[0];
  EXPECT_EQ(r->get_type(), kTypeTest);
  EXPECT_EQ(r->get_tid(), 77u);
  EXPECT_EQ(r->get_priority(), msg_priority::high);
  EXPECT_EQ(r->get_version(), 3);
  EXPECT_EQ(r->get_compat_version(), 2);
  EXPECT_EQ(r->get_seq(), 1u);
  EXPECT_EQ(r->front().to_string(), "front");
  EXPECT_EQ(r->middle().to_string(), "mid");
  EXPECT_EQ(r->data().to_string(), "data!");
  EXPECT_EQ(r->get_source().type, entity_type::client);
  EXPECT_EQ(r->get_source().num, 4100);
}

TEST_F(Pair, TypedMessagesAreDecodedUnknownOnesDeliveredGeneric) {
  auto reg = std::make_shared<MessageRegistry>();
  reg->add<MCounter>();
  server = make_messenger({entity_type::osd, 0}, opts);
  server->set_message_registry(reg);
  client = make_messenger({entity_type::client, 1}, opts);
  std::vector<MessageRef> got;
  sd.on_message = [&](const MessageRef& m) { got.push_back(m); };
  server->add_dispatcher_tail(&sd);
  ASSERT_FALSE(server->bind(loopback_any_port()));
  server->start();
  client->start();
  ConnectionRef con = connect();
  con->send_message(make_message<MCounter>(41));
  con->send_message(make_message<Message>(0x7fff));  // not registered
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 2; }));
  std::lock_guard l(sd.w.mu);
  auto* typed = dynamic_cast<MCounter*>(got[0].get());
  ASSERT_NE(typed, nullptr);
  EXPECT_TRUE(typed->decoded);
  EXPECT_EQ(typed->value, 41u);
  EXPECT_EQ(dynamic_cast<MCounter*>(got[1].get()), nullptr);
  EXPECT_EQ(got[1]->get_type(), 0x7fff);
}

TEST_F(Pair, UndecodableTypedMessageFaultsOnlyThatConnection) {
  auto reg = std::make_shared<MessageRegistry>();
  reg->add<MCounter>();
  server = make_messenger({entity_type::osd, 0}, opts);
  server->set_message_registry(reg);
  server->set_policy(entity_type::client, Policy::stateless_server());
  client = make_messenger({entity_type::client, 1}, opts);
  client->set_policy(entity_type::osd, Policy::lossy_client());
  ASSERT_NO_FATAL_FAILURE(start_pair(*server, sd, *client, cd));
  LogCapture logs;
  ConnectionRef con = connect();
  MessageRef bad = make_message<Message>(MCounter::kType, 2, 1);
  bad->front().append("xy");  // 2 bytes: decode_payload throws
  con->send_message(bad);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.resets == 1; }));
  EXPECT_TRUE(logs.contains("failed to decode"));
  // compat_version beyond what we understand (MCounter is version 2).
  ConnectionRef con2 = connect();
  con2->send_message(make_message<Message>(MCounter::kType, 5, 3));
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.resets == 2; }));
  EXPECT_TRUE(logs.contains("compat_version 3"));
  EXPECT_EQ(sd.counts().messages, 0u);
  // The server still serves new connections.
  ConnectionRef con3 = connect();
  con3->send_message(make_message<MCounter>(1));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 1; }));
}

// Counts live instances, to see when the sender frees a message.
struct Tracked : Message {
  static std::atomic<int>& live() {
    static std::atomic<int> n{0};
    return n;
  }
  Tracked() : Message(kTypeTest) { ++live(); }
  ~Tracked() override { --live(); }
};

TEST_F(Pair, AckFramesFreeTheSentListOnAOneWaySession) {
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  ConnectionRef con = connect();
  for (int i = 0; i < 100; ++i) con->send_message(make_message<Tracked>());
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 100; }));
  // The server never sends a message, so only ACK frames can acknowledge
  // these; the client then drops them from its sent list.
  EXPECT_TRUE(eventually([] { return Tracked::live().load() == 0; }, 10s))
      << Tracked::live().load() << " messages still held";
}

TEST_F(Pair, LossySessionKeepsNoSentList) {
  start(Policy::stateless_server(), Policy::lossy_client(), opts);
  ConnectionRef con = connect();
  for (int i = 0; i < 50; ++i) con->send_message(make_message<Tracked>());
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 50; }));
  EXPECT_TRUE(eventually([] { return Tracked::live().load() == 0; }, 10s));
}

TEST_F(Pair, KeepaliveIsAcknowledged) {
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  ConnectionRef con = connect();
  con->send_keepalive();  // may be requested before READY
  EXPECT_TRUE(eventually([&] { return con->last_keepalive_ack_ns() != 0; }, 10s));
}

TEST_F(Pair, MarkDownDropsTheSessionWithoutCallbacks) {
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  ConnectionRef con = connect();
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.connects == 1; }));
  con->mark_down();
  // At once (the teardown runs later on the connection's worker): sends
  // fail and connect_to makes a new session whose messages arrive.
  EXPECT_EQ(con->send_message(make_message<Message>(kTypeTest)), make_error_code(errc::not_connected));
  ConnectionRef again = connect();
  EXPECT_NE(again.get(), con.get());
  EXPECT_FALSE(again->send_message(make_message<Message>(kTypeTest)));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 1; })) << "a message sent right after mark_down was lost";
  EXPECT_TRUE(eventually([&] { return !con->is_connected(); }, 5s));
  EXPECT_EQ(cd.counts().resets, 0);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.connects == 2; }));
}

TEST_F(Pair, LossyFaultResetsTheSessionAndCallsHandleReset) {
  start(Policy::stateless_server(), Policy::lossy_client(), opts);
  ConnectionRef con = connect();
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.accepts == 1; }));
  sd.last_con->mark_down();  // the server drops it: the client sees a fault
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.resets == 1; }));
  EXPECT_EQ(cd.last_con.get(), con.get());
  EXPECT_FALSE(con->is_connected());
  EXPECT_EQ(con->send_message(make_message<Message>(kTypeTest)), make_error_code(errc::not_connected));
  // A lossy session never comes back by itself; connect_to makes a new one
  // whose numbering starts again at 1.
  std::vector<std::uint64_t> seqs;
  sd.on_message = [&](const MessageRef& m) { seqs.push_back(m->get_seq()); };
  connect()->send_message(make_message<Message>(kTypeTest));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 1; }));
  EXPECT_EQ(seqs, std::vector<std::uint64_t>{1});
}

TEST_F(Pair, RefusedConnectIsReported) {
  opts.ms_connection_ready_timeout = 2s;
  client = make_messenger({entity_type::client, 1}, opts);
  client->set_policy(entity_type::osd, Policy::lossy_client());
  client->add_dispatcher_tail(&cd);
  client->start();
  // Bind then close a messenger to find a port nobody listens on.
  EntityAddrVec dead;
  {
    auto tmp = make_messenger({entity_type::osd, 9}, opts);
    ASSERT_FALSE(tmp->bind(loopback_any_port()));
    dead = tmp->get_myaddrs();
    tmp->shutdown();
    tmp->wait();
  }
  client->connect_to(entity_type::osd, dead);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.refused >= 1 && cd.resets == 1; }));
}

TEST_F(Pair, PeerRestartIsSeenAsRemoteReset) {
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  const std::uint32_t nonce = server->get_nonce();
  const EntityAddrVec addrs = server->get_myaddrs();
  ConnectionRef con = connect();
  con->send_message(make_message<Message>(kTypeTest));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 1; }));
  // Restart the server: same address and nonce, no session state.
  server->shutdown();
  server->wait();
  server = make_messenger({entity_type::osd, 0}, opts, nonce);
  server->set_policy(entity_type::client, Policy::stateful_server());
  server->add_dispatcher_tail(&sd2);
  EntityAddrVec again(EntityAddr(AddrType::msgr2, addrs.front().addr));
  ASSERT_FALSE(server->bind(again));
  server->start();
  // The client reconnects (SESSION_RECONNECT), is told SESSION_RESET, reports
  // a remote reset and starts a new session on the same Connection.
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.remote_resets == 1; }));
  con->send_message(make_message<Message>(kTypeTest));
  ASSERT_TRUE(sd2.w.wait_for([&] { return sd2.messages >= 1; }));
  EXPECT_TRUE(con->is_connected());
}

TEST_F(Pair, ClientRestartIsSeenAsRemoteResetByTheServer) {
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  const std::uint32_t nonce = client->get_nonce();
  ConnectionRef con = connect();
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.accepts == 1; }));
  client->shutdown();
  client->wait();
  // Same nonce and address family: the server finds the old session, with a
  // different client cookie (the peer restarted).
  client = make_messenger({entity_type::client, 4100}, opts, nonce);
  client->set_policy(entity_type::osd, Policy::lossless_client());
  client->add_dispatcher_tail(&cd2);
  client->start();
  ConnectionRef con2 = connect();
  con2->send_message(make_message<Message>(kTypeTest));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.remote_resets == 1 && sd.messages == 1; }));
}

TEST_F(Pair, MissingFeaturesAreRefusedWithIdentMissingFeatures) {
  Policy sp = Policy::stateless_server(/*req=*/1ull << 20);  // SERVER_PACIFIC
  Policy cp = Policy::lossy_client();
  cp.features_supported &= ~(1ull << 20);
  start(sp, cp, opts);
  LogCapture logs;
  connect();
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.resets == 1; }));
  EXPECT_TRUE(logs.contains("peer requires features we lack 0x100000"));
  EXPECT_EQ(sd.counts().accepts, 0);
}

TEST_F(Pair, SilentServerHitsTheClientsReadyTimeout) {
  opts.ms_connection_ready_timeout = 300ms;
  client = make_messenger({entity_type::client, 1}, opts);
  client->set_policy(entity_type::osd, Policy::lossy_client());
  client->add_dispatcher_tail(&cd);
  client->start();
  // A peer that accepts and never says a word (not even a banner): a bare
  // stack of the kind under test (TCP, soft fabric, or verbs on rxe) whose
  // accepted connections are held but never started.
  std::shared_ptr<transport::Stack> mute_stack = make_test_stack();
  mute_stack->start();
  std::mutex held_mu;
  std::vector<transport::ConnectionRef> held;
  NetAddress bound;
  ASSERT_FALSE(mute_stack->listen(
      loopback_any_port().addrs.front().addr,
      [&](transport::ConnectionRef c) {
        std::lock_guard l(held_mu);
        held.push_back(std::move(c));
      },
      bound));
  EntityAddrVec mute(EntityAddr(AddrType::msgr2, bound));
  LogCapture logs;
  const auto t0 = std::chrono::steady_clock::now();
  client->connect_to(entity_type::osd, mute);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.resets == 1; }, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  EXPECT_TRUE(logs.contains("ms_connection_ready_timeout"));
  mute_stack->stop();  // closes the held connections
  std::lock_guard l(held_mu);
  EXPECT_FALSE(held.empty());
}

TEST_F(Pair, IdleConnectionTimesOut) {
  opts.ms_connection_idle_timeout = 300ms;
  start(Policy::stateless_server(), Policy::lossy_client(), opts);
  connect();
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.connects == 1; }));
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.resets == 1; }, 10s));
}

// ms_connection_idle_timeout as Ceph's AsyncConnection::tick applies it: a
// READY connection with no frame either way for the timeout is faulted, on
// whichever side has the timeout. Here only the server has it and the client
// (900 s) stays silent, as a client that vanished without its close reaching
// the server (a partition ate its FIN or DREQ): the server must close the
// lossy connection, free it and report the reset to its dispatcher.
TEST_F(Pair, ServerIdleTimeoutClosesASilentLossyClientAndReportsIt) {
  MessengerOptions so = opts;
  so.ms_connection_idle_timeout = 400ms;
  server = make_messenger({entity_type::osd, 0}, so);
  client = make_messenger({entity_type::client, 4100}, opts);
  server->set_policy(entity_type::client, Policy::stateless_server());
  client->set_policy(entity_type::osd, Policy::lossy_client());
  ASSERT_NO_FATAL_FAILURE(start_pair(*server, sd, *client, cd));
  LogCapture logs;
  ConnectionRef con = connect();
  ASSERT_FALSE(con->send_message(make_message<Message>(kTypeTest)));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.resets == 1; }, 10s)) << "the server reports its idle lossy connection";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms) << "closed before the timeout";
  EXPECT_TRUE(logs.contains("ms_connection_idle_timeout: no traffic"));
  EXPECT_GE(server->stats().faults, 1u);
  EXPECT_EQ(server->stats().idle_timeouts, 1u) << "the fault is counted as an idle timeout";
  EXPECT_EQ(client->stats().idle_timeouts, 0u) << "the client has no timeout of its own (900 s)";
  EXPECT_FALSE(sd.last_con->is_connected());
  EXPECT_TRUE(eventually([&] { return server->stats().connections == 0; }, 10s))
      << "the server still holds " << server->stats().connections << " connection(s)";
  // The client hears the close (the transport's end of stream or disconnect).
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.resets == 1; }, 10s));
  EXPECT_EQ(sd.counts().remote_resets + cd.counts().remote_resets, 0);
}

// A connection that carries traffic more often than the timeout stays up,
// here in one direction only (the server sends nothing but ACKs).
TEST_F(Pair, BusyConnectionOutlivesTheIdleTimeout) {
  opts.ms_connection_idle_timeout = 300ms;
  start(Policy::stateless_server(), Policy::lossy_client(), opts);
  ConnectionRef con = connect();
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.connects == 1; }));
  constexpr int kCount = 30;  // one every 50 ms: 1.5 s, five timeouts
  for (int i = 0; i < kCount; ++i) {
    ASSERT_FALSE(con->send_message(make_message<Message>(kTypeTest))) << i;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == kCount; }));
  EXPECT_EQ(sd.counts().resets + cd.counts().resets, 0);
  EXPECT_EQ(server->stats().faults + client->stats().faults, 0u);
  EXPECT_EQ(server->stats().idle_timeouts + client->stats().idle_timeouts, 0u);
  EXPECT_TRUE(con->is_connected());
}

// Lossless sessions as in Ceph (ProtocolV2::_fault): the idle timeout only
// drops the transport connection. A lossless client (no standby) reconnects
// at once, the stateful server keeps the session (standby); neither side
// reports a reset, and later messages arrive once each, in order.
TEST_F(Pair, IdleTimeoutKeepsALosslessSession) {
  opts.ms_connection_idle_timeout = 300ms;
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  std::vector<std::uint32_t> got;
  sd.on_message = [&](const MessageRef& m) {
    std::uint32_t v = ~0u;
    if (m->data().length() == sizeof(v)) m->data().copy_out(0, sizeof(v), &v);
    got.push_back(v);
  };
  auto numbered = [](std::uint32_t v) {
    MessageRef m = make_message<Message>(kTypeTest);
    m->data().append(&v, sizeof(v));
    return m;
  };
  ConnectionRef con = connect();
  ASSERT_FALSE(con->send_message(numbered(0)));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 1; }));
  ASSERT_TRUE(eventually([&] { return client->stats().faults >= 1; }, 10s)) << "the idle timeout faulted the client";
  EXPECT_GE(client->stats().idle_timeouts + server->stats().idle_timeouts, 1u);
  ASSERT_TRUE(eventually([&] { return server->stats().reconnects >= 1; }, 10s))
      << "the lossless client reconnected its session";
  for (std::uint32_t i = 1; i <= 5; ++i) ASSERT_FALSE(con->send_message(numbered(i)));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 6; }));
  std::this_thread::sleep_for(100ms);
  std::lock_guard l(sd.w.mu);
  EXPECT_EQ(got, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(sd.resets + cd.counts().resets + sd.remote_resets + cd.counts().remote_resets, 0);
  EXPECT_EQ(server->stats().sessions_reset + client->stats().sessions_reset, 0u);
}

// A lossless peer with standby (Ceph's lossless_peer) that has nothing to
// send goes to standby after the idle timeout and stays there, connection
// closed, until a message is queued; then it reconnects the same session.
TEST_F(Pair, IdleLosslessPeerWaitsInStandbyUntilItHasSomethingToSend) {
  opts.ms_connection_idle_timeout = 300ms;
  start(Policy::stateful_server(), Policy::lossless_peer(), opts);
  ConnectionRef con = connect();
  ASSERT_FALSE(con->send_message(make_message<Message>(kTypeTest)));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 1; }));
  ASSERT_TRUE(eventually([&] { return client->stats().faults >= 1 && !con->is_connected(); }, 10s));
  std::this_thread::sleep_for(1s);  // three more timeouts: no reconnect loop
  EXPECT_FALSE(con->is_connected());
  EXPECT_LE(client->stats().idle_timeouts, 1u) << "a connection in standby has no idle timer";
  EXPECT_EQ(client->stats().reconnects + server->stats().reconnects, 0u);
  EXPECT_LE(client->stats().faults, 1u);
  ASSERT_FALSE(con->send_message(make_message<Message>(kTypeTest)));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 2; }));
  EXPECT_GE(server->stats().reconnects, 1u) << "the same session, reconnected";
  EXPECT_EQ(sd.counts().resets + cd.counts().resets + sd.counts().remote_resets + cd.counts().remote_resets, 0);
}

TEST_F(Pair, KeepaliveIntervalKeepsAnIdleConnectionUp) {
  opts.ms_connection_idle_timeout = 600ms;
  opts.ms_keepalive_interval = 100ms;
  start(Policy::stateless_server(), Policy::lossy_client(), opts);
  ConnectionRef con = connect();
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.connects == 1; }));
  std::this_thread::sleep_for(1500ms);  // 2.5 idle timeouts pass
  EXPECT_EQ(cd.counts().resets, 0);
  EXPECT_TRUE(con->is_connected());
}

TEST_F(Pair, PolicyByteThrottlePausesReadingUntilMessagesAreReleased) {
  Policy sp = Policy::stateful_server();
  sp.throttler_bytes = std::make_shared<Throttle>("client-bytes", 256 * 1024);
  start(sp, Policy::lossless_client(), opts);
  std::vector<MessageRef> held;
  sd.on_message = [&](const MessageRef& m) { held.push_back(m); };
  ConnectionRef con = connect();
  constexpr int kCount = 64;
  const std::string payload(64 * 1024, 'x');
  for (int i = 0; i < kCount; ++i) {
    MessageRef m = make_message<Message>(kTypeTest);
    m->data().append(payload);
    con->send_message(m);
  }
  // The server holds every message it receives: reading must stop near the
  // budget (256 KiB, plus the message that crossed it).
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages >= 4; }));
  std::this_thread::sleep_for(300ms);  // reading has stopped: nothing more arrives
  {
    std::lock_guard l(sd.w.mu);
    EXPECT_LT(sd.messages, static_cast<std::uint64_t>(kCount));
    EXPECT_LE(sp.throttler_bytes->current(), 256u * 1024 + payload.size());
    sd.on_message = nullptr;  // drop what arrives from now on at once
    held.clear();             // release: budget returns, reading resumes
  }
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == kCount; }));
  EXPECT_LE(sp.throttler_bytes->peak(), 256u * 1024 + payload.size());
}

TEST_F(Pair, DispatchThrottleBoundsUndispatchedBytes) {
  opts.ms_dispatch_throttle_bytes = 128 * 1024;
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  std::atomic<bool> gate{false};
  sd.on_message = [&](const MessageRef&) {
    while (!gate.load()) std::this_thread::yield();
  };
  ConnectionRef con = connect();
  for (int i = 0; i < 32; ++i) {
    MessageRef m = make_message<Message>(kTypeTest);
    m->data().append(std::string(32 * 1024, 'y'));
    con->send_message(m);
  }
  // Let the server fill its dispatch budget (however slow the stack: the rxe
  // guest runs under TCG), then give it time to overshoot if it would.
  ASSERT_TRUE(eventually([&] { return server->stats().messages_received >= 4; }));
  std::this_thread::sleep_for(300ms);
  // One message in ms_dispatch, 128 KiB (4 x 32 KiB) queued, one more that
  // crossed the limit: reading stopped there.
  EXPECT_LE(server->stats().messages_received, 7u);
  gate = true;
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 32; }));
}

// Two lossless peers connect to each other at once. Whether the two
// CLIENT_IDENTs actually cross depends on timing: if one handshake completes
// before the other side's connect_to() runs, that side reuses the accepted
// session and there is no race (seen once in CI on the driven engine with
// the rings). So the test repeats the exchange with fresh messengers until a
// race happened, and checks every attempt for loss and order.
TEST_F(Pair, ConnectionRaceEndsWithOneSessionAndNoLoss) {
  constexpr int kAttempts = 20;
  constexpr int kN = 200;
  std::vector<std::uint32_t> expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = i + 1;
  int raced_in = 0;
  for (int attempt = 1; attempt <= kAttempts && raced_in == 0; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    RecordingDispatcher da, db;  // outlive the messengers
    auto a = make_messenger({entity_type::osd, 1}, opts);
    auto b = make_messenger({entity_type::osd, 2}, opts);
    std::vector<std::uint32_t> at_a, at_b;
    da.on_message = [&](const MessageRef& m) { at_a.push_back(static_cast<std::uint32_t>(m->get_tid())); };
    db.on_message = [&](const MessageRef& m) { at_b.push_back(static_cast<std::uint32_t>(m->get_tid())); };
    for (auto* p : {&a, &b}) {
      (*p)->set_default_policy(Policy::lossless_peer());
      ASSERT_FALSE((*p)->bind(loopback_any_port()));
    }
    a->add_dispatcher_tail(&da);
    b->add_dispatcher_tail(&db);
    a->start();
    b->start();
    LogCapture logs;
    log::set_level(log::Subsys::session, 5);
    ConnectionRef ab = a->connect_to(entity_type::osd, b->get_myaddrs());
    ConnectionRef ba = b->connect_to(entity_type::osd, a->get_myaddrs());
    for (int i = 1; i <= kN; ++i) {
      MessageRef m1 = make_message<Message>(kTypeTest);
      m1->set_tid(i);
      ab->send_message(m1);
      MessageRef m2 = make_message<Message>(kTypeTest);
      m2->set_tid(i);
      ba->send_message(m2);
    }
    ASSERT_TRUE(db.w.wait_for([&] { return db.messages >= kN; }));
    ASSERT_TRUE(da.w.wait_for([&] { return da.messages >= kN; }));
    {
      std::lock_guard l(db.w.mu);
      EXPECT_EQ(at_b, expected);
    }
    {
      std::lock_guard l(da.w.mu);
      EXPECT_EQ(at_a, expected);
    }
    log::set_level(log::Subsys::session, log::kDefaultLevel);
    // Both CLIENT_IDENTs met the other side's outgoing session: one side let
    // the incoming connection take its session over, the other said WAIT.
    int race_lines = 0;
    for (const auto& line : logs.lines())
      if (line.find("connection race") != std::string::npos) {
        ++race_lines;
        std::printf("  %s\n", line.c_str());
      }
    if (race_lines > 0) raced_in = attempt;
    a->shutdown();
    b->shutdown();
    a->wait();
    b->wait();
  }
  EXPECT_GE(raced_in, 1) << "the two connects never raced in " << kAttempts << " attempts";
}

TEST_F(Pair, ShutdownWithTrafficInFlightIsClean) {
  start(Policy::stateful_server(), Policy::lossless_client(), opts);
  ConnectionRef con = connect();
  for (int i = 0; i < 1000; ++i) {
    MessageRef m = make_message<Message>(kTypeTest);
    m->data().append(std::string(1024, 'z'));
    con->send_message(m);
  }
  client->shutdown();
  server->shutdown();
  client->wait();
  server->wait();
  EXPECT_EQ(con->send_message(make_message<Message>(kTypeTest)), make_error_code(errc::not_connected));
}


// A daemon's messengers may share one stack: the first to shut down must not
// stop it under the others.
TEST(SharedStack, FirstMessengerToWaitDoesNotStopTheOthers) {
  MessengerOptions o = test_options();
  RecordingDispatcher sd, d1, d2;
  auto server = make_messenger({entity_type::osd, 0}, o);
  server->add_dispatcher_tail(&sd);
  ASSERT_FALSE(server->bind(loopback_any_port()));
  server->start();
  std::shared_ptr<transport::Stack> shared = make_test_stack();
  auto first = Messenger::create(shared, {entity_type::client, 1}, o);
  auto second = Messenger::create(shared, {entity_type::client, 2}, o);
  first->add_dispatcher_tail(&d1);
  second->add_dispatcher_tail(&d2);
  first->start();
  second->start();
  ConnectionRef c1 = first->connect_to(entity_type::osd, server->get_myaddrs());
  ConnectionRef c2 = second->connect_to(entity_type::osd, server->get_myaddrs());
  ASSERT_FALSE(c1->send_message(make_message<Message>(kTypeTest)));
  ASSERT_FALSE(c2->send_message(make_message<Message>(kTypeTest)));
  ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == 2; }));

  first->shutdown();
  first->wait();
  // The second messenger's connection still works on the shared stack.
  for (int i = 0; i < 10; ++i) ASSERT_FALSE(c2->send_message(make_message<Message>(kTypeTest)));
  EXPECT_TRUE(sd.w.wait_for([&] { return sd.messages == 12; }));
  ConnectionRef again = second->connect_to(entity_type::osd, server->get_myaddrs());
  EXPECT_EQ(again, c2);

  second->shutdown();
  second->wait();
  server->shutdown();
  server->wait();
}

}  // namespace
}  // namespace siphon::test
