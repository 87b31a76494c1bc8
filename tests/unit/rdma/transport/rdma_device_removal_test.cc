// The RDMA stack when its device goes away and comes back (soft fabric:
// soft::set_device_removed, as `rdma link delete` / `rdma link add`):
// connections fault with a reason naming the device, the stack lets go of
// every object it made on the device (the soft provider's live-object gauges
// reach 0, which is what lets the kernel finish unregistering an rxe device),
// listening and connecting are refused meanwhile, and once the device is
// listed again the stack reopens it, listens where it listened and carries
// traffic -- with memory the application still holds from before intact.
// docs/rdma-transport.md, "Device removal".
#include <gtest/gtest.h>

#include <string>

#include "stack_test_util.h"

namespace siphon::rdma {
namespace {

using namespace test;

RdmaOptions removal_options(bool srq = false) {
  RdmaOptions o = small_options();
  o.device_check_interval = std::chrono::milliseconds(20);
  if (srq) {
    o.support_srq = true;
    o.receive_queue_len = 256;
  }
  return o;
}

std::uint64_t counter(const RdmaStack& s, const char* name) { return s.counters().snapshot().at(name); }

// Every object of `p`'s devices gone: what a removed device needs.
::testing::AssertionResult all_released(const Provider& p, std::chrono::milliseconds t = 10s) {
  std::optional<soft::SoftCounters> c;
  const bool ok = eventually(
      [&] {
        c = soft::counters(p);
        return c && c->qps_live == 0 && c->cqs_live == 0 && c->srqs_live == 0 && c->mrs_live == 0 &&
               c->mws_live == 0 && c->pds_live == 0 && c->contexts_live == 0 && c->cm_ids_live == 0;
      },
      t);
  if (ok) return ::testing::AssertionSuccess();
  if (!c) return ::testing::AssertionFailure() << "not a soft provider";
  return ::testing::AssertionFailure() << "still live: " << c->qps_live << " QPs, " << c->cqs_live << " CQs, "
                                       << c->srqs_live << " SRQs, " << c->mrs_live << " MRs, " << c->mws_live
                                       << " MWs, " << c->pds_live << " PDs, " << c->contexts_live
                                       << " contexts, " << c->cm_ids_live << " CM ids";
}

// A server stack on its own provider (the one whose device is removed) and
// a client stack on another (its device stays): two hosts on one wire.
struct Hosts {
  std::unique_ptr<Provider> sp = soft::make_provider();
  std::unique_ptr<Provider> cp = soft::make_provider();
  std::unique_ptr<RdmaStack> server, client;
  AcceptQueue accepted;
  NetAddress bound;

