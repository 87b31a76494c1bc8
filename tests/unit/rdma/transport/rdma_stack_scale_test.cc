// Many connections between two stacks: pinned memory follows the credits,
// and connect/exchange/close churn leaks no connection, QP, pool buffer,
// registration or file descriptor.
#include <gtest/gtest.h>

#include <iostream>

#include "stack_test_util.h"

namespace siphon::rdma {
namespace {

using namespace test;

RdmaOptions many_options() {
  RdmaOptions o = small_options();
  // Default queue depths (send queue 256): each worker's CQ is sized for its
  // share of max_connections (cq_depth 0), so 256 connections fit on the
  // two workers (before, a fixed 8192-entry CQ took 29 per worker).
  EXPECT_EQ(o.cq_depth, 0u);
  EXPECT_EQ(o.send_queue_depth, 256u);
  o.max_connections = 256;
  return o;
}

TEST(RdmaStackScale, TwoHundredFiftySixConnectionsOnTwoWorkersPinOnlyWhatTheirCreditsNeed) {
  const RdmaOptions o = many_options();
  Pair p(o);
  constexpr std::size_t kConns = 256;
  std::vector<std::unique_ptr<Duplex>> ds;
  for (std::size_t i = 0; i < kConns; ++i) {
    ds.push_back(std::make_unique<Duplex>());
    ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, *ds.back())) << "connection " << i;
  }
  EXPECT_EQ(p.client->connection_count(), kConns);
  EXPECT_EQ(p.server->connection_count(), kConns);
  for (std::size_t i = 0; i < kConns; ++i)
    ASSERT_TRUE(exchange(*ds[i], 20, static_cast<std::uint32_t>(i * 100))) << "connection " << i;
  // (credits + 2 update slots) receive buffers per connection, plus the
  // send pool (its cap: it is shared by every connection of the stack).
  const std::size_t per_conn = (o.credits + 2) * o.buffer_size;
  const std::size_t send_pool = o.send_buffers * o.buffer_size;
  for (const RdmaStack* s : {p.client.get(), p.server.get()}) {
    EXPECT_LE(s->registered_bytes(), per_conn * kConns + send_pool) << "pinned memory beyond what credits need";
    EXPECT_GE(s->registered_bytes(), per_conn * kConns) << "every connection's receives are registered";
  }
  std::cout << "[          ] " << kConns << " connections: client pins " << (p.client->registered_bytes() >> 10)
            << " KiB, server " << (p.server->registered_bytes() >> 10) << " KiB (formula: " << kConns << " x "
            << (per_conn >> 10) << " KiB + send pool <= " << (send_pool >> 10) << " KiB)\n";
  for (auto& d : ds) d->close();
  ds.clear();
  EXPECT_TRUE(no_leaks(*p.client));
  EXPECT_TRUE(no_leaks(*p.server));
  EXPECT_EQ(p.client->counters().snapshot().at("qps_active"), 0u);
  EXPECT_EQ(p.server->counters().snapshot().at("qps_active"), 0u);
}

// A connection that does not fit its worker's CQ fails with a reason that
// names the limit and the remedy; nothing crashes and the stack keeps
// serving the connections it has.
TEST(RdmaStackScale, AFullCompletionQueueFailsTheConnectionWithAReason) {
  RdmaOptions o = small_options();
  o.common.async_op_threads = 1;
  o.send_queue_depth = 118;  // + 8 credits + 2 update slots = 128 CQ entries a connection
  o.cq_depth = 256;          // two connections (a power of two: the soft CQ rounds up)
  Pair p(o);
  std::vector<std::unique_ptr<Duplex>> ds;
  for (int i = 0; i < 2; ++i) {
    ds.push_back(std::make_unique<Duplex>());
    ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, *ds.back())) << "connection " << i;
  }
  LogCapture logs;
  std::promise<std::error_code> third;
  p.client->connect(p.bound, p.client->pick_worker(),
                    [&](std::error_code ec, transport::ConnectionRef) { third.set_value(ec); });
  auto f = third.get_future();
  ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(f.get(), make_error_code(errc::resource_exhausted));
  EXPECT_TRUE(logs.contains("completion queue is full (256 of 256 entries reserved; a connection needs 128)"));
  EXPECT_TRUE(logs.contains("raise ms_async_rdma_cq_depth"));
  ASSERT_TRUE(exchange(*ds[0], 5, 1));
  ASSERT_TRUE(exchange(*ds[1], 5, 2));
  for (auto& d : ds) d->close();
  ds.clear();
  EXPECT_TRUE(no_leaks(*p.client));
  // The entries come back: a new connection fits again.
  Duplex d;
  ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, d));
  ASSERT_TRUE(exchange(d, 5, 3));
}

