// Two echoing peers exchanging zero-copy messages (issue 19: the two-host
// rxe tier saw a transfer stall until ms_async_rdma_transfer_timeout).
//
// Each end sends originals to the other and echoes every original it
// receives, the way siphon-bench's echo server does: the reply carries the
// very data segment that was delivered -- the receiver's own receive-pool
// buffers -- so it goes out zero-copy again, offered from pool memory. Both
// receive pools are small, so the echoes in flight can hold most of them.
// Every message must come back intact, and no connection may fault: a
// transfer that waits for pool room that never comes is caught by
// ms_async_rdma_transfer_timeout (20 s here, see echo_options(); a fault,
// counted in transfer_timeouts).
// Before the fix each end's pool filled with its echoes, offered in place
// and held until the peer's read_done, while the peer's READ of them waited
// for pool room held the same way: the first transfer timed out (2 s) with
// a handful of the 24 echoes back. Nothing here asserts a duration.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "stack_test_util.h"

namespace siphon::rdma {
namespace {

using namespace test;

constexpr std::size_t kData = 192 * 1024;  // 12 receive buffers of 16 KiB; above the 64 KiB threshold
constexpr std::uint32_t kMessages = 24;    // originals per end

// front: [0] 'O' (original) or 'E' (echo), [1..4] the index, little-endian.
proto::Frame echo_frame(char kind, std::uint32_t i, std::uint32_t seed, BufferList data) {
  proto::Frame f;
  f.tag = proto::Tag::message;
  f.segments[0] = pattern(41, seed + i);
  std::uint8_t front[5] = {static_cast<std::uint8_t>(kind)};
  std::memcpy(front + 1, &i, 4);
  f.segments[1] = BufferList::copy_of(std::string_view(reinterpret_cast<const char*>(front), sizeof front));
  f.segments[3] = std::move(data);
  return f;
}

// Echoes every original back on its connection (with the delivered data,
// not a copy) and checks every echo of its own originals.
struct Echoer : Collector {
  transport::Connection* conn = nullptr;
  std::uint32_t own_seed = 0;    // the seed of this end's originals
  std::uint32_t peer_seed = 0;   // the peer's
  std::atomic<std::uint32_t> echoes_back{0}, echoed{0}, damaged{0};

