// MSG_ZEROCOPY sends of the TCP stack (siphon_ms_tcp_zerocopy_threshold,
// docs/transport.md §3): frames intact and in order, buffers released only
// after the kernel's completion, the "copied, so switch off" rule (loopback
// always copies), a socket closed with sends outstanding, the option off and
// a kernel that refuses SO_ZEROCOPY.
#include "tcp_test_util.h"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <optional>
#include <thread>

namespace siphon::transport::test {
namespace {

template <typename Pred>
bool eventually_on(const ConnectionRef& c, Pred pred, std::chrono::milliseconds timeout = 15s) {
  const auto deadline = Clock::now() + timeout;
  while (!run_on(c->worker(), pred)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TcpOptions zc_options(std::size_t threshold, bool check_copies) {
  TcpOptions o = test_options(1);
  o.zerocopy_threshold = threshold;
  o.zerocopy_check_copies = check_copies;
  return o;
}

std::uint8_t pattern(std::size_t i, std::uint8_t seed) { return static_cast<std::uint8_t>((i * 131 + seed) & 0xff); }

proto::Frame big_frame(std::size_t n, std::uint8_t seed) {
  std::string data(n, '\0');
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<char>(pattern(i, seed));
  proto::Frame f;
  f.tag = proto::Tag::message;
  f.segments[0] = BufferList::copy_of(std::to_string(seed));
  f.segments[3] = BufferList::copy_of(data);
  return f;
}

TcpConnectionStats stats_of(const ConnectionRef& c) {
  return run_on(c->worker(), [&] { return tcp(c)->stats(); });
}

std::uint64_t held_bytes(Worker& w) {
  return run_on(w, [&] { return static_cast<TcpWorker&>(w).zerocopy_held_bytes(); });
}

int so_zerocopy(const ConnectionRef& c) {
  return run_on(c->worker(), [&] {
    int v = -1;
    socklen_t len = sizeof v;
    if (::getsockopt(tcp(c)->native_handle(), SOL_SOCKET, SO_ZEROCOPY, &v, &len) != 0) return -1;
    return v;
  });
}

// A data segment over memory the test owns, whose release is observed: the
// release hook records, on the worker that drops the last reference, how
// many of the connection's zero-copy sends the kernel had completed then.
struct Observed {
  explicit Observed(std::size_t n) : mem(n), seg(mem.data(), n, &Observed::on_release, nullptr, this) {
    for (std::size_t i = 0; i < n; ++i) mem[i] = static_cast<std::byte>(pattern(i, 77));
  }
  static void on_release(Segment* s) noexcept {
    auto* self = static_cast<Observed*>(s->owner());
    if (self->conn != nullptr) {
      self->sends_at_release = self->conn->stats().zc_sends;
      self->completed_at_release = self->conn->stats().zc_completed;
    }
    self->released.store(true);
  }
  proto::Frame frame() {
    proto::Frame f;
    f.tag = proto::Tag::message;
    f.segments[0] = BufferList::copy_of("observed");
    f.segments[3].append(BufferPtr(&seg, 0, mem.size()));
    return f;
  }
  std::vector<std::byte> mem;
  Segment seg;
  TcpConnection* conn = nullptr;
  std::uint64_t sends_at_release = 0;
  std::uint64_t completed_at_release = 0;
  std::atomic<bool> released{false};
};

bool intact(const proto::Frame& f, std::size_t n, std::uint8_t seed) {
  return f.segments[3].length() == n && f.segments[3].crc32c(0) == big_frame(n, seed).segments[3].crc32c(0);
}

class TcpZeroCopyTest : public TcpFixture {
 protected:
  // Stacks with zero-copy kept on, a connected pair whose server does not
  // read, and obs's 4 MiB frame sent by the client with MSG_ZEROCOPY.
  void start_outstanding_send(Observed& obs, std::optional<Pair>& out) {
    make_stacks(test_options(1), zc_options(64u << 10, /*check_copies=*/false));
    const auto addr = listen();
    ASSERT_TRUE(addr);
    out.emplace(connect_pair(*addr));
    Pair& p = *out;
    ASSERT_TRUE(p.client.rec->wait_established());
    ASSERT_TRUE(p.server.rec->wait_established());
    run_on(p.server.conn->worker(), [&] { p.server.conn->pause_receive(true); });
    obs.conn = tcp(p.client.conn).get();
    ASSERT_FALSE(send(p.client.conn, obs.frame()));
    ASSERT_TRUE(eventually_on(p.client.conn, [&] { return tcp(p.client.conn)->stats().zc_sends > 0; }));
  }
};

// Frames of 0 B to 8 MiB with zero-copy kept on (loopback would switch it
// off): every frame arrives intact and in order, the qualifying ones went
// out with MSG_ZEROCOPY, and once the peer has everything every send is
// completed and nothing is held any more.
TEST_F(TcpZeroCopyTest, FramesFrom0To8MiBArriveIntactAndInOrder) {
  make_stacks(test_options(1), zc_options(64u << 10, /*check_copies=*/false));
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_pair(*addr);
  ASSERT_TRUE(p.client.rec->wait_established());
  EXPECT_EQ(so_zerocopy(p.client.conn), 1);
  p.server.rec->keep_frames = false;
  const std::vector<std::size_t> sizes = {0, 1, 4095, (64u << 10) - 1, 64u << 10, (64u << 10) + 1, 1u << 20,
                                          (3u << 20) + 7, 8u << 20, 10, 256u << 10, 4u << 20};
  std::atomic<int> bad{0};
  std::atomic<int> next{0};
  p.server.rec->frame_hook = [&](proto::Frame& f) {
    const int i = next.fetch_add(1);
    if (f.segments[0].to_string() != std::to_string(i) || !intact(f, sizes[i % sizes.size()], static_cast<std::uint8_t>(i)))
      bad.fetch_add(1);
  };
  constexpr int kFrames = 36;
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_FALSE(send(p.client.conn, big_frame(sizes[i % sizes.size()], static_cast<std::uint8_t>(i))));
  }
  ASSERT_TRUE(p.server.rec->wait_frames(kFrames, 120s)) << p.server.rec->frame_count();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(p.client.rec->fault_count() + p.server.rec->fault_count(), 0);
  EXPECT_TRUE(eventually_on(p.client.conn, [&] {
    const auto& s = tcp(p.client.conn)->stats();
    return s.zc_held_frames == 0 && s.zc_completed == s.zc_sends && p.client.conn->queued_bytes() == 0;
  }));
  const auto s = stats_of(p.client.conn);
  EXPECT_GT(s.zc_sends, 0u);
  EXPECT_TRUE(s.zc_on) << "check_copies is off: zero-copy stays on";
  EXPECT_GT(s.zc_released_frames, 0u);
  EXPECT_EQ(s.zc_completed, s.zc_sends);
  EXPECT_EQ(s.zc_copied, s.zc_completed) << "loopback reports every zero-copy send as copied";
  EXPECT_EQ(held_bytes(p.client.conn->worker()), 0u);
  const auto& logger = p.client.conn->worker().perf().logger();
  EXPECT_EQ(logger.get(l_msgr_tcp_zerocopy_sends).u64, s.zc_sends);
  EXPECT_GT(logger.get(l_msgr_tcp_zerocopy_bytes).u64, 8u << 20);
  EXPECT_EQ(logger.get(l_msgr_tcp_zerocopy_copied).u64, s.zc_copied);
}

// The peer does not read: the 4 MiB frame's data cannot all be acknowledged,
// so its zero-copy sends stay incomplete and its buffer is held. Once the
// peer reads, the buffer is released, and at that moment every zero-copy
// send had been completed by the kernel.
TEST_F(TcpZeroCopyTest, ABufferIsReleasedOnlyAfterTheKernelCompletedItsSends) {
  make_stacks(test_options(1), zc_options(64u << 10, /*check_copies=*/false));
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_pair(*addr);
  ASSERT_TRUE(p.client.rec->wait_established());
  ASSERT_TRUE(p.server.rec->wait_established());
  run_on(p.server.conn->worker(), [&] { p.server.conn->pause_receive(true); });
  constexpr std::size_t kSize = 4u << 20;
  Observed obs(kSize);
  obs.conn = tcp(p.client.conn).get();
  ASSERT_FALSE(send(p.client.conn, obs.frame()));
  ASSERT_TRUE(eventually_on(p.client.conn, [&] { return tcp(p.client.conn)->stats().zc_sends > 0; }));
  std::this_thread::sleep_for(200ms);  // let what can be acknowledged be acknowledged
  const auto paused = stats_of(p.client.conn);
  EXPECT_FALSE(obs.released.load()) << "released while the peer had not acknowledged the data";
  EXPECT_LT(paused.zc_completed, paused.zc_sends);
  run_on(p.server.conn->worker(), [&] { p.server.conn->pause_receive(false); });
  ASSERT_TRUE(p.server.rec->wait_frames(1, 30s));
  const auto frames = p.server.rec->take_frames();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].segments[3].length(), kSize);
  EXPECT_EQ(frames[0].segments[3].crc32c(0), [&] {
    BufferList bl;
    bl.append(BufferPtr(obs.mem.data(), obs.mem.size()));
    return bl.crc32c(0);
  }());
  ASSERT_TRUE(eventually_on(p.client.conn, [&] { return obs.released.load(); }));
  EXPECT_GT(obs.sends_at_release, 0u);
  EXPECT_EQ(obs.completed_at_release, obs.sends_at_release) << "released before the kernel's completion";
  EXPECT_TRUE(eventually_on(p.client.conn, [&] {
    return tcp(p.client.conn)->stats().zc_held_frames == 0 &&
           static_cast<TcpWorker&>(p.client.conn->worker()).zerocopy_held_bytes() == 0;
  }));
}

// Closed with zero-copy sends outstanding and the peer reading again: the
// socket is kept (shut down) until the completions arrive, and only then is
// the buffer released.
TEST_F(TcpZeroCopyTest, CloseWithSendsOutstandingReleasesAfterTheCompletions) {
  Observed obs(4u << 20);
  std::optional<Pair> pair;
  ASSERT_NO_FATAL_FAILURE(start_outstanding_send(obs, pair));
  Pair& p = *pair;
  run_on(p.client.conn->worker(), [&] {
    p.client.conn->close();
    EXPECT_FALSE(obs.released.load()) << "close() released a buffer the kernel may still read";
  });
  run_on(p.server.conn->worker(), [&] { p.server.conn->pause_receive(false); });
  ASSERT_TRUE(eventually_on(p.client.conn, [&] { return obs.released.load(); }, 10s));
  EXPECT_EQ(obs.completed_at_release, obs.sends_at_release) << "released before the kernel's completion";
  EXPECT_EQ(held_bytes(p.client.conn->worker()), 0u);
}

// Closed with sends outstanding and a peer that never reads: after the
// linger bound the connection is reset, which makes the kernel drop (and
// complete) what it held; the buffer is then released, nothing leaks.
TEST_F(TcpZeroCopyTest, CloseWithAPeerThatNeverReadsResetsThenReleases) {
  Observed obs(4u << 20);
  std::optional<Pair> pair;
  ASSERT_NO_FATAL_FAILURE(start_outstanding_send(obs, pair));
  Pair& p = *pair;
  const auto t0 = Clock::now();
  run_on(p.client.conn->worker(), [&] { p.client.conn->close(); });
  ASSERT_TRUE(eventually_on(p.client.conn, [&] { return obs.released.load(); }, 10s));
  EXPECT_GE(Clock::now() - t0, 1500ms) << "released before the linger bound";
  EXPECT_EQ(obs.completed_at_release, obs.sends_at_release) << "the reset did not complete the sends";
  EXPECT_EQ(held_bytes(p.client.conn->worker()), 0u);
  run_on(p.server.conn->worker(), [&] { p.server.conn->pause_receive(false); });
  EXPECT_TRUE(p.server.rec->wait_fault(10s)) << "the peer did not see the reset";
}

// Loopback copies every zero-copy send (SO_EE_CODE_ZEROCOPY_COPIED): with
// the check on, the connection stops passing MSG_ZEROCOPY once a window of
// completions shows it, and frames keep flowing with copies.
TEST_F(TcpZeroCopyTest, LoopbackCopiesSwitchZeroCopyOff) {
  make_stacks(test_options(1), zc_options(64u << 10, /*check_copies=*/true));
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_pair(*addr);
  ASSERT_TRUE(p.client.rec->wait_established());
  p.server.rec->keep_frames = false;
  std::atomic<int> bad{0};
  std::atomic<int> next{0};
  p.server.rec->frame_hook = [&](proto::Frame& f) {
    const int i = next.fetch_add(1);
    if (!intact(f, 256u << 10, static_cast<std::uint8_t>(i))) bad.fetch_add(1);
  };
  int sent = 0;
  bool off = false;
  for (; sent < 400 && !off; ++sent) {
    ASSERT_FALSE(send(p.client.conn, big_frame(256u << 10, static_cast<std::uint8_t>(sent))));
    ASSERT_TRUE(p.server.rec->wait_frames(static_cast<std::size_t>(sent) + 1, 30s));
    off = eventually_on(p.client.conn, [&] { return tcp(p.client.conn)->stats().zc_held_frames == 0; }) &&
          !stats_of(p.client.conn).zc_on;
  }
  ASSERT_TRUE(off) << "still on after " << sent << " frames";
  const auto at_off = stats_of(p.client.conn);
  EXPECT_GE(at_off.zc_copied, 17u);  // more than half of a 32-completion window
  for (int i = 0; i < 20; ++i, ++sent)
    ASSERT_FALSE(send(p.client.conn, big_frame(256u << 10, static_cast<std::uint8_t>(sent))));
  ASSERT_TRUE(p.server.rec->wait_frames(static_cast<std::size_t>(sent), 30s));
  EXPECT_EQ(bad.load(), 0);
  const auto after = stats_of(p.client.conn);
  EXPECT_EQ(after.zc_sends, at_off.zc_sends) << "MSG_ZEROCOPY passed after the switch-off";
  EXPECT_EQ(p.client.conn->worker().perf().logger().get(l_msgr_tcp_zerocopy_disabled).u64, 1u);
  EXPECT_EQ(p.client.rec->fault_count() + p.server.rec->fault_count(), 0);
}

// siphon_ms_tcp_zerocopy_threshold = 0: no SO_ZEROCOPY, no zero-copy send.
TEST_F(TcpZeroCopyTest, OffSendsWithCopies) {
  make_stacks(test_options(1), zc_options(0, true));
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_pair(*addr);
  ASSERT_TRUE(p.client.rec->wait_established());
  EXPECT_EQ(so_zerocopy(p.client.conn), 0);
  p.server.rec->keep_frames = false;
  for (int i = 0; i < 8; ++i) ASSERT_FALSE(send(p.client.conn, big_frame(1u << 20, static_cast<std::uint8_t>(i))));
  ASSERT_TRUE(p.server.rec->wait_frames(8, 30s));
  const auto s = stats_of(p.client.conn);
  EXPECT_FALSE(s.zc_on);
  EXPECT_EQ(s.zc_sends, 0u);
  EXPECT_EQ(s.zc_fallbacks, 0u);
  EXPECT_EQ(p.client.conn->worker().perf().logger().get(l_msgr_tcp_zerocopy_sends).u64, 0u);
}

// A kernel without SO_ZEROCOPY (the setsockopt() forced to fail): the
// connection copies, counts a fallback, and works.
TEST_F(TcpZeroCopyTest, AKernelWithoutSoZerocopyCopies) {
  struct Restore {
    ~Restore() { tcp_zerocopy_force_refusal_for_test(0); }
  } restore;
  tcp_zerocopy_force_refusal_for_test(ENOPROTOOPT);
  make_stacks(test_options(1), zc_options(64u << 10, true));
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_pair(*addr);
  ASSERT_TRUE(p.client.rec->wait_established());
  EXPECT_EQ(so_zerocopy(p.client.conn), 0);
  p.server.rec->keep_frames = false;
  for (int i = 0; i < 4; ++i) ASSERT_FALSE(send(p.client.conn, big_frame(1u << 20, static_cast<std::uint8_t>(i))));
  ASSERT_TRUE(p.server.rec->wait_frames(4, 30s));
  const auto s = stats_of(p.client.conn);
  EXPECT_FALSE(s.zc_on);
  EXPECT_EQ(s.zc_sends, 0u);
  EXPECT_EQ(s.zc_fallbacks, 1u);
  EXPECT_EQ(p.client.rec->fault_count() + p.server.rec->fault_count(), 0);
}

}  // namespace
}  // namespace siphon::transport::test
