// RDMA -> TCP failover inside one lossless session (issue 19, item 4;
// docs/rdma-transport.md, Failover), on the software fabric: a client and a
// server, each with an async+rdma primary (its own soft provider) and an
// async+posix fallback. The client streams numbered messages with a CRC of
// their data; the server checks each arrives once, in order, intact. The
// client's fabric link is pulled (soft::set_link_down) for longer than
// siphon_ms_fallback_after, so the session goes over TCP and keeps going,
// then plugged back in, so it returns to RDMA. The application on either
// side sees no reset, and the switch counters equal the switches made.
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>

#include "msgr/base/crc32c.h"
#include "msgr_test_util.h"
#include "ordered_delivery.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/transport/rdma_stack.h"

namespace siphon::test {
namespace {

constexpr std::uint16_t kType = 0x7300;

// 1 B .. 256 B mostly; one in 64 up to 16 KiB; one in 512 from 64 to 128 KiB
// (zero-copy on the RDMA stack).
std::size_t data_size(std::uint64_t i) {
  const std::uint64_t h = mix(i);
  if (h % 512 == 0) return (64u << 10) + (h >> 9) % (64u << 10);
  if (h % 64 == 0) return 1 + (h >> 9) % (16u << 10);
  return 1 + (h >> 9) % 256;
}

// Data: a PRNG stream seeded by i; front = u64 index, u32 crc32c(data).
MessageRef make(std::uint64_t i) {
  const std::size_t n = data_size(i);
  MessageRef m = make_message<Message>(kType);
  m->set_tid(i);
  std::byte* d = m->data().append_uninitialized(n);
  std::uint64_t x = mix(i ^ 0x7777);
  for (std::size_t k = 0; k < n; ++k) {
    if (k % 8 == 0) x = x * 6364136223846793005ull + 1442695040888963407ull;
    d[k] = static_cast<std::byte>(x >> (8 * (k % 8)));
  }
  const std::uint32_t crc = crc32c(0, d, n);
  std::byte* f = m->front().append_uninitialized(12);
  std::memcpy(f, &i, 8);
  std::memcpy(f + 8, &crc, 4);
  return m;
}

std::string differs(const Message& m) {
  const std::uint64_t i = m.get_tid();
  // One session, never reset: its sequence numbers count like our index.
  if (m.get_seq() != i) return "seq " + std::to_string(m.get_seq()) + " carries tid " + std::to_string(i);
  BufferList front = m.front();
  auto fb = front.contiguous();
  if (fb.size() != 12) return "message " + std::to_string(i) + ": bad front";
  std::uint64_t fi = 0;
  std::uint32_t fcrc = 0;
  std::memcpy(&fi, fb.data(), 8);
  std::memcpy(&fcrc, fb.data() + 8, 4);
  std::uint32_t crc = 0;
  for (const auto& p : m.data().ptrs()) crc = crc32c(crc, p.bytes());
  if (fi != i || m.data().length() != data_size(i) || crc != fcrc) return "message " + std::to_string(i) + ": data differs";
  return {};
}

// What the application is told about its sessions: must stay all zero.
struct ResetWatch : Dispatcher {
  bool ms_dispatch(MessageRef) override { return false; }
  bool ms_handle_reset(ConnectionRef) override {
    ++resets;
    return false;
  }
  void ms_handle_remote_reset(ConnectionRef) override { ++remote_resets; }
  std::atomic<int> resets{0}, remote_resets{0};
};

std::shared_ptr<transport::Stack> rdma_stack(rdma::Provider& provider) {
  rdma::RdmaOptions r;
  r.common = test_stack_options(2).common;
  r.device_name = "soft0";
  r.buffer_size = 16 * 1024;
  r.credits = 8;
  r.receive_buffers = 512;
  r.polling = std::chrono::microseconds(50);
  r.ack_timeout = 12;  // ~17 ms per try: a pulled link is noticed in ~0.1 s
  r.retry_count = 5;
  r.cm_timeout = std::chrono::milliseconds(1000);
  r.device_check_interval = std::chrono::milliseconds(50);
  return std::make_shared<rdma::RdmaStack>(provider, r);
}

MessengerOptions failover_options() {
  MessengerOptions o = test_options();
  o.siphon_ms_fallback_after = std::chrono::milliseconds(500);
  o.siphon_ms_fallback_retry_interval = std::chrono::milliseconds(200);
  return o;
}

// Waits up to `timeout` for `pred`.
template <typename P>
bool eventually(P pred, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

struct Rig {
  std::unique_ptr<rdma::Provider> client_fabric = rdma::soft::make_provider();
  std::unique_ptr<rdma::Provider> server_fabric = rdma::soft::make_provider();
  OrderVerifier v{differs};
  ResetWatch client_watch, server_watch;
  std::shared_ptr<transport::Stack> server_rdma, client_rdma;
  MessengerPair m;
  std::atomic<std::uint64_t> sent{0};
  std::atomic<bool> stop{false};
  std::thread sender;

  // `server_fallback`: the server has a TCP fallback (a Siphon peer
  // listening on both) or not (one address, as a Ceph peer has).
  void start(bool server_fallback, bool link_down_first = false) {
    const MessengerOptions o = failover_options();
    server_rdma = rdma_stack(*server_fabric);
    client_rdma = rdma_stack(*client_fabric);
    m.server = Messenger::create(server_rdma, {entity_type::osd, 0}, o);
    m.client = Messenger::create(client_rdma, {entity_type::client, 7}, o);
    if (server_fallback) m.server->set_fallback_stack(make_tcp_stack_for_test());
    m.client->set_fallback_stack(make_tcp_stack_for_test());
    m.server->set_policy(entity_type::client, Policy::stateful_server());
    m.client->set_policy(entity_type::osd, Policy::lossless_client());
    m.server->add_dispatcher_tail(&v);
    m.server->add_dispatcher_tail(&server_watch);
    m.client->add_dispatcher_tail(&client_watch);
    ASSERT_FALSE(m.server->bind(loopback_any_port()));
    ASSERT_EQ(m.server->get_myaddrs().addrs.size(), server_fallback ? 2u : 1u) << m.server->get_myaddrs().to_string();
    m.server->start();
    m.client->start();
    if (link_down_first) rdma::soft::set_link_down(*client_fabric, true);
    ConnectionRef con = m.client->connect_to(entity_type::osd, m.server->get_myaddrs());
    sender = std::thread([this, con] {
      for (std::uint64_t i = 1; !stop.load(); ++i) {
        v.pace(i, std::chrono::seconds(60), 1000);
        if (con->send_message(make(i))) break;
        sent.store(i);
      }
    });
  }
  std::uint64_t received() {
    std::lock_guard l(v.w.mu);
    return v.received;
  }
  // Waits for `n` more messages to arrive.
  bool flows(std::uint64_t n) {
    const std::uint64_t at = received();
    return eventually([&] { return received() >= at + n; }, std::chrono::seconds(60));
  }
  // Stops sending and checks every message sent arrived once, in order, intact.
  void finish() {
    stop.store(true);
    sender.join();
    const std::uint64_t count = sent.load();
    {
      std::lock_guard l(v.w.mu);  // the dispatcher reads it under this lock
      v.target = count;
    }
    v.expect_all(count, v.wait_all(count, std::chrono::seconds(60)));
    EXPECT_EQ(client_watch.resets.load() + client_watch.remote_resets.load(), 0);
    EXPECT_EQ(server_watch.resets.load() + server_watch.remote_resets.load(), 0);
    EXPECT_EQ(m.client->stats().sessions_reset + m.server->stats().sessions_reset, 0u);
    std::printf("[ failover ] %" PRIu64 " messages (%" PRIu64 " MiB) delivered once, in order, intact\n", count,
                v.bytes >> 20);
  }
  ~Rig() {
    stop.store(true);
    if (sender.joinable()) sender.join();
    m.stop();
  }

  static std::shared_ptr<transport::Stack> make_tcp_stack_for_test() {
    return transport::make_tcp_stack(test_stack_options(2));
  }
};

std::uint64_t rdma_messages(const rdma::Provider& p) { return rdma::soft::counters(p)->messages_sent; }

TEST(RdmaFailover, LinkDownMovesTheSessionToTcpAndBack) {
  const QuietLogs quiet{log::Subsys::transport, log::Subsys::rdma};
  Rig r;
  ASSERT_NO_FATAL_FAILURE(r.start(true));
  ASSERT_TRUE(r.flows(3000)) << "no traffic over RDMA";
  EXPECT_GT(rdma_messages(*r.client_fabric), 0u);

  // The cable out: the session faults, RDMA reconnects fail for
  // siphon_ms_fallback_after, then the session goes over TCP -- where
  // messages keep arriving although the fabric carries nothing.
  ASSERT_TRUE(rdma::soft::set_link_down(*r.client_fabric, true));
  ASSERT_TRUE(eventually([&] { return r.m.client->stats().fallback_switches == 1; }, std::chrono::seconds(30)));
  const std::uint64_t fabric_at = rdma_messages(*r.client_fabric);
  ASSERT_TRUE(r.flows(3000)) << "no traffic over the fallback";
  EXPECT_EQ(rdma_messages(*r.client_fabric), fabric_at) << "the fabric carried messages while down";
  EXPECT_EQ(r.m.client->stats().primary_switches, 0u) << "moved back while the link was down";

  // The cable back: a probe connects, the session returns to RDMA, and the
  // fabric carries the traffic again.
  ASSERT_TRUE(rdma::soft::set_link_down(*r.client_fabric, false));
  ASSERT_TRUE(eventually([&] { return r.m.client->stats().primary_switches == 1; }, std::chrono::seconds(30)));
  const std::uint64_t fabric_back = rdma_messages(*r.client_fabric);
  ASSERT_TRUE(r.flows(3000)) << "no traffic after moving back";
  EXPECT_GT(rdma_messages(*r.client_fabric), fabric_back + 20) << "traffic did not return to RDMA";

  r.finish();
  const MessengerStats cs = r.m.client->stats();
  const MessengerStats ss = r.m.server->stats();
  std::printf("[ failover ] switches: %" PRIu64 " to TCP, %" PRIu64 " back to RDMA; client faults %" PRIu64
              ", reconnects %" PRIu64 ", replayed %" PRIu64 "\n",
              cs.fallback_switches, cs.primary_switches, cs.faults, cs.reconnects + ss.reconnects,
              cs.messages_replayed);
  EXPECT_EQ(cs.fallback_switches, 1u);
  EXPECT_EQ(cs.primary_switches, 1u);
  EXPECT_EQ(ss.fallback_switches + ss.primary_switches, 0u) << "the server never dials";
  EXPECT_GE(ss.reconnects, 2u);
}

// The RDMA device of one side goes away (soft::set_device_removed, as
// `rdma link delete`) and comes back: that stack releases everything on it
// and reopens it (docs/rdma-transport.md, Device removal); the session
// moves to TCP meanwhile and back to RDMA after, losing nothing.
void device_removed_and_back(bool on_server) {
  const QuietLogs quiet{log::Subsys::transport, log::Subsys::rdma};
  Rig r;
  ASSERT_NO_FATAL_FAILURE(r.start(true));
  ASSERT_TRUE(r.flows(3000)) << "no traffic over RDMA";
  rdma::Provider& gone = on_server ? *r.server_fabric : *r.client_fabric;
  auto& stack = dynamic_cast<rdma::RdmaStack&>(on_server ? *r.server_rdma : *r.client_rdma);
  const auto removals = [&] { return stack.counters().snapshot().at("device_removals"); };
  const auto reopens = [&] { return stack.counters().snapshot().at("device_reopens"); };

  ASSERT_TRUE(rdma::soft::set_device_removed(gone, "soft0", true));
  ASSERT_TRUE(eventually([&] { return removals() == 1; }, std::chrono::seconds(30)));
  ASSERT_TRUE(eventually([&] { return r.m.client->stats().fallback_switches == 1; }, std::chrono::seconds(30)));
  ASSERT_TRUE(eventually(
      [&] {
        const auto c = rdma::soft::counters(gone);
        return c->qps_live == 0 && c->cqs_live == 0 && c->mrs_live == 0 && c->pds_live == 0 &&
               c->contexts_live == 0 && c->cm_ids_live == 0;
      },
      std::chrono::seconds(30)))
      << "the stack still holds objects of the removed device";
  ASSERT_TRUE(r.flows(3000)) << "no traffic over the fallback";
  EXPECT_EQ(r.m.client->stats().primary_switches, 0u) << "moved back while the device was away";

  ASSERT_TRUE(rdma::soft::set_device_removed(gone, "soft0", false));
  ASSERT_TRUE(eventually([&] { return reopens() == 1; }, std::chrono::seconds(30)));
  ASSERT_TRUE(eventually([&] { return r.m.client->stats().primary_switches == 1; }, std::chrono::seconds(30)));
  const std::uint64_t fabric_back = rdma_messages(*r.client_fabric);
  ASSERT_TRUE(r.flows(3000)) << "no traffic after moving back";
  EXPECT_GT(rdma_messages(*r.client_fabric), fabric_back + 20) << "traffic did not return to RDMA";
  r.finish();
  EXPECT_EQ(r.m.client->stats().fallback_switches, 1u);
  EXPECT_EQ(r.m.client->stats().primary_switches, 1u);
  EXPECT_EQ(removals(), 1u);
  EXPECT_EQ(reopens(), 1u);
}

TEST(RdmaFailover, ServerDeviceRemovedAndBack) { device_removed_and_back(true); }

TEST(RdmaFailover, ClientDeviceRemovedAndBack) { device_removed_and_back(false); }

TEST(RdmaFailover, RdmaDownAtConnectStartsOnTcpThenMovesToRdma) {
  const QuietLogs quiet{log::Subsys::transport, log::Subsys::rdma};
  Rig r;
  ASSERT_NO_FATAL_FAILURE(r.start(true, /*link_down_first=*/true));
  ASSERT_TRUE(r.flows(2000)) << "no traffic over the fallback";
  EXPECT_EQ(r.m.client->stats().fallback_switches, 1u);
  EXPECT_EQ(rdma_messages(*r.client_fabric), 0u);
  ASSERT_TRUE(rdma::soft::set_link_down(*r.client_fabric, false));
  ASSERT_TRUE(eventually([&] { return r.m.client->stats().primary_switches == 1; }, std::chrono::seconds(30)));
  ASSERT_TRUE(r.flows(2000));
  EXPECT_GT(rdma_messages(*r.client_fabric), 0u);
  r.finish();
  EXPECT_EQ(r.m.client->stats().fallback_switches, 1u);
  EXPECT_EQ(r.m.client->stats().primary_switches, 1u);
}

// A peer with one address (a Ceph peer, or Siphon without a fallback stack):
// the session has nowhere to go, keeps redialling RDMA, and resumes there
// when the link returns -- still lossless, and no switch is counted.
TEST(RdmaFailover, PeerWithOneAddressNeverSwitches) {
  const QuietLogs quiet{log::Subsys::transport, log::Subsys::rdma, log::Subsys::session};
  Rig r;
  ASSERT_NO_FATAL_FAILURE(r.start(false));
  ASSERT_TRUE(r.flows(2000));
  ASSERT_TRUE(rdma::soft::set_link_down(*r.client_fabric, true));
  // Well past siphon_ms_fallback_after (0.5 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::uint64_t stalled = r.received();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(r.received(), stalled) << "messages arrived with the only path down";
  ASSERT_TRUE(rdma::soft::set_link_down(*r.client_fabric, false));
  ASSERT_TRUE(r.flows(2000)) << "the session did not resume over RDMA";
  r.finish();
  EXPECT_EQ(r.m.client->stats().fallback_switches + r.m.client->stats().primary_switches, 0u);
  EXPECT_GT(r.m.client->stats().faults, 0u);
}

// A fallback stack set after bind() would be one that nobody started or
// listened on, dialled by failover and stopped at shutdown: it is refused
// with a log line that says when to call it, and the messenger carries on
// with its primary stack alone.
TEST(RdmaFailover, FallbackSetAfterBindIsRefused) {
  const QuietLogs quiet{log::Subsys::transport, log::Subsys::rdma};
  Rig r;
  ASSERT_NO_FATAL_FAILURE(r.start(false));
  LogCapture logs;
  r.m.server->set_fallback_stack(Rig::make_tcp_stack_for_test());
  EXPECT_TRUE(logs.contains("set_fallback_stack(async+posix) after bind() or start() is ignored"));
  EXPECT_EQ(r.m.server->get_myaddrs().addrs.size(), 1u) << r.m.server->get_myaddrs().to_string();
  ASSERT_TRUE(r.flows(500));
  r.finish();
  // Refused, not half-applied: the server's sessions never saw a fallback.
  EXPECT_EQ(r.m.server->stats().fallback_switches + r.m.server->stats().primary_switches, 0u);
}

}  // namespace
}  // namespace siphon::test
