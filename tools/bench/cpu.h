// CPU time of a process, of single threads and of sets of threads (Linux).
//
// siphon-bench reports CPU seconds per side. When client and server run in
// separate processes each side is its whole process (getrusage). In loopback
// mode both share one process: the server's side is the set of threads its
// stack and messenger started (found by listing /proc/self/task before and
// after), the client's side is everything else.
//
// A thread's total comes from its CPU-time clock (nanosecond resolution);
// its user/system split from the kernel's tick-sampled utime/stime in
// /proc/self/task/<tid>/stat, applied to that total.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace siphon::bench {

struct CpuTimes {
  std::uint64_t user_ns = 0;
  std::uint64_t system_ns = 0;
  std::uint64_t total_ns() const noexcept { return user_ns + system_ns; }
  CpuTimes operator-(const CpuTimes& o) const noexcept {
    return {user_ns > o.user_ns ? user_ns - o.user_ns : 0, system_ns > o.system_ns ? system_ns - o.system_ns : 0};
  }
  CpuTimes operator+(const CpuTimes& o) const noexcept { return {user_ns + o.user_ns, system_ns + o.system_ns}; }
};

// This process (all threads, living and exited): getrusage(RUSAGE_SELF).
CpuTimes process_cpu() noexcept;
// The calling thread: getrusage(RUSAGE_THREAD).
CpuTimes this_thread_cpu() noexcept;
// Thread `tid` of this process; zero if it has exited.
CpuTimes thread_cpu(pid_t tid) noexcept;
// The sum over `tids`.
CpuTimes threads_cpu(const std::vector<pid_t>& tids) noexcept;
// The thread ids of this process (/proc/self/task), ascending.
std::vector<pid_t> list_threads();
// Starts and joins one thread, once per process, so that helper threads a
// sanitizer runtime spawns with the process's first thread (TSan's
// background thread) already exist: call before a list_threads() whose
// difference should hold only the threads the code under measurement starts.
void settle_runtime_threads();
// Ids in `after` that are not in `before` (both ascending).
std::vector<pid_t> new_threads(const std::vector<pid_t>& before, const std::vector<pid_t>& after);

}  // namespace siphon::bench
