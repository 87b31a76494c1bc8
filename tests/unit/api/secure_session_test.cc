// Secure mode between two Siphon messengers (issue 15): cephx's key-based
// exchange from a shared keyring (docs/security.md), then AES-128-GCM for
// every frame, on the stack under test -- TCP here, the RDMA stack on the
// software fabric in secure_session_test_rdma. Messages go both ways (a
// server echoes each one; sizes up to 1 MiB, past the RDMA zero-copy
// threshold), sessions re-authenticate and re-key on every reconnect, and
// ciphertext damaged on the way is caught by the GCM tag: it faults only
// that connection, whose lossless session replays, while a second client's
// session never notices. The first case runs again with clients that speak
// msgr2.0 (rev0) frames, one GCM message a frame (cephx.md §6.3), on both
// stacks; the tampering case over TCP. On RDMA, data segments past
// ms_async_rdma_zero_copy_threshold go by SEND in secure mode (never READ
// from registered memory), in either revision: checked on the counters.
#include <cinttypes>
#include <cstdio>
#include <atomic>
#include <cstring>
#include <thread>

#include "messenger_pair.h"
#include "messenger_state.h"
#include "msgr_test_util.h"
#include "ordered_delivery.h"
#ifdef SIPHON_TEST_RDMA
#include "rdma/soft/soft_provider.h"
#include "rdma/transport/rdma_stack.h"
#endif

