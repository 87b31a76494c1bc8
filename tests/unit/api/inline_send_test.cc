// send_message() on the connection's own worker (issue 20): a reply sent
// from ms_fast_dispatch is handed to the transport before send_message()
// returns (no post to the worker), keeps its order with the replies sent
// after it in the same callback and with messages another thread sends on
// the same connection at the same time, and never makes a dispatcher
// callback run inside another one. Over TCP (the session code is the same on
// every stack).
#include <atomic>
#include <thread>
#include <vector>

#include "msgr/perf/compiled.h"
#include "msgr/transport/transport.h"
#include "messenger_pair.h"
#include "msgr_test_util.h"

namespace siphon::test {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kRequest = 0x7501;
constexpr std::uint16_t kReply = 0x7502;
constexpr std::uint16_t kPush = 0x7503;
constexpr std::uint64_t kRequests = 2000;
constexpr std::uint64_t kPushes = 2000;

// Depth of dispatcher callbacks on this thread: above 1 means one ran inside
// another (a re-entrant call).
thread_local int depth = 0;
std::atomic<int> max_depth{0};
struct Enter {
  Enter() {
    const int d = ++depth;
    int m = max_depth.load();
    while (d > m && !max_depth.compare_exchange_weak(m, d)) {}
  }
  ~Enter() { --depth; }
};

MessageRef make(std::uint16_t type, std::uint64_t tid) {
  MessageRef m = make_message<Message>(type);
  m->set_tid(tid);
  m->data().append(BufferList::copy_of("x"));
  return m;
}

// Server: answers each request with two replies (tids 2i-1, 2i) from
// ms_fast_dispatch, and counts how many of them reached the transport
// inside send_message() (the worker's msgr_send_messages counter moved).
class Echo : public Dispatcher {
 public:
  explicit Echo(transport::Worker& worker) : worker_(worker) {}
  bool ms_can_fast_dispatch(const Message& m) const override { return m.get_type() == kRequest; }
  void ms_fast_dispatch(MessageRef m) override {
    Enter e;
    {
      std::lock_guard l(w.mu);
      if (!con) con = m->get_connection();
      w.notify();
    }
    for (std::uint64_t k : {2 * m->get_tid() - 1, 2 * m->get_tid()}) {
      const std::uint64_t before = sent_counter();
      if (m->get_connection()->send_message(make(kReply, k))) ++errors;
      if (sent_counter() == before + 1) ++inline_sends;
    }
  }
  bool ms_dispatch(MessageRef) override {
    Enter e;
    return true;
  }
  void ms_handle_accept(ConnectionRef) override { Enter e; }
  bool ms_handle_reset(ConnectionRef) override {
    Enter e;
    return true;
  }

  Waiter w;
  ConnectionRef con;
  std::atomic<std::uint64_t> inline_sends{0};
  std::atomic<std::uint64_t> errors{0};

 private:
  std::uint64_t sent_counter() const {
    return worker_.perf().logger().get(transport::l_msgr_send_messages).u64;
  }
  transport::Worker& worker_;
};

// Client: replies and pushes each in their own order, each exactly once.
class Checker : public Dispatcher {
 public:
  bool ms_can_fast_dispatch(const Message& m) const override {
    return m.get_type() == kReply || m.get_type() == kPush;
  }
  void ms_fast_dispatch(MessageRef m) override {
    Enter e;
    std::lock_guard l(w.mu);
    std::uint64_t& next = m->get_type() == kReply ? next_reply : next_push;
    if (m->get_tid() != next && bad.empty())
      bad = "type " + std::to_string(m->get_type()) + ": expected tid " + std::to_string(next) + ", got " +
            std::to_string(m->get_tid());
    next = m->get_tid() + 1;
    ++received;
    w.notify();
  }
  bool ms_dispatch(MessageRef) override {
    Enter e;
    return true;
  }
  void ms_handle_connect(ConnectionRef) override { Enter e; }
  bool ms_handle_reset(ConnectionRef) override {
    Enter e;
    return true;
  }

