// Credit-based flow control for one RDMA connection (docs/architecture.md §5,
// docs/rdma-transport.md §Credits). Pure bookkeeping: no I/O, no locks, no
// allocation; owned by the connection's worker.
//
// Each side posts `window` data receives, plus kUpdateSlots receives reserved
// for explicit credit updates (in SRQ mode: reserves that many receives of
// its worker's SRQ), and grants the peer `window` credits and kUpdateSlots
// update slots (ConnectInfo::credits, ::update_slots).
//
//   sender:   one data credit per data SEND; with none, queue, never post (the
//             queue is the backpressure the messenger sees).
//   receiver: a data receive consumed and re-posted is owed back; every
//             outgoing SEND carries what is owed (piggyback). When at least
//             ceil(window / S) is owed and no data SEND can carry it
//             (nothing queued, or no data credits of our own), send an
//             explicit update; it goes into one of the peer's update slots.
//             S = min(the peer's update_slots, kUpdateSlots): half a window
//             with the 2 slots every Siphon grants, the whole window for a
//             peer that grants 1 (we never use more slots than we grant).
//   both:     credits in a SEND's header are applied when its completion is
//             processed, and an update slot is re-posted at that same moment.
//   pause:    while the receiver is paused (its dispatch throttle is full)
//             its completions are held: not processed, so neither their
//             credits applied nor their receives re-posted, and nothing is
//             owed for them. A held receive is still consumed: it counts
//             against the peer from the moment it arrives (below).
//
// Why S update slots always suffice (no RNR): the peer can spend only
// credits it has processed. Every update returns at least ceil(window/S)
// credits, so S updates the peer has not yet processed hold back a whole
// window: the peer cannot have spent anything we have not already returned,
// so we cannot owe ceil(window/S) again until it processes one of them (and
// re-posts its slot).
//
// Why it cannot deadlock: a sender out of credits has all `window` of its
// SENDs at the receiver; once processed they are owed (>= ceil(window/S))
// and the receiver either piggybacks them on data or sends an update. If the
// receiver stops processing (paused), credits stop coming back: that is the
// intended backpressure. The randomized test in
// tests/unit/rdma/transport/credits_test.cc checks both properties, for S =
// 1 and 2.
//
// Enforcement (the receiver does not trust the peer to follow the above):
// every completion is classified when it ARRIVES -- not when it is
// processed, since a held receive is consumed all the same -- and
//   - a data SEND is allowed only while fewer than `window` data SENDs are
//     outstanding, counting every one that arrived and whose credit has not
//     yet gone back in one of our headers (take_owed). A peer that follows
//     the protocol never exceeds this: it spends only credits it has, and
//     it has at most `window` plus what we returned;
//   - an explicit update is allowed only while fewer than kUpdateSlots
//     updates are held (arrived, slot not yet re-posted): by the proof
//     above a correct peer never has more than kUpdateSlots unprocessed.
// So the receives a connection holds never exceed window + kUpdateSlots,
// paused or not: exactly its reservation in a shared receive queue. The
// first SEND beyond that is detected at its completion, before the
// connection can hold a receive it was not granted; the connection is
// faulted (its QP goes to ERR, so it takes no more) and every receive it
// still held goes back to the SRQ. (Between that SEND landing and its
// completion being polled, an RC QP can land further SENDs: those complete
// on the faulted connection and are re-posted at once; the SRQ's receives
// beyond the sum of reservations absorb them. No receive queue can do
// better: hardware does not stop a QP at a count.)
#pragma once

#include <cstdint>

#include "rdma/transport/rdma_wire.h"

