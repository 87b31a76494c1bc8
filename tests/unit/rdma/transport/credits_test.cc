#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>

#include "rdma/transport/credits.h"

namespace siphon::rdma {
namespace {

TEST(Credits, SpendReturnAndOverReturnIsAProtocolError) {
  CreditState c(4, 8);
  EXPECT_EQ(c.credits(), 4u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(c.can_send_data());
    c.spend_data();
  }
  EXPECT_FALSE(c.can_send_data());
  EXPECT_FALSE(c.on_returned(5)) << "more than was spent";
  EXPECT_TRUE(c.on_returned(3));
  EXPECT_EQ(c.credits(), 3u);
  EXPECT_FALSE(c.on_returned(2)) << "only one is outstanding now";
}

TEST(Credits, OwedIsPiggybackedAndUpdatesFollowTheRule) {
  CreditState c(8, 8);
  for (int i = 0; i < 3; ++i) c.on_data_reposted();
  EXPECT_FALSE(c.update_due());
  c.on_data_reposted();
  EXPECT_TRUE(c.update_due());
  EXPECT_EQ(c.take_owed(), 4u);
  EXPECT_EQ(c.owed(), 0u);
  EXPECT_FALSE(c.update_due());
  EXPECT_EQ(c.granted(), 4u);
  for (int i = 0; i < 4; ++i) c.on_data_reposted();
  EXPECT_TRUE(c.should_send_update(false)) << "idle: send an update";
  EXPECT_FALSE(c.should_send_update(true)) << "data queued and credits left: piggyback instead";
  for (int i = 0; i < 8; ++i) c.spend_data();
  EXPECT_TRUE(c.should_send_update(true)) << "data queued but no credits: must update";
}

TEST(Credits, UpdateThresholdFollowsThePeersUpdateSlots) {
  EXPECT_EQ(CreditState(8, 8).update_threshold(), 4u) << "2 slots: half a window";
  EXPECT_EQ(CreditState(8, 7, 2).update_threshold(), 4u) << "ceil(7 / 2)";
  EXPECT_EQ(CreditState(8, 8, 1).update_threshold(), 8u) << "1 slot: the whole window";
  EXPECT_EQ(CreditState(8, 8, 64).update_threshold(), 4u) << "we use no more slots than we grant";
  CreditState c(0, 8);
  c.peer_granted(16, 1);
  EXPECT_EQ(c.credits(), 16u);
  EXPECT_EQ(c.update_threshold(), 8u);
}

TEST(Credits, TheReceiverCountsThePeersDataAndUpdatesAtArrival) {
  CreditState c(8, 4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(c.on_data_arrived());
  EXPECT_FALSE(c.on_data_arrived()) << "a fifth data SEND without a credit returned";
  // Processed and re-posted is not enough: the credit must have gone back.
  c.on_data_reposted();
  c.on_data_reposted();
  EXPECT_FALSE(c.on_data_arrived());
  EXPECT_EQ(c.take_owed(), 2u);
  EXPECT_EQ(c.data_outstanding(), 2u);
  EXPECT_TRUE(c.on_data_arrived());
  EXPECT_TRUE(c.on_data_arrived());
  EXPECT_FALSE(c.on_data_arrived());
  // Updates: kUpdateSlots held at most; a slot re-posted frees one.
  for (std::uint32_t i = 0; i < kUpdateSlots; ++i) ASSERT_TRUE(c.on_update_arrived());
  EXPECT_FALSE(c.on_update_arrived());
  c.on_update_reposted();
  EXPECT_TRUE(c.on_update_arrived());
  EXPECT_FALSE(c.on_update_arrived());
}

// Two endpoints exchanging messages over a reliable in-order wire, each with
// `window` data receives and `slots` update receives posted, driven by
// random schedules. Checks that a SEND never arrives without a matching
// receive posted (an RNR on hardware), that the receiver's enforcement
// (on_data_arrived / on_update_arrived) never faults a peer that follows the
// protocol, that credits stay consistent, and that nothing deadlocks while
// messages are queued.
struct Endpoint {
  CreditState credits;
  std::uint32_t posted_data, posted_slots;
  std::deque<int> queued;            // data waiting for a credit
  struct Arrived {
    bool update;
    std::uint16_t credits;
  };
  std::deque<Arrived> arrived;       // completions not yet processed
  std::uint64_t delivered = 0;
  Endpoint(std::uint32_t w, std::uint32_t slots) : credits(w, w, slots), posted_data(w), posted_slots(slots) {}
};

struct InFlight {
  bool update;
  std::uint16_t credits;
};

std::string state(const Endpoint (&ep)[2]) {
  std::string st;
  for (int k = 0; k < 2; ++k)
    st += " | ep" + std::to_string(k) + ": credits " + std::to_string(ep[k].credits.credits()) + " owed " +
          std::to_string(ep[k].credits.owed()) + " queued " + std::to_string(ep[k].queued.size()) +
          " arrived " + std::to_string(ep[k].arrived.size()) + " delivered " + std::to_string(ep[k].delivered);
  return st;
}

void run_simulation(std::uint32_t window, std::uint64_t seed, std::uint64_t messages_each,
                    std::uint32_t slots = kUpdateSlots) {
  Endpoint ep[2] = {Endpoint(window, slots), Endpoint(window, slots)};
  std::deque<InFlight> wire[2];  // wire[i]: in flight towards endpoint i
  std::mt19937_64 rng(seed);
  std::uint64_t to_send[2] = {messages_each, messages_each};
  std::uint64_t idle_steps = 0;
  while (ep[0].delivered < messages_each || ep[1].delivered < messages_each) {
    ASSERT_LT(idle_steps, 10000u) << "deadlock: window " << window << " seed " << seed << state(ep);
    bool progress = false;
    const int i = static_cast<int>(rng() % 2), peer = 1 - i;
    Endpoint& me = ep[i];
    switch (rng() % 4) {
      case 0:  // the application hands us a message
        if (to_send[i] > 0 && me.queued.size() < 100) {
          me.queued.push_back(1);
          --to_send[i];
          progress = true;
        }
        break;
      case 1:  // send queued data while credits last, piggybacking returns
        while (!me.queued.empty() && me.credits.can_send_data()) {
          me.credits.spend_data();
          me.queued.pop_front();
          wire[peer].push_back({false, me.credits.take_owed()});
          progress = true;
        }
        break;
      case 2: {  // the network delivers one SEND into a posted receive
        if (wire[i].empty()) break;
        const InFlight f = wire[i].front();
        wire[i].pop_front();
        std::uint32_t& posted = f.update ? me.posted_slots : me.posted_data;
        ASSERT_GT(posted, 0u) << "RNR: a SEND arrived with no receive posted (window " << window
                              << " seed " << seed << ")" << state(ep);
        --posted;
        ASSERT_TRUE(f.update ? me.credits.on_update_arrived() : me.credits.on_data_arrived())
            << "a correct peer was caught by the enforcement (window " << window << " slots " << slots << " seed "
            << seed << ")" << state(ep);
        me.arrived.push_back({f.update, f.credits});
        progress = true;
        break;
      }
      case 3:  // process completions in order: apply credits, re-post, deliver
        while (!me.arrived.empty()) {
          const Endpoint::Arrived a = me.arrived.front();
          me.arrived.pop_front();
          ASSERT_TRUE(me.credits.on_returned(a.credits)) << "over-return";
          if (a.update) {
            ++me.posted_slots;
            me.credits.on_update_reposted();
          } else {
            ++me.posted_data;
            me.credits.on_data_reposted();
            ++me.delivered;
          }
          progress = true;
        }
        if (me.credits.should_send_update(!me.queued.empty())) {
          wire[peer].push_back({true, me.credits.take_owed()});
          progress = true;
        }
        break;
    }
    idle_steps = progress ? 0 : idle_steps + 1;
  }
  EXPECT_EQ(ep[0].delivered, messages_each);
  EXPECT_EQ(ep[1].delivered, messages_each);
}

TEST(Credits, RandomSchedulesNeverDeadlockOrOverrunReceives) {
  for (std::uint32_t window : {2u, 3u, 4u, 5u, 8u, 32u})
    for (std::uint64_t seed = 1; seed <= 30; ++seed) run_simulation(window, seed, 2000);
}

// A peer that grants one update slot: updates wait for a whole window, and
// still never overrun its single slot nor deadlock.
TEST(Credits, RandomSchedulesWithOneUpdateSlot) {
  for (std::uint32_t window : {2u, 3u, 5u, 8u})
    for (std::uint64_t seed = 1; seed <= 30; ++seed) run_simulation(window, seed, 2000, 1);
}

}  // namespace
}  // namespace siphon::rdma