namespace siphon::test {
namespace {

constexpr std::uint16_t kType = 0x7300;
const std::vector<std::uint8_t> kAdminKey = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                             0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};

// Data bytes of message i: mostly small, some KiB, every 50th 300 KiB and
// every 200th 1 MiB.
std::size_t data_size(std::uint64_t i) {
  if (i % 200 == 0) return 1u << 20;
  if (i % 50 == 0) return 300u << 10;
  const std::uint64_t h = mix(i);
  return h % 8 == 0 ? 1 + h % 9000 : h % 200;
}

void fill(BufferList& bl, std::size_t n, std::uint64_t seed) {
  std::byte* p = bl.append_uninitialized(n);
  std::uint64_t x = mix(seed);
  for (std::size_t k = 0; k < n; ++k) {
    if (k % 8 == 0) x = x * 6364136223846793005ull + 1442695040888963407ull;
    p[k] = static_cast<std::byte>(x >> (8 * (k % 8)));
  }
}

MessageRef make(std::uint64_t i) {
  MessageRef m = make_message<Message>(kType);
  m->set_tid(i);
  fill(m->front(), 24, i);
  fill(m->data(), data_size(i), i + 7);
  return m;
}

std::string differs(const Message& m) {
  const MessageRef want = make(m.get_tid());
  if (m.get_type() != kType || m.front().to_string() != want->front().to_string() ||
      m.data().to_string() != want->data().to_string())
    return "message " + std::to_string(m.get_tid()) + " differs";
  return {};
}

// The server: checks each message and sends back a fresh copy of it on the
// connection it came on.
class Echo : public Dispatcher {
 public:
  bool ms_can_fast_dispatch(const Message&) const override { return true; }
  void ms_fast_dispatch(MessageRef m) override {
    if (!differs(*m).empty()) corrupt.fetch_add(1);
    const auto info = m->get_connection()->auth_info();
    if (info.con_mode != proto::kConModeSecure || info.name != "client.admin") not_secure.fetch_add(1);
    m->get_connection()->send_message(make(m->get_tid()));
    received.fetch_add(1);
  }
  bool ms_dispatch(MessageRef) override { return false; }
  std::atomic<std::uint64_t> received{0}, corrupt{0}, not_secure{0};
};

struct Faults {
  std::uint32_t drop_one_in = 0;  // TCP: a socket operation; RDMA: a QP moved to ERR
  double corrupt = 0;             // chance a received buffer gets one bit flipped
  std::uint64_t seed = 1;
};

std::shared_ptr<transport::Stack> stack_with(const Faults& f) {
  transport::TcpOptions o = test_stack_options(2);
#ifdef SIPHON_TEST_RDMA
  rdma::soft::SoftOptions so;
  so.faults.seed = f.seed;
  so.faults.qp_to_err.one_in = f.drop_one_in;
  so.faults.corrupt_data.probability = f.corrupt;
  // Providers outlive every stack of the test binary.
  static std::vector<std::unique_ptr<rdma::Provider>> providers;
  providers.push_back(rdma::soft::make_provider(so));
  rdma::RdmaOptions r;
  r.common = o.common;
  r.device_name = "soft0";
  r.buffer_size = 16 * 1024;
  r.credits = 8;
  r.receive_buffers = 8192;
  r.polling = std::chrono::microseconds(50);
  return std::make_shared<rdma::RdmaStack>(*providers.back(), r);
#else
  o.common.inject.socket_failures = f.drop_one_in;
  o.common.inject.corruption_probability = f.corrupt;
  o.common.inject.seed = f.seed;
  return transport::make_tcp_stack(o);
#endif
}

ServerAuth server_auth() {
  ServerAuth a;
  a.service_methods = {proto::kAuthMethodCephx};  // cephx required
  a.service_modes = {proto::kConModeSecure};      // and secure mode
  a.keys["client.admin"] = kAdminKey;
  a.keyring_source = "the test's keyring";
  return a;
}

ClientAuth client_auth() {
  ClientAuth a;
  a.methods = {proto::kAuthMethodCephx};
  a.secret = kAdminKey;
  a.key_source = "the test's keyring";
  a.modes = {proto::kConModeSecure, proto::kConModeCrc};
  a.key_based_everywhere = true;
  return a;
}

std::unique_ptr<Messenger> server_on(std::shared_ptr<transport::Stack> stack, Echo& echo) {
  auto s = Messenger::create(std::move(stack), {entity_type::osd, 0}, test_options());
  s->set_policy(entity_type::client, Policy::stateful_server());
  s->set_server_auth(server_auth());
  s->add_dispatcher_tail(&echo);
  EXPECT_FALSE(s->bind(loopback_any_port()));
  s->start();
  return s;
}

// `rev1` false: the client leaves msgr2.1 out of its banner, so its
// connections use msgr2.0 frames.
std::unique_ptr<Messenger> client_on(std::shared_ptr<transport::Stack> stack, OrderVerifier& v, std::int64_t num,
                                     bool rev1 = true) {
  MessengerOptions o = test_options();
  o.ms_msgr2_rev1 = rev1;
  auto c = Messenger::create(std::move(stack), {entity_type::client, num}, std::move(o));
  c->set_policy(entity_type::osd, Policy::lossless_client());
  c->set_client_auth(client_auth());
  c->add_dispatcher_tail(&v);
  c->start();
  return c;
}

// Sends 1..count on `con`, paced by the echoes `v` has seen.
void send_all(const ConnectionRef& con, OrderVerifier& v, std::uint64_t count) {
  v.target = count;  // wakes the waiter on the last one
  for (std::uint64_t i = 1; i <= count; ++i) {
    v.pace(i, std::chrono::seconds(60));
    ASSERT_FALSE(con->send_message(make(i)));
  }
}

void carries_messages_both_ways(bool rev1) {
  Echo echo;
  OrderVerifier v(differs);
  constexpr std::uint64_t kCount = 400;
  MessengerPair m;
  const auto server_stack = stack_with({});
  const auto client_stack = stack_with({});
  m.server = server_on(server_stack, echo);
  m.client = client_on(client_stack, v, 7, rev1);
  ConnectionRef con = m.client->connect_to(entity_type::osd, m.server->get_myaddrs());
  ASSERT_NO_FATAL_FAILURE(send_all(con, v, kCount));
  v.expect_all(kCount, v.wait_all(kCount, std::chrono::seconds(120)));
  EXPECT_EQ(echo.corrupt.load(), 0u);
  EXPECT_EQ(echo.not_secure.load(), 0u) << "the server saw messages outside a secure client.admin session";
  const auto info = con->auth_info();
  EXPECT_EQ(info.method, proto::kAuthMethodCephx);
  EXPECT_EQ(info.con_mode, proto::kConModeSecure);
  EXPECT_EQ(m.client->stats().faults, 0u);
  EXPECT_EQ(m.server->stats().decrypt_errors, 0u);
#ifdef SIPHON_TEST_RDMA
  // Messages 50, 100, ... carry 300 KiB or 1 MiB, past the zero-copy
  // threshold (64 KiB): in secure mode their ciphertext goes by SEND, and
  // nothing is offered for the peer to READ.
  std::uint64_t big = 0;
  for (std::uint64_t i = 1; i <= kCount; ++i)
    if (rdma::zero_copy_applies(rdma::RdmaOptions{}.zero_copy_threshold, data_size(i))) big += data_size(i);
  ASSERT_GT(big, 0u);
  for (const auto& [who, stack] : {std::pair{"client", client_stack}, std::pair{"server", server_stack}}) {
    const rdma::RdmaCounters c = std::dynamic_pointer_cast<rdma::RdmaStack>(stack)->counters();
    EXPECT_EQ(c.zero_copy_transfers.load(), 0u) << who << ": a secure session used the zero-copy path";
    EXPECT_EQ(c.rdma_reads.load(), 0u) << who;
    EXPECT_GE(c.tx_copied_bytes.load(), big) << who << ": the large data segments did not go by SEND";
  }
#endif
}

TEST(SecureSession, CarriesMessagesBothWaysInSecureMode) { carries_messages_both_ways(true); }

// Both ends log the revision and the mode at READY; the TCP transport also
// logs the revision each connection agreed on.
TEST(SecureSession, CarriesMessagesBothWaysInSecureModeOverMsgr20) {
  LogCapture logs;
  log::set_level(log::Subsys::transport, 5);
  log::set_level(log::Subsys::session, 5);
  carries_messages_both_ways(false);
  log::set_level(log::Subsys::transport, log::kDefaultLevel);
  log::set_level(log::Subsys::session, log::kDefaultLevel);
  const auto logged = [&](std::string_view side) {
    for (const std::string& l : logs.lines())
      if (l.find(side) != std::string::npos && l.find("auth cephx, secure mode, msgr2 rev0") != std::string::npos)
        return true;
    return false;
  };
  EXPECT_TRUE(logged("ready with ")) << "the client logged no secure msgr2.0 session";
  EXPECT_TRUE(logged("accepted client.admin from ")) << "the server logged no secure msgr2.0 session";
  EXPECT_FALSE(logs.contains("msgr2 rev1")) << "a connection used msgr2.1 frames";
#ifndef SIPHON_TEST_RDMA
  EXPECT_TRUE(logs.contains("(msgr2 rev0,")) << "the connection did not use msgr2.0 frames";
#endif
}

// The connection breaks every few dozen operations: each reconnect runs
// cephx again, gets a new connection secret and fresh nonces, and the
// lossless session replays into the new secure stream.
TEST(SecureSession, EveryReconnectIsSecureAgain) {
  const QuietLogs quiet{log::Subsys::session, log::Subsys::transport, log::Subsys::rdma};
  Echo echo;
  OrderVerifier v(differs);
  constexpr std::uint64_t kCount = 1500;
  MessengerPair m;
  m.server = server_on(stack_with({}), echo);
  // One socket operation in 20 fails (was 1 in 60: the batched write path
  // of issue 20 does the 1500 echoes in fewer operations, and some runs
  // ended without a failure).
  m.client = client_on(stack_with({20, 0, 5}), v, 7);
  ConnectionRef con = m.client->connect_to(entity_type::osd, m.server->get_myaddrs());
  ASSERT_NO_FATAL_FAILURE(send_all(con, v, kCount));
  const bool done = v.wait_all(kCount, std::chrono::seconds(240));
  if (!done) {
    print_messenger_state("client", *m.client);
    print_messenger_state("server", *m.server);
  }
  v.expect_all(kCount, done);
  const auto cs = m.client->stats();
  std::printf("[ secure ] %" PRIu64 " echoes in order over %" PRIu64 " client faults, %" PRIu64 " reconnects\n",
              kCount, cs.faults, cs.reconnects);
  EXPECT_GT(cs.reconnects, 0u) << "injection did not break the connection";
  EXPECT_EQ(echo.corrupt.load(), 0u);
  EXPECT_EQ(echo.not_secure.load(), 0u);
  EXPECT_EQ(con->auth_info().con_mode, proto::kConModeSecure);
}

// Client A's stack flips bits in what it receives (the server's
// ciphertext): the GCM tag catches each one, A's connection faults and its
// session replays, every echo still arrives intact; client B, on a clean
// stack and the same server, never faults.
void tampered_ciphertext_faults_only_that_connection(bool rev1) {
  Echo echo;
  OrderVerifier va(differs), vb(differs);
  constexpr std::uint64_t kCount = 1000;
  MessengerPair m;
  m.server = server_on(stack_with({}), echo);
  // One received buffer in 20 gets a flipped bit. At 1 in 100 a run could
  // end without any: client A's reads are batched (since issue 20's write
  // path, ~80 reads for the 1000 echoes), and 0.99^80 is 45 %.
  m.client = client_on(stack_with({0, 0.05, 9}), va, 7, rev1);
  auto client_b = client_on(stack_with({}), vb, 8, rev1);
  ConnectionRef a = m.client->connect_to(entity_type::osd, m.server->get_myaddrs());
  ConnectionRef b = client_b->connect_to(entity_type::osd, m.server->get_myaddrs());
  std::thread tb([&] { send_all(b, vb, kCount); });
  ASSERT_NO_FATAL_FAILURE(send_all(a, va, kCount));
  tb.join();
  const bool a_done = va.wait_all(kCount, std::chrono::seconds(240));
  const bool b_done = vb.wait_all(kCount, std::chrono::seconds(240));
  if (!a_done || !b_done) {
    print_messenger_state("client A", *m.client);
    print_messenger_state("client B", *client_b);
    print_messenger_state("server", *m.server);
  }
  va.expect_all(kCount, a_done);
  vb.expect_all(kCount, b_done);
  const auto as = m.client->stats();
  const auto bs = client_b->stats();
  std::printf("[ secure ] client A: %" PRIu64 " frames failed their GCM tag, %" PRIu64 " crc errors, %" PRIu64
              " faults, %" PRIu64 " reconnects; client B: %" PRIu64 " faults\n",
              as.decrypt_errors, as.crc_errors, as.faults, as.reconnects, bs.faults);
  EXPECT_GT(as.decrypt_errors, 0u) << "no flipped bit landed in a secure frame";
  EXPECT_GE(as.faults, as.decrypt_errors);
  EXPECT_EQ(bs.faults, 0u);
  EXPECT_EQ(bs.decrypt_errors, 0u);
  EXPECT_EQ(echo.corrupt.load(), 0u);
  client_b->shutdown();
  client_b->wait();
}

TEST(SecureSession, TamperedCiphertextFaultsOnlyThatConnection) {
  const QuietLogs quiet{log::Subsys::session, log::Subsys::transport, log::Subsys::rdma};
  tampered_ciphertext_faults_only_that_connection(true);
}

#ifndef SIPHON_TEST_RDMA
// rev0 decrypts each frame's preamble before it can check the tag: a
// flipped bit there fails the preamble's crc before any length in it is
// used, and is counted as a decrypt error like a failed tag.
TEST(SecureSession, TamperedCiphertextFaultsOnlyThatConnectionOverMsgr20) {
  const QuietLogs quiet{log::Subsys::session, log::Subsys::transport, log::Subsys::rdma};
  tampered_ciphertext_faults_only_that_connection(false);
}
#endif

// A client whose key differs from the server's keyring is refused: it
// never reaches READY, its fault names the entity, and the server counts
// the refusal.
TEST(SecureSession, AWrongKeyIsRefusedAndCounted) {
  Echo echo;
  OrderVerifier v;
  MessengerPair m;
  m.server = server_on(stack_with({}), echo);
  m.client = Messenger::create(stack_with({}), {entity_type::client, 7}, test_options());
  m.client->set_policy(entity_type::osd, Policy::lossy_client());
  ClientAuth wrong = client_auth();
  wrong.secret[0] ^= 0xff;
  m.client->set_client_auth(wrong);
  m.client->add_dispatcher_tail(&v);
  m.client->start();
  ConnectionRef con = m.client->connect_to(entity_type::osd, m.server->get_myaddrs());
  // connect_to() dials at once, so on a busy machine the refusal can close
  // this lossy connection before the message is offered: send_message() may
  // then refuse it, which is as right as queueing it.
  (void)con->send_message(make(1));
  ASSERT_TRUE(eventually([&] { return m.server->stats().auth_refused > 0; }));
  ASSERT_TRUE(eventually([&] { return con->last_fault().code == make_error_code(errc::auth_failed); }))
      << con->last_fault().reason;
  EXPECT_NE(con->last_fault().reason.find("client.admin"), std::string::npos) << con->last_fault().reason;
  EXPECT_EQ(echo.received.load(), 0u);
}

}  // namespace
}  // namespace siphon::test
