// Fault injection: the seeded injector on its own, and ms_inject_* in a
// running TcpStack (socket failures at the configured rate, deterministic per
// seed; delayed MESSAGE frames).
#include <array>
#include <cstddef>

#include "tcp_test_util.h"

namespace siphon::transport::test {
namespace {

InjectOptions one_in(std::uint32_t n, std::uint64_t seed) {
  InjectOptions o;
  o.socket_failures = n;
  o.seed = seed;
  return o;
}

std::vector<bool> decisions(const InjectOptions& o, std::uint64_t stream, int count,
                            InjectionCounters& counters) {
  FaultInjector inj(o, o.seed, stream, &counters);
  std::vector<bool> out;
  for (int i = 0; i < count; ++i) out.push_back(inj.socket_failure());
  return out;
}

TEST(FaultInjector, OffByDefault) {
  InjectionCounters c;
  FaultInjector inj(InjectOptions{}, 1, 0, &c);
  EXPECT_FALSE(inj.enabled());
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(inj.socket_failure());
  EXPECT_EQ(inj.message_delay().count(), 0);
  EXPECT_EQ(c.socket_ops.load(), 0u) << "nothing is counted while off";
}

TEST(FaultInjector, DeterministicPerSeedAndStream) {
  InjectionCounters c;
  const auto a = decisions(one_in(10, 42), 0, 5000, c);
  EXPECT_EQ(a, decisions(one_in(10, 42), 0, 5000, c));
  EXPECT_NE(a, decisions(one_in(10, 43), 0, 5000, c)) << "another seed";
  EXPECT_NE(a, decisions(one_in(10, 42), 1, 5000, c)) << "another connection";
}

TEST(FaultInjector, FailsOneInN) {
  InjectionCounters c;
  const auto d = decisions(one_in(50, 7), 3, 100000, c);
  const auto fails = std::count(d.begin(), d.end(), true);
  // Binomial(100000, 1/50): mean 2000, sd ~44.
  EXPECT_GT(fails, 1800);
  EXPECT_LT(fails, 2200);
  EXPECT_EQ(c.socket_ops.load(), 100000u);
  EXPECT_EQ(c.socket_failures.load(), static_cast<std::uint64_t>(fails));
  InjectionCounters always;
  const auto every = decisions(one_in(1, 7), 0, 100, always);
  EXPECT_EQ(std::count(every.begin(), every.end(), true), 100);
}

TEST(FaultInjector, MessageDelays) {
  InjectOptions o;
  o.delay_type = "osd";
  o.delay_probability = 0.5;
  o.delay_max = 0.01;
  InjectionCounters c;
  FaultInjector inj(o, 9, 0, &c);
  EXPECT_TRUE(inj.enabled());
  int delayed = 0;
  for (int i = 0; i < 10000; ++i) {
    const auto d = inj.message_delay();
    EXPECT_LE(d, std::chrono::milliseconds(10));
    delayed += d.count() > 0;
  }
  EXPECT_GT(delayed, 4500);
  EXPECT_LT(delayed, 5500);
  EXPECT_EQ(c.delays.load(), static_cast<std::uint64_t>(delayed));
  o.delay_type.clear();  // Ceph: no type, no delays
  FaultInjector off(o, 9, 0, &c);
  EXPECT_EQ(off.message_delay().count(), 0);
}

TEST(FaultInjector, CorruptionFlipsOneBitAtTheConfiguredRate) {
  InjectOptions o;
  o.corruption_probability = 0.25;
  InjectionCounters c;
  FaultInjector inj(o, 11, 0, &c);
  EXPECT_TRUE(inj.enabled());
  int flipped = 0;
  for (int i = 0; i < 4000; ++i) {
    std::array<std::byte, 37> buf{};
    const bool hit = inj.corrupt(buf.data(), buf.size());
    int bits = 0;
    for (std::byte b : buf) bits += __builtin_popcount(std::to_integer<unsigned>(b));
    EXPECT_EQ(bits, hit ? 1 : 0) << "exactly one bit when it fires, none otherwise";
    flipped += hit;
  }
  // Binomial(4000, 1/4): mean 1000, sd ~27.
  EXPECT_GT(flipped, 850);
  EXPECT_LT(flipped, 1150);
  EXPECT_EQ(c.corruptions.load(), static_cast<std::uint64_t>(flipped));
  std::byte one{};
  EXPECT_FALSE(inj.corrupt(&one, 0)) << "nothing to damage";
  InjectionCounters off_counters;
  FaultInjector off(InjectOptions{}, 11, 0, &off_counters);
  std::array<std::byte, 8> buf{};
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(off.corrupt(buf.data(), buf.size()));
  EXPECT_EQ(off_counters.corruptions.load(), 0u);
}

// ---------------------------------------------------------------------------
// In a running stack

class TcpFaultTest : public TcpFixture {
 protected:
  // A fresh server stack, and a client stack injecting `inject`; returns
  // the server's listening address.
  std::optional<NetAddress> injecting_client(const InjectOptions& inject) {
    TcpOptions copts = test_options();
    copts.common.inject = inject;
    make_stacks(test_options(), copts);
    return listen();
  }