  explicit Hosts(const RdmaOptions& o) {
    debug_logging();
    server = std::make_unique<RdmaStack>(*sp, o);
    client = std::make_unique<RdmaStack>(*cp, o);
    server->start();
    client->start();
    EXPECT_FALSE(server->listen(*NetAddress::parse("127.0.0.1:0"), accepted.handler(), bound));
  }
  ~Hosts() {
    soft::set_device_removed(*sp, "soft0", false);
    client->stop();
    server->stop();
  }
};

// A connect's outcome.
std::error_code try_connect(RdmaStack& from, const NetAddress& to, transport::ConnectionRef* out = nullptr) {
  std::promise<std::pair<std::error_code, transport::ConnectionRef>> p;
  from.connect(to, from.pick_worker(), [&](std::error_code ec, transport::ConnectionRef c) {
    p.set_value({ec, std::move(c)});
  });
  auto f = p.get_future();
  if (f.wait_for(30s) != std::future_status::ready) return make_error_code(errc::timed_out);
  auto [ec, c] = f.get();
  if (out != nullptr) *out = std::move(c);
  else close_sync(c);
  return ec;
}

void removed_and_back(bool srq) {
  Hosts h(removal_options(srq));
  Duplex d;
  ASSERT_TRUE(open_duplex(*h.client, h.bound, h.accepted, d));
  // Zero-copy data (READ into the receive pool) and small frames; the
  // server keeps what it received across the removal.
  const auto data = [](std::uint32_t i) -> std::size_t { return i % 4 == 0 ? 200 * 1024 : 0; };
  on_worker(*d.c, [&] {
    for (std::uint32_t i = 0; i < 40; ++i) EXPECT_FALSE(d.c->send(message(i, 1500, data(i))));
    return 0;
  });
  ASSERT_TRUE(d.sh.wait([&] { return d.sh.frames.size() == 40; }));
  std::vector<proto::Frame> kept;
  {
    std::lock_guard lk(d.sh.mu);
    kept = std::move(d.sh.frames);
    d.sh.frames.clear();
  }
  ASSERT_GT(h.server->buffers_in_use(), 0u) << "the kept frames hold receive-pool buffers";

  // Traffic still queued when the device goes.
  on_worker(*d.c, [&] {
    for (std::uint32_t i = 0; i < 200; ++i)
      if (d.c->send(message(1000 + i, 3000, i % 10 == 0 ? 100 * 1024 : 0))) break;
    return 0;
  });
  ASSERT_TRUE(soft::set_device_removed(*h.sp, "soft0", true));

  ASSERT_TRUE(d.sh.wait([&] { return d.sh.fault.has_value(); })) << "the server's connection faults";
  const auto f = d.sh.get_fault();
  EXPECT_EQ(f->code, make_error_code(errc::device_not_found)) << f->code.message() << ": " << f->reason;
  EXPECT_NE(f->reason.find("soft0 was removed"), std::string::npos) << f->reason;
  ASSERT_TRUE(d.ch.wait([&] { return d.ch.fault.has_value(); })) << "and so does the client's (its peer is gone)";

  // Everything the server stack made on soft0 goes.
  ASSERT_TRUE(eventually([&] { return counter(*h.server, "device_removals") == 1; }));
  d.close();
  EXPECT_TRUE(all_released(*h.sp));
  EXPECT_EQ(h.server->memory_regions(), 0u) << "the pools are deregistered";
  EXPECT_EQ(counter(*h.server, "qps_active"), 0u);
  EXPECT_EQ(counter(*h.client, "device_removals"), 0u) << "the client's device is still there";

  // Meanwhile: no listening, no connecting, nothing accepted.
  NetAddress b2;
  EXPECT_EQ(h.server->listen(*NetAddress::parse("127.0.0.1:0"), h.accepted.handler(), b2),
            make_error_code(errc::device_not_found));
  EXPECT_EQ(try_connect(*h.server, h.bound), make_error_code(errc::device_not_found));
  EXPECT_TRUE(try_connect(*h.client, h.bound)) << "nobody listens on a removed device";
  std::this_thread::sleep_for(200ms);  // several checks: still released, nothing reopened
  EXPECT_EQ(counter(*h.server, "device_reopens"), 0u);
  EXPECT_TRUE(all_released(*h.sp, 1s));

  // What the application held is intact.
  for (std::uint32_t i = 0; i < 40; ++i) EXPECT_TRUE(is_message(kept[i], i, 1500, data(i))) << i;

  // Back: reopened, listening on the same address again, traffic both ways.
  ASSERT_TRUE(soft::set_device_removed(*h.sp, "soft0", false));
  ASSERT_TRUE(eventually([&] { return counter(*h.server, "device_reopens") == 1; }));
  EXPECT_GT(h.server->memory_regions(), 0u);
  Duplex d2;
  ASSERT_TRUE(eventually([&] {
    Duplex probe;
    return open_duplex(*h.client, h.bound, h.accepted, probe) == ::testing::AssertionSuccess();
  })) << "the listener is bound again on " << h.bound.to_string();
  ASSERT_TRUE(open_duplex(*h.client, h.bound, h.accepted, d2));
  EXPECT_TRUE(exchange(d2, 60, 7, [](std::uint32_t i) -> std::size_t { return i % 5 == 0 ? 150 * 1024 : 0; }));
  // Buffers kept from before the removal still read right, and go back.
  for (std::uint32_t i = 0; i < 40; ++i) EXPECT_TRUE(is_message(kept[i], i, 1500, data(i))) << i;
  kept.clear();
  // The server dials out too.
  AcceptQueue back;
  NetAddress cb;
  ASSERT_FALSE(h.client->listen(*NetAddress::parse("127.0.0.1:0"), back.handler(), cb));
  Duplex d3;
  ASSERT_TRUE(open_duplex(*h.server, cb, back, d3));
  EXPECT_TRUE(exchange(d3, 20, 99));
  d2.close();
  d3.close();
  EXPECT_EQ(counter(*h.server, "device_removals"), 1u);
  for (const RdmaStack* s : {h.client.get(), h.server.get()})
    EXPECT_TRUE(eventually([&] { return s->connection_count() == 0 && s->buffers_in_use() == s->srq_posted(); }))
        << s->connection_count() << " connections, " << s->buffers_in_use() << " buffers in use, "
        << s->srq_posted() << " on SRQs";
}

TEST(RdmaDeviceRemoval, ConnectionsFaultEverythingIsReleasedAndTheDeviceIsReopened) { removed_and_back(false); }

TEST(RdmaDeviceRemoval, SharedReceiveQueuesAreReleasedAndMadeAgain) { removed_and_back(true); }

// No CM id on the device (nothing listens, nothing is connected): the
// periodic check sees it unlisted, and listed again.
TEST(RdmaDeviceRemoval, ThePeriodicCheckFindsARemovalWithoutAnyCmEvent) {
  debug_logging();
  auto p = soft::make_provider();
  RdmaStack s(*p, removal_options());
  s.start();
  ASSERT_TRUE(soft::set_device_removed(*p, "soft0", true));
  ASSERT_TRUE(eventually([&] { return counter(s, "device_removals") == 1; }));
  EXPECT_TRUE(all_released(*p));
  ASSERT_TRUE(soft::set_device_removed(*p, "soft0", false));
  ASSERT_TRUE(eventually([&] { return counter(s, "device_reopens") == 1; }));
  AcceptQueue aq;
  NetAddress bound;
  ASSERT_FALSE(s.listen(*NetAddress::parse("127.0.0.1:0"), aq.handler(), bound));
  Duplex d;
  ASSERT_TRUE(open_duplex(s, bound, aq, d));
  EXPECT_TRUE(exchange(d, 30, 3));
  d.close();
  s.stop();
}

// ms_async_rdma_device_check_interval = 0: a DEVICE_REMOVAL still releases
// the device, but nothing reopens it.
TEST(RdmaDeviceRemoval, NoCheckIntervalReleasesButNeverReopens) {
  RdmaOptions o = removal_options();
  o.device_check_interval = std::chrono::milliseconds(0);
  Hosts h(o);
  ASSERT_TRUE(soft::set_device_removed(*h.sp, "soft0", true));
  ASSERT_TRUE(eventually([&] { return counter(*h.server, "device_removals") == 1; })) << "seen on the listener";
  EXPECT_TRUE(all_released(*h.sp));
  ASSERT_TRUE(soft::set_device_removed(*h.sp, "soft0", false));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(counter(*h.server, "device_reopens"), 0u);
  EXPECT_TRUE(try_connect(*h.client, h.bound));
  NetAddress b2;
  EXPECT_EQ(h.server->listen(*NetAddress::parse("127.0.0.1:0"), h.accepted.handler(), b2),
            make_error_code(errc::device_not_found));
}

// Removed and given back several times in a row, with connections being
// opened all along: no object leaks, no crash, and the stack ends up open.
TEST(RdmaDeviceRemoval, RepeatedRemovalsUnderConnectionChurn) {
  Hosts h(removal_options());
  std::atomic<bool> stop{false};
  std::atomic<int> opened{0};
  std::thread churn([&] {
    while (!stop) {
      transport::ConnectionRef c;
      if (!try_connect(*h.client, h.bound, &c) && c) ++opened;
      close_sync(c);
      std::this_thread::sleep_for(1ms);
    }
  });
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(60ms);
    ASSERT_TRUE(soft::set_device_removed(*h.sp, "soft0", true));
    ASSERT_TRUE(eventually([&] { return counter(*h.server, "device_removals") == std::uint64_t(round) + 1; }));
    ASSERT_TRUE(all_released(*h.sp)) << "round " << round;
    ASSERT_TRUE(soft::set_device_removed(*h.sp, "soft0", false));
    ASSERT_TRUE(eventually([&] { return counter(*h.server, "device_reopens") == std::uint64_t(round) + 1; }));
  }
  stop = true;
  churn.join();
  EXPECT_GT(opened.load(), 0);
  // Open at the end: a connection carries traffic (the churn's accepted
  // connections, never started, are dropped first).
  std::this_thread::sleep_for(100ms);
  while (h.accepted.pop(0ms)) {
  }
  Duplex d;
  ASSERT_TRUE(open_duplex(*h.client, h.bound, h.accepted, d));
  EXPECT_TRUE(exchange(d, 20, 5));
}

// Stopped while the device is away, and destroyed: nothing left behind.
TEST(RdmaDeviceRemoval, StoppingWhileRemovedReleasesCleanly) {
  debug_logging();
  auto p = soft::make_provider();
  {
    RdmaStack s(*p, removal_options(true));
    s.start();
    AcceptQueue aq;
    NetAddress bound;
    ASSERT_FALSE(s.listen(*NetAddress::parse("127.0.0.1:0"), aq.handler(), bound));
    ASSERT_TRUE(soft::set_device_removed(*p, "soft0", true));
    ASSERT_TRUE(eventually([&] { return counter(s, "device_removals") == 1; }));
    s.stop();
  }
  EXPECT_TRUE(all_released(*p, 1s));
  soft::set_device_removed(*p, "soft0", false);
}

}  // namespace
}  // namespace siphon::rdma