// ms_async_rdma_max_connections bounds the connections of a stack whichever
// side opened them: a dial beyond it fails at once with a reason (it never
// reaches the peer, which rejects nothing), the open connections keep
// working, and a closed connection makes room for a new dial.
TEST(RdmaStackScale, TheDiallingSideKeepsMaxConnections) {
  RdmaOptions o = small_options();
  o.max_connections = 2;
  Pair p(o);
  std::vector<std::unique_ptr<Duplex>> ds;
  for (int i = 0; i < 2; ++i) {
    ds.push_back(std::make_unique<Duplex>());
    ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, *ds.back())) << "connection " << i;
  }
  const auto rejected_before = p.server->counters().snapshot().at("connections_rejected");
  LogCapture logs;
  std::promise<std::error_code> third;
  p.client->connect(p.bound, p.client->pick_worker(), [&](std::error_code ec, transport::ConnectionRef c) {
    EXPECT_EQ(c, nullptr);
    third.set_value(ec);
  });
  auto f = third.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), make_error_code(errc::too_many_connections));
  EXPECT_TRUE(logs.contains("2 connections are open on this stack, ms_async_rdma_max_connections = 2"));
  EXPECT_TRUE(logs.contains("raise ms_async_rdma_max_connections or close connections"));
  EXPECT_EQ(p.client->connection_count(), 2u);
  EXPECT_EQ(p.server->counters().snapshot().at("connections_rejected"), rejected_before)
      << "the dial reached the peer";
  ASSERT_TRUE(exchange(*ds[0], 5, 1));
  ASSERT_TRUE(exchange(*ds[1], 5, 2));
  // One closed: its place is free again on both stacks.
  ds[1]->close();
  ds.pop_back();
  ASSERT_TRUE(eventually([&] { return p.client->connection_count() == 1 && p.server->connection_count() == 1; }));
  Duplex d;
  ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, d));
  ASSERT_TRUE(exchange(d, 5, 3));
  d.close();
  for (auto& x : ds) x->close();
  ds.clear();
  EXPECT_TRUE(no_leaks(*p.client));
  EXPECT_TRUE(no_leaks(*p.server));
}

TEST(RdmaStackScale, ChurnLeaksNothing) {
  const RdmaOptions o = many_options();
  Pair p(o);
  constexpr std::size_t kPerRound = 8;
  const auto duration = std::chrono::seconds(20);
  std::size_t fds_after_first = 0, registered_after_first = 0;
  std::size_t rounds = 0, opened = 0;
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    {
      std::vector<std::unique_ptr<Duplex>> ds;
      for (std::size_t i = 0; i < kPerRound; ++i) {
        ds.push_back(std::make_unique<Duplex>());
        ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, *ds.back())) << "round " << rounds;
        ++opened;
      }
      for (std::size_t i = 0; i < kPerRound; ++i)
        ASSERT_TRUE(exchange(*ds[i], 10, static_cast<std::uint32_t>(rounds * 1000 + i * 10))) << "round " << rounds;
      // Half are closed by the client, half by the server (the other end
      // learns of it through DISCONNECTED).
      for (std::size_t i = 0; i < kPerRound; ++i) {
        auto& d = *ds[i];
        close_sync(i % 2 == 0 ? d.c : d.s);
        Collector& other = i % 2 == 0 ? d.sh : d.ch;
        ASSERT_TRUE(other.wait([&] { return other.fault.has_value(); })) << "round " << rounds;
        d.close();
      }
    }
    ASSERT_TRUE(no_leaks(*p.client)) << "round " << rounds;
    ASSERT_TRUE(no_leaks(*p.server)) << "round " << rounds;
    ASSERT_EQ(p.client->counters().snapshot().at("qps_active"), 0u);
    ASSERT_EQ(p.server->counters().snapshot().at("qps_active"), 0u);
    const std::size_t fds = open_fds();
    const std::size_t reg = p.client->registered_bytes() + p.server->registered_bytes();
    if (rounds == 0) {
      fds_after_first = fds;
      registered_after_first = reg;
    } else {
      // The fabric's sockets of a closed connection may take a moment to go.
      ASSERT_TRUE(eventually([&] { return open_fds() <= fds_after_first; }, 5s))
          << "round " << rounds << ": " << open_fds() << " fds open, " << fds_after_first << " after round 0";
      // Buffers freed on one worker may sit in its cache (at most two
      // batches of 16) while another worker grows the pool: per stack, per
      // pool and per worker.
      const std::size_t kStacks = 2, kPools = 2;
      const std::size_t slack = kStacks * kPools * o.common.async_op_threads * 2 * 16 * o.buffer_size;
      ASSERT_LE(reg, registered_after_first + slack) << "round " << rounds << ": registrations grow";
    }
    ++rounds;
  }
  RecordProperty("rounds", static_cast<int>(rounds));
  EXPECT_GE(rounds, 3u);
  EXPECT_EQ(p.client->counters().snapshot().at("connections_created"), opened);
  std::cout << "[          ] " << rounds << " rounds, " << opened << " connections\n";
}

}  // namespace
}  // namespace siphon::rdma
