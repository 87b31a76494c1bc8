// SRQ mode (ms_async_rdma_support_srq): one shared receive queue per worker,
// filled once from the receive pool; every connection's credits (plus its
// update slots) are a reservation in its worker's SRQ, taken when it is
// admitted and given back when it closes; a connection that does not fit is
// refused with a reason naming the option to change.
#include <gtest/gtest.h>

#include <iostream>

#include "rdma/transport/credits.h"
#include "stack_test_util.h"

namespace siphon::rdma {
namespace {

using namespace test;

RdmaOptions srq_options(std::size_t workers, std::size_t depth) {
  RdmaOptions o = small_options();
  o.common.async_op_threads = workers;
  o.support_srq = true;
  o.receive_queue_len = depth;
  return o;
}

std::size_t per_conn(const RdmaOptions& o) { return o.credits + kUpdateSlots; }

// Data sizes for exchange(): every 7th frame with a data segment big enough
// to go by RDMA READ, a few KiB on some others.
std::size_t srq_data(std::uint32_t i) { return i % 7 == 6 ? 100 * 1024 : i % 3 * 5000; }

// Connections closed and every pool buffer back, except the receives the
// SRQs keep posted.
::testing::AssertionResult settled(const RdmaStack& s) {
  if (eventually([&] { return s.connection_count() == 0 && s.buffers_in_use() == s.srq_posted(); }))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.connection_count() << " connections, " << s.buffers_in_use()
                                       << " pool buffers in use, " << s.srq_posted() << " posted on SRQs";
}

std::uint64_t counter(const RdmaStack& s, const char* name) { return s.counters().snapshot().at(name); }

TEST(RdmaStackSrq, ManyConnectionsShareOneSrqPerWorkerAndPinTheSameReceives) {
  const RdmaOptions o = srq_options(2, 400);
  Pair p(o);
  for (const RdmaStack* s : {p.client.get(), p.server.get()}) {
    EXPECT_EQ(s->srq_count(), 2u) << "one SRQ per worker";
    EXPECT_EQ(s->srq_posted(), 800u) << "each SRQ filled to ms_async_rdma_receive_queue_len";
    EXPECT_EQ(s->srq_reserved(), 0u);
    EXPECT_EQ(s->buffers_in_use(), 800u);
  }
  std::vector<std::unique_ptr<Duplex>> ds;
  ds.push_back(std::make_unique<Duplex>());
  ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, *ds.back()));
  ASSERT_TRUE(exchange(*ds.back(), 40, 1, srq_data));
  EXPECT_EQ(p.client->srq_reserved(), per_conn(o));
  EXPECT_EQ(p.server->srq_reserved(), per_conn(o));
  const std::size_t pinned_client_1 = p.client->registered_bytes();
  const std::size_t pinned_server_1 = p.server->registered_bytes();

  constexpr std::size_t kConns = 48;  // 24 per worker: 240 of each SRQ's 400 receives reserved
  while (ds.size() < kConns) {
    ds.push_back(std::make_unique<Duplex>());
    ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, *ds.back())) << "connection " << ds.size();
  }
  for (std::size_t i = 0; i < kConns; ++i)
    ASSERT_TRUE(exchange(*ds[i], 40, static_cast<std::uint32_t>(i * 100 + 1000), srq_data)) << "connection " << i;
  for (const RdmaStack* s : {p.client.get(), p.server.get()}) {
    EXPECT_EQ(s->srq_count(), 2u);
    EXPECT_EQ(s->srq_posted(), 800u) << "no receive posted beyond the SRQs";
    EXPECT_EQ(s->srq_reserved(), kConns * per_conn(o)) << "each connection's credits reserved";
    EXPECT_EQ(counter(*s, "qps_active"), kConns);
    // Receive buffers (beyond the SRQs') come back once the frames are gone:
    // only READ targets are taken from the pool per message.
    EXPECT_TRUE(eventually([&] { return s->buffers_in_use() == s->srq_posted(); }))
        << s->buffers_in_use() << " buffers in use";
  }
  // Pinned memory does not follow the connection count: 48 connections pin
  // what one did (the SRQs' receives, the READ targets and the send slab).
  EXPECT_EQ(p.client->registered_bytes(), pinned_client_1);
  EXPECT_EQ(p.server->registered_bytes(), pinned_server_1);
  std::cout << "[          ] SRQ mode, " << kConns << " connections on 2 workers: client pins "
            << (p.client->registered_bytes() >> 10) << " KiB, server " << (p.server->registered_bytes() >> 10)
            << " KiB (1 connection: " << (pinned_client_1 >> 10) << " / " << (pinned_server_1 >> 10)
            << " KiB); SRQs: 2 x 400 x " << (o.buffer_size >> 10) << " KiB\n";

  for (auto& d : ds) d->close();
  ds.clear();
  for (const RdmaStack* s : {p.client.get(), p.server.get()}) {
    EXPECT_TRUE(settled(*s));
    EXPECT_EQ(s->srq_reserved(), 0u) << "closing releases the reservations";
    EXPECT_EQ(s->srq_posted(), 800u) << "teardown leaves the receives on the SRQ";
    EXPECT_EQ(counter(*s, "qps_active"), 0u);
    EXPECT_EQ(counter(*s, "rnr_events"), 0u);
    EXPECT_EQ(counter(*s, "srq_refusals"), 0u);
    EXPECT_EQ(counter(*s, "wc_errors"), 0u);
  }
  // The released receives serve new connections.
  Duplex d;
  ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, d));
  ASSERT_TRUE(exchange(d, 40, 9, srq_data));
}

