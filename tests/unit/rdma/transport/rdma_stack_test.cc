// The RDMA stack end to end on the software fabric: two stacks in one
// process, connected through the provider's rdma-cm-shaped CM.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/transport/rdma_stack.h"

namespace siphon::rdma {
namespace {

using namespace std::chrono_literals;

// Collects what a connection delivers.
struct Collector : transport::ConnectionHandler {
  std::mutex mu;
  std::condition_variable cv;
  bool established = false;
  std::vector<proto::Frame> frames;
  std::optional<transport::Fault> fault;
  int writable = 0;
  void on_established(const proto::Negotiated&) override {
    std::lock_guard lk(mu);
    established = true;
    cv.notify_all();
  }
  void on_frame(proto::Frame&& f) override {
    std::lock_guard lk(mu);
    frames.push_back(std::move(f));
    cv.notify_all();
  }
  void on_fault(const transport::Fault& f) override {
    std::lock_guard lk(mu);
    fault = f;
    cv.notify_all();
  }
  void on_writable() override {
    std::lock_guard lk(mu);
    ++writable;
  }
  template <typename Pred>
  bool wait(Pred p, std::chrono::milliseconds t = 20s) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, t, p);
  }
};

RdmaOptions small_options() {
  RdmaOptions o;
  o.device_name = "soft0";
  o.common.async_op_threads = 2;
  o.buffer_size = 16 * 1024;
  o.credits = 8;
  o.send_buffers = 256;
  o.receive_buffers = 4096;
  o.polling = std::chrono::microseconds(50);
  o.zero_copy_threshold = 64 * 1024;
  return o;
}

// Runs `fn` on the connection's worker and waits for it.
template <typename F>
auto on_worker(transport::Connection& c, F fn) {
  std::promise<decltype(fn())> p;
  auto fut = p.get_future();
  c.worker().post([&] { p.set_value(fn()); });
  return fut.get();
}

struct Pair {
  std::unique_ptr<Provider> provider = soft::make_provider();
  std::unique_ptr<RdmaStack> server, client;
  transport::ConnectionRef sconn, cconn;
  Collector shandler, chandler;

  explicit Pair(RdmaOptions o = small_options()) {
    if (std::getenv("SIPHON_TEST_DEBUG")) log::set_level(log::Subsys::rdma, 20);
    server = std::make_unique<RdmaStack>(*provider, o);
    client = std::make_unique<RdmaStack>(*provider, o);
    server->start();
    client->start();
  }
  ~Pair() {
    if (cconn) cconn->worker().post([c = cconn] { c->close(); });
    if (sconn) sconn->worker().post([c = sconn] { c->close(); });
    client->stop();
    server->stop();
  }
  void connect() {
    std::promise<transport::ConnectionRef> accepted, connected;
    NetAddress bound;
    ASSERT_FALSE(server->listen(*NetAddress::parse("127.0.0.1:0"),
                                [&](transport::ConnectionRef c) { accepted.set_value(c); }, bound));
    client->connect(bound, client->pick_worker(), [&](std::error_code ec, transport::ConnectionRef c) {
      EXPECT_FALSE(ec) << ec.message();
      connected.set_value(c);
    });
    auto cf = connected.get_future();
    auto sf = accepted.get_future();
    ASSERT_EQ(cf.wait_for(20s), std::future_status::ready);
    ASSERT_EQ(sf.wait_for(20s), std::future_status::ready);
    cconn = cf.get();
    sconn = sf.get();
    ASSERT_TRUE(cconn && sconn);
    sconn->worker().post([this] { sconn->start(shandler, proto::Banner{}); });
    cconn->worker().post([this] { cconn->start(chandler, proto::Banner{}); });
    ASSERT_TRUE(chandler.wait([&] { return chandler.established; }));
    ASSERT_TRUE(shandler.wait([&] { return shandler.established; }));
  }
};

BufferList pattern(std::size_t n, std::uint32_t seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return BufferList::copy_of(s);
}

proto::Frame message(std::uint32_t i, std::size_t front, std::size_t data) {
  proto::Frame f;
  f.tag = proto::Tag::message;
  f.segments[0] = pattern(41, i);
  f.segments[1] = pattern(front, i + 1);
  f.segments[3] = pattern(data, i + 3);
  return f;
}

TEST(RdmaStack, FramesOfEverySizeArriveInOrderAndIntact) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.connect());
  std::mt19937 rng(7);
  std::vector<std::pair<std::size_t, std::size_t>> sizes;
  for (int i = 0; i < 600; ++i) {
    const std::size_t front = rng() % 3000;
    const std::size_t data = i % 50 == 0 ? 200000 + rng() % 300000 : rng() % 40000;
    sizes.emplace_back(front, data);
  }
  on_worker(*p.cconn, [&] {
    for (std::uint32_t i = 0; i < sizes.size(); ++i) EXPECT_FALSE(p.cconn->send(message(i, sizes[i].first, sizes[i].second)));
    return 0;
  });
  ASSERT_TRUE(p.shandler.wait([&] { return p.shandler.frames.size() == sizes.size() || p.shandler.fault; }, 60s))
      << p.shandler.frames.size();
  ASSERT_FALSE(p.shandler.fault) << p.shandler.fault->reason;
  for (std::uint32_t i = 0; i < sizes.size(); ++i) {
    const proto::Frame& f = p.shandler.frames[i];
    ASSERT_EQ(f.segments[1], pattern(sizes[i].first, i + 1)) << i;
    ASSERT_EQ(f.segments[3], pattern(sizes[i].second, i + 3)) << i;
  }
  const auto c = p.client->counters().snapshot();
  EXPECT_EQ(c.at("zero_copy_transfers"), 12u);
  EXPECT_EQ(c.at("rnr_events"), 0u);
  EXPECT_EQ(p.server->counters().snapshot().at("rnr_events"), 0u);
  EXPECT_GT(c.at("credits_returned"), 0u);
}

