// Which event engine should carry async+posix (issue 20 item 4): the
// epoll readiness loop Asio runs today, or io_uring with a multishot receive
// into a provided-buffer ring and sends submitted with the wait. This is the
// engines alone, with no messenger on top: two threads of one process over
// loopback TCP, each side one socket and one loop, so what differs between
// the cases is only how a loop learns of data and moves it. The result is the
// ceiling of what changing the engine could save per message; the messenger's
// own CPU per message (siphon-bench, same run) is what it is held against
// (docs/performance.md, "io_uring or epoll").
//
//   PingPong/<engine>/64      one 64-byte message each way, one in flight
//   Stream/<engine>/4096      4 KiB messages one way, written 16 per
//                             system call or submission (a messenger's
//                             batched writev), read as they come
//
// Engines:
//   epoll         non-blocking sockets; wait, then recv/send until EAGAIN
//   epoll_asio    the same plus the speculative recv Asio 1.74 makes before
//                 each wait (it returns EAGAIN when the peer has not answered)
//   uring         multishot recv (IOSQE_BUFFER_SELECT, 16 x 64 KiB buffers),
//                 sends submitted together with the wait for the next receive
//                 (one io_uring_enter per round), send CQEs skipped on success
//   uring_defer   the same ring with IORING_SETUP_SINGLE_ISSUER |
//                 IORING_SETUP_DEFER_TASKRUN (completion work runs only when
//                 the ring's thread waits)
//
// Each benchmark iteration is one whole session: connect, run
// SIPHON_TCP_ENGINE_BENCH_MSGS round trips (default 20000) for the
// ping-pong, ten times as many messages for the stream, close. Counters: msgs_per_s (wall), cpu_us_per_msg (both
// threads' CPU time from CLOCK_THREAD_CPUTIME_ID, divided by the messages),
// syscalls_per_msg (the system calls this code makes, both threads: recv,
// send, writev, epoll_wait, io_uring_enter).
//
// Every byte is checked (the echo against what was sent, the stream's count
// and pattern); a mismatch or an error stops the case with SkipWithError,
// which prints ERROR OCCURRED (the ctest smoke run fails on it). A kernel or
// seccomp profile that refuses io_uring_setup leaves the uring cases with an
// "io_uring refused" label and no figures.
//
// Run: build/release/tests/bench/tcp_engine_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

enum class Engine { epoll, epoll_asio, uring, uring_defer };

constexpr std::size_t kBatch = 16;           // stream: messages per writev / sendmsg
constexpr std::size_t kRecvBuf = 64 * 1024;  // receive buffer (each of the ring's)
constexpr unsigned kRingBufs = 16;           // provided buffers per ring (power of 2)

std::uint64_t messages_per_session() {
  const char* v = std::getenv("SIPHON_TCP_ENGINE_BENCH_MSGS");
  if (v == nullptr) return 20000;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  return (end != v && *end == '\0' && n > 0) ? n : 20000;
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string errno_text(const char* what, int err) { return std::string(what) + ": " + std::strerror(err); }

// A connected loopback TCP pair, TCP_NODELAY on both (as the messenger sets).
struct Pair {
  int client = -1;
  int server = -1;
  std::string error;
  Pair() {
    const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 1) != 0 ||
        ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      error = errno_text("listen on 127.0.0.1", errno);
    } else {
      client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (client < 0 || ::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        error = errno_text("connect", errno);
      } else {
        server = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (server < 0) error = errno_text("accept", errno);
      }
    }
    if (lfd >= 0) ::close(lfd);
    const int one = 1;
    for (int fd : {client, server})
      if (fd >= 0) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Pair() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
};

// What one side of a session did.
struct Side {
  double cpu_s = 0;
  std::uint64_t syscalls = 0;
  std::uint64_t bytes = 0;
  std::string error;  // empty: fine
};

// ---------------------------------------------------------------- epoll --

// `asio` false: the leanest epoll loop, level-triggered on EPOLLIN (EPOLLOUT
// added only while a write waits for room): wait, then one recv, unless the
// last recv filled the buffer (then recv first). `asio` true: what Asio 1.74
// does, edge-triggered with EPOLLIN and EPOLLOUT registered once and a
// speculative recv before every wait, so each wait is preceded by a recv
// that finds nothing when the peer has not answered yet.
class EpollLoop {
 public:
  EpollLoop(int fd, bool asio) : fd_(fd), asio_(asio) {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    const int fl = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    epoll_event ev{};
    ev.events = asio ? (EPOLLIN | EPOLLOUT | EPOLLET) : EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  }
  ~EpollLoop() { ::close(ep_); }
  EpollLoop(const EpollLoop&) = delete;
  EpollLoop& operator=(const EpollLoop&) = delete;

