// SendQueue and ReconnectBackoff: sequence numbers, the sent list, replay
// exactly once and in order, renumbering for a new session; the backoff
// schedule.
#include <gtest/gtest.h>

#include <memory>

#include "msgr/session/backoff.h"
#include "msgr/session/send_queue.h"

namespace siphon::session {
namespace {

struct Msg {
  int id;
  std::uint64_t seq = 0;
};
using Ref = std::shared_ptr<Msg>;
struct Traits {
  static std::uint64_t seq(const Ref& m) { return m->seq; }
  static void set_seq(Ref& m, std::uint64_t s) { m->seq = s; }
};
using Q = SendQueue<Ref, Traits>;

std::vector<int> send_all(Q& q, bool lossless, std::vector<std::uint64_t>* seqs = nullptr) {
  std::vector<int> ids;
  while (q.has_pending()) {
    bool replayed = false;
    Ref m = q.next_to_send(lossless, replayed);
    ids.push_back(m->id);
    if (seqs) seqs->push_back(m->seq);
  }
  return ids;
}

TEST(SendQueue, SeqStartsAtOneAndSentListIsFreedOnAck) {
  Q q;
  for (int i = 0; i < 5; ++i) q.push(std::make_shared<Msg>(Msg{i}));
  std::vector<std::uint64_t> seqs;
  send_all(q, true, &seqs);
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(q.sent_count(), 5u);
  EXPECT_EQ(q.ack(3), 3u);
  EXPECT_EQ(q.sent_count(), 2u);
  EXPECT_EQ(q.ack(3), 0u);
  EXPECT_EQ(q.ack(10), 2u);
}

TEST(SendQueue, LossyKeepsNothing) {
  Q q;
  q.push(std::make_shared<Msg>(Msg{1}));
  send_all(q, false);
  EXPECT_EQ(q.sent_count(), 0u);
}

TEST(SendQueue, ReplayAfterReconnectIsExactlyOnceAndInOrder) {
  Q q;
  for (int i = 1; i <= 6; ++i) q.push(std::make_shared<Msg>(Msg{i}));
  send_all(q, true);          // seqs 1..6 on the wire
  q.ack(2);                   // the peer acknowledged 1, 2
  q.push(std::make_shared<Msg>(Msg{7}));  // queued during the fault
  q.requeue_sent();           // fault: 3..6 go back in front of 7
  EXPECT_EQ(q.discard_acked(4), 2u);  // RECONNECT_OK(4): the peer had 3, 4 too
  std::vector<std::uint64_t> seqs;
  const auto ids = send_all(q, true, &seqs);
  EXPECT_EQ(ids, (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{5, 6, 7}));  // replays keep their seqs
}

TEST(SendQueue, RenumberForANewSession) {
  Q q;
  for (int i = 1; i <= 3; ++i) q.push(std::make_shared<Msg>(Msg{i}));
  send_all(q, true);
  q.ack(1);
  q.renumber();
  std::vector<std::uint64_t> seqs;
  const auto ids = send_all(q, true, &seqs);
  EXPECT_EQ(ids, (std::vector<int>{2, 3}));
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{1, 2}));
}

TEST(ReconnectBackoff, DoublesFromInitialToMax) {
  using namespace std::chrono_literals;
  ReconnectBackoff b(200ms, 15s);
  using C = ReconnectBackoff::Cause;
  EXPECT_EQ(b.next(C::fault_when_ready), 0ms);
  EXPECT_EQ(b.next(C::attempt_failed), 200ms);
  EXPECT_EQ(b.next(C::attempt_failed), 400ms);
  EXPECT_EQ(b.next(C::attempt_failed), 800ms);
  for (int i = 0; i < 10; ++i) b.next(C::attempt_failed);
  EXPECT_EQ(b.current(), 15s);
  b.reset();
  EXPECT_EQ(b.next(C::peer_said_wait), 15s);
  EXPECT_EQ(b.next(C::fault_when_ready), 0ms);
}

}  // namespace
}  // namespace siphon::session
