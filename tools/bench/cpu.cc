#include "tools/bench/cpu.h"

#include <dirent.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>

namespace siphon::bench {
namespace {

std::uint64_t tv_ns(const timeval& tv) noexcept {
  return static_cast<std::uint64_t>(tv.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(tv.tv_usec) * 1000ull;
}

CpuTimes rusage_times(int who) noexcept {
  rusage ru{};
  if (::getrusage(who, &ru) != 0) return {};
  return {tv_ns(ru.ru_utime), tv_ns(ru.ru_stime)};
}

// Linux's CPU-clock id of another thread of this process (glibc's
// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), as pthread_getcpuclockid uses).
clockid_t thread_clock(pid_t tid) noexcept {
  return static_cast<clockid_t>((~static_cast<std::uint32_t>(tid) << 3) | 6u);
}

// utime and stime (clock ticks) from /proc/self/task/<tid>/stat.
bool stat_ticks(pid_t tid, std::uint64_t& utime, std::uint64_t& stime) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", static_cast<int>(tid));
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char buf[1024];
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // The command name (field 2) is in parentheses and may hold spaces.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return false;
  ++p;
  // Fields after the name: 3 state, 4 ppid, ... 14 utime, 15 stime.
  for (int field = 3; field < 14; ++field) {
    while (*p == ' ') ++p;
    while (*p != ' ' && *p != '\0') ++p;
  }
  char* end = nullptr;
  utime = std::strtoull(p, &end, 10);
  if (end == p) return false;
  p = end;
  stime = std::strtoull(p, &end, 10);
  return end != p;
}

}  // namespace

CpuTimes process_cpu() noexcept { return rusage_times(RUSAGE_SELF); }

CpuTimes this_thread_cpu() noexcept { return rusage_times(RUSAGE_THREAD); }

CpuTimes thread_cpu(pid_t tid) noexcept {
  timespec ts{};
  if (::clock_gettime(thread_clock(tid), &ts) != 0) return {};
  const std::uint64_t total = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
  std::uint64_t ut = 0, st = 0;
  if (!stat_ticks(tid, ut, st) || ut + st == 0) return {total, 0};
  const auto user = static_cast<std::uint64_t>(static_cast<double>(total) * static_cast<double>(ut) / static_cast<double>(ut + st));
  return {user, total - user};
}

CpuTimes threads_cpu(const std::vector<pid_t>& tids) noexcept {
  CpuTimes sum;
  for (pid_t t : tids) sum = sum + thread_cpu(t);
  return sum;
}

std::vector<pid_t> list_threads() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long v = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && v > 0) out.push_back(static_cast<pid_t>(v));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void settle_runtime_threads() {
  static std::once_flag once;
  std::call_once(once, [] { std::thread([] {}).join(); });
}

std::vector<pid_t> new_threads(const std::vector<pid_t>& before, const std::vector<pid_t>& after) {
  std::vector<pid_t> out;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(out));
  return out;
}

}  // namespace siphon::bench
