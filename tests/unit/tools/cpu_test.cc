// CPU accounting of siphon-bench (tools/bench/cpu.h).
#include <ctime>
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "tools/bench/cpu.h"

namespace siphon::bench {
namespace {

void burn(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  volatile std::uint64_t x = 0;
  while (std::chrono::steady_clock::now() < until) x = x + 1;
}

// Spins until this thread has used `cpu` of CPU time (its own clock), not
// wall time: on a loaded machine a wall-time spin may get little CPU. Gives
// up after 60 s of wall time.
void burn_cpu(std::chrono::milliseconds cpu) {
  const auto thread_ns = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::nanoseconds(ts.tv_sec * 1'000'000'000LL + ts.tv_nsec);
  };
  const auto start = thread_ns();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  volatile std::uint64_t x = 0;
  while (thread_ns() - start < cpu && std::chrono::steady_clock::now() < give_up) x = x + 1;
}

TEST(Cpu, ThreadsAreFoundAndAttributed) {
  settle_runtime_threads();  // under TSan, its helper thread comes with the first thread
  const auto before = list_threads();
  ASSERT_FALSE(before.empty());
  EXPECT_NE(std::find(before.begin(), before.end(), static_cast<pid_t>(::syscall(SYS_gettid))), before.end());
  std::atomic<bool> go{false}, done{false};
  std::atomic<pid_t> tid{0};
  std::thread t([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    while (!go) std::this_thread::yield();
    burn_cpu(std::chrono::milliseconds(100));
    done = true;
    while (go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (tid == 0) std::this_thread::yield();
  const auto added = new_threads(before, list_threads());
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0], tid.load());
  const CpuTimes t0 = threads_cpu(added);
  go = true;
  while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const CpuTimes t1 = threads_cpu(added);
  // 100 ms of the thread's own CPU time (however long that takes on a busy
  // machine), read through the attribution under test.
  EXPECT_GT((t1 - t0).total_ns(), 50'000'000u);
  EXPECT_LT((t1 - t0).total_ns(), 2'000'000'000u);
  // The process total includes that thread's time.
  EXPECT_GE(process_cpu().total_ns(), t1.total_ns());
  go = false;
  t.join();
  // pthread_join returns when the kernel clears the thread's tid, a moment
  // before /proc/self/task/<tid> goes away: wait (bounded) for that.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (thread_cpu(added[0]).total_ns() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(thread_cpu(added[0]).total_ns(), 0u) << "an exited thread reads as zero";
}

TEST(Cpu, ThisThread) {
  const CpuTimes a = this_thread_cpu();
  burn(std::chrono::milliseconds(50));
  const CpuTimes b = this_thread_cpu();
  EXPECT_GT((b - a).total_ns(), 0u);
  EXPECT_EQ((a - b).total_ns(), 0u) << "differences never go negative";
}

}  // namespace
}  // namespace siphon::bench
