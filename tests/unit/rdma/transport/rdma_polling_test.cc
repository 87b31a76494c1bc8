// The polling policy (ms_async_rdma_polling_us): an explicit value is
// honoured, flagged when it oversubscribes the CPUs; left unset ("auto") the
// stack spins only when its spinning workers and one more CPU fit in the
// CPUs of the process, and never when a thread of this process produces the
// completions (the software fabric). Stacks count their spinning workers
// process-wide while they exist.
#include <sched.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "rdma/soft/soft_provider.h"
#include "rdma/transport/rdma_stack.h"
#include "stack_test_util.h"

namespace siphon::rdma::test {
namespace {

using std::chrono::microseconds;
constexpr bool kAdapter = false, kProcessThread = true;

TEST(RdmaPolling, AutoSpinsOnlyWhenTheSpinnersFitInTheCpus) {
  // 3 workers + 1 CPU for the rest fit in 4 CPUs: Ceph's 1000 us.
  EXPECT_EQ(plan_polling(std::nullopt, 3, 0, 4, kAdapter).spin, microseconds(1000));
  // Another stack's 3 spinning workers already run: 7 > 4, no spinning.
  EXPECT_EQ(plan_polling(std::nullopt, 3, 3, 4, kAdapter).spin, microseconds(0));
  // 2 CPUs (the CI machines): 3 workers never spin.
  EXPECT_EQ(plan_polling(std::nullopt, 3, 0, 2, kAdapter).spin, microseconds(0));
  EXPECT_EQ(plan_polling(std::nullopt, 1, 0, 2, kAdapter).spin, microseconds(1000));
  // Auto never reports an oversubscription: it avoids one.
  for (std::size_t cpus : {1u, 2u, 64u}) {
    const PollingPlan p = plan_polling(std::nullopt, 3, 0, cpus, kAdapter);
    EXPECT_FALSE(p.oversubscribed);
    EXPECT_FALSE(p.reason.empty());
  }
}

TEST(RdmaPolling, AutoNeverSpinsAgainstAnInProcessCompletionThread) {
  const PollingPlan p = plan_polling(std::nullopt, 1, 0, 256, kProcessThread);
  EXPECT_EQ(p.spin, microseconds(0));
  EXPECT_FALSE(p.oversubscribed);
  EXPECT_NE(p.reason.find("software fabric"), std::string::npos) << p.reason;
}

TEST(RdmaPolling, AutoSpinsBrieflyWhenTheWorkersDriveTheProvider) {
  // The driven engine: no thread of its own fills the CQs; the workers do,
  // spin briefly on any number of CPUs, and yield the CPU on empty polls.
  for (std::size_t cpus : {1u, 2u, 256u}) {
    const PollingPlan p = plan_polling(std::nullopt, 3, 3, cpus, kAdapter, /*progress_by_pollers=*/true);
    EXPECT_EQ(p.spin, kDrivenPolling) << cpus;
    EXPECT_TRUE(p.yield_idle) << cpus;
    EXPECT_FALSE(p.oversubscribed);
    EXPECT_NE(p.reason.find("driven engine"), std::string::npos) << p.reason;
  }
  // Explicit values yield too on that provider; adapters' spinners do not.
  EXPECT_TRUE(plan_polling(microseconds(200), 3, 0, 2, kAdapter, true).yield_idle);
  EXPECT_FALSE(plan_polling(std::nullopt, 1, 0, 4, kAdapter).yield_idle);
  EXPECT_FALSE(plan_polling(microseconds(200), 1, 0, 4, kAdapter).yield_idle);
  // An explicit value still wins.
  EXPECT_EQ(plan_polling(microseconds(0), 3, 0, 2, kAdapter, true).spin, microseconds(0));
}

TEST(RdmaPolling, AnExplicitValueIsHonouredAndFlaggedWhenItOversubscribes) {
  PollingPlan p = plan_polling(microseconds(250), 3, 0, 64, kAdapter);
  EXPECT_EQ(p.spin, microseconds(250));
  EXPECT_FALSE(p.oversubscribed);
  p = plan_polling(microseconds(1000), 3, 3, 4, kAdapter);
  EXPECT_EQ(p.spin, microseconds(1000)) << "honoured even when it oversubscribes";
  EXPECT_TRUE(p.oversubscribed);
  EXPECT_NE(p.reason.find("6 spinning RDMA workers"), std::string::npos) << p.reason;
  EXPECT_NE(p.reason.find("4 usable CPUs"), std::string::npos) << p.reason;
  p = plan_polling(microseconds(50), 1, 0, 256, kProcessThread);
  EXPECT_EQ(p.spin, microseconds(50));
  EXPECT_TRUE(p.oversubscribed);
  EXPECT_NE(p.reason.find("software fabric"), std::string::npos) << p.reason;
  // 0 never spins, so it never oversubscribes.
  p = plan_polling(microseconds(0), 24, 100, 1, kProcessThread);
  EXPECT_EQ(p.spin, microseconds(0));
  EXPECT_FALSE(p.oversubscribed);
}

TEST(RdmaPolling, UsableCpusIsTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(usable_cpus(), static_cast<std::size_t>(CPU_COUNT(&set)));
}

// The stack applies the plan: auto on the soft fabric's threaded engine does
// not spin; an explicit value does, and its workers count process-wide until
// the stack goes (a later stack's auto decision sees them).
TEST(RdmaPolling, TheStackAppliesThePlanAndCountsItsSpinners) {
  soft::SoftOptions threaded;
  threaded.driven_engine = false;
  if (const char* e = std::getenv("SIPHON_SOFT_ENGINE"); e != nullptr && std::string_view(e) == "driven")
    GTEST_SKIP() << "SIPHON_SOFT_ENGINE=driven overrides the threaded engine this test needs";
  auto provider = soft::make_provider(threaded);
  ASSERT_TRUE(provider->completions_from_process_thread());
  const std::size_t before = spinning_workers();
  RdmaOptions o = small_options();
  o.polling.reset();
  {
    RdmaStack s(*provider, o);
    EXPECT_EQ(s.polling(), microseconds(0));
    EXPECT_EQ(spinning_workers(), before);
  }
  o.polling = microseconds(75);
  {
    RdmaStack s(*provider, o);
    EXPECT_EQ(s.polling(), microseconds(75));
    EXPECT_EQ(spinning_workers(), before + o.common.async_op_threads);
    // A stack that does not spin still runs traffic (sleeping on the channel
    // after every batch): covered by every stack test; here only the counts.
  }
  EXPECT_EQ(spinning_workers(), before);
}

// On the driven engine (the soft fabric's default) the workers run the
// fabric, so auto spins 50 us and yields on every empty poll while it does.
TEST(RdmaPolling, AutoSpinsAndYieldsOnTheDrivenEngine) {
  if (const char* e = std::getenv("SIPHON_SOFT_ENGINE"); e != nullptr && std::string_view(e) == "thread")
    GTEST_SKIP() << "SIPHON_SOFT_ENGINE=thread overrides the driven engine this test needs";
  auto provider = soft::make_provider();
  ASSERT_TRUE(provider->progress_by_pollers());
  ASSERT_FALSE(provider->completions_from_process_thread());
  const std::size_t before = spinning_workers();
  RdmaOptions o = small_options();
  o.polling.reset();
  {
    RdmaStack s(*provider, o);
    EXPECT_EQ(s.polling(), kDrivenPolling);
    EXPECT_EQ(spinning_workers(), before + o.common.async_op_threads);
  }
  EXPECT_EQ(spinning_workers(), before);
}

}  // namespace
}  // namespace siphon::rdma::test
