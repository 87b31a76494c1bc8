// The messenger's perf counters (docs/observability.md §Counters) against a
// loopback run: Ceph's AsyncMessenger::Worker-<n> counters move by exactly
// the messages and bytes sent, the levels are gauges that a `perf reset`
// leaves alone and that return to 0 when connections close, and loggers
// enter and leave the process collection with their messengers and stacks
// while another thread dumps (run under TSan too). Built twice: over TCP
// (messenger_perf_test) and over the RDMA stack on the software fabric
// (messenger_perf_test_rdma), which also checks the Siphon::RDMAWorker
// logger against RdmaStack::counters().
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "msgr/perf/compiled.h"
#include "msgr/perf/perf_counters.h"
#include "msgr/perf/sampling.h"
#include "msgr/transport/transport.h"
#include "msgr_test_util.h"

namespace siphon::test {
namespace {

using namespace std::chrono_literals;
using transport::WorkerPerf;

constexpr std::uint16_t kType = 0x7401;
constexpr std::uint64_t kMessages = 500;
constexpr std::size_t kData = 3000;

// Counts messages on the fast path (on the worker: fast dispatch time moves).
class FastSink : public Dispatcher {
 public:
  bool ms_can_fast_dispatch(const Message& m) const override { return m.get_type() == kType; }
  void ms_fast_dispatch(MessageRef) override {
    // Busy for at least `spin` (0: not at all), on the worker.
    const auto until = std::chrono::steady_clock::now() + spin;
    while (std::chrono::steady_clock::now() < until) {
    }
    received.fetch_add(1);
  }
  bool ms_dispatch(MessageRef) override { return true; }
  std::atomic<std::uint64_t> received{0};
  std::chrono::nanoseconds spin{0};  // set before the messages are sent
};

std::uint64_t value(transport::Worker& w, int idx) { return w.perf().logger().get(idx).u64; }
std::uint64_t count(transport::Worker& w, int idx) { return w.perf().logger().get(idx).count; }

std::string logger_name(transport::Worker& w) { return w.perf().logger().name(); }

// One counter of a logger of the process collection, by name (nullopt: no
// such logger or counter).
std::optional<std::uint64_t> collected(const std::string& logger, const std::string& counter) {
  std::optional<std::uint64_t> v;
  perf::DumpFilter f;
  f.logger = logger;
  f.counter = counter;
  perf::process_collection().visit(f, [&](const perf::Logger& l, const perf::CounterInfo& info, const perf::Value& x) {
    if (l.name() == logger && info.name == counter) v = x.u64;
  });
  return v;
}

bool dumped(const std::string& logger) {
  return perf::process_collection().perf_dump().find("\"" + logger + "\"") != std::string::npos;
}

// A server and a client, each on its own one-worker stack.
struct Pair {
  std::shared_ptr<transport::Stack> sstack = make_test_stack(test_stack_options(1));
  std::shared_ptr<transport::Stack> cstack = make_test_stack(test_stack_options(1));
  FastSink sink;
  RecordingDispatcher cd;
  std::unique_ptr<Messenger> server = Messenger::create(sstack, {entity_type::osd, 7}, test_options());
  std::unique_ptr<Messenger> client = Messenger::create(cstack, {entity_type::client, 9}, test_options());
  ConnectionRef con;

