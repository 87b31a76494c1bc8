// Outgoing-message bookkeeping of one session (msgr2-wire.md §8.1, §8.2):
// sequence numbers, the sent list kept until the peer acknowledges, and the
// replay after a reconnect. A pure value type: no I/O, no locks; the driver
// calls it on the session's worker.
//
//            push()                      next_to_send()
//   caller ─────────> pending ───────────────────────────> wire
//                       ^  (seq assigned: out_seq+1)   │ lossless: also kept in
//                       │                              v
//     requeue_sent() ───┴──────────────────────────── sent ──ack(seq)──> freed
//
// After a fault the sent list goes back to the front of pending with its
// seqs (requeue_sent). SESSION_RECONNECT_OK(n) then drops what the peer
// already has (discard_acked(n)) and the rest is sent again with the same
// seqs, so each message is delivered exactly once and in order. A new
// session (SERVER_IDENT after SESSION_RESET) renumbers from 1.
//
// `Traits` supplies `static std::uint64_t seq(const Ref&)` and
// `static void set_seq(Ref&, std::uint64_t)`.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

namespace siphon::session {

template <class Ref, class Traits>
class SendQueue {
 public:
  void push(Ref m) { pending_.push_back(std::move(m)); }
  bool has_pending() const noexcept { return !pending_.empty(); }
  std::size_t pending_count() const noexcept { return pending_.size(); }
  std::size_t sent_count() const noexcept { return sent_.size(); }
  std::uint64_t out_seq() const noexcept { return out_seq_; }
  const std::deque<Ref>& pending() const noexcept { return pending_; }
  const std::deque<Ref>& sent() const noexcept { return sent_; }

  // Takes the next message to transmit, numbering it if it has no seq yet;
  // `lossless` keeps a reference in the sent list. `replayed` tells whether
  // it is a retransmission.
  Ref next_to_send(bool lossless, bool& replayed) {
    Ref m = std::move(pending_.front());
    pending_.pop_front();
    replayed = Traits::seq(m) != 0;
    if (!replayed) Traits::set_seq(m, ++out_seq_);
    if (lossless) sent_.push_back(m);
    return m;
  }

  // The peer has every message up to `seq`: free them.
  std::size_t ack(std::uint64_t seq) {
    std::size_t n = 0;
    while (!sent_.empty() && Traits::seq(sent_.front()) <= seq) {
      sent_.pop_front();
      ++n;
    }
    return n;
  }

  // Fault on a lossless session: unacknowledged messages go back to the
  // front of the queue, in order, keeping their seqs.
  void requeue_sent() {
    while (!sent_.empty()) {
      pending_.push_front(std::move(sent_.back()));
      sent_.pop_back();
    }
  }

  // SESSION_RECONNECT_OK: the peer already has everything up to `seq`.
  std::size_t discard_acked(std::uint64_t seq) {
    std::size_t n = 0;
    while (!pending_.empty() && Traits::seq(pending_.front()) != 0 &&
           Traits::seq(pending_.front()) <= seq) {
      pending_.pop_front();
      ++n;
    }
    return n;
  }

  // A new session starts (numbering from 1): requeue what was not
  // acknowledged and forget the old numbers.
  void renumber() {
    requeue_sent();
    for (auto& m : pending_) Traits::set_seq(m, 0);
    out_seq_ = 0;
  }

  // Drops everything (lossy fault, full reset, mark_down).
  void clear() {
    pending_.clear();
    sent_.clear();
    out_seq_ = 0;
  }

 private:
  std::deque<Ref> pending_;
  std::deque<Ref> sent_;
  std::uint64_t out_seq_ = 0;
};

}  // namespace siphon::session