  // Reads at least one byte into buf (up to len): >0 bytes, 0 at EOF, <0 -errno.
  ssize_t read_some(char* buf, std::size_t len, Side& s) {
    bool try_first = asio_ || last_read_full_;
    for (;;) {
      if (try_first) {
        ++s.syscalls;
        const ssize_t n = ::recv(fd_, buf, len, 0);
        if (n >= 0) {
          last_read_full_ = static_cast<std::size_t>(n) == len;
          return n;
        }
        if (errno != EAGAIN && errno != EINTR) return -errno;
      }
      if (const int w = wait(s); w < 0) return w;
      try_first = true;
    }
  }

  // Writes all of iov (consumed as it goes): 0 or -errno.
  int write_all(iovec* iov, int cnt, Side& s) {
    while (cnt > 0) {
      ++s.syscalls;
      const ssize_t n = ::writev(fd_, iov, cnt);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN) return -errno;
        if (const int w = wait_writable(s); w < 0) return w;
        continue;
      }
      std::size_t left = static_cast<std::size_t>(n);
      while (cnt > 0 && left >= iov->iov_len) {
        left -= iov->iov_len;
        ++iov;
        --cnt;
      }
      if (cnt > 0) {
        iov->iov_base = static_cast<char*>(iov->iov_base) + left;
        iov->iov_len -= left;
      }
    }
    return 0;
  }

 private:
  int wait(Side& s) {
    epoll_event ev{};
    for (;;) {
      ++s.syscalls;
      const int n = ::epoll_wait(ep_, &ev, 1, 10000);
      if (n > 0) return 0;
      if (n == 0) return -ETIMEDOUT;
      if (errno != EINTR) return -errno;
    }
  }
  int modify(std::uint32_t events, Side& s) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd_;
    ++s.syscalls;
    return ::epoll_ctl(ep_, EPOLL_CTL_MOD, fd_, &ev) == 0 ? 0 : -errno;
  }
  int wait_writable(Side& s) {
    if (asio_) return wait(s);  // EPOLLOUT is registered (edge-triggered)
    if (const int rc = modify(EPOLLOUT, s); rc < 0) return rc;
    const int w = wait(s);
    const int rc = modify(EPOLLIN, s);
    return w < 0 ? w : rc;
  }
  int fd_;
  int ep_ = -1;
  bool asio_;
  bool last_read_full_ = false;
};

// -------------------------------------------------------------- io_uring --

constexpr std::uint64_t kRecvTag = 1;
constexpr std::uint64_t kSendTag = 2;

class UringLoop {
 public:
  // Empty error(): ready. Otherwise the ring could not be set up.
  UringLoop(int fd, bool defer) : fd_(fd), bufs_(static_cast<std::size_t>(kRingBufs) * kRecvBuf) {
    io_uring_params p{};
    p.flags = defer ? (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN) : 0;
    if (const int rc = io_uring_queue_init_params(64, &ring_, &p); rc < 0) {
      error_ = errno_text("io_uring_setup", -rc);
      return;
    }
    ready_ = true;
    const std::size_t br_bytes = sizeof(io_uring_buf) * kRingBufs;
    void* mem = ::mmap(nullptr, br_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (mem == MAP_FAILED) {
      error_ = errno_text("mmap of the buffer ring", errno);
      return;
    }
    br_ = static_cast<io_uring_buf_ring*>(mem);
    io_uring_buf_ring_init(br_);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uintptr_t>(br_);
    reg.ring_entries = kRingBufs;
    reg.bgid = 0;
    if (const int rc = io_uring_register_buf_ring(&ring_, &reg, 0); rc < 0) {
      error_ = errno_text("io_uring_register_buf_ring", -rc);
      return;
    }
    for (unsigned i = 0; i < kRingBufs; ++i)
      io_uring_buf_ring_add(br_, bufs_.data() + static_cast<std::size_t>(i) * kRecvBuf, kRecvBuf,
                            static_cast<unsigned short>(i), io_uring_buf_ring_mask(kRingBufs), static_cast<int>(i));
    io_uring_buf_ring_advance(br_, static_cast<int>(kRingBufs));
    arm_recv();
  }
  ~UringLoop() {
    if (ready_) io_uring_queue_exit(&ring_);
    if (br_ != nullptr) ::munmap(br_, sizeof(io_uring_buf) * kRingBufs);
  }
  UringLoop(const UringLoop&) = delete;
  UringLoop& operator=(const UringLoop&) = delete;

  const std::string& error() const { return error_; }

  // Queues a send of iov (not submitted: the next wait submits it). The
  // iovec is read when the SQE is submitted; its memory must stay until the
  // send completes, which a MSG_WAITALL send on a stream socket does only
  // when all is sent. With `want_cqe` false a successful send posts no CQE
  // (IOSQE_CQE_SKIP_SUCCESS): the ping-pong learns it went out from the
  // reply, and only a failure or a short send wakes the ring.
  void queue_send(iovec* iov, int cnt, std::size_t total, bool want_cqe) {
    io_uring_sqe* sqe = sqe_or_flush();
    msg_ = {};
    msg_.msg_iov = iov;
    msg_.msg_iovlen = static_cast<std::size_t>(cnt);
    io_uring_prep_sendmsg(sqe, fd_, &msg_, MSG_WAITALL | MSG_NOSIGNAL);
    if (!want_cqe) sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, kSendTag);
    send_expect_ = total;
  }