// A receiver that holds its receives (paused) keeps its whole window out of
// the SRQ; the other connections on the worker are not starved of receives
// and nothing sees an RNR.
TEST(RdmaStackSrq, APausedReceiverHoldsOnlyItsOwnReservation) {
  const RdmaOptions o = srq_options(1, 3 * 10);  // three connections' worth
  Pair p(o);
  Duplex a, b;
  ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, a));
  ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, b));
  on_worker(*a.s, [&] {
    a.s->pause_receive(true);
    return 0;
  });
  on_worker(*a.c, [&] {
    for (std::uint32_t i = 0; i < 50; ++i) EXPECT_FALSE(a.c->send(message(i, 3000, 0)));
    return 0;
  });
  // b keeps working while a's sender is out of credits.
  for (std::uint32_t round = 0; round < 5; ++round) ASSERT_TRUE(exchange(b, 30, 100 * round, srq_data));
  EXPECT_LT(a.sh.frame_count(), 50u);
  on_worker(*a.s, [&] {
    a.s->pause_receive(false);
    return 0;
  });
  ASSERT_TRUE(a.sh.wait([&] { return a.sh.frames.size() >= 50 || a.sh.fault; }));
  EXPECT_FALSE(a.sh.get_fault());
  {
    std::lock_guard lk(a.sh.mu);
    for (std::uint32_t i = 0; i < 50; ++i) EXPECT_TRUE(is_message(a.sh.frames[i], i, 3000, 0)) << i;
  }
  a.close();
  b.close();
  for (const RdmaStack* s : {p.client.get(), p.server.get()}) {
    EXPECT_TRUE(settled(*s));
    EXPECT_EQ(counter(*s, "rnr_events"), 0u);
    EXPECT_EQ(s->srq_reserved(), 0u);
  }
}

// The server's SRQ has room for two connections: the third is rejected, the
// client hears the peer's reason, the server logs why naming the option; a
// closed connection's reservation lets the next one in.
TEST(RdmaStackSrq, AConnectionOverTheSrqBudgetIsRefusedWithAReason) {
  debug_logging();
  auto provider = soft::make_provider();
  const RdmaOptions so = srq_options(1, 25);   // 2 connections of 8 credits + 2 update slots
  const RdmaOptions co = srq_options(1, 100);  // the client has room for more
  RdmaStack server(*provider, so), client(*provider, co);
  server.start();
  client.start();
  AcceptQueue aq;
  NetAddress bound;
  ASSERT_FALSE(server.listen(*NetAddress::parse("127.0.0.1:0"), aq.handler(), bound));
  std::vector<std::unique_ptr<Duplex>> ds;
  for (int i = 0; i < 2; ++i) {
    ds.push_back(std::make_unique<Duplex>());
    ASSERT_TRUE(open_duplex(client, bound, aq, *ds.back())) << "connection " << i;
  }
  EXPECT_EQ(server.srq_reserved(), 20u);
  {
    LogCapture logs;
    std::promise<std::error_code> third;
    client.connect(bound, client.pick_worker(),
                   [&](std::error_code ec, transport::ConnectionRef) { third.set_value(ec); });
    auto f = third.get_future();
    ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
    EXPECT_EQ(f.get(), make_error_code(errc::connection_refused));
    EXPECT_TRUE(logs.contains("rejected by the peer: no resources")) << "the client reports the peer's reason";
    // The server logs after it sent the reject: the client can hear it first.
    EXPECT_TRUE(eventually([&] {
      return logs.contains("shared receive queue is fully reserved (20 of 25 receives reserved; a connection "
                           "needs 10 = ms_async_rdma_credits + 2)");
    }));
    EXPECT_TRUE(eventually([&] { return logs.contains("raise ms_async_rdma_receive_queue_len"); }));
  }
  EXPECT_EQ(counter(server, "srq_refusals"), 1u);
  EXPECT_EQ(server.srq_reserved(), 20u) << "a refused connection reserves nothing";
  EXPECT_TRUE(eventually([&] { return client.srq_reserved() == 20u; })) << "nor on the client, once it failed";
  ASSERT_TRUE(exchange(*ds[0], 10, 1, srq_data));
  ASSERT_TRUE(exchange(*ds[1], 10, 2, srq_data));
  // Closing one releases its reservation: the next connection fits.
  ds[0]->close();
  EXPECT_TRUE(eventually([&] { return server.srq_reserved() == 10u; }));
  ds.push_back(std::make_unique<Duplex>());
  ASSERT_TRUE(open_duplex(client, bound, aq, *ds.back()));
  ASSERT_TRUE(exchange(*ds.back(), 10, 3, srq_data));
  for (auto& d : ds) d->close();
  ds.clear();
  EXPECT_TRUE(settled(server));
  EXPECT_TRUE(settled(client));
  EXPECT_EQ(server.srq_reserved(), 0u);
  EXPECT_EQ(counter(server, "rnr_events"), 0u);
  EXPECT_EQ(counter(client, "rnr_events"), 0u);
  client.stop();
  server.stop();
}

// Settings that cannot work fail at stack creation with the cause and the
// remedy, naming the options.
TEST(RdmaStackSrq, ImpossibleSrqSettingsFailCreationWithAReason) {
  auto provider = soft::make_provider();
  RdmaOptions o = srq_options(2, 5);  // below one connection's 10
  try {
    RdmaStack s(*provider, o);
    ADD_FAILURE() << "an SRQ too small for one connection was accepted";
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find("ms_async_rdma_receive_queue_len = 5"), std::string::npos) << e.what();
  }
  o = srq_options(2, 4096);  // 2 x 4096 receives do not fit 4096 receive buffers
  try {
    RdmaStack s(*provider, o);
    ADD_FAILURE() << "SRQs larger than the receive pool were accepted";
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find("ms_async_rdma_receive_buffers = 4096"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace siphon::rdma
