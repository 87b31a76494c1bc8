// The RDMA stack under injected fabric faults (soft FaultPlan on the client
// stack's provider only): a fault ends the affected connection with a clear
// reason, both ends release everything, and the server keeps serving a
// second, healthy connection. Recovering lost data is the session layer's
// job; the stack's is to fail cleanly and only where the fault is.
//
// Fault draws are deterministic per QP (FaultPlan::seed and the QP's
// creation order on its provider): the seeds below make the fault fire a
// few dozen work requests into the traffic, not during the banner exchange.
#include <gtest/gtest.h>

#include <string_view>
#include <thread>

#include "stack_test_util.h"

namespace siphon::rdma {
namespace {

using namespace test;

constexpr std::uint32_t kFrames = 300;
constexpr std::size_t kFront = 12000;  // about one SEND per frame

// The fabric's threaded engine: completions reach the workers as CQ events,
// which the lost/late CQ-event injectors act on. The driven engine (the
// default) has its workers poll and drive the fabric, and no CQ event to lose.
soft::SoftOptions threaded_engine() {
  soft::SoftOptions o;
  o.driven_engine = false;
  return o;
}

// Sends kFrames frames client -> server; returns once the server has them
// all or either end faulted.
void blast(transport::ConnectionRef& c, Collector& ch, Collector& sh, std::uint32_t base = 0) {
  on_worker(*c, [&] {
    for (std::uint32_t i = 0; i < kFrames; ++i)
      if (c->send(message(base + i, kFront, 0))) break;  // faulted: send() refuses
    return 0;
  });
  sh.wait([&] { return sh.frames.size() >= kFrames || sh.fault.has_value(); }, 30s);
  ch.wait([&] { return ch.fault.has_value(); }, 100ms);
}

// What every faulted scenario must show: the faulty connection is dead at
// both ends with a reason, the healthy one still carries frames both ways,
// and closing everything leaves no connection, QP or buffer behind.
void check_isolated_and_clean(Pair& p, RdmaStack& clean, Duplex& good) {
  ASSERT_TRUE(p.shandler.wait([&] { return p.shandler.fault.has_value(); }))
      << "the server end of the faulted connection learns of it";
  EXPECT_FALSE(p.shandler.get_fault()->reason.empty());
  // The healthy connection is untouched, both ways.
  on_worker(*good.c, [&] {
    for (std::uint32_t i = 0; i < 100; ++i) EXPECT_FALSE(good.c->send(message(i, 3000, i % 10 == 0 ? 100000 : 0)));
    return 0;
  });
  on_worker(*good.s, [&] {
    for (std::uint32_t i = 0; i < 100; ++i) EXPECT_FALSE(good.s->send(message(i, 500, 0)));
    return 0;
  });
  ASSERT_TRUE(good.sh.wait([&] { return good.sh.frames.size() == 100 || good.sh.fault; }));
  ASSERT_TRUE(good.ch.wait([&] { return good.ch.frames.size() == 100 || good.ch.fault; }));
  EXPECT_FALSE(good.sh.get_fault());
  EXPECT_FALSE(good.ch.get_fault());
  {
    std::lock_guard lk(good.sh.mu);
    for (std::uint32_t i = 0; i < 100; ++i)
      EXPECT_TRUE(is_message(good.sh.frames[i], i, 3000, i % 10 == 0 ? 100000 : 0)) << i;
  }
  p.close_main();
  good.close();
  EXPECT_TRUE(no_leaks(*p.client));
  EXPECT_TRUE(no_leaks(*p.server));
  EXPECT_TRUE(no_leaks(clean));
  for (const RdmaStack* s : {p.client.get(), p.server.get(), &clean})
    EXPECT_EQ(s->counters().snapshot().at("qps_active"), 0u);
}

// `h`'s end faulted with `code`, for a reason that contains `reason`.
::testing::AssertionResult faulted_with(Collector& h, errc code, std::string_view reason) {
  const auto f = h.get_fault();
  if (!f) return ::testing::AssertionFailure() << "no fault";
  if (f->code != make_error_code(code))
    return ::testing::AssertionFailure() << "faulted with " << f->code.message() << " (" << f->reason
                                         << "), expected " << make_error_code(code).message();
  if (f->reason.find(reason) == std::string::npos)
    return ::testing::AssertionFailure() << "the reason \"" << f->reason << "\" does not say \"" << reason << "\"";
  return ::testing::AssertionSuccess();
}

struct Scenario {
  std::unique_ptr<Pair> p;
  std::unique_ptr<RdmaStack> clean;  // a healthy client on the server's provider
  std::unique_ptr<Duplex> good;
  explicit Scenario(const soft::FaultPlan& faults) {
    p = std::make_unique<Pair>(small_options(), faults);
    clean = std::make_unique<RdmaStack>(*p->provider, small_options());
    clean->start();
    good = std::make_unique<Duplex>();
  }
  ~Scenario() {
    good.reset();
    clean.reset();
    p.reset();
  }
  // Opens the healthy connection, then the pair's (faulty) one, and blasts
  // frames over the faulty one.
  void open_and_blast() {
    ASSERT_TRUE(open_duplex(*clean, p->bound, p->accepted, *good));
    ASSERT_NO_FATAL_FAILURE(p->connect());
    blast(p->cconn, p->chandler, p->shandler);
  }
};

TEST(RdmaStackFaults, AnErrorCompletionFaultsOnlyThatConnection) {
  soft::FaultPlan f;
  f.seed = 3;
  f.error_completion.one_in = 40;  // the 38th WR of the client's QP
  f.completion_error = WcStatus::remote_operation_error;
  Scenario sc(f);
  Pair& p = *sc.p;
  ASSERT_NO_FATAL_FAILURE(sc.open_and_blast());
  ASSERT_TRUE(faulted_with(p.chandler, errc::remote_operation_error, "SEND completed with remote operation error"))
      << "the client's QP failed a SEND";
  EXPECT_LT(p.shandler.frame_count(), kFrames);
  EXPECT_EQ(soft::counters(*p.client_provider)->error_completions, 1u);
  EXPECT_EQ(p.client->counters().snapshot().at("wc_other_errors"), 1u);
  check_isolated_and_clean(p, *sc.clean, *sc.good);
}

TEST(RdmaStackFaults, AQpThatGoesToErrFaultsWithAClearReason) {
  // Only flushed completions: nothing says "error" but the QP state.
  soft::FaultPlan f;
  f.seed = 5;
  f.qp_to_err.one_in = 50;  // at the 69th WR
  Scenario sc(f);
  Pair& p = *sc.p;
  ASSERT_NO_FATAL_FAILURE(sc.open_and_blast());
  ASSERT_TRUE(faulted_with(p.chandler, errc::work_request_flushed, "error state"))
      << "a QP in ERR must not leave the connection silently dead";
  EXPECT_EQ(soft::counters(*p.client_provider)->qp_errors_injected, 1u);
  check_isolated_and_clean(p, *sc.clean, *sc.good);
}

TEST(RdmaStackFaults, FailedPostsFaultTheConnection) {
  // Which post fails (a SEND batch or a receive re-post) depends on timing,
  // so connections are opened one after another (each QP draws its own
  // sequence) until a failed SEND post has been seen: the WRs after the
  // failed one in its batch were never posted, and the drain must not wait
  // for their completions (no_leaks would time out).
  soft::FaultPlan f;
  f.seed = 1;
  f.fail_post.one_in = 100;
  Scenario sc(f);
  Pair& p = *sc.p;
  ASSERT_TRUE(open_duplex(*sc.clean, p.bound, p.accepted, *sc.good));
  bool send_failed = false;
  for (int round = 0; round < 12 && !send_failed; ++round) {
    Duplex d;
    if (!open_duplex(*p.client, p.bound, p.accepted, d)) {
      // The failure hit the initial receives: setup failed, cleanly.
      continue;
    }
    blast(d.c, d.ch, d.sh, 0);
    const auto fault = d.ch.get_fault();
    if (!fault) continue;  // this QP's failing draw lies beyond the traffic
    EXPECT_EQ(fault->code, make_error_code(errc::injected_fault));
    EXPECT_TRUE(fault->reason == "posting to the send queue failed" ||
                fault->reason == "re-posting a receive failed")
        << fault->reason;
    send_failed = fault->reason == "posting to the send queue failed";
    ASSERT_TRUE(d.sh.wait([&] { return d.sh.fault.has_value(); }));
    d.close();
    ASSERT_TRUE(no_leaks(*p.client)) << "round " << round;
  }
  EXPECT_TRUE(send_failed) << "no round failed a SEND post";
  EXPECT_GE(soft::counters(*p.client_provider)->failed_posts, 1u);
  // The main connection of the pair was never opened: close_main is a no-op.
  p.shandler.fault = transport::Fault{errc::injected_fault, "not used"};
  check_isolated_and_clean(p, *sc.clean, *sc.good);
}

TEST(RdmaStackFaults, LinkDropsAreRecoveredWithoutAFault) {
  // RC retransmission hides a dropped link: no fault, nothing lost.
  soft::FaultPlan f;
  f.seed = 11;
  f.link_drop.one_in = 25;
  Pair p(small_options(), f);
  ASSERT_NO_FATAL_FAILURE(p.connect());
  blast(p.cconn, p.chandler, p.shandler);
  EXPECT_FALSE(p.chandler.get_fault()) << p.chandler.get_fault()->reason;
  EXPECT_FALSE(p.shandler.get_fault()) << p.shandler.get_fault()->reason;
  {
    std::lock_guard lk(p.shandler.mu);
    ASSERT_EQ(p.shandler.frames.size(), kFrames);
    for (std::uint32_t i = 0; i < kFrames; ++i) ASSERT_TRUE(is_message(p.shandler.frames[i], i, kFront, 0)) << i;
  }
  EXPECT_GT(soft::counters(*p.client_provider)->link_drops, 3u);
  EXPECT_EQ(p.client->counters().snapshot().at("wc_errors"), 0u);
  p.close_main();
  EXPECT_TRUE(no_leaks(*p.client));
  EXPECT_TRUE(no_leaks(*p.server));
}

// A completion notification lost by the device or driver (the CQ disarms
// for a completion but no event reaches the channel): a worker asleep on its
// CQ would never wake for that completion, and the connection would sit
// until a transfer timeout faulted it -- what the two-host rxe tier showed.
// The worker's rescue poll finds the completions, counts the loss and serves
// them: every frame arrives, nothing faults.
TEST(RdmaStackFaults, LostCompletionEventsAreRescued) {
  soft::FaultPlan f;
  f.seed = 7;
  f.lost_cq_event.one_in = 2;  // about every other notification of the client's CQs
  Pair p(small_options(), f, threaded_engine());
  ASSERT_NO_FATAL_FAILURE(p.connect());
  constexpr std::uint32_t kRounds = 30;
  for (std::uint32_t i = 0; i < kRounds; ++i) {
    // The client's worker goes to sleep (past its 50 us of polling) before
    // each frame arrives, so it depends on a notification every time.
    std::this_thread::sleep_for(3ms);
    on_worker(*p.sconn, [&] { return p.sconn->send(message(i, 2000, 0)) ? 1 : 0; });
    ASSERT_TRUE(p.chandler.wait([&] { return p.chandler.frames.size() > i || p.chandler.fault.has_value(); }, 5s))
        << "frame " << i << " never reached the client: its worker slept through a lost notification";
  }
  EXPECT_FALSE(p.chandler.get_fault());
  EXPECT_FALSE(p.shandler.get_fault());
  {
    std::lock_guard lk(p.chandler.mu);
    ASSERT_EQ(p.chandler.frames.size(), kRounds);
    for (std::uint32_t i = 0; i < kRounds; ++i) EXPECT_TRUE(is_message(p.chandler.frames[i], i, 2000, 0)) << i;
  }
  const std::uint64_t lost = soft::counters(*p.client_provider)->cq_events_lost;
  const std::uint64_t missed = p.client->counters().snapshot().at("cq_events_missed");
  EXPECT_GT(lost, 3u) << "the fault did not fire";
  EXPECT_GT(missed, 0u) << "no lost notification was seen by the rescue poll";
  EXPECT_LE(missed, lost) << "a rescue counted a notification that was not lost";
  EXPECT_EQ(p.server->counters().snapshot().at("cq_events_missed"), 0u) << "the server's fabric loses nothing";
  p.close_main();
  EXPECT_TRUE(no_leaks(*p.client));
  EXPECT_TRUE(no_leaks(*p.server));
}

// A notification that trails its completion is late, not lost: the provider
// makes the completion visible before it writes the event, and a rescue
// tick in between finds a completion with no event. Here every notification
// of the client's CQs comes 250 ms after its completion (longer than the
// rescue's 100 ms period, so a rescue always runs in between) while the
// worker polls for 600 ms after the rescue (so the event arrives before the
// CQ is armed again). The rescue serves the frame; nothing is counted lost.
TEST(RdmaStackFaults, LateCompletionEventsAreNotCountedAsLost) {
  soft::FaultPlan f;
  f.late_cq_event = 250ms;
  RdmaOptions o = small_options();
  o.polling = std::chrono::microseconds(600'000);
  Pair p(o, f, threaded_engine());
  ASSERT_NO_FATAL_FAILURE(p.connect());
  constexpr std::uint32_t kRounds = 4;
  for (std::uint32_t i = 0; i < kRounds; ++i) {
    std::this_thread::sleep_for(800ms);  // the client's worker is asleep on its armed CQ
    on_worker(*p.sconn, [&] { return p.sconn->send(message(i, 2000, 0)) ? 1 : 0; });
    ASSERT_TRUE(p.chandler.wait([&] { return p.chandler.frames.size() > i || p.chandler.fault.has_value(); }, 5s))
        << "frame " << i;
  }
  EXPECT_FALSE(p.chandler.get_fault());
  EXPECT_FALSE(p.shandler.get_fault());
  {
    std::lock_guard lk(p.chandler.mu);
    ASSERT_EQ(p.chandler.frames.size(), kRounds);
    for (std::uint32_t i = 0; i < kRounds; ++i) EXPECT_TRUE(is_message(p.chandler.frames[i], i, 2000, 0)) << i;
  }
  EXPECT_GE(soft::counters(*p.client_provider)->cq_events_late, kRounds) << "the fault did not fire";
  EXPECT_EQ(soft::counters(*p.client_provider)->cq_events_lost, 0u);
  EXPECT_EQ(p.client->counters().snapshot().at("cq_events_missed"), 0u) << "a late event was counted as lost";
  p.close_main();
  EXPECT_TRUE(no_leaks(*p.client));
  EXPECT_TRUE(no_leaks(*p.server));
}

TEST(RdmaStackFaults, ZeroCopyTransferCutByAnErrorReleasesEverything) {
  // A fault while the receiver is pulling a transfer: its reserved pool
  // buffers and the sender's registered region must all come back.
  soft::FaultPlan f;
  f.seed = 3;
  f.error_completion.one_in = 40;
  f.completion_error = WcStatus::general_error;
  RdmaOptions o = small_options();
  Pair p(o, f);
  ASSERT_NO_FATAL_FAILURE(p.connect());
  BufferList big = pattern(8u << 20, 7);
  on_worker(*p.cconn, [&] {
    for (std::uint32_t i = 0; i < 40; ++i) {
      proto::Frame m = message(i, 100, 0);
      m.segments[3] = big;
      if (p.cconn->send(std::move(m))) break;
    }
    return 0;
  });
  ASSERT_TRUE(p.chandler.wait([&] { return p.chandler.fault.has_value(); }, 60s));
  ASSERT_TRUE(p.shandler.wait([&] { return p.shandler.fault.has_value(); }));
  EXPECT_GT(p.client->counters().snapshot().at("zero_copy_transfers"), 0u);
  p.close_main();
  EXPECT_TRUE(no_leaks(*p.client));
  EXPECT_TRUE(no_leaks(*p.server));
  EXPECT_TRUE(eventually([&] { return big.ptrs()[0].segment()->use_count() == 1; }))
      << "the sender still references the data of a dead connection";
}

}  // namespace
}  // namespace siphon::rdma