  // Submits what is queued and waits until received bytes arrive; hands
  // each chunk to on_data(ptr, len). Returns >0 bytes handed, 0 at EOF, <0 -errno.
  template <class F>
  ssize_t wait_data(F&& on_data, Side& s) {
    if (eof_) return 0;  // seen in the batch that also carried the last data
    for (;;) {
      ++s.syscalls;
      const int rc = io_uring_submit_and_wait(&ring_, 1);
      if (rc < 0 && rc != -EINTR) return rc;
      ssize_t got = 0;
      bool eof = false;
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_cqe* cqe = nullptr;
      int fail = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        const std::uint64_t tag = io_uring_cqe_get_data64(cqe);
        if (tag == kSendTag) {
          // Only failures and short sends reach here (CQE_SKIP_SUCCESS).
          if (cqe->res < 0) fail = cqe->res;
          else if (static_cast<std::size_t>(cqe->res) != send_expect_) fail = -EIO;
          continue;
        }
        if (cqe->res == -ENOBUFS) {  // every buffer out: they are returned below, re-arm
          rearm_ = true;
          continue;
        }
        if (cqe->res < 0) {
          fail = cqe->res;
          continue;
        }
        if (!(cqe->flags & IORING_CQE_F_MORE)) rearm_ = true;
        if (cqe->res == 0) {
          eof = true;
          continue;
        }
        const unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        char* b = bufs_.data() + static_cast<std::size_t>(bid) * kRecvBuf;
        on_data(b, static_cast<std::size_t>(cqe->res));
        got += cqe->res;
        io_uring_buf_ring_add(br_, b, kRecvBuf, static_cast<unsigned short>(bid), io_uring_buf_ring_mask(kRingBufs),
                              0);
        io_uring_buf_ring_advance(br_, 1);
      }
      io_uring_cq_advance(&ring_, seen);
      if (fail != 0) return fail;
      eof_ = eof;
      if (rearm_ && !eof) {
        rearm_ = false;
        arm_recv();
      }
      if (got > 0) return got;
      if (eof) return 0;
    }
  }

  // The stream's sender: submits the queued send (queued with want_cqe)
  // and waits for its completion: 0, or -errno (-EIO for a short send).
  int wait_send(Side& s) {
    for (;;) {
      ++s.syscalls;
      const int rc = io_uring_submit_and_wait(&ring_, 1);
      if (rc < 0 && rc != -EINTR) return rc;
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_cqe* cqe = nullptr;
      int fail = 0;
      bool done = false;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        if (io_uring_cqe_get_data64(cqe) == kSendTag) {
          done = true;
          if (cqe->res < 0) fail = cqe->res;
          else if (static_cast<std::size_t>(cqe->res) != send_expect_) fail = -EIO;
        } else if (cqe->res < 0 && cqe->res != -ENOBUFS) {
          fail = cqe->res;
        }
      }
      io_uring_cq_advance(&ring_, seen);
      if (fail != 0) return fail;
      if (done) return 0;
    }
  }

 private:
  io_uring_sqe* sqe_or_flush() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }
  void arm_recv() {
    io_uring_sqe* sqe = sqe_or_flush();
    io_uring_prep_recv_multishot(sqe, fd_, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 0;
    io_uring_sqe_set_data64(sqe, kRecvTag);
  }

  int fd_;
  io_uring ring_{};
  bool ready_ = false;
  std::string error_;
  io_uring_buf_ring* br_ = nullptr;
  std::vector<char> bufs_;
  msghdr msg_{};
  std::size_t send_expect_ = 0;
  bool rearm_ = false;
  bool eof_ = false;
};

