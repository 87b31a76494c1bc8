// Credit-based flow control for one RDMA connection (docs/architecture.md §5,
// docs/rdma-transport.md §Credits). Pure bookkeeping: no I/O, no locks; owned
// by the connection's worker.
//
// Each side posts `window` data receives, plus kUpdateSlots receives reserved
// for explicit credit updates, and grants the peer `window` credits.
//
//   sender:   one data credit per data SEND; with none, queue, never post (the
//             queue is the backpressure the messenger sees).
//   receiver: a data receive consumed and re-posted is owed back; every
//             outgoing SEND carries what is owed (piggyback). When at least
//             half a window is owed and no data SEND can carry it (nothing
//             queued, or no data credits of our own), send an explicit
//             update; it goes into one of the peer's update slots.
//   both:     credits in a SEND's header are applied when its completion is
//             processed, and an update slot is re-posted at that same moment.
//
// Why two update slots always suffice (no RNR): the peer can spend only
// credits it has processed. Every update returns at least ceil(window/2)
// credits, so two updates the peer has not yet processed hold back a whole
// window: the peer cannot have spent anything we have not already returned,
// so we cannot owe half a window again until it processes one of them (and
// re-posts its slot).
//
// Why it cannot deadlock: a sender out of credits has all `window` of its
// SENDs at the receiver; once processed they are owed (>= half a window) and
// the receiver either piggybacks them on data or sends an update. If the
// receiver stops processing (its dispatch throttle is full), credits stop
// coming back: that is the intended backpressure. The randomized test in
// tests/unit/rdma/transport/credits_test.cc checks both properties.
#pragma once

#include <cstdint>

#include "rdma/transport/wire.h"

namespace siphon::rdma {

inline constexpr std::uint32_t kUpdateSlots = 2;
static_assert(kUpdateSlots >= kMinUpdateSlots && kUpdateSlots <= kMaxUpdateSlots,
              "the update slots are advertised in ConnectInfo, which a peer checks against wire.h");

class CreditState {
 public:
  // `peer_window`: credits the peer granted us; `my_window`: what we granted.
  CreditState(std::uint32_t peer_window, std::uint32_t my_window) noexcept
      : credits_(peer_window), peer_window_(peer_window), my_window_(my_window) {}

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
    return n;
  }
  std::uint32_t owed() const noexcept { return owed_; }
  // At least half a window is owed back to the peer.
  bool update_due() const noexcept { return owed_ >= (my_window_ + 1) / 2; }
  // An explicit update should go out now: it is due and no data SEND can
  // carry it -- nothing is queued, or we are out of data credits ourselves
  // (both sides stalled with data queued would otherwise wait forever).
  bool should_send_update(bool data_queued) const noexcept {
    return update_due() && (!data_queued || !can_send_data());
  }

  std::uint32_t peer_window() const noexcept { return peer_window_; }
  std::uint32_t my_window() const noexcept { return my_window_; }
  // Counters (docs/rdma-transport.md §Counters).
  std::uint64_t spent() const noexcept { return spent_; }
  std::uint64_t returned() const noexcept { return returned_; }
  std::uint64_t granted() const noexcept { return granted_; }

 private:
  std::uint32_t credits_;
  std::uint32_t peer_window_, my_window_;
  std::uint32_t owed_ = 0;
  std::uint64_t spent_ = 0, returned_ = 0, granted_ = 0;
};

}  // namespace siphon::rdma
