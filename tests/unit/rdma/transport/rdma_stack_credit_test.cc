// The receiver enforces the credit protocol (rdma/transport/credits.h,
// Enforcement). A raw RC peer that sends data SENDs without a credit, or more
// explicit credit updates than the update slots it was granted, is faulted
// with a reason naming the violation and counted -- when the offending SEND
// arrives, although the connection is paused and holds its receives -- and a
// bystander connection on the same (single) worker keeps its round trips,
// with per-QP receive queues and with the worker's shared receive queue, and
// with no RNR anywhere on the fabric. The peer's own update-slot count is
// honoured (a peer granting one slot gets one update per window).
#include <gtest/gtest.h>

#include <cstring>

#include "msgr/proto/frame.h"
#include "raw_rc_peer.h"
#include "rdma/transport/credits.h"
#include "rdma/transport/rdma_wire.h"
#include "stack_test_util.h"

namespace siphon::rdma {
namespace {

using namespace test;
using siphon::test::RawRcPeer;

constexpr std::uint32_t kRecvSize = 4096;
constexpr std::uint32_t kPeerCredits = 8;  // what the raw peer grants the server
constexpr std::uint64_t kSendId = 1000;

// Page 0 of its memory is the send buffer, then the receive slots.
class RawPeer : public RawRcPeer {
 public:
  explicit RawPeer(Provider& prov, std::uint16_t update_slots = kUpdateSlots)
      : RawRcPeer(prov, {kRecvSize * (1 + kPeerCredits + update_slots), kRecvSize, kRecvSize, kPeerCredits,
                         update_slots}) {}