TEST(RdmaStack, SixtyFourMiBMessageIsZeroCopyOnTheSendSide) {
  RdmaOptions o = small_options();
  o.receive_buffers = 8192;
  Pair p(o);
  ASSERT_NO_FATAL_FAILURE(p.connect());
  const std::size_t n = 64u << 20;
  BufferList big = pattern(n, 99);
  ASSERT_EQ(big.segment_count(), 1u);
  const std::byte* data_ptr = big.ptrs()[0].data();
  proto::Frame f;
  f.tag = proto::Tag::message;
  f.segments[0] = pattern(41, 1);
  f.segments[3] = big;
  on_worker(*p.cconn, [&] { return p.cconn->send(std::move(f)); });
  ASSERT_TRUE(p.shandler.wait([&] { return !p.shandler.frames.empty() || p.shandler.fault; }, 120s));
  ASSERT_FALSE(p.shandler.fault) << p.shandler.fault->reason;
  EXPECT_EQ(p.shandler.frames[0].segments[3], big);
  const auto c = p.client->counters().snapshot();
  EXPECT_EQ(c.at("zero_copy_transfers"), 1u);
  EXPECT_EQ(c.at("zero_copy_bytes"), n);
  EXPECT_EQ(c.at("tx_copied_bytes"), 0u) << "no byte of the data was copied on the send side";
  EXPECT_EQ(big.ptrs()[0].data(), data_ptr);
  // The receiver pulled it straight into its registered pool.
  EXPECT_EQ(p.server->counters().snapshot().at("rdma_reads"), n / (16 * 1024));
}

TEST(RdmaStack, AStalledReceiverGivesBackpressureNotRnr) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.connect());
  p.sconn->worker().post([&] { p.sconn->pause_receive(true); });
  std::this_thread::sleep_for(50ms);
  const std::size_t kFrames = 2000;
  std::size_t queued = on_worker(*p.cconn, [&] {
    for (std::uint32_t i = 0; i < kFrames; ++i) EXPECT_FALSE(p.cconn->send(message(i, 4000, 0)));
    return p.cconn->queued_bytes();
  });
  std::this_thread::sleep_for(200ms);
  queued = on_worker(*p.cconn, [&] { return p.cconn->queued_bytes(); });
  EXPECT_GT(queued, 4000u * 1000) << "the sender holds the backlog while the receiver is stalled";
  const auto c = p.client->counters().snapshot();
  EXPECT_GE(c.at("credit_stalls"), 1u);
  EXPECT_EQ(c.at("rnr_events"), 0u);
  EXPECT_LE(p.shandler.frames.size(), 0u) << "nothing is delivered while paused";
  p.sconn->worker().post([&] { p.sconn->pause_receive(false); });
  ASSERT_TRUE(p.shandler.wait([&] { return p.shandler.frames.size() == kFrames || p.shandler.fault; }, 60s));
  EXPECT_EQ(on_worker(*p.cconn, [&] { return p.cconn->queued_bytes(); }), 0u);
  EXPECT_GE(p.chandler.writable, 1) << "on_writable after draining below the low-water mark";
  EXPECT_EQ(p.client->counters().snapshot().at("rnr_events"), 0u);
}

TEST(RdmaStack, PeerCloseFaultsTheOtherSide) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.connect());
  p.cconn->worker().post([&] { p.cconn->close(); });
  ASSERT_TRUE(p.shandler.wait([&] { return p.shandler.fault.has_value(); }));
  EXPECT_FALSE(p.chandler.fault) << "no callback after close()";
}

TEST(RdmaStack, AMissingDeviceIsAClearSetupError) {
  auto provider = soft::make_provider();
  RdmaOptions o = small_options();
  o.device_name = "mlx5_0";
  try {
    RdmaStack s(*provider, o);
    FAIL() << "opening mlx5_0 on the soft fabric succeeded";
  } catch (const SetupError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("mlx5_0"), std::string::npos) << what;
    EXPECT_NE(what.find("soft0"), std::string::npos) << "names the devices present: " << what;
    EXPECT_NE(what.find("ms_async_rdma_device_name"), std::string::npos) << what;
  }
}

TEST(RdmaStack, ConnectToNobodyIsRefused) {
  Pair p;
  std::promise<std::error_code> done;
  p.client->connect(*NetAddress::parse("127.0.0.1:1"), p.client->pick_worker(),
                    [&](std::error_code ec, transport::ConnectionRef c) {
                      EXPECT_FALSE(c);
                      done.set_value(ec);
                    });
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(f.get());
}

}  // namespace
}  // namespace siphon::rdma