namespace siphon::rdma {

inline constexpr std::uint32_t kUpdateSlots = 2;
static_assert(kUpdateSlots >= kMinUpdateSlots && kUpdateSlots <= kMaxUpdateSlots,
              "the update slots are advertised in ConnectInfo, which a peer checks against rdma_wire.h");

class CreditState {
 public:
  // `peer_window`: credits the peer granted us; `my_window`: what we granted;
  // `peer_update_slots`: update slots the peer granted us (>= 1; we use at
  // most kUpdateSlots of them).
  CreditState(std::uint32_t peer_window, std::uint32_t my_window,
              std::uint32_t peer_update_slots = kUpdateSlots) noexcept
      : credits_(peer_window),
        peer_window_(peer_window),
        my_window_(my_window),
        update_threshold_(threshold(my_window, peer_update_slots)) {}
  // The receive side's limits hold from the first receive posted, before the
  // peer's grant is known (a SEND can complete before our ESTABLISHED event
  // is handled): a connection starts with CreditState(0, my_window) and
  // learns the peer's grant here, before it sends anything.
  void peer_granted(std::uint32_t peer_window, std::uint32_t peer_update_slots) noexcept {
    credits_ = peer_window_ = peer_window;
    update_threshold_ = threshold(my_window_, peer_update_slots);
  }

  // --- sending
  std::uint32_t credits() const noexcept { return credits_; }
  bool can_send_data() const noexcept { return credits_ > 0; }
  void spend_data() noexcept {
    --credits_;
    ++spent_;
  }

  // --- receiving: credits returned in a processed SEND header. Returns false
  // if the peer returned more than we had outstanding (a protocol error: the
  // connection must be faulted).
  bool on_returned(std::uint32_t credits) noexcept {
    if (credits > peer_window_ - credits_) return false;
    credits_ += credits;
    returned_ += credits;
    return true;
  }

  // A data receive of ours was consumed by the peer and has been re-posted.
  void on_data_reposted() noexcept { ++owed_; }
  // Takes everything owed, to put in an outgoing SEND header. Never exceeds
  // my_window (<= 65535, checked at connect).
  std::uint16_t take_owed() noexcept {
    const auto n = static_cast<std::uint16_t>(owed_);
    owed_ = 0;
    granted_ += n;
    data_outstanding_ -= n;  // owed <= outstanding: owed ones arrived
    return n;
  }
  std::uint32_t owed() const noexcept { return owed_; }
  // At least ceil(my_window / S) is owed back to the peer (S: see above).
  bool update_due() const noexcept { return owed_ >= update_threshold_; }
  std::uint32_t update_threshold() const noexcept { return update_threshold_; }
  // An explicit update should go out now: it is due and no data SEND can
  // carry it -- nothing is queued, or we are out of data credits ourselves
  // (both sides stalled with data queued would otherwise wait forever).
  bool should_send_update(bool data_queued) const noexcept {
    return update_due() && (!data_queued || !can_send_data());
  }

  // --- enforcement, at the arrival of each completion (see above). False:
  // the peer broke the protocol and the connection must be faulted.
  // A data SEND (stream, read_request, read_done) arrived.
  bool on_data_arrived() noexcept {
    if (data_outstanding_ >= my_window_) return false;
    ++data_outstanding_;
    return true;
  }
  // An explicit credit update arrived (into one of our update slots).
  bool on_update_arrived() noexcept {
    if (updates_held_ >= kUpdateSlots) return false;
    ++updates_held_;
    return true;
  }
  // An update's completion was processed and its slot re-posted.
  void on_update_reposted() noexcept { --updates_held_; }
  // Data SENDs arrived whose credit has not gone back yet; updates held.
  std::uint32_t data_outstanding() const noexcept { return data_outstanding_; }
  std::uint32_t updates_held() const noexcept { return updates_held_; }

  std::uint32_t peer_window() const noexcept { return peer_window_; }
  std::uint32_t my_window() const noexcept { return my_window_; }
  // Counters (docs/rdma-transport.md §Counters).
  std::uint64_t spent() const noexcept { return spent_; }
  std::uint64_t returned() const noexcept { return returned_; }
  std::uint64_t granted() const noexcept { return granted_; }

 private:
  static constexpr std::uint32_t threshold(std::uint32_t window, std::uint32_t slots) noexcept {
    const std::uint32_t s = slots == 0 ? 1 : (slots < kUpdateSlots ? slots : kUpdateSlots);
    return (window + s - 1) / s;
  }

  std::uint32_t credits_;
  std::uint32_t peer_window_, my_window_;
  std::uint32_t update_threshold_;
  std::uint32_t owed_ = 0;
  std::uint32_t data_outstanding_ = 0, updates_held_ = 0;
  std::uint64_t spent_ = 0, returned_ = 0, granted_ = 0;
};

}  // namespace siphon::rdma