  // Posts one SEND, `h` (a stream SEND carries one byte, `byte`), and waits
  // for its completion; returns its status. Receives completing meanwhile
  // are recorded and re-posted.
  WcStatus send(const SendHeader& h, std::uint8_t byte = 'x') {
    std::uint8_t* p = at(0);
    h.encode(p);
    std::uint32_t n = SendHeader::kSize;
    if (h.type == SendType::stream) p[n++] = byte;
    if (post_send(0, n, kSendId)) return WcStatus::general_error;
    std::optional<WcStatus> st;
    poll_until([&] { return st.has_value(); }, &st);
    return st.value_or(WcStatus::general_error);  // none in time
  }
  // Polls until `done()` (or 10 s): receives are recorded and re-posted.
  template <typename Pred>
  bool poll_until(Pred done, std::optional<WcStatus>* send_status = nullptr) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    Wc wc[16];
    while (!done()) {
      if (std::chrono::steady_clock::now() >= end) return false;
      const std::size_t k = cq().poll(wc);
      for (std::size_t i = 0; i < k; ++i) {
        if (wc[i].wr_id == kSendId) {
          if (send_status != nullptr) *send_status = wc[i].status;
          continue;
        }
        if (wc[i].status != WcStatus::success) continue;
        const auto slot = static_cast<std::uint32_t>(wc[i].wr_id);
        SendHeader h;
        if (!SendHeader::decode({slot_data(slot), wc[i].byte_len}, h) && h.type == SendType::credit_update) {
          ++updates;
          update_credits += h.credits_returned;
        }
        (void)post_recv(slot);
      }
      if (k == 0) std::this_thread::sleep_for(100us);  // polling a CQ, not waiting out a race
    }
    return true;
  }
  std::uint32_t updates = 0, update_credits = 0;  // explicit updates the server sent us
};

struct Case {
  const char* name;
  bool srq;      // receives from the worker's shared receive queue
  bool updates;  // flood credit updates (else: data SENDs without credits)
};

class CreditViolation : public ::testing::TestWithParam<Case> {};

TEST_P(CreditViolation, FaultsTheViolatorAndSparesTheBystander) {
  const Case& c = GetParam();
  RdmaOptions o = small_options();
  o.common.async_op_threads = 1;  // one worker: the violator and the bystander share it (and its SRQ)
  if (c.srq) {
    o.support_srq = true;
    o.receive_queue_len = 3 * (o.credits + kUpdateSlots);  // room for three connections' reservations
  }
  Pair p(o);
  Duplex by;  // the bystander
  ASSERT_TRUE(open_duplex(*p.client, p.bound, p.accepted, by));
  ASSERT_TRUE(exchange(by, 20, 1));
  auto raw_provider = soft::make_provider();
  RawPeer raw(*raw_provider);
  ASSERT_TRUE(raw.connect(p.bound));
  Duplex bad;
  bad.s = p.accepted.pop();
  ASSERT_TRUE(bad.s);
  // Started, then paused (its dispatch throttle full): every receive it gets
  // is held, not re-posted -- the case where ignoring credits used to drain
  // a shared receive queue.
  on_worker(*bad.s, [&] {
    bad.s->start(bad.sh, proto::Banner{});
    bad.s->pause_receive(true);
    return 0;
  });
  SendHeader h;
  h.type = c.updates ? SendType::credit_update : SendType::stream;
  h.length = c.updates ? 0 : 1;
  const std::uint32_t allowed = c.updates ? kUpdateSlots : o.credits;
  for (std::uint32_t i = 0; i < allowed; ++i) ASSERT_EQ(raw.send(h), WcStatus::success) << "SEND " << i;
  // One more: the fabric places it (it knows nothing of credits); the
  // server must notice it at its arrival.
  ASSERT_EQ(raw.send(h), WcStatus::success);
  const bool faulted = bad.sh.wait([&] { return bad.sh.fault.has_value(); }, 5s);
  // Whether or not it was noticed, the peer keeps going: more SENDs than
  // the whole receive queue holds, until one fails.
  std::uint32_t more = 0;
  while (more < 40 && raw.send(h) == WcStatus::success) ++more;
  // The bystander, on the same worker, keeps its round trips.
  for (std::uint32_t round = 0; round < 3; ++round)
    ASSERT_TRUE(exchange(by, 30, 100 * round + 100)) << "bystander round " << round;
  ASSERT_TRUE(faulted) << "the violation went unnoticed";
  const auto f = bad.sh.get_fault();
  EXPECT_EQ(f->code, make_error_code(errc::out_of_credits)) << f->code.message();
  EXPECT_NE(f->reason.find(c.updates ? "credit violation: the peer sent a credit update with all 2 of its update "
                                       "slots still held"
                                     : "credit violation: the peer sent a data SEND without a credit"),
            std::string::npos)
      << f->reason;
  EXPECT_EQ(more, 0u) << "the faulted connection took more SENDs";
  const auto sc = p.server->counters().snapshot();
  EXPECT_EQ(sc.at("credit_violations"), 1u);
  EXPECT_EQ(sc.at("rnr_events"), 0u);
  EXPECT_EQ(p.client->counters().snapshot().at("rnr_events"), 0u) << "the bystander's sender saw an RNR";
  EXPECT_EQ(soft::counters(*p.provider)->rnr_naks_sent, 0u) << "the server's fabric answered a SEND with RNR";
  EXPECT_FALSE(by.ch.get_fault());
  EXPECT_FALSE(by.sh.get_fault());
  bad.close();
  if (c.srq) {  // the violator's reservation, and every receive it held, are back
    EXPECT_TRUE(eventually([&] {
      return p.server->srq_reserved() == o.credits + kUpdateSlots && p.server->srq_posted() == o.receive_queue_len;
    })) << p.server->srq_reserved() << " reserved, " << p.server->srq_posted() << " posted";
  }
  by.close();
  EXPECT_TRUE(eventually([&] { return p.server->connection_count() == 0; }));
}

INSTANTIATE_TEST_SUITE_P(RdmaStack, CreditViolation,
                         ::testing::Values(Case{"DataWithoutCreditPerQp", false, false},
                                           Case{"DataWithoutCreditSrq", true, false},
                                           Case{"UpdateFloodPerQp", false, true},
                                           Case{"UpdateFloodSrq", true, true}),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// A peer granting one update slot is honoured: the server's explicit updates
// wait until a whole window is owed, so there is one per window (two slots
// would give two, the second into a slot the peer may not have re-posted).
TEST(CreditUpdateSlots, APeerGrantingOneSlotGetsOneUpdatePerWindow) {
  RdmaOptions o = small_options();
  o.common.async_op_threads = 1;
  Pair p(o);
  auto raw_provider = soft::make_provider();
  RawPeer raw(*raw_provider, 1);
  ASSERT_TRUE(raw.connect(p.bound));
  Duplex peer;
  peer.s = p.accepted.pop();
  ASSERT_TRUE(peer.s);
  on_worker(*peer.s, [&] {
    peer.s->start(peer.sh, proto::Banner{});
    return 0;
  });
  // Our msgr2 banner, one byte per SEND: data the server processes and owes
  // credits for, without anything to send back that could carry them.
  BufferList banner = proto::encode_banner(proto::Banner{});
  const std::string bytes = banner.to_string();
  ASSERT_GE(bytes.size(), 2 * o.credits);
  SendHeader h;
  h.type = SendType::stream;
  h.length = 1;
  for (std::uint32_t window = 1; window <= 2; ++window) {
    for (std::uint32_t i = 0; i < o.credits; ++i)
      ASSERT_EQ(raw.send(h, static_cast<std::uint8_t>(bytes[(window - 1) * o.credits + i])), WcStatus::success);
    ASSERT_TRUE(raw.poll_until([&] { return raw.update_credits >= window * o.credits; }))
        << "window " << window << ": " << raw.update_credits << " credits returned";
    EXPECT_EQ(raw.updates, window) << "one update per window of " << o.credits;
  }
  EXPECT_FALSE(peer.sh.get_fault());
  EXPECT_EQ(p.server->counters().snapshot().at("credit_violations"), 0u);
  EXPECT_EQ(soft::counters(*raw_provider)->rnr_naks_sent, 0u);
  peer.close();
}

}  // namespace
}  // namespace siphon::rdma