  // Runs one connection from the (injecting) client stack, ping-ponging
  // until it faults; returns the client's fault.
  std::optional<Fault> ping_until_fault(const NetAddress& addr) {
    Recorder& crec = recorder();
    Recorder& srec = recorder();
    crec.keep_frames = srec.keep_frames = false;
    ConnectionRef sconn;
    // The server answers every frame; the client sends the next on each answer.
    srec.frame_hook = [&](proto::Frame&) { (void)sconn->send(control(proto::Tag::ack, "pong")); };
    ConnectionRef cconn;
    crec.frame_hook = [&](proto::Frame&) { (void)cconn->send(control(proto::Tag::ack, "ping")); };
    const auto connected = connect(*client_, addr, &crec, {}, [](Connection& conn) {
      (void)conn.send(control(proto::Tag::ack, "ping"));
    });
    if (connected.first) return Fault{connected.first, "connect failed"};
    cconn = connected.second;
    sconn = accept_next();
    if (!sconn) return std::nullopt;
    run_on(sconn->worker(), [&] { sconn->start(srec, {}); });
    if (!crec.wait_fault(20s)) return std::nullopt;
    // The server side sees the injected failure as the peer going away.
    EXPECT_TRUE(srec.wait_fault());
    if (srec.fault()) {
      EXPECT_EQ(srec.fault()->code, errc::connection_reset) << srec.fault()->reason;
    }
    return crec.fault();
  }
};

TEST_F(TcpFaultTest, InjectedSocketFailuresAtTheConfiguredRate) {
  const auto addr = injecting_client(one_in(20, 1234));
  ASSERT_TRUE(addr);
  constexpr int kConnections = 30;
  for (int i = 0; i < kConnections; ++i) {
    const auto fault = ping_until_fault(*addr);
    ASSERT_TRUE(fault) << "connection " << i << " never faulted";
    EXPECT_EQ(fault->code, errc::injected_fault);
    EXPECT_EQ(fault->reason, "injected socket failure");
  }
  const auto& c = client_->injection_counters();
  EXPECT_EQ(c.socket_failures.load(), static_cast<std::uint64_t>(kConnections));
  const double rate = static_cast<double>(c.socket_failures.load()) /
                      static_cast<double>(c.socket_ops.load());
  EXPECT_GT(rate, 1.0 / 40) << c.socket_ops.load() << " operations";
  EXPECT_LT(rate, 1.0 / 10) << c.socket_ops.load() << " operations";
  EXPECT_EQ(server_->injection_counters().socket_ops.load(), 0u) << "the server injects nothing";
}

// The k-th socket operation of a connection fails, where k depends only on
// the seed and the connection's serial number: whatever the operations are.
TEST_F(TcpFaultTest, InjectionIsDeterministicPerSeed) {
  constexpr std::uint64_t kSeed = 777;
  const InjectOptions inject = one_in(25, kSeed);
  InjectionCounters scratch;
  FaultInjector model(inject, kSeed, /*stream=*/0, &scratch);
  std::uint64_t expected = 1;
  while (!model.socket_failure()) ++expected;

  for (int run = 0; run < 2; ++run) {
    const auto addr = injecting_client(inject);
    ASSERT_TRUE(addr);
    const auto fault = ping_until_fault(*addr);
    ASSERT_TRUE(fault);
    EXPECT_EQ(fault->code, errc::injected_fault);
    EXPECT_EQ(client_->injection_counters().socket_ops.load(), expected) << "run " << run;
    client_->stop();
    server_->stop();
  }
}

TEST_F(TcpFaultTest, EveryOperationFailsWhenNIsOne) {
  const auto addr = injecting_client(one_in(1, 5));
  ASSERT_TRUE(addr);
  const auto fault = ping_until_fault(*addr);
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->code, errc::injected_fault);
  EXPECT_EQ(client_->injection_counters().socket_ops.load(), 1u);
}

// ms_inject_corruption_probability: a bit flipped in the bytes a read
// returned is caught by the frame CRCs; the damaged frame is never delivered
// and the connection faults with bad_crc.
TEST_F(TcpFaultTest, CorruptedReadsFaultWithBadCrc) {
  InjectOptions inject;
  inject.corruption_probability = 1.0;
  inject.seed = 21;
  const auto addr = injecting_client(inject);
  ASSERT_TRUE(addr);
  const auto fault = ping_until_fault(*addr);
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->code, errc::bad_crc) << fault->reason;
  EXPECT_GE(client_->injection_counters().corruptions.load(), 1u);
  EXPECT_EQ(server_->injection_counters().corruptions.load(), 0u) << "the server injects nothing";
}

TEST_F(TcpFaultTest, DelaysHoldMessagesBackInOrder) {
  TcpOptions sopts = test_options();
  sopts.common.inject.delay_type = "osd";
  sopts.common.inject.delay_probability = 1.0;
  sopts.common.inject.delay_max = 0.02;
  sopts.common.inject.seed = 3;
  make_stacks(sopts, test_options());
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_pair(*addr);
  ASSERT_TRUE(p.server.rec->wait_established());
  const auto start = Clock::now();
  run_on(p.client.conn->worker(), [&] {
    for (int i = 0; i < 20; ++i) {
      proto::Frame f;
      if (i % 2 == 0) {
        f.tag = proto::Tag::message;
        f.segments[0] = BufferList::copy_of(std::to_string(i));
      } else {
        f = control(proto::Tag::keepalive2, std::to_string(i));
      }
      EXPECT_FALSE(p.client.conn->send(std::move(f)));
    }
  });
  ASSERT_TRUE(p.server.rec->wait_frames(20));
  const auto elapsed = Clock::now() - start;
  const auto& c = server_->injection_counters();
  EXPECT_EQ(c.delays.load(), 10u) << "MESSAGE frames only";
  EXPECT_GE(elapsed, std::chrono::nanoseconds(c.delay_ns.load())) << "delays run one after another";
  EXPECT_GT(c.delay_ns.load(), 0u);
  const auto frames = p.server.rec->take_frames();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(frames[i].segments[0].to_string(), std::to_string(i));
}

}  // namespace
}  // namespace siphon::transport::test
