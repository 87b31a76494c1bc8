// The TCP stack's write path (issue 20): one sendmsg() per batch instead of
// boost::asio::async_write's 64 KiB pieces, the first frame on an idle
// connection written from inside send(), and none of it calling the handler
// inside send() (docs/transport.md §1).
#include "tcp_test_util.h"

#include <poll.h>
#include <sys/socket.h>

#include <thread>

namespace siphon::transport::test {
namespace {

// Polls `pred` on the connection's worker until it holds (bounded).
template <typename Pred>
bool eventually_on(const ConnectionRef& c, Pred pred, std::chrono::milliseconds timeout = 15s) {
  const auto deadline = Clock::now() + timeout;
  while (!run_on(c->worker(), pred)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

class TcpWriteTest : public TcpFixture {
 protected:
  void SetUp() override { make_stacks(); }
};

proto::Frame big_frame(std::size_t n, std::uint8_t seed) {
  std::string data(n, '\0');
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<char>((i * 131 + seed) & 0xff);
  proto::Frame f;
  f.tag = proto::Tag::message;
  f.segments[0] = BufferList::copy_of(std::to_string(seed));
  f.segments[3] = BufferList::copy_of(data);
  return f;
}

TEST_F(TcpWriteTest, FirstSendOnAnIdleConnectionIsWrittenBeforeSendReturns) {
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_pair(*addr);
  ASSERT_TRUE(p.client.rec->wait_established());
  ASSERT_TRUE(p.server.rec->wait_established());
  // Let the banner batch finish.
  ASSERT_TRUE(eventually_on(p.client.conn, [&] { return p.client.conn->queued_bytes() == 0; }));
  const auto events_before = p.client.rec->events();
  run_on(p.client.conn->worker(), [&] {
    const auto before = tcp(p.client.conn)->stats();
    EXPECT_FALSE(p.client.conn->send(control(proto::Tag::ack, "first")));
    const auto after_first = tcp(p.client.conn)->stats();
    EXPECT_EQ(after_first.write_batches, before.write_batches + 1) << "written inside send()";
    EXPECT_GT(after_first.bytes_sent, before.bytes_sent);
    EXPECT_EQ(p.client.conn->queued_bytes(), 0u);
    // Later frames of the same handler queue behind it, for one gathered write.
    for (int i = 0; i < 50; ++i) EXPECT_FALSE(p.client.conn->send(control(proto::Tag::ack, std::to_string(i))));
    EXPECT_EQ(tcp(p.client.conn)->stats().write_batches, after_first.write_batches);
    EXPECT_GT(p.client.conn->queued_bytes(), 0u);
  });
  ASSERT_TRUE(p.server.rec->wait_frames(51));
  const auto frames = p.server.rec->take_frames();
  ASSERT_EQ(frames.size(), 51u);
  EXPECT_EQ(frames[0].segments[0].to_string(), "first");
  for (int i = 0; i < 50; ++i) EXPECT_EQ(frames[1 + i].segments[0].to_string(), std::to_string(i));
  EXPECT_EQ(p.client.rec->events(), events_before) << "no callback from these sends";
  EXPECT_EQ(p.client.rec->fault_count() + p.server.rec->fault_count(), 0);
}

// Frames larger than the socket buffers, alternating with small ones, sent
// from handler after handler: each arrives whole and in order, the large
// ones in far fewer write calls than 64 KiB pieces would take.
TEST_F(TcpWriteTest, LargeAndSmallFramesFromSuccessiveHandlersArriveInOrderAndIntact) {
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_pair(*addr);
  ASSERT_TRUE(p.client.rec->wait_established());
  p.server.rec->keep_frames = false;
  std::atomic<int> bad{0};
  std::atomic<int> next{0};
  std::string first_bad;
  const std::vector<std::size_t> sizes = {4u << 20, 10, 1u << 20, 0, 3 * (1u << 20) + 7, 64 << 10, 1};
  p.server.rec->frame_hook = [&](proto::Frame& f) {
    const int i = next.fetch_add(1);
    const proto::Frame want = big_frame(sizes[i % sizes.size()], static_cast<std::uint8_t>(i));
    if (f.segments[0].to_string() != want.segments[0].to_string() ||
        f.segments[3].length() != want.segments[3].length() ||
        f.segments[3].crc32c(0) != want.segments[3].crc32c(0)) {
      if (bad.fetch_add(1) == 0) first_bad = "frame " + std::to_string(i);
    }
  };
  constexpr int kFrames = 28;
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_FALSE(send(p.client.conn, big_frame(sizes[i % sizes.size()], static_cast<std::uint8_t>(i))));
  }
  ASSERT_TRUE(p.server.rec->wait_frames(kFrames, 60s)) << p.server.rec->frame_count();
  EXPECT_EQ(bad.load(), 0) << first_bad;
  EXPECT_EQ(p.client.rec->fault_count() + p.server.rec->fault_count(), 0);
  EXPECT_TRUE(eventually_on(p.client.conn, [&] { return p.client.conn->queued_bytes() == 0; }));
  const auto stats = run_on(p.client.conn->worker(), [&] { return tcp(p.client.conn)->stats(); });
  EXPECT_EQ(stats.frames_sent, static_cast<std::uint64_t>(kFrames));
}

// A socket error met inside send() (the peer reset the connection) is
// reported by on_fault from the event loop, once, never inside send().
TEST_F(TcpWriteTest, AWriteErrorInsideSendIsFaultedFromTheEventLoop) {
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_pair(*addr);
  ASSERT_TRUE(p.client.rec->wait_established());
  ASSERT_TRUE(p.server.rec->wait_established());
  ASSERT_TRUE(eventually_on(p.client.conn, [&] { return p.client.conn->queued_bytes() == 0; }));
  const int cfd = run_on(p.client.conn->worker(), [&] { return tcp(p.client.conn)->native_handle(); });
  run_on(p.client.conn->worker(), [&] {
    // The server resets the connection (SO_LINGER 0, then close) while the
    // client's worker is busy here, so the reset is pending on the socket
    // when send() writes to it.
    run_on(p.server.conn->worker(), [&] {
      const linger l{1, 0};
      ::setsockopt(tcp(p.server.conn)->native_handle(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
      p.server.conn->close();
    });
    pollfd pfd{cfd, POLLIN, 0};
    for (int i = 0; i < 5000 && (pfd.revents & (POLLERR | POLLHUP)) == 0; ++i) ::poll(&pfd, 1, 1);
    EXPECT_NE(pfd.revents & (POLLERR | POLLHUP), 0) << "the reset did not arrive";
    (void)p.client.conn->send(control(proto::Tag::ack, "into a reset connection"));
    EXPECT_EQ(p.client.rec->fault_count(), 0) << "on_fault ran inside send()";
  });
  ASSERT_TRUE(p.client.rec->wait_fault());
  EXPECT_EQ(p.client.rec->fault_count(), 1);
  // After the fault, send() reports the connection closed.
  EXPECT_TRUE(send(p.client.conn, control(proto::Tag::ack, "late")));
}

// ms_tcp_busy_poll_us: workers that spin between messages still deliver every
// frame in order, in both directions, and stop cleanly (the spin ends when
// the stack stops, with no frame or callback lost).
TEST_F(TcpFixture, BusyPollingWorkersPingPongAndStop) {
  TcpOptions o = test_options(1);
  o.busy_poll = std::chrono::microseconds(2000);
  make_stacks(o, o);
  const auto addr = listen();
  ASSERT_TRUE(addr);
  Pair p = connect_unstarted(*addr);
  ASSERT_TRUE(p.client.conn && p.server.conn);
  constexpr int kRounds = 2000;
  std::atomic<int> pongs{0};
  std::atomic<int> out_of_order{0};
  p.server.rec->keep_frames = p.client.rec->keep_frames = false;
  const ConnectionRef sconn = p.server.conn, cconn = p.client.conn;
  p.server.rec->frame_hook = [&](proto::Frame& f) { (void)sconn->send(control(proto::Tag::ack, f.segments[0].to_string())); };
  p.client.rec->frame_hook = [&](proto::Frame& f) {
    const int n = pongs.fetch_add(1);
    if (f.segments[0].to_string() != std::to_string(n)) out_of_order.fetch_add(1);
    if (n + 1 < kRounds) (void)cconn->send(control(proto::Tag::ack, std::to_string(n + 1)));
  };
  start(p.server);
  ASSERT_FALSE(send(cconn, control(proto::Tag::ack, "0")));
  ASSERT_TRUE(p.client.rec->wait_frames(kRounds, 60s)) << p.client.rec->frame_count();
  EXPECT_EQ(out_of_order.load(), 0);
  EXPECT_EQ(p.client.rec->fault_count() + p.server.rec->fault_count(), 0);
  client_->stop();  // returns although the workers were spinning
  server_->stop();
}

}  // namespace
}  // namespace siphon::transport::test