  // lossless: both sides keep their sessions and the server acknowledges
  // (msgr_handle_ack_lat); lossy: a closed connection ends both sessions.
  explicit Pair(bool lossless = true) {
    server->set_default_policy(lossless ? Policy::lossless_peer() : Policy::stateless_server());
    client->set_default_policy(lossless ? Policy::lossless_peer() : Policy::lossy_client());
    server->add_dispatcher_tail(&sink);
    client->add_dispatcher_tail(&cd);
    EXPECT_FALSE(server->bind(loopback_any_port()));
    server->start();
    client->start();
    con = client->connect_to(entity_type::osd, server->get_myaddrs());
  }
  ~Pair() { stop(); }
  void stop() {
    if (client) client->shutdown();
    if (server) server->shutdown();
    if (client) client->wait();
    if (server) server->wait();
    client.reset();
    server.reset();
  }
  void send(std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) {
      MessageRef m = make_message<Message>(kType);
      m->data().append(std::string(kData, 'p'));
      ASSERT_FALSE(con->send_message(m));
    }
  }
};

// The fast-dispatch sampler picks one call in kFastDispatchSampleEvery, and
// not every n-th one (a workload alternating two kinds of message must not
// be sampled on one kind only).
TEST(PerfCounters, FastDispatchSamplerPicksOneInEightAtRandom) {
  if (!perf::kCompiledIn) GTEST_SKIP() << "built with SIPHON_PERF_COUNTERS=OFF";
  ASSERT_TRUE(perf::enabled());
  std::uint64_t picked = 0, even = 0;
  std::vector<std::uint64_t> gaps;
  std::thread([&] {  // a fresh thread: the sampler's state is per thread
    std::uint64_t last = 0;
    for (std::uint64_t i = 1; i <= 80000; ++i) {
      if (!perf::sample_at_random<perf::kFastDispatchSampleEvery>()) continue;
      ++picked;
      if (i % 2 == 0) ++even;
      gaps.push_back(i - last);
      last = i;
    }
  }).join();
  const std::uint64_t expected = 80000 / perf::kFastDispatchSampleEvery;
  EXPECT_GT(picked, expected * 9 / 10);
  EXPECT_LT(picked, expected * 11 / 10);
  // Both parities sampled about equally, and the gaps are not one period.
  EXPECT_GT(even, picked * 4 / 10);
  EXPECT_LT(even, picked * 6 / 10);
  std::sort(gaps.begin(), gaps.end());
  ASSERT_FALSE(gaps.empty());
  EXPECT_LT(gaps.front(), perf::kFastDispatchSampleEvery);
  EXPECT_GT(gaps.back(), 2 * perf::kFastDispatchSampleEvery);
}

// msgr_running_fast_dispatch_time is estimated from one dispatch in
// kFastDispatchSampleEvery, each counted that many times, so it covers all
// of them: with every dispatch busy for at least 20 us, the counter reaches
// at least half of messages x 20 us (unscaled, the sample alone would sum to
// about an eighth). A lower bound only: a sampled dispatch preempted on a
// loaded machine counts eight times, so no upper bound holds.
TEST(PerfCounters, FastDispatchTimeCoversEveryDispatchFromItsSample) {
  if (!perf::kCompiledIn) GTEST_SKIP() << "built with SIPHON_PERF_COUNTERS=OFF";
  constexpr std::uint64_t kSlow = 400;
  constexpr auto kSpin = std::chrono::microseconds(20);
  Pair p;
  p.sink.spin = kSpin;
  p.send(kSlow);
  ASSERT_TRUE(eventually([&] { return p.sink.received.load() == kSlow; }));
  transport::Worker& sw = p.sstack->worker(0);
  const std::uint64_t ns = value(sw, transport::l_msgr_running_fast_dispatch_time);
  const std::uint64_t floor_ns = kSlow * std::chrono::nanoseconds(kSpin).count() / 2;
  EXPECT_GE(ns, floor_ns) << "fast dispatch time " << ns << " ns for " << kSlow << " dispatches of at least "
                          << kSpin.count() << " us";
}

TEST(PerfCounters, WorkerCountersMoveByExactlyWhatWasSent) {
  if (!perf::kCompiledIn) GTEST_SKIP() << "built with SIPHON_PERF_COUNTERS=OFF";
  Pair p;
  transport::Worker& cw = p.cstack->worker(0);
  transport::Worker& sw = p.sstack->worker(0);
  EXPECT_NE(cw.perf().id(), sw.perf().id()) << "worker ids are unique in the process";
  EXPECT_TRUE(dumped(logger_name(cw)));
  EXPECT_TRUE(dumped(logger_name(sw)));
  EXPECT_EQ(logger_name(cw).rfind("AsyncMessenger::Worker-", 0), 0u);

  p.send(kMessages);
  ASSERT_TRUE(eventually([&] { return p.sink.received.load() == kMessages; }));
  // Every byte one side sent has arrived when the other side's count equals
  // it (both monotonic): the server's ACKs travel the other way.
  ASSERT_TRUE(eventually([&] { return value(cw, transport::l_msgr_send_bytes) == value(sw, transport::l_msgr_recv_bytes); }))
      << value(cw, transport::l_msgr_send_bytes) << " sent, " << value(sw, transport::l_msgr_recv_bytes) << " received";
  ASSERT_TRUE(eventually([&] { return value(sw, transport::l_msgr_send_bytes) == value(cw, transport::l_msgr_recv_bytes); }));

  EXPECT_EQ(value(cw, transport::l_msgr_send_messages), kMessages);
  EXPECT_EQ(value(sw, transport::l_msgr_recv_messages), kMessages);
  EXPECT_EQ(value(sw, transport::l_msgr_send_messages), 0u) << "ACKs and keepalives are not messages";
  EXPECT_EQ(value(cw, transport::l_msgr_recv_messages), 0u);
  EXPECT_EQ(p.client->stats().messages_sent, kMessages);
  EXPECT_EQ(p.server->stats().messages_received, kMessages);
  // The payloads alone; frames, banners and the handshake add more.
  EXPECT_GT(value(cw, transport::l_msgr_send_bytes), kMessages * kData);

  EXPECT_EQ(value(cw, transport::l_msgr_created_connections), 1u);
  EXPECT_EQ(value(sw, transport::l_msgr_created_connections), 1u);
  EXPECT_EQ(value(cw, transport::l_msgr_active_connections), 1u);
  EXPECT_EQ(value(sw, transport::l_msgr_active_connections), 1u);

  // Every 8th message a thread sends through send_message() has its queue
  // latency taken (this thread may have sent others before this test).
  const std::uint64_t sampled = kMessages / WorkerPerf::kQueueLatSampleEvery;
  EXPECT_GE(count(cw, transport::l_msgr_send_messages_queue_lat), sampled);
  EXPECT_LE(count(cw, transport::l_msgr_send_messages_queue_lat), sampled + 1);
  EXPECT_GT(value(cw, transport::l_msgr_send_messages_queue_lat), 0u);
  // The server acknowledged: the client handled ACK frames.
  EXPECT_GE(count(cw, transport::l_msgr_handle_ack_lat), 1u);
  EXPECT_GT(value(cw, transport::l_msgr_running_total_time), 0u);
#ifndef SIPHON_TEST_RDMA
  // TCP write completions are send events of their own. (Over RDMA the
  // client's flushes may all run inside completion handling: the messages
  // queued before READY go out when the handshake's last frame is received,
  // the rest when credits come back; that is receive time.)
  EXPECT_GT(value(cw, transport::l_msgr_running_send_time), 0u);
#endif
  EXPECT_GT(value(sw, transport::l_msgr_running_recv_time), 0u);
  EXPECT_GT(value(sw, transport::l_msgr_running_fast_dispatch_time), 0u);
  EXPECT_EQ(value(cw, transport::l_msgr_running_fast_dispatch_time), 0u);
  // Only top-level sections are timed, each in its own category, so the
  // categories add up to the total exactly (a send nested in a receive is
  // receive time, not counted twice).
  for (transport::Worker* w : {&cw, &sw})
    EXPECT_EQ(value(*w, transport::l_msgr_running_total_time),
              value(*w, transport::l_msgr_running_send_time) + value(*w, transport::l_msgr_running_recv_time))
        << logger_name(*w);

#ifdef SIPHON_TEST_RDMA
  // The RDMA loggers are the storage of RdmaStack::counters().
  auto& crs = dynamic_cast<rdma::RdmaStack&>(*p.cstack);
  auto& srs = dynamic_cast<rdma::RdmaStack&>(*p.sstack);
  const auto cc = crs.counters().snapshot();
  const auto sc = srs.counters().snapshot();
  EXPECT_EQ(cc.at("tx_bytes"), value(cw, transport::l_msgr_send_bytes));
  EXPECT_EQ(sc.at("rx_bytes"), value(sw, transport::l_msgr_recv_bytes));
  EXPECT_EQ(sc.at("rx_bytes"), cc.at("tx_bytes"));
  EXPECT_GE(cc.at("tx_messages"), kMessages);  // messages plus handshake frames
  EXPECT_EQ(cc.at("connections_active"), 1u);
  EXPECT_EQ(cc.at("qps_active"), 1u);
  EXPECT_GT(sc.at("cq_completions"), 0u);
  EXPECT_GE(sc.at("cq_polls"), sc.at("cq_polls_empty"));
  const std::string dump = perf::process_collection().perf_dump();
  EXPECT_NE(dump.find(fmt::format("\"Siphon::RDMAWorker-{}\"", cw.perf().id())), std::string::npos) << dump;
  EXPECT_NE(dump.find("\"Siphon::RDMAStack"), std::string::npos);
  EXPECT_NE(dump.find("\"pinned_bytes\""), std::string::npos);
#endif
}

// `perf = false` at run time: no counter moves and no time is taken (the
// timing helpers read no clock: WorkerPerf::now() is a zero time point), and
// messages stamped while counters were off are not measured once they are
// back on (no queue latency from a zero stamp).
TEST(PerfCounters, CountersOffReadNoClockAndMoveNothing) {
  if (!perf::kCompiledIn) GTEST_SKIP() << "built with SIPHON_PERF_COUNTERS=OFF";
  struct On {
    ~On() { perf::set_enabled(true); }
  } restore;
  perf::set_enabled(false);
  EXPECT_EQ(WorkerPerf::now(), WorkerPerf::Clock::time_point{});
  {
    Pair p;
    transport::Worker& cw = p.cstack->worker(0);
    transport::Worker& sw = p.sstack->worker(0);
    p.send(kMessages);
    ASSERT_TRUE(eventually([&] { return p.sink.received.load() == kMessages; }));
    for (transport::Worker* w : {&cw, &sw}) {
      for (int idx = transport::l_msgr_first + 1; idx < transport::l_msgr_last; ++idx)
        EXPECT_EQ(value(*w, idx), 0u) << logger_name(*w) << " counter " << idx << " moved with perf off";
    }
    EXPECT_EQ(p.server->stats().messages_received, kMessages) << "the messenger's own stats stay on";
  }
  // A section opened while counters are off and closed after they came back
  // on is not timed, nor is a section nested in it.
  WorkerPerf wp;
  {
    const WorkerPerf::Section outer(wp, transport::l_msgr_running_send_time);
    EXPECT_EQ(outer.start(), WorkerPerf::Clock::time_point{});
    perf::set_enabled(true);
    const WorkerPerf::Section inner(wp, transport::l_msgr_running_recv_time);
    EXPECT_EQ(inner.start(), WorkerPerf::Clock::time_point{});
    std::this_thread::sleep_for(2ms);
  }
  for (int idx : {transport::l_msgr_running_send_time, transport::l_msgr_running_recv_time,
                  transport::l_msgr_running_total_time})
    EXPECT_EQ(wp.logger().get(idx).u64, 0u) << "counter " << idx;
}

// Sections nest: only the outermost one reads the clock and is timed, into
// its own category and the total; a nested one (a reply flushed while a read
// is handled) reads no clock and adds nothing of its own.
TEST(PerfCounters, OnlyTheOutermostSectionIsTimed) {
  if (!perf::kCompiledIn) GTEST_SKIP() << "built with SIPHON_PERF_COUNTERS=OFF";
  WorkerPerf wp;
  {
    const WorkerPerf::Section outer(wp, transport::l_msgr_running_recv_time);
    EXPECT_NE(outer.start(), WorkerPerf::Clock::time_point{});
    {
      const WorkerPerf::Section inner(wp, transport::l_msgr_running_send_time);
      EXPECT_EQ(inner.start(), WorkerPerf::Clock::time_point{});
      const WorkerPerf::Section same(wp, transport::l_msgr_running_recv_time);
      EXPECT_EQ(same.start(), WorkerPerf::Clock::time_point{});
      std::this_thread::sleep_for(2ms);
    }
  }
  const auto recv = wp.logger().get(transport::l_msgr_running_recv_time).u64;
  EXPECT_GE(recv, 2'000'000u);
  EXPECT_EQ(wp.logger().get(transport::l_msgr_running_send_time).u64, 0u);
  EXPECT_EQ(wp.logger().get(transport::l_msgr_running_total_time).u64, recv);
  // After the nesting ends, a new top-level section is timed again.
  {
    const WorkerPerf::Section next(wp, transport::l_msgr_running_send_time);
    EXPECT_NE(next.start(), WorkerPerf::Clock::time_point{});
    std::this_thread::sleep_for(1ms);
  }
  const auto send = wp.logger().get(transport::l_msgr_running_send_time).u64;
  EXPECT_GE(send, 1'000'000u);
  EXPECT_EQ(wp.logger().get(transport::l_msgr_running_total_time).u64, recv + send);
}

TEST(PerfCounters, GaugesSurvivePerfResetAndReturnToZeroWhenConnectionsClose) {
  if (!perf::kCompiledIn) GTEST_SKIP() << "built with SIPHON_PERF_COUNTERS=OFF";
  Pair p(false);
  transport::Worker& cw = p.cstack->worker(0);
  transport::Worker& sw = p.sstack->worker(0);
  p.send(10);
  ASSERT_TRUE(eventually([&] { return p.sink.received.load() == 10; }));
  ASSERT_EQ(value(sw, transport::l_msgr_active_connections), 1u);

  // `perf reset all` with the connection open (Ceph's underflow, §3.6).
  ASSERT_TRUE(perf::process_collection().reset(std::nullopt));
  EXPECT_EQ(value(cw, transport::l_msgr_send_messages), 0u) << "counters are reset";
  EXPECT_EQ(value(cw, transport::l_msgr_active_connections), 1u) << "gauges are not";
  EXPECT_EQ(value(sw, transport::l_msgr_active_connections), 1u);

  p.client->mark_down_all();
  ASSERT_TRUE(eventually([&] {
    return value(cw, transport::l_msgr_active_connections) == 0 && value(sw, transport::l_msgr_active_connections) == 0;
  })) << "client " << value(cw, transport::l_msgr_active_connections) << ", server "
      << value(sw, transport::l_msgr_active_connections);
  // The messenger's own logger: its levels are back to 0 too (gauges, so
  // the reset above left them alone and nothing wrapped).
  ASSERT_TRUE(collected("siphon-messenger-osd.7", "connections").has_value());
  ASSERT_TRUE(eventually([&] {
    return collected("siphon-messenger-osd.7", "connections") == 0u &&
           collected("siphon-messenger-client.9", "connections") == 0u &&
           collected("siphon-messenger-osd.7", "undispatched_bytes") == 0u;
  })) << perf::process_collection().perf_dump();
#ifdef SIPHON_TEST_RDMA
  auto& crs = dynamic_cast<rdma::RdmaStack&>(*p.cstack);
  ASSERT_TRUE(eventually([&] { return crs.counters().snapshot().at("connections_active") == 0; }));
  EXPECT_EQ(crs.counters().snapshot().at("qps_active"), 0u);
#endif
}

// Two messengers of one entity name (an OSD's public and cluster
// messengers): the first keeps Ceph's logger name, the second is named by
// its role, a third without a role is numbered -- never by an address, so
// the names (and the Prometheus series built from them) are the same on
// every start.
TEST(PerfCounters, MessengersOfOneEntityNameGetStableLoggerNames) {
  std::vector<std::unique_ptr<Messenger>> ms;
  for (const char* role : {"public", "cluster", ""}) {
    MessengerOptions o = test_options();
    o.role = role;
    ms.push_back(Messenger::create(make_test_stack(test_stack_options(1)), {entity_type::osd, 5}, o));
    ms.back()->start();
  }
  EXPECT_TRUE(dumped("siphon-messenger-osd.5"));
  EXPECT_TRUE(dumped("siphon-messenger-osd.5-cluster"));
  EXPECT_TRUE(dumped("siphon-messenger-osd.5-2"));
  EXPECT_EQ(perf::process_collection().perf_dump().find("siphon-messenger-osd.5-0x"), std::string::npos);
  for (auto& m : ms) {
    m->shutdown();
    m->wait();
  }
  ms.clear();
  EXPECT_FALSE(dumped("siphon-messenger-osd.5"));
  EXPECT_FALSE(dumped("siphon-messenger-osd.5-cluster"));
}

// Messengers and stacks come and go on two threads while a third dumps and
// resets: every logger is listed while its owner lives and gone after.
TEST(PerfCounters, LoggersComeAndGoWithMessengersAndStacks) {
  const std::string before = perf::process_collection().perf_dump();
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      (void)perf::process_collection().perf_dump();
      (void)perf::process_collection().perf_schema();
      (void)perf::process_collection().reset(std::nullopt);
      std::this_thread::sleep_for(1ms);
    }
  });
  auto churn = [&](std::int64_t base) {
    for (int i = 0; i < 4; ++i) {
      std::string worker_logger, msgr_logger = fmt::format("siphon-messenger-client.{}", base + i);
      {
        auto stack = make_test_stack(test_stack_options(2));
        worker_logger = logger_name(stack->worker(1));
        auto m = Messenger::create(stack, {entity_type::client, base + i}, test_options());
        m->start();
        EXPECT_TRUE(dumped(worker_logger)) << worker_logger;
        EXPECT_TRUE(dumped(msgr_logger)) << msgr_logger;
        m->shutdown();
        m->wait();
      }
      EXPECT_FALSE(dumped(msgr_logger)) << msgr_logger << " outlived its messenger";
    }
  };
  std::thread a(churn, 100), b(churn, 200);
  a.join();
  b.join();
  done.store(true);
  reader.join();
  // Nothing of ours is left (worker ids are reused, so compare names).
  EXPECT_EQ(perf::process_collection().perf_dump().find("siphon-messenger-client.1"), std::string::npos);
  EXPECT_EQ(perf::process_collection().perf_dump().find("siphon-messenger-client.2"), std::string::npos);
  EXPECT_EQ(perf::process_collection().perf_dump(), before);
}

}  // namespace
}  // namespace siphon::test
