// shm-ring-probe: what a one-way stream of 4 KiB messages between two
// processes of one host costs through (a) a shared-memory ring with an
// eventfd wake-up only when the other side sleeps, (b) TCP loopback with
// TCP_NODELAY, (c) a unix stream socket. Both sides copy each payload once
// (the writer into the ring or socket, the reader out into its own
// buffer), as a same-host link of the software fabric would. It is the
// floor measured for the same-host link that issue 14 item 9 asks for
// (docs/performance.md, "What a same-host link could cost"); it is not
// part of the build.
//
//   g++ -O2 -std=c++20 tools/dev/shm-ring-probe.cc -o /tmp/shm-ring-probe
//   /tmp/shm-ring-probe shm 3; /tmp/shm-ring-probe tcp 3; /tmp/shm-ring-probe unix 3
//   /tmp/shm-ring-probe MODE SECONDS WINDOW   # at most WINDOW messages unconsumed
//
// Prints messages per second, the CPU time of both processes per message,
// their context switches per message and (shm) the wake-ups per message.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

constexpr std::size_t kMsg = 4096;
constexpr std::size_t kSlots = 64;

struct Shared {
  alignas(64) std::atomic<std::uint64_t> head{0};
  alignas(64) std::atomic<std::uint64_t> tail{0};
  alignas(64) std::atomic<int> cons_sleep{0};
  alignas(64) std::atomic<int> prod_sleep{0};
  alignas(64) std::atomic<int> stop{0};
  std::atomic<std::uint64_t> wakes_data{0}, wakes_space{0};
  alignas(64) char slots[kSlots][kMsg];
};

struct Usage {
  double cpu_s;
  long csw;
};
Usage usage() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return {r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6,
          r.ru_nvcsw + r.ru_nivcsw};
}

void wait_efd(int fd) {
  std::uint64_t v;
  (void)!read(fd, &v, sizeof v);
}
void kick(int fd) {
  std::uint64_t one = 1;
  (void)!write(fd, &one, sizeof one);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "shm";
  const double secs = argc > 2 ? std::atof(argv[2]) : 3.0;
  // The window: messages the writer may have sent that the reader has not
  // consumed (shm: taken out of the ring; sockets: acknowledged by an
  // 8-byte count the reader writes back after each read). 0 = the ring's
  // 64 slots for shm, the socket buffers alone for the sockets.
  const std::uint64_t window = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
  const std::uint64_t ring_window = window == 0 || window > kSlots ? kSlots : window;
  int res[2];
  (void)!pipe(res);
  static char src[kMsg], dst[1 << 16];
  std::memset(src, 7, sizeof src);

  if (mode == "shm") {
    auto* s = static_cast<Shared*>(
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    new (s) Shared();
    const int efd_data = eventfd(0, 0), efd_space = eventfd(0, 0);
    const pid_t pid = fork();
    if (pid == 0) {  // consumer
      std::uint64_t n = 0;
      for (;;) {
        const std::uint64_t h = s->head.load(std::memory_order_relaxed);
        if (s->tail.load(std::memory_order_acquire) == h) {
          if (s->stop.load()) break;
          s->cons_sleep.store(1, std::memory_order_seq_cst);
          std::atomic_thread_fence(std::memory_order_seq_cst);
          if (s->tail.load(std::memory_order_seq_cst) == h && !s->stop.load()) wait_efd(efd_data);
          s->cons_sleep.store(0, std::memory_order_relaxed);
          continue;
        }
        std::memcpy(dst, s->slots[h % kSlots], kMsg);
        s->head.store(h + 1, std::memory_order_release);
        ++n;
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (s->prod_sleep.load(std::memory_order_seq_cst)) {
          s->prod_sleep.store(0);
          s->wakes_space.fetch_add(1);
          kick(efd_space);
        }
      }
      Usage u = usage();
      (void)!write(res[1], &u, sizeof u);
      _exit(0);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto end = t0 + std::chrono::duration<double>(secs);
    std::uint64_t n = 0;
    while (std::chrono::steady_clock::now() < end) {
      for (int b = 0; b < 256; ++b) {
        const std::uint64_t t = s->tail.load(std::memory_order_relaxed);
        while (t - s->head.load(std::memory_order_acquire) >= ring_window) {
          s->prod_sleep.store(1, std::memory_order_seq_cst);
          std::atomic_thread_fence(std::memory_order_seq_cst);
          if (t - s->head.load(std::memory_order_seq_cst) >= ring_window) wait_efd(efd_space);
          s->prod_sleep.store(0, std::memory_order_relaxed);
        }
        std::memcpy(s->slots[t % kSlots], src, kMsg);
        s->tail.store(t + 1, std::memory_order_release);
        ++n;
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (s->cons_sleep.load(std::memory_order_seq_cst)) {
          s->cons_sleep.store(0);
          s->wakes_data.fetch_add(1);
          kick(efd_data);
        }
      }
    }
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s->stop.store(1);
    kick(efd_data);
    Usage c{};
    (void)!read(res[0], &c, sizeof c);
    waitpid(pid, nullptr, 0);
    Usage p = usage();
    std::printf("shm   %8.0f msg/s  cpu %5.2f us/msg  csw %.2f/msg  wakes data %.3f space %.3f /msg\n",
                n / el, (p.cpu_s + c.cpu_s) * 1e6 / n, double(p.csw + c.csw) / n,
                double(s->wakes_data.load()) / n, double(s->wakes_space.load()) / n);
    return 0;
  }

  int fds[2];
  if (mode == "unix") {
    socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
  } else {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t al = sizeof a;
    getsockname(l, reinterpret_cast<sockaddr*>(&a), &al);
    listen(l, 1);
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    connect(fds[0], reinterpret_cast<sockaddr*>(&a), sizeof a);
    fds[1] = accept(l, nullptr, nullptr);
    int one = 1;
    setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    close(l);
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::uint64_t bytes = 0;
    for (;;) {
      ssize_t r = read(fds[1], dst, sizeof dst);
      if (r <= 0) break;
      bytes += static_cast<std::uint64_t>(r);
      if (window != 0) {
        const std::uint64_t done = bytes / kMsg;
        (void)!write(fds[1], &done, sizeof done);
      }
    }
    Usage u = usage();
    (void)!write(res[1], &u, sizeof u);
    _exit(0);
  }
  close(fds[1]);
  const auto t0 = std::chrono::steady_clock::now();
  const auto end = t0 + std::chrono::duration<double>(secs);
  std::uint64_t n = 0, acked = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (int b = 0; b < 256; ++b) {
      while (window != 0 && n - acked >= window) {
        std::uint64_t a[64];
        const ssize_t r = read(fds[0], a, sizeof a);
        if (r < static_cast<ssize_t>(sizeof a[0])) return 1;
        acked = a[r / sizeof a[0] - 1];
      }
      if (write(fds[0], src, kMsg) != static_cast<ssize_t>(kMsg)) return 1;
      ++n;
    }
  }
  shutdown(fds[0], SHUT_WR);
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(fds[0]);
  Usage c{};
  (void)!read(res[0], &c, sizeof c);
  waitpid(pid, nullptr, 0);
  Usage p = usage();
  std::printf("%-5s %8.0f msg/s  cpu %5.2f us/msg  csw %.2f/msg\n", mode.c_str(), n / el,
              (p.cpu_s + c.cpu_s) * 1e6 / n, double(p.csw + c.csw) / n);
  return 0;
}