bool uring(Engine e) { return e == Engine::uring || e == Engine::uring_defer; }

// Whether this kernel and its seccomp profile let a ring be set up at all.
std::string uring_refusal() {
  io_uring ring{};
  const int rc = io_uring_queue_init(4, &ring, 0);
  if (rc < 0) return errno_text("io_uring_setup", -rc);
  io_uring_queue_exit(&ring);
  return {};
}

// ------------------------------------------------------------ ping-pong --

constexpr std::size_t kPingSize = 64;

void fill(char* p, std::size_t n, std::uint64_t seq) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<char>((seq * 131 + i * 7) & 0xff);
}

// The echo side: returns every byte it reads, until EOF.
Side echo_side(int fd, Engine e) {
  Side s;
  const double c0 = thread_cpu_s();
  std::array<char, kRecvBuf> buf{};
  if (uring(e)) {
    UringLoop loop(fd, e == Engine::uring_defer);
    if (!loop.error().empty()) {
      s.error = loop.error();
      return s;
    }
    // Data is echoed from the ring's buffer after copying it aside (the
    // buffer goes back to the kernel as soon as the handler returns).
    std::vector<char> out;
    iovec iov{};
    for (;;) {
      out.clear();
      const ssize_t n = loop.wait_data([&](const char* p, std::size_t len) { out.insert(out.end(), p, p + len); }, s);
      if (n == 0) break;
      if (n < 0) {
        s.error = errno_text("echo side", static_cast<int>(-n));
        break;
      }
      s.bytes += static_cast<std::uint64_t>(n);
      iov = {out.data(), out.size()};
      // Submitted by the next wait, together with it. `out` is reused only
      // when the next data has arrived, which the peer sends only after it
      // received this echo, so the send is complete by then.
      loop.queue_send(&iov, 1, out.size(), false);
    }
  } else {
    EpollLoop loop(fd, e == Engine::epoll_asio);
    for (;;) {
      const ssize_t n = loop.read_some(buf.data(), buf.size(), s);
      if (n == 0) break;
      if (n < 0) {
        s.error = errno_text("echo side", static_cast<int>(-n));
        break;
      }
      s.bytes += static_cast<std::uint64_t>(n);
      iovec iov{buf.data(), static_cast<std::size_t>(n)};
      if (const int rc = loop.write_all(&iov, 1, s); rc < 0) {
        s.error = errno_text("echo send", -rc);
        break;
      }
    }
  }
  s.cpu_s = thread_cpu_s() - c0;
  return s;
}