  void on_frame(proto::Frame&& f) override {
    const BufferList front = f.segments[1];
    if (f.tag != proto::Tag::message || front.length() != 5) {
      damaged.fetch_add(1);
      return;
    }
    std::uint8_t b[5];
    front.copy_out(0, 5, b);
    std::uint32_t i = 0;
    std::memcpy(&i, b + 1, 4);
    if (b[0] == 'O') {
      if (!(f.segments[3] == pattern(kData, peer_seed + i))) damaged.fetch_add(1);
      // On this worker, inside the delivery: like a handler that answers at once.
      if (conn->send(echo_frame('E', i, peer_seed, std::move(f.segments[3])))) damaged.fetch_add(1);
      echoed.fetch_add(1);
    } else {
      if (b[0] != 'E' || !(f.segments[3] == pattern(kData, own_seed + i))) damaged.fetch_add(1);
      echoes_back.fetch_add(1);  // the frame (and its pool buffers) dropped here
    }
    std::lock_guard lk(mu);
    cv.notify_all();
  }
};

RdmaOptions echo_options() {
  RdmaOptions o = small_options();
  // 64 buffers of 16 KiB: 10 stay posted as receives, max_read is 512 KiB;
  // four echoes of 192 KiB in flight hold most of the rest.
  o.receive_buffers = 64;
  o.common.async_op_threads = 1;
  // The stall this test guards against never resolves, so any bound catches
  // it. 2 s was tripped by plain slowness: under ThreadSanitizer with other
  // tests running (CI's tsan step; locally, four runs at once on 2 vCPUs)
  // the exchange takes 8-11 s and a transfer can wait behind the others for
  // over 2 s (52 failures in 72 such runs at 2 s, none in 44 at 20 s).
  o.transfer_timeout = std::chrono::seconds(20);
  return o;
}

TEST(RdmaEchoZeroCopy, EchoingPeersNeverStallOnTheirPools) {
  debug_logging();
  auto provider = soft::make_provider();
  const RdmaOptions o = echo_options();
  RdmaStack a(*provider, o), b(*provider, o);
  a.start();
  b.start();
  AcceptQueue aq;
  NetAddress bound;
  ASSERT_FALSE(b.listen(*NetAddress::parse("127.0.0.1:0"), aq.handler(), bound));
  std::promise<transport::ConnectionRef> connected;
  a.connect(bound, a.pick_worker(), [&](std::error_code ec, transport::ConnectionRef c) {
    EXPECT_FALSE(ec) << ec.message();
    connected.set_value(c);
  });
  auto cf = connected.get_future();
  ASSERT_EQ(cf.wait_for(20s), std::future_status::ready);
  transport::ConnectionRef ca = cf.get(), cb = aq.pop();
  ASSERT_TRUE(ca && cb);
  Echoer ea, eb;
  ea.conn = ca.get();
  eb.conn = cb.get();
  ea.own_seed = eb.peer_seed = 1000;
  eb.own_seed = ea.peer_seed = 5000;
  cb->worker().post([&] { cb->start(eb, proto::Banner{}); });
  ca->worker().post([&] { ca->start(ea, proto::Banner{}); });
  ASSERT_TRUE(ea.wait([&] { return ea.established; }));
  ASSERT_TRUE(eb.wait([&] { return eb.established; }));

  // Both ends send all their originals at once.
  on_worker(*ca, [&] {
    for (std::uint32_t i = 0; i < kMessages; ++i)
      EXPECT_FALSE(ca->send(echo_frame('O', i, ea.own_seed, pattern(kData, ea.own_seed + i))));
    return 0;
  });
  on_worker(*cb, [&] {
    for (std::uint32_t i = 0; i < kMessages; ++i)
      EXPECT_FALSE(cb->send(echo_frame('O', i, eb.own_seed, pattern(kData, eb.own_seed + i))));
    return 0;
  });
  auto done = [](Echoer& e) { return e.echoes_back.load() == kMessages || e.fault.has_value(); };
  const bool a_done = ea.wait([&] { return done(ea); }, 60s);
  const bool b_done = eb.wait([&] { return done(eb); }, 60s);
  const auto fa = ea.get_fault(), fb = eb.get_fault();
  EXPECT_FALSE(fa) << "a: " << fa->reason;
  EXPECT_FALSE(fb) << "b: " << fb->reason;
  EXPECT_TRUE(a_done && b_done) << "echoes back: a " << ea.echoes_back.load() << ", b " << eb.echoes_back.load()
                                << " of " << kMessages;
  EXPECT_EQ(ea.echoes_back.load(), kMessages);
  EXPECT_EQ(eb.echoes_back.load(), kMessages);
  EXPECT_EQ(ea.damaged.load(), 0u);
  EXPECT_EQ(eb.damaged.load(), 0u);
  EXPECT_EQ(a.counters().snapshot().at("transfer_timeouts"), 0u);
  EXPECT_EQ(b.counters().snapshot().at("transfer_timeouts"), 0u);
  // Originals and echoes both went zero-copy; the echoes' data, delivered
  // in the receive pool, was copied out of it before it was offered.
  for (const RdmaStack* s : {&a, &b}) {
    const auto c = s->counters().snapshot();
    EXPECT_EQ(c.at("zero_copy_transfers"), 2u * kMessages);
    EXPECT_EQ(c.at("zero_copy_pool_copies"), kMessages);
  }

  close_sync(ca);
  close_sync(cb);
  ca.reset();
  cb.reset();
  EXPECT_TRUE(no_leaks(a));
  EXPECT_TRUE(no_leaks(b));
  a.stop();
  b.stop();
}

}  // namespace
}  // namespace siphon::rdma
