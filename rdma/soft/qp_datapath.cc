// RC data path of the soft fabric: posting (user thread, lock-free), the
// requester (serialise WRs, ACK/NAK/READ response handling, RNR and
// transport retries) and the responder (PSN check, RNR, rkey/bounds/access
// validation, placement, responses in order). Engine-side functions run on
// the engine thread only; nothing here allocates, and the only lock is the
// MR table's, held while registered memory is copied.
#include <net/if.h>

#include <algorithm>
#include <cstring>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/soft/core.h"
#include "rdma/soft/objects.h"

namespace siphon::rdma::soft::detail {

// ------------------------------------------------------------- posting

std::error_code QpCore::post_send(std::span<const SendWr> wrs, std::size_t* bad) noexcept {
  const QpState st = state();
  if (st != QpState::rts && st != QpState::sqd && st != QpState::err) {
    if (bad != nullptr) *bad = 0;
    return errc::invalid_qp_state;
  }
  const FaultPlan& faults = dev.fabric.options.faults;
  const std::uint64_t max_msg = dev.fabric.options.max_msg_size;
  const auto start = sq_prod_.load(std::memory_order_relaxed);
  auto p = start;
  const auto freed = sq_free_.load(std::memory_order_acquire);
  std::error_code ec;
  std::size_t i = 0;
  for (; i < wrs.size(); ++i) {
    const SendWr& wr = wrs[i];
    if (static_cast<unsigned>(wr.opcode) > static_cast<unsigned>(Opcode::local_inv) ||
        wr.num_sge > caps.max_send_sge || (wr.num_sge != 0 && wr.sg_list == nullptr)) {
      ec = errc::invalid_argument;
      break;
    }
    // Memory-window operations carry no data. A bind names a window of this
    // device and an MR; the rest (PD, MR rights, range, window state) is the
    // engine's to check when the WR executes, as an HCA does.
    MwImpl* mw = nullptr;
    if (wr.opcode == Opcode::bind_mw || wr.opcode == Opcode::local_inv) {
      if (wr.num_sge != 0 || (wr.flags & kInline) != 0) {
        ec = errc::invalid_argument;
        break;
      }
      if (wr.opcode == Opcode::bind_mw) {
        mw = dynamic_cast<MwImpl*>(wr.bind.mw);
        if (mw == nullptr || &mw->device() != &dev || wr.bind.mr == nullptr ||
            (wr.rkey >> 8) != (mw->rkey() >> 8) || wr.bind.length > 0xFFFFFFFFull) {
          ec = errc::invalid_argument;
          break;
        }
      }
    }
    std::uint64_t total = 0;
    for (std::uint32_t k = 0; k < wr.num_sge; ++k) total += wr.sg_list[k].length;
    const bool inl = (wr.flags & kInline) != 0;
    if (inl && (total > caps.max_inline_data || wr.opcode == Opcode::rdma_read)) {
      ec = errc::invalid_argument;
      break;
    }
    if (p - freed >= sq_cap_) {
      ec = errc::queue_full;
      break;
    }
    if (faults.fail_post.enabled() && post_rng_.fire(faults.fail_post)) {
      Counters::bump(dev.fabric.counters.failed_posts);
      ec = errc::injected_fault;
      break;
    }
    const std::size_t slot = p % sq_cap_;
    SendSlot& s = sq_[slot];
    s.wr_id = wr.wr_id;
    s.op = wr.opcode;
    s.flags = wr.flags;
    s.imm = wr.imm_data;
    s.raddr = wr.remote_addr;
    s.rkey = wr.rkey;
    s.num_sge = wr.num_sge;
    s.length = static_cast<std::uint32_t>(std::min<std::uint64_t>(total, 0xFFFFFFFFu));
    s.too_long = total > max_msg;
    s.read_done = false;
    s.fault_checked = false;
    s.local_done = false;
    if (wr.opcode == Opcode::bind_mw) {
      s.raddr = wr.bind.addr;
      s.mr_key = wr.bind.mr->lkey();
      s.mw_key = mw->rkey();
      s.mw_access = wr.bind.access;
      s.mw_len = wr.bind.length;
    }
    if (inl) {
      std::uint8_t* dst = &sq_inline_[slot * caps.max_inline_data];
      for (std::uint32_t k = 0; k < wr.num_sge; ++k) {
        if (wr.sg_list[k].length != 0)
          std::memcpy(dst, reinterpret_cast<const void*>(wr.sg_list[k].addr), wr.sg_list[k].length);
        dst += wr.sg_list[k].length;
      }
    } else {
      Sge* dst = &sq_sges_[slot * std::max<std::uint32_t>(caps.max_send_sge, 1)];
      for (std::uint32_t k = 0; k < wr.num_sge; ++k) dst[k] = wr.sg_list[k];
    }
    if (mw != nullptr) mw->set_rkey(wr.rkey);
    ++p;
  }
  if (p != start) {
    sq_prod_.store(p, std::memory_order_release);
    dev.fabric.engine->ring(this);
  }
  if (ec && bad != nullptr) *bad = i;
  return ec;
}

std::error_code QpCore::post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept {
  if (srq) {
    if (bad != nullptr) *bad = 0;
    return errc::invalid_argument;
  }
  const QpState st = state();
  if (st == QpState::reset) {
    if (bad != nullptr) *bad = 0;
    return errc::invalid_qp_state;
  }
  const FaultPlan& faults = dev.fabric.options.faults;
  auto ec = rq_->post(wrs, bad, faults.fail_post.enabled() ? &post_rng_ : nullptr, &faults.fail_post,
                      &dev.fabric.counters);
  if (st == QpState::err) dev.fabric.engine->ring(this);  // flush them
  return ec;
}

// ------------------------------------------------------------- engine: requester

void QpCore::on_doorbell() {
  const QpState st = state();
  if (st == QpState::err) {
    flush_send_queue();
    flush_recvs();
    check_overrun();
    return;
  }
  if (st != QpState::rts && st != QpState::sqd) return;
  sq_seen_ = sq_prod_.load(std::memory_order_acquire);
  if (sq_seen_ > done_ && retry_deadline_ == TimePoint{}) arm_retry_timer();
  if (req_link_ != nullptr)
    dev.fabric.engine->want_tx(req_link_);
  else
    ensure_link();
}

std::chrono::nanoseconds QpCore::retry_period() const noexcept {
  const auto d = ack_timeout_duration(attr.timeout);
  return d.count() == 0 ? std::chrono::milliseconds(100) : d;
}

void QpCore::arm_retry_timer() {
  retry_deadline_ = dev.fabric.engine->now() + retry_period();
  wake_at(retry_deadline_);
}

void QpCore::wake_at(TimePoint when) {
  // Lazy timers: one heap entry at a time is enough; on_timer() re-arms for
  // whatever deadline is current when it fires.
  if (wakeup_ != TimePoint{} && wakeup_ <= when) return;
  wakeup_ = when;
  dev.fabric.engine->schedule(this, when);
}

void QpCore::progress() noexcept {
  retry_left_ = attr.retry_cnt;
  rnr_left_ = attr.rnr_retry;
  // A completed READ may unblock the next READ or a fenced WR.
  if (req_link_ != nullptr && tx_next_ < sq_seen_) dev.fabric.engine->want_tx(req_link_);
  if (sq_seen_ > done_)
    arm_retry_timer();
  else
    retry_deadline_ = TimePoint{};
}

void QpCore::ensure_link() {
  const QpState st = state();
  if ((st != QpState::rts && st != QpState::sqd) || req_link_ != nullptr || reconnect_wait_) return;
  open_link();
}

void QpCore::open_link() {
  Engine& e = *dev.fabric.engine;
  std::uint32_t scope = 0;
  const auto gids = host_gids();
  if (attr.av.sgid_index < gids.size() && !gids[attr.av.sgid_index].netdev.empty())
    scope = if_nametoindex(gids[attr.av.sgid_index].netdev.c_str());
  NetAddress to;
  std::error_code ec;
  int fd = -1;
  if (!e.link_down() &&
      gid_to_address(attr.av.dgid, static_cast<std::uint16_t>(attr.dest_qp_num >> 8), scope, to))
    fd = connect_nb(to, ec);
  if (fd < 0) {
    reconnect_wait_ = true;  // the retry timer tries again
    if (sq_seen_ > done_ && retry_deadline_ == TimePoint{}) arm_retry_timer();
    return;
  }
  auto* link = new Link(e, &dev, Link::Kind::requester, fd, true, e.options().link_buffer_bytes);
  link->qp = this;
  link->home_ep = scq ? scq->domain_fd() : -1;  // its events wake the poller of our send CQ
  if (link->register_fd()) {
    link->qp = nullptr;
    link->close(false);
    reconnect_wait_ = true;
    return;
  }
  wire::Header h{};
  h.type = static_cast<wire::u8>(wire::Type::hello);
  h.len = sizeof(wire::Hello);
  wire::Hello hello{};
  hello.magic = wire::kMagic;
  hello.version = wire::kVersion;
  hello.src_qpn = qpn;
  hello.dst_qpn = attr.dest_qp_num;
  hello.src_guid = dev.attr.node_guid;
  link->put(h, &hello, sizeof hello);
  req_link_ = link;
  if (tx_next_ > done_) rewind_to(done_);  // a new link: resend what is unacknowledged
}

void QpCore::rewind_to(std::uint64_t idx) {
  if (idx >= tx_next_) return;
  SIPHON_TRACE(rdma, "soft: QP {:#x}: rewind to {} (done {}, next {})", qpn, idx, done_, tx_next_);
  Counters::bump(dev.fabric.counters.retransmits, tx_next_ - idx);
  tx_next_ = idx;
  reads_out_ = 0;
  for (std::uint64_t i = done_; i < idx; ++i) {
    const SendSlot& s = sq_[i % sq_cap_];
    if (s.op == Opcode::rdma_read && !s.read_done) ++reads_out_;
  }
}

void QpCore::on_link_lost(Link& link) {
  if (&link != req_link_) return;
  SIPHON_TRACE(rdma, "soft: QP {:#x}: link lost, errno {} (done {}, next {})", qpn, link.error, done_,
             tx_next_);
  req_link_ = nullptr;
  if (state() != QpState::rts && state() != QpState::sqd) return;
  if (link.error == 0 && sq_seen_ > done_) {
    open_link();  // the peer closed: reconnect at once (a flap); failures wait for the timer
    return;
  }
  reconnect_wait_ = true;
  if (sq_seen_ > done_ && retry_deadline_ == TimePoint{}) arm_retry_timer();
}

void QpCore::on_timer(TimePoint now) {
  if (wakeup_ != TimePoint{} && now < wakeup_) return;  // an older entry; a later one is queued
  wakeup_ = TimePoint{};
  const QpState st = state();
  if (st != QpState::rts && st != QpState::sqd) return;
  Engine& e = *dev.fabric.engine;
  if (hold_until_ != TimePoint{}) {
    if (now >= hold_until_) {
      SIPHON_TRACE(rdma, "soft: QP {:#x}: hold over (done {}, next {}, rewind {})", qpn, done_,
                 tx_next_, rewind_pending_);
      hold_until_ = TimePoint{};
      if (req_link_ != nullptr) e.want_tx(req_link_);
    } else {
      wake_at(hold_until_);
    }
  }
  if (retry_deadline_ == TimePoint{}) return;
  if (now < retry_deadline_) {
    wake_at(retry_deadline_);
    return;
  }
  if (sq_seen_ <= done_) {
    retry_deadline_ = TimePoint{};
    return;
  }
  Counters::bump(dev.fabric.counters.retry_timeouts);
  SIPHON_TRACE(rdma, "soft: QP {:#x}: ACK timeout (done {}, next {}, retries left {})", qpn, done_,
             tx_next_, retry_left_);
  if (attr.timeout != 0) {
    if (retry_left_ == 0) {
      SIPHON_LOG(rdma, 5, "soft: QP {:#x}: transport retries exhausted", qpn);
      fail_oldest(WcStatus::retry_exceeded);
      return;
    }
    --retry_left_;
  }
  arm_retry_timer();
  if (reconnect_wait_) {
    reconnect_wait_ = false;
    ensure_link();
  }
}

void QpCore::fail_oldest(WcStatus st) {
  // The QP is in ERR before the error completion can be polled.
  enter_error();
  sq_seen_ = sq_prod_.load(std::memory_order_acquire);
  if (done_ < sq_seen_) complete_send(done_, st);
  to_error();
  check_overrun();
}

std::uint64_t QpCore::psn_to_index(std::uint32_t psn, bool* ok) const noexcept {
  const std::uint32_t delta = (psn - index_psn(done_)) & wire::kPsnMask;
  *ok = delta < tx_next_ - done_;
  return done_ + delta;
}

void QpCore::fill_requests(Link& link) {
  if (&link != req_link_ || link.state != Link::State::open) return;
  const QpState st = state();
  if (st != QpState::rts && st != QpState::sqd) return;
  Engine& e = *dev.fabric.engine;
  if (hold_until_ != TimePoint{} && e.now() < hold_until_) return;
  if (rewind_pending_) {
    if (link.tx_busy()) return;
    rewind_pending_ = false;
    rewind_to(rewind_idx_);
  }
  if (st == QpState::sqd) return;  // drained: start nothing new
  const FaultPlan& faults = dev.fabric.options.faults;
  sq_seen_ = sq_prod_.load(std::memory_order_acquire);
  if (sq_seen_ > done_ && retry_deadline_ == TimePoint{}) arm_retry_timer();
  while (tx_next_ < sq_seen_ && pending_err_idx_ == ~0ull && !link.tx_busy() &&
         link.tx_space() >= sizeof(wire::Header)) {
    const std::size_t slot = tx_next_ % sq_cap_;
    SendSlot& s = sq_[slot];
    if (!s.fault_checked) {
      s.fault_checked = true;
      if (faults.qp_to_err.enabled() && engine_rng_.fire(faults.qp_to_err)) {
        Counters::bump(dev.fabric.counters.qp_errors_injected);
        to_error();
        check_overrun();
        return;
      }
      if (faults.link_drop.enabled() && engine_rng_.fire(faults.link_drop)) {
        Counters::bump(dev.fabric.counters.link_drops);
        link.error = 0;
        link.close(true);  // -> on_link_lost: reconnect and resend
        return;
      }
      if (faults.delay.enabled() && engine_rng_.fire(faults.delay)) {
        Counters::bump(dev.fabric.counters.delays);
        // From a fresh clock, not the engine's loop time (e.now()), which
        // may be older than the post: the hold must last delay_us from here.
        hold_until_ = Clock::now() + std::chrono::microseconds(faults.delay_us);
        wake_at(hold_until_);
        return;
      }
      if (faults.error_completion.enabled() && engine_rng_.fire(faults.error_completion)) {
        Counters::bump(dev.fabric.counters.error_completions);
        pending_err_ = faults.completion_error;
        pending_err_idx_ = tx_next_;
        break;
      }
    }
    if ((s.flags & kFence) != 0 && reads_out_ != 0) break;
    if (s.op == Opcode::rdma_read && reads_out_ >= std::max<std::uint8_t>(attr.max_rd_atomic, 1))
      break;
    if (s.too_long) {
      pending_err_ = WcStatus::local_length_error;
      pending_err_idx_ = tx_next_;
      break;
    }
    // Memory-window operations execute here, in send-queue order: every
    // earlier WR has been transmitted, no later one has. They cross the wire
    // as a zero-length WRITE (a no-op the responder acknowledges) so PSNs
    // stay dense and they complete in order through the ACK; a resend after a
    // link loss does not execute them again.
    if (s.op == Opcode::bind_mw || s.op == Opcode::local_inv) {
      if (!s.local_done) {
        const bool ok = s.op == Opcode::bind_mw
                            ? dev.mrs.bind_mw(s.mw_key, s.rkey, pd, qpn, s.mr_key, s.raddr, s.mw_len, s.mw_access)
                            : dev.mrs.invalidate(s.rkey, pd);
        if (!ok) {
          // rxe: IB_WC_MW_BIND_ERR (mapped to local_protection_error) for a
          // bind, IB_WC_LOC_QP_OP_ERR for an invalidate; the QP enters ERR.
          pending_err_ = s.op == Opcode::bind_mw ? WcStatus::local_protection_error
                                                 : WcStatus::local_qp_operation_error;
          pending_err_idx_ = tx_next_;
          break;
        }
        s.local_done = true;
      }
      wire::Header h{};
      h.type = static_cast<wire::u8>(wire::Type::write);
      h.psn = index_psn(tx_next_);
      link.put(h);
      Counters::bump(dev.fabric.counters.messages_sent);
      ++tx_next_;
      continue;
    }
    const Sge* sges = &sq_sges_[slot * std::max<std::uint32_t>(caps.max_send_sge, 1)];
    if ((s.flags & kInline) == 0) {
      const std::uint32_t need = s.op == Opcode::rdma_read ? std::uint32_t{kLocalWrite} : 0u;
      bool ok = true;
      {
        std::lock_guard lk(dev.mrs.mu);
        for (std::uint32_t k = 0; k < s.num_sge && ok; ++k)
          ok = sges[k].length == 0 ||
               dev.mrs.check(sges[k].lkey, pd, need, sges[k].addr, sges[k].length) != nullptr;
      }
      if (!ok) {
        pending_err_ = WcStatus::local_protection_error;
        pending_err_idx_ = tx_next_;
        break;
      }
    }
    wire::Header h{};
    h.psn = index_psn(tx_next_);
    h.len = s.length;
    h.imm = s.imm;
    h.raddr = s.raddr;
    h.rkey = s.rkey;
    switch (s.op) {
      case Opcode::send_with_imm: h.flags = wire::kHasImm; [[fallthrough]];
      case Opcode::send: h.type = static_cast<wire::u8>(wire::Type::send); break;
      case Opcode::rdma_write_with_imm: h.flags = wire::kHasImm; [[fallthrough]];
      case Opcode::rdma_write: h.type = static_cast<wire::u8>(wire::Type::write); break;
      case Opcode::rdma_read: h.type = static_cast<wire::u8>(wire::Type::read); break;
      case Opcode::bind_mw:
      case Opcode::local_inv: break;  // handled above
    }
    if ((s.flags & kSolicited) != 0) h.flags |= wire::kSolicited;
    if (s.op == Opcode::rdma_read) {
      if (link.same_host) h.flags |= wire::kSameHost;
      link.put(h);
      ++reads_out_;
    } else {
      TxSource src;
      if ((s.flags & kInline) != 0) {
        src.kind = TxSource::Kind::inline_data;
        src.data = &sq_inline_[slot * caps.max_inline_data];
      } else {
        src.kind = TxSource::Kind::gather;
        src.sges = sges;
        src.num_sge = s.num_sge;
        src.pd = pd;
      }
      link.start(h, src);
    }
    Counters::bump(dev.fabric.counters.messages_sent);
    SIPHON_TRACE(rdma, "soft: QP {:#x}: request {} psn {:#x} out", qpn, tx_next_, h.psn.value());
    ++tx_next_;
  }
  // A WR that failed before transmission completes in order, once every
  // earlier WR has.
  if (pending_err_idx_ != ~0ull && done_ == pending_err_idx_) {
    const WcStatus err = pending_err_;
    pending_err_idx_ = ~0ull;
    fail_oldest(err);
  }
}

void QpCore::retire_acked() {
  while (done_ < tx_next_) {
    const SendSlot& s = sq_[done_ % sq_cap_];
    if (s.op == Opcode::rdma_read ? !s.read_done : done_ >= acked_) break;
    complete_send(done_, WcStatus::success);
  }
  check_overrun();
  if (pending_err_idx_ != ~0ull && done_ == pending_err_idx_ && state() != QpState::err) {
    const WcStatus err = pending_err_;
    pending_err_idx_ = ~0ull;
    fail_oldest(err);
  }
}

void QpCore::on_response(Link& link, const wire::Header& h) {
  if (&link != req_link_ || state() == QpState::err) {
    SIPHON_TRACE(rdma, "soft: QP {:#x}: response psn {:#x} on an old link or in ERR: ignored", qpn,
               h.psn.value());
    return;
  }
  bool ok = false;
  const std::uint64_t idx = psn_to_index(h.psn.value(), &ok);
  const auto type = static_cast<wire::Type>(h.type);
  SIPHON_TRACE(rdma, "soft: QP {:#x}: {} code {} psn {:#x} (index {}, done {}, next {}){}", qpn,
             type == wire::Type::ack ? "ACK" : "NAK", h.code, h.psn.value(), idx, done_, tx_next_,
             ok ? "" : ", outside the window: ignored");
  if (type == wire::Type::ack) {
    if (!ok) return;  // a duplicate ACK
    acked_ = std::max(acked_, idx + 1);
    retire_acked();
    if (state() != QpState::err) progress();
    return;
  }
  if (!ok) return;
  const auto code = static_cast<wire::NakCode>(h.code);
  if (code == wire::NakCode::not_ready) {
    // The responder answers every request it cannot take with not_ready, so
    // only the one for the oldest outstanding WR counts; it acknowledges
    // nothing (a hardware responder would have dropped them all).
    if (idx != done_ || rewind_pending_) return;
  } else {
    acked_ = std::max(acked_, idx);  // a NAK acknowledges everything before it
    retire_acked();
    if (state() == QpState::err) return;
  }
  Engine& e = *dev.fabric.engine;
  switch (code) {
    case wire::NakCode::rnr:
      retry_left_ = attr.retry_cnt;  // the responder is alive: transport retries start over
      if (attr.rnr_retry != 7) {
        if (rnr_left_ == 0) {
          fail_oldest(WcStatus::rnr_retry_exceeded);
          return;
        }
        --rnr_left_;
      }
      hold_until_ = e.now() + rnr_timer_duration(h.rnr_timer);
      retry_deadline_ = hold_until_ + retry_period();
      wake_at(hold_until_);
      rewind_pending_ = true;
      rewind_idx_ = idx;
      return;
    case wire::NakCode::not_ready:
      // As if the request had been dropped: resend after the ACK timeout.
      if (attr.timeout != 0) {
        if (retry_left_ == 0) {
          fail_oldest(WcStatus::retry_exceeded);
          return;
        }
        --retry_left_;
      }
      hold_until_ = e.now() + retry_period();
      retry_deadline_ = hold_until_ + retry_period();
      wake_at(hold_until_);
      rewind_pending_ = true;
      rewind_idx_ = idx;
      return;
    case wire::NakCode::remote_access: fail_oldest(WcStatus::remote_access_error); return;
    case wire::NakCode::invalid_request: fail_oldest(WcStatus::remote_invalid_request); return;
    case wire::NakCode::remote_op: fail_oldest(WcStatus::remote_operation_error); return;
  }
  fail_oldest(WcStatus::bad_response);
}

void QpCore::on_hello_ack() {}

RxSink QpCore::read_resp_sink(const wire::Header& h) {
  RxSink sink;
  read_idx_ = ~0ull;
  if (state() == QpState::err) return sink;
  bool ok = false;
  const std::uint64_t idx = psn_to_index(h.psn.value(), &ok);
  if (!ok) return sink;
  const std::size_t slot = idx % sq_cap_;
  const SendSlot& s = sq_[slot];
  if (s.op != Opcode::rdma_read || s.read_done || h.len.value() != s.length) return sink;
  read_idx_ = idx;
  sink.kind = RxSink::Kind::scatter;
  sink.sges = &sq_sges_[slot * std::max<std::uint32_t>(caps.max_send_sge, 1)];
  sink.num_sge = s.num_sge;
  sink.pd = pd;
  sink.remote = s.raddr;
  return sink;
}

void QpCore::on_read_resp_done(const wire::Header&, bool failed) {
  if (read_idx_ == ~0ull || state() == QpState::err) return;
  const std::uint64_t idx = read_idx_;
  read_idx_ = ~0ull;
  acked_ = std::max(acked_, idx);
  if (failed) {
    retire_acked();
    if (state() != QpState::err && done_ == idx) fail_oldest(WcStatus::local_protection_error);
    return;
  }
  sq_[idx % sq_cap_].read_done = true;
  if (reads_out_ != 0) --reads_out_;
  retire_acked();
  if (state() != QpState::err) progress();
}

// ------------------------------------------------------------- engine: responder

void QpCore::attach_responder(Link& link) {
  if (resp_link_ != nullptr && resp_link_ != &link) {
    resp_link_->qp = nullptr;
    resp_link_->close(false);
  }
  resp_link_ = &link;
  link.qp = this;
  link.set_home(rcq ? rcq->domain_fd() : -1);  // its requests wake the poller of our receive CQ
  resp_head_ = resp_count_ = 0;
  resp_reads_ = 0;
}

void QpCore::detach_responder(Link& link) {
  if (resp_link_ != &link) return;
  resp_link_ = nullptr;
  resp_head_ = resp_count_ = 0;
  resp_reads_ = 0;
}

bool QpCore::claim_recv(RecvWork& w) {
  if (srq) return srq->ring.pop(w);
  return rq_ && rq_->pop(w);
}

RxSink QpCore::on_request(Link& link, const wire::Header& h) {
  RxSink sink;
  cur_ = Cur::process;
  const QpState st = state();
  if (st != QpState::rtr && st != QpState::rts && st != QpState::sqd) {
    cur_ = Cur::not_ready;
    return sink;
  }
  if (link.peer_qpn != attr.dest_qp_num) {
    cur_ = Cur::drop;  // not our peer: a packet for nobody
    return sink;
  }
  const std::uint32_t psn = h.psn.value();
  if (psn != expected_psn_) {
    const std::uint32_t behind = (expected_psn_ - psn) & wire::kPsnMask;
    cur_ = behind != 0 && behind < (1u << 23) ? Cur::duplicate : Cur::drop;
    return sink;
  }
  const auto type = static_cast<wire::Type>(h.type);
  const std::uint32_t len = h.len.value();
  const bool needs_recv =
      type == wire::Type::send || (type == wire::Type::write && (h.flags & wire::kHasImm) != 0);
  if (needs_recv && !claimed_.valid && !claim_recv(claimed_)) {
    cur_ = Cur::rnr;
    return sink;
  }
  if (type == wire::Type::send) {
    std::uint64_t room = 0;
    for (std::uint32_t k = 0; k < claimed_.num_sge; ++k) room += claimed_.sges[k].length;
    if (room < len) {
      cur_ = Cur::too_long;
      return sink;
    }
    sink.kind = RxSink::Kind::scatter;
    sink.sges = claimed_.sges.data();
    sink.num_sge = claimed_.num_sge;
    sink.pd = pd;
    return sink;
  }
  if (type == wire::Type::write && len != 0) {
    const std::uint64_t raddr = h.raddr.value();
    bool ok = (attr.access_flags & kRemoteWrite) != 0;
    if (ok) {
      std::lock_guard lk(dev.mrs.mu);
      ok = dev.mrs.check(h.rkey.value(), pd, kRemoteWrite, raddr, len, qpn) != nullptr;
    }
    if (!ok) {
      cur_ = Cur::access;
      return sink;
    }
    sink.kind = RxSink::Kind::mr;
    sink.addr = raddr;
    sink.key = h.rkey.value();
    sink.pd = pd;
    sink.need = kRemoteWrite;
    sink.qpn = qpn;
  }
  return sink;
}

void QpCore::on_request_done(Link&, const wire::Header& h, bool failed) {
  const std::uint32_t psn = h.psn.value();
  const auto type = static_cast<wire::Type>(h.type);
  static constexpr const char* kVerdict[] = {"execute", "drop", "duplicate", "not ready",
                                             "RNR NAK", "too long", "access error"};
  SIPHON_TRACE(rdma, "soft: QP {:#x}: request psn {:#x} in: {} (expected {:#x})", qpn, psn,
             kVerdict[static_cast<int>(cur_)], expected_psn_);
  switch (cur_) {
    case Cur::drop:
      return;
    case Cur::not_ready:
      queue_nak(psn, wire::NakCode::not_ready);
      return;
    case Cur::duplicate:
      if (type == wire::Type::read)
        queue_read(h);  // re-executed: the first response may have died with a link
      else
        queue_ack((expected_psn_ - 1) & wire::kPsnMask);
      return;
    case Cur::rnr:
      Counters::bump(dev.fabric.counters.rnr_naks_sent);
      queue_nak(psn, wire::NakCode::rnr);
      return;
    case Cur::too_long:
      responder_fatal(psn, wire::NakCode::invalid_request, WcStatus::local_length_error);
      return;
    case Cur::access:
      responder_fatal(psn, wire::NakCode::remote_access, WcStatus::flushed);
      return;
    case Cur::process:
      break;
  }
  // The QP may have entered ERR while this request's payload arrived (a
  // local fault, or the application moving it there): the receive it had
  // claimed was then completed as flushed, and nothing may complete or
  // execute now -- a success completion here would be a second completion
  // of the same receive (seen as a use of a freed wr_id by the RDMA stack).
  if (const QpState now = state(); now != QpState::rtr && now != QpState::rts && now != QpState::sqd) return;
  const bool imm = (h.flags & wire::kHasImm) != 0;
  const bool solicited = (h.flags & wire::kSolicited) != 0;
  if (type == wire::Type::read) {
    if (!queue_read(h)) return;
  } else if (failed) {
    if (type == wire::Type::send)
      responder_fatal(psn, wire::NakCode::remote_op, WcStatus::local_protection_error);
    else
      responder_fatal(psn, wire::NakCode::remote_access, WcStatus::flushed);
    return;
  } else if (type == wire::Type::send) {
    recv_complete(claimed_, WcStatus::success, WcOpcode::recv, h.len.value(), imm, h.imm.value(),
                  solicited);
  } else if (imm) {
    recv_complete(claimed_, WcStatus::success, WcOpcode::recv_rdma_with_imm, h.len.value(), true,
                  h.imm.value(), solicited);
  }
  expected_psn_ = (expected_psn_ + 1) & wire::kPsnMask;
  if (type != wire::Type::read) queue_ack(psn);
  check_overrun();
}

bool QpCore::queue_read(const wire::Header& h) {
  const std::uint32_t psn = h.psn.value();
  const std::uint32_t len = h.len.value();
  const std::uint64_t raddr = h.raddr.value();
  bool ok = (attr.access_flags & kRemoteRead) != 0 || len == 0;
  if (ok && len != 0) {
    std::lock_guard lk(dev.mrs.mu);
    ok = dev.mrs.check(h.rkey.value(), pd, kRemoteRead, raddr, len, qpn) != nullptr;
  }
  if (!ok) {
    responder_fatal(psn, wire::NakCode::remote_access, WcStatus::flushed);
    return false;
  }
  if (resp_reads_ >= std::max<std::uint8_t>(attr.max_dest_rd_atomic, 1) ||
      resp_count_ + 2 > resp_q_.size()) {
    responder_fatal(psn, wire::NakCode::invalid_request, WcStatus::flushed);
    return false;
  }
  Resp& r = resp_q_[(resp_head_ + resp_count_++) % resp_q_.size()];
  // A same-host response is a grant: the access was checked above, the
  // requester copies the bytes (link.cc, Link::pull_read_response).
  const bool same_host =
      (h.flags & wire::kSameHost) != 0 && len != 0 && dev.fabric.options.same_host_copy;
  r = Resp{wire::Type::read_resp, wire::NakCode{}, psn, raddr, h.rkey.value(), len, same_host};
  ++resp_reads_;
  kick_responder();
  return true;
}

void QpCore::queue_ack(std::uint32_t psn) {
  if (resp_count_ != 0) {
    Resp& last = resp_q_[(resp_head_ + resp_count_ - 1) % resp_q_.size()];
    if (last.type == wire::Type::ack) {
      last.psn = psn;  // cumulative: one ACK covers the batch
      kick_responder();
      return;
    }
  }
  if (resp_count_ == resp_q_.size()) return;  // cannot happen (sized for the read limit)
  resp_q_[(resp_head_ + resp_count_++) % resp_q_.size()] =
      Resp{wire::Type::ack, wire::NakCode{}, psn, 0, 0, 0, false};
  kick_responder();
}

void QpCore::queue_nak(std::uint32_t psn, wire::NakCode code) {
  if (resp_count_ == resp_q_.size()) return;
  resp_q_[(resp_head_ + resp_count_++) % resp_q_.size()] = Resp{wire::Type::nak, code, psn, 0, 0, 0, false};
  kick_responder();
}

void QpCore::responder_fatal(std::uint32_t psn, wire::NakCode code, WcStatus claimed_status) {
  // The NAK goes out on the still-open link; this QP enters ERR like a
  // hardware responder after a class C error, before the receive it had
  // claimed completes with `claimed_status`.
  queue_nak(psn, code);
  enter_error();
  if (claimed_.valid)
    recv_complete(claimed_, claimed_status, WcOpcode::recv, 0, false, 0, false);
  to_error();
  check_overrun();
}

void QpCore::kick_responder() {
  if (resp_link_ != nullptr) dev.fabric.engine->want_tx(resp_link_);
}

void QpCore::send_owed_responses() {
  // Called before the responder link is closed (QP destroyed or reset). A
  // request's receive completion is pushed when it executes, its ACK only at
  // the engine's next flush: an application that destroys the QP as soon as
  // it polls that completion got here in between, and the closed link took
  // the ACK with it -- the requester, whose data had been delivered, saw the
  // peer vanish and ended in retry_exceeded (issue 21). A hardware responder
  // has sent that ACK by then, so the responses owed for executed requests
  // go out first, as far as the socket takes them without blocking.
  if (resp_link_ == nullptr || resp_link_->state != Link::State::open) return;
  SIPHON_TRACE(rdma, "soft: QP {:#x}: sending {} owed responses before closing", qpn, resp_count_);
  resp_link_->flush();
}

void QpCore::fill_responses(Link& link) {
  if (&link != resp_link_) return;
  while (resp_count_ != 0 && !link.tx_busy()) {
    const Resp& r = resp_q_[resp_head_];
    wire::Header h{};
    h.type = static_cast<wire::u8>(r.type);
    h.psn = r.psn;
    if (r.type == wire::Type::read_resp && r.same_host) {
      h.flags = wire::kSameHost;
      h.len = r.len;
      h.raddr = r.addr;
      if (!link.put(h)) return;
      --resp_reads_;
    } else if (r.type == wire::Type::read_resp) {
      if (link.tx_space() < sizeof h) return;
      h.len = r.len;
      TxSource src;
      src.kind = r.len != 0 ? TxSource::Kind::mr : TxSource::Kind::none;
      src.addr = r.addr;
      src.key = r.key;
      src.pd = pd;
      src.qpn = qpn;
      link.start(h, src);
      --resp_reads_;
    } else {
      h.code = static_cast<wire::u8>(r.code);
      h.rnr_timer = attr.min_rnr_timer;
      if (!link.put(h)) return;
    }
    resp_head_ = (resp_head_ + 1) % resp_q_.size();
    --resp_count_;
  }
}

}  // namespace siphon::rdma::soft::detail