  Waiter w;
  std::uint64_t next_reply = 1, next_push = 1, received = 0;
  std::string bad;
};

TEST(InlineSend, RepliesFromFastDispatchGoOutAtOnceInOrderWithOtherThreadsSends) {
  max_depth = 0;
  auto server_stack = make_test_stack(test_stack_options(1));
  transport::Worker& server_worker = server_stack->worker(0);
  MessengerPair run;
  run.server = Messenger::create(server_stack, {entity_type::osd, 0}, test_options());
  run.client = make_messenger({entity_type::client, 1}, test_options());
  Echo echo(server_worker);
  Checker checker;
  ASSERT_NO_FATAL_FAILURE(start_pair(*run.server, echo, *run.client, checker));
  ConnectionRef con = run.client->connect_to(entity_type::osd, run.server->get_myaddrs());

  ASSERT_FALSE(con->send_message(make(kRequest, 1)));
  ASSERT_TRUE(echo.w.wait_for([&] { return echo.con != nullptr; }, 30s));
  // Another thread pushes on the server's side of the same connection while
  // the worker answers requests on it.
  std::thread pusher([&] {
    for (std::uint64_t i = 1; i <= kPushes; ++i) ASSERT_FALSE(echo.con->send_message(make(kPush, i)));
  });
  for (std::uint64_t i = 2; i <= kRequests; ++i) ASSERT_FALSE(con->send_message(make(kRequest, i)));
  pusher.join();

  const std::uint64_t total = 2 * kRequests + kPushes;
  EXPECT_TRUE(checker.w.wait_for([&] { return checker.received >= total; }, 60s))
      << checker.received << " of " << total;
  {
    std::lock_guard l(checker.w.mu);
    EXPECT_TRUE(checker.bad.empty()) << checker.bad;
    EXPECT_EQ(checker.received, total);
    EXPECT_EQ(checker.next_reply, 2 * kRequests + 1);
    EXPECT_EQ(checker.next_push, kPushes + 1);
  }
  EXPECT_EQ(echo.errors.load(), 0u);
  EXPECT_EQ(max_depth.load(), 1) << "a dispatcher callback ran inside another";
  if constexpr (perf::kCompiledIn) {
    // Replies from the worker go to the transport inside send_message(),
    // except while a drain of the other thread's pushes is already pending
    // (those replies queue behind the pushes, in order).
    EXPECT_GT(echo.inline_sends.load(), kRequests / 2) << "of " << 2 * kRequests;
  }
  echo.con.reset();
  run.stop();
}

// Without another thread, every reply from the worker goes out inline.
TEST(InlineSend, EveryReplyFromTheWorkerIsHandedOverInsideSendMessage) {
  if constexpr (!perf::kCompiledIn) GTEST_SKIP() << "perf counters compiled out: nothing to observe";
  max_depth = 0;
  auto server_stack = make_test_stack(test_stack_options(1));
  MessengerPair run;
  run.server = Messenger::create(server_stack, {entity_type::osd, 0}, test_options());
  run.client = make_messenger({entity_type::client, 1}, test_options());
  Echo echo(server_stack->worker(0));
  Checker checker;
  ASSERT_NO_FATAL_FAILURE(start_pair(*run.server, echo, *run.client, checker));
  ConnectionRef con = run.client->connect_to(entity_type::osd, run.server->get_myaddrs());
  constexpr std::uint64_t kN = 500;
  for (std::uint64_t i = 1; i <= kN; ++i) ASSERT_FALSE(con->send_message(make(kRequest, i)));
  EXPECT_TRUE(checker.w.wait_for([&] { return checker.received >= 2 * kN; }, 60s));
  {
    std::lock_guard l(checker.w.mu);
    EXPECT_TRUE(checker.bad.empty()) << checker.bad;
  }
  EXPECT_EQ(echo.inline_sends.load(), 2 * kN);
  EXPECT_EQ(max_depth.load(), 1);
  echo.con.reset();
  run.stop();
}

}  // namespace
}  // namespace siphon::test