// The pinging side: `count` round trips of kPingSize bytes, each checked.
Side ping_side(int fd, Engine e, std::uint64_t count) {
  Side s;
  const double c0 = thread_cpu_s();
  std::array<char, kPingSize> out{};
  std::array<char, kPingSize> in{};
  std::array<char, kRecvBuf> buf{};
  auto check = [&](std::uint64_t seq) {
    if (std::memcmp(out.data(), in.data(), kPingSize) != 0) s.error = "echo differs at round trip " + std::to_string(seq);
  };
  if (uring(e)) {
    UringLoop loop(fd, e == Engine::uring_defer);
    if (!loop.error().empty()) {
      s.error = loop.error();
      return s;
    }
    for (std::uint64_t i = 0; i < count && s.error.empty(); ++i) {
      fill(out.data(), kPingSize, i);
      iovec iov{out.data(), kPingSize};
      loop.queue_send(&iov, 1, kPingSize, false);  // submitted with the wait for the reply
      std::size_t have = 0;
      while (have < kPingSize && s.error.empty()) {
        const ssize_t n = loop.wait_data(
            [&](const char* p, std::size_t len) {
              if (have + len > kPingSize) {
                s.error = "more echoed than sent";
                return;
              }
              std::memcpy(in.data() + have, p, len);
              have += len;
            },
            s);
        if (n <= 0) s.error = n == 0 ? "echo side closed" : errno_text("ping", static_cast<int>(-n));
      }
      s.bytes += have;
      if (s.error.empty()) check(i);
    }
  } else {
    EpollLoop loop(fd, e == Engine::epoll_asio);
    for (std::uint64_t i = 0; i < count && s.error.empty(); ++i) {
      fill(out.data(), kPingSize, i);
      iovec iov{out.data(), kPingSize};
      if (const int rc = loop.write_all(&iov, 1, s); rc < 0) {
        s.error = errno_text("ping send", -rc);
        break;
      }
      std::size_t have = 0;
      while (have < kPingSize) {
        const ssize_t n = loop.read_some(buf.data(), buf.size(), s);
        if (n <= 0) {
          s.error = n == 0 ? "echo side closed" : errno_text("ping", static_cast<int>(-n));
          break;
        }
        if (have + static_cast<std::size_t>(n) > kPingSize) {
          s.error = "more echoed than sent";
          break;
        }
        std::memcpy(in.data() + have, buf.data(), static_cast<std::size_t>(n));
        have += static_cast<std::size_t>(n);
      }
      s.bytes += have;
      if (s.error.empty()) check(i);
    }
  }
  s.cpu_s = thread_cpu_s() - c0;
  return s;
}

// --------------------------------------------------------------- stream --

// Receives until EOF, checking the pattern byte by byte (byte k of the
// stream is k * 7 mod 251, so a lost, repeated or reordered chunk shows).
Side sink_side(int fd, Engine e) {
  Side s;
  const double c0 = thread_cpu_s();
  auto consume = [&](const char* p, std::size_t len) {
    for (std::size_t i = 0; i < len && s.error.empty(); i += 509) {  // spot-check, cheap
      const std::uint64_t k = s.bytes + i;
      if (static_cast<unsigned char>(p[i]) != static_cast<unsigned char>((k * 7) % 251))
        s.error = "stream byte " + std::to_string(k) + " differs";
    }
    s.bytes += len;
  };
  if (uring(e)) {
    UringLoop loop(fd, e == Engine::uring_defer);
    if (!loop.error().empty()) {
      s.error = loop.error();
      return s;
    }
    for (;;) {
      const ssize_t n = loop.wait_data(consume, s);
      if (n == 0 || !s.error.empty()) break;
      if (n < 0) {
        s.error = errno_text("sink", static_cast<int>(-n));
        break;
      }
    }
  } else {
    EpollLoop loop(fd, e == Engine::epoll_asio);
    std::vector<char> buf(kRecvBuf);
    for (;;) {
      const ssize_t n = loop.read_some(buf.data(), buf.size(), s);
      if (n == 0 || !s.error.empty()) break;
      if (n < 0) {
        s.error = errno_text("sink", static_cast<int>(-n));
        break;
      }
      consume(buf.data(), static_cast<std::size_t>(n));
    }
  }
  s.cpu_s = thread_cpu_s() - c0;
  return s;
}

// Sends `count` messages of `size` bytes, kBatch per writev / sendmsg.
Side source_side(int fd, Engine e, std::uint64_t count, std::size_t size) {
  Side s;
  const double c0 = thread_cpu_s();
  // 251 is prime and the pattern's period; a batch's bytes are kBatch * size,
  // so the source keeps one buffer per phase of the pattern it can start at.
  const std::size_t batch_bytes = kBatch * size;
  std::vector<char> data(batch_bytes + 251);
  for (std::size_t k = 0; k < data.size(); ++k) data[k] = static_cast<char>((k * 7) % 251);
  std::vector<iovec> iov(kBatch);
  auto make_batch = [&](std::uint64_t first_byte, std::size_t n) {
    char* base = data.data() + (first_byte % 251);
    for (std::size_t j = 0; j < n; ++j) iov[j] = {base + j * size, size};
  };
  std::unique_ptr<UringLoop> ul;
  std::unique_ptr<EpollLoop> el;
  if (uring(e)) {
    ul = std::make_unique<UringLoop>(fd, e == Engine::uring_defer);
    if (!ul->error().empty()) {
      s.error = ul->error();
      return s;
    }
  } else {
    el = std::make_unique<EpollLoop>(fd, false);
  }
  for (std::uint64_t sent = 0; sent < count && s.error.empty();) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kBatch, count - sent));
    make_batch(s.bytes, n);
    if (ul) {
      ul->queue_send(iov.data(), static_cast<int>(n), n * size, true);
      if (const int rc = ul->wait_send(s); rc < 0) s.error = errno_text("stream send", -rc);
    } else if (const int rc = el->write_all(iov.data(), static_cast<int>(n), s); rc < 0) {
      s.error = errno_text("stream send", -rc);
    }
    s.bytes += n * size;
    sent += n;
  }
  ::shutdown(fd, SHUT_WR);
  s.cpu_s = thread_cpu_s() - c0;
  return s;
}

// ------------------------------------------------------------- harness --

void report(benchmark::State& state, std::uint64_t msgs, double cpu_s, std::uint64_t syscalls) {
  const double m = static_cast<double>(msgs);
  state.SetItemsProcessed(static_cast<std::int64_t>(msgs));
  state.counters["msgs_per_s"] = benchmark::Counter(m, benchmark::Counter::kIsRate);
  state.counters["cpu_us_per_msg"] = benchmark::Counter(cpu_s * 1e6 / m);
  state.counters["syscalls_per_msg"] =
      benchmark::Counter(static_cast<double>(syscalls) / m);
}

bool refused(benchmark::State& state, Engine e) {
  if (!uring(e)) return false;
  static const std::string why = uring_refusal();
  if (why.empty()) return false;
  state.SetLabel("io_uring refused (" + why + "): no figures");
  for (auto _ : state) {
  }
  return true;
}

// Runs one session per benchmark iteration: `server(fd)` on a thread,
// `client(fd)` on this one, over a fresh loopback pair; the server must
// have received `server_bytes`. Reports the totals over the iterations.
template <typename Server, typename Client>
void run_sessions(benchmark::State& state, std::uint64_t msgs_per_session, std::uint64_t server_bytes,
                  Server&& server, Client&& client) {
  std::uint64_t msgs = 0;
  std::uint64_t syscalls = 0;
  double cpu = 0;
  for (auto _ : state) {
    Pair p;
    if (!p.error.empty()) {
      state.SkipWithError(p.error.c_str());
      break;
    }
    Side srv;
    std::thread t([&] { srv = server(p.server); });
    const Side cli = client(p.client);
    t.join();
    const std::string err = !cli.error.empty() ? cli.error : srv.error;
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
    if (srv.bytes != server_bytes) {
      state.SkipWithError("the receiving side did not see every byte");
      break;
    }
    msgs += msgs_per_session;
    syscalls += cli.syscalls + srv.syscalls;
    cpu += cli.cpu_s + srv.cpu_s;
  }
  if (msgs > 0) report(state, msgs, cpu, syscalls);
}

void BM_PingPong(benchmark::State& state, Engine e) {
  if (refused(state, e)) return;
  const std::uint64_t count = messages_per_session();
  run_sessions(
      state, count, count * kPingSize, [&](int fd) { return echo_side(fd, e); },
      [&](int fd) {
        Side s = ping_side(fd, e, count);
        ::shutdown(fd, SHUT_WR);  // the echo side's EOF
        return s;
      });
}

void BM_Stream(benchmark::State& state, Engine e) {
  if (refused(state, e)) return;
  const std::uint64_t count = 10 * messages_per_session();  // a stream message costs ~1/10 of a round trip
  const auto size = static_cast<std::size_t>(state.range(0));
  run_sessions(
      state, count, count * size, [&](int fd) { return sink_side(fd, e); },
      [&](int fd) { return source_side(fd, e, count, size); });
}

constexpr std::array<std::pair<const char*, Engine>, 4> kEngines{{{"epoll", Engine::epoll},
                                                                  {"epoll_asio", Engine::epoll_asio},
                                                                  {"uring", Engine::uring},
                                                                  {"uring_defer", Engine::uring_defer}}};

[[maybe_unused]] const bool registered = [] {
  for (const auto& [name, e] : kEngines)
    benchmark::RegisterBenchmark((std::string("PingPong/") + name + "/64").c_str(), BM_PingPong, e)
        ->Iterations(3)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (const auto& [name, e] : kEngines)
    benchmark::RegisterBenchmark((std::string("Stream/") + name).c_str(), BM_Stream, e)
        ->Arg(4096)
        ->Iterations(3)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
