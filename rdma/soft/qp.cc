// RC queue pair of the soft fabric: creation, the modify() state machine,
// errors and flushes, destruction. The data path (post, requester and
// responder protocol) is in qp_datapath.cc.
//
// QP state machine (IB spec 10.3, RC subset), driven by modify() and by
// errors the engine detects:
//
//        modify                modify              modify
//   RESET ------> INIT -----------------> RTR -------------> RTS <----+
//     ^  <--+      |  INIT->INIT             \                |  ^    | RTS->RTS
//     |     |      |                          \      modify   v  |    |
//     |     +------+                           \          SQD --+ (SQD->RTS)
//     |                                         \           |
//     |  any --modify(RESET)--> RESET            v          v
//     +------------------------------------- ERR <-- any (modify(ERR), a completion
//                                                         error, a remote NAK,
//                                                         retries exhausted)
// Posting sends is allowed in RTS, SQD and ERR (ERR flushes them); posting
// receives in every state but RESET. Leaving for RESET drops every WR without
// a completion; entering ERR completes every outstanding WR with `flushed`.
#include <net/if.h>

#include <algorithm>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/soft/core.h"

namespace siphon::rdma::soft::detail {

std::chrono::nanoseconds rnr_timer_duration(std::uint8_t code) noexcept {
  // IB spec table 45, in units of 10 microseconds (code 0 = 655.36 ms).
  static constexpr std::uint32_t k10us[32] = {
      65536, 1,   2,   3,   4,   6,   8,    12,   16,   24,   32,   48,   64,   96,   128,  192,
      256,   384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return std::chrono::microseconds(10ull * k10us[code & 31]);
}

std::chrono::nanoseconds ack_timeout_duration(std::uint8_t code) noexcept {
  if (code == 0) return std::chrono::nanoseconds(0);  // infinite
  return std::chrono::nanoseconds(4096ull << std::min<std::uint8_t>(code, 31));
}

namespace {

struct Rule {
  QpState from, to;
  std::uint32_t required, optional;
};

constexpr std::uint32_t kPathish = kAttrPath | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                                   kAttrMaxRdAtomic | kAttrMaxDestRdAtomic | kAttrPkeyIndex |
                                   kAttrPort;
constexpr Rule kRules[] = {
    {QpState::reset, QpState::init, kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, 0},
    {QpState::init, QpState::init, 0, kAttrPkeyIndex | kAttrPort | kAttrAccessFlags},
    {QpState::init, QpState::rtr,
     kAttrPath | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer,
     kAttrAccessFlags | kAttrPkeyIndex},
    {QpState::rtr, QpState::rts,
     kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxRdAtomic,
     kAttrAccessFlags | kAttrMinRnrTimer},
    {QpState::rts, QpState::rts, 0, kAttrAccessFlags | kAttrMinRnrTimer},
    {QpState::rts, QpState::sqd, 0, 0},
    {QpState::sqd, QpState::rts, 0, kAttrAccessFlags | kAttrMinRnrTimer},
    {QpState::sqd, QpState::sqd, 0, kAttrAccessFlags | kAttrMinRnrTimer | kPathish},
};

}  // namespace

bool modify_allowed(QpState cur, QpState next, std::uint32_t mask) noexcept {
  mask &= ~static_cast<std::uint32_t>(kAttrState);
  if (next == QpState::reset || next == QpState::err) return mask == 0 || next == QpState::err;
  for (const Rule& r : kRules) {
    if (r.from == cur && r.to == next)
      return (mask & r.required) == r.required && (mask & ~(r.required | r.optional)) == 0;
  }
  return false;
}

namespace {
bool transition_exists(QpState cur, QpState next) noexcept {
  if (next == QpState::reset || next == QpState::err) return true;
  for (const Rule& r : kRules)
    if (r.from == cur && r.to == next) return true;
  return false;
}

// Detaches `link` from this QP and closes it.
void drop_link(Link*& link) {
  if (link == nullptr) return;
  link->qp = nullptr;
  link->close(false);
  link = nullptr;
}
}  // namespace

QpCore::QpCore(DeviceCore& d, std::uint32_t pd_id, const QpInit& init, std::shared_ptr<CqCore> s,
               std::shared_ptr<CqCore> r, std::shared_ptr<SrqCore> q, std::uint64_t seed)
    : dev(d), pd(pd_id), caps(init.caps), sq_sig_all(init.sq_sig_all), scq(std::move(s)),
      rcq(std::move(r)), srq(std::move(q)), post_rng_(seed), engine_rng_(seed ^ 0x5deece66dull) {
  if (srq) {
    caps.max_recv_wr = 0;
    caps.max_recv_sge = 0;
  }
  sq_cap_ = caps.max_send_wr;
  const std::size_t slots = std::max<std::uint32_t>(sq_cap_, 1);
  sq_.reset(new SendSlot[slots]());
  sq_sges_.reset(new Sge[slots * std::max<std::uint32_t>(caps.max_send_sge, 1)]);
  sq_inline_.reset(new std::uint8_t[slots * std::max<std::uint32_t>(caps.max_inline_data, 1)]);
  if (!srq) rq_ = std::make_unique<RecvRing>(caps.max_recv_wr, caps.max_recv_sge);
  const std::uint32_t rsge = std::max<std::uint32_t>(
      {srq ? srq->ring.max_sge() : caps.max_recv_sge, 1u});
  claimed_.sges.resize(rsge);
  scratch_recv_.sges.resize(rsge);
  resp_q_.resize(2 * static_cast<std::size_t>(dev.attr.max_qp_rd_atom) + 8);
}

QpCore::~QpCore() = default;

void QpCore::register_qpn(std::error_code& ec) {
  QpnBlock* block = nullptr;
  for (auto& b : dev.blocks)
    if (b->used < 256) {
      block = b.get();
      break;
    }
  if (block == nullptr && (block = open_qpn_block(dev, ec)) == nullptr) return;
  std::uint32_t slot = 0;
  while (block->qps[slot] != nullptr) ++slot;
  block->qps[slot] = this;
  ++block->used;
  qpn = (static_cast<std::uint32_t>(block->port) << 8) | slot;
  dev.fabric.engine->add_timer_client(this);
  ec.clear();
}

void QpCore::destroy() {
  destroyed = true;
  Engine& engine = *dev.fabric.engine;
  engine.drain_doorbells();  // no stale pointer to us stays in the doorbell stack
  for (auto& b : dev.blocks)
    if (b->port == (qpn >> 8) && b->qps[qpn & 0xFF] == this) {
      b->qps[qpn & 0xFF] = nullptr;
      --b->used;
    }
  engine.remove_timer_client(this);
  drop_link(req_link_);
  send_owed_responses();
  drop_link(resp_link_);
}

std::error_code QpCore::modify(const QpAttr& a, std::uint32_t mask) {
  const QpState cur = state();
  const QpState next = (mask & kAttrState) != 0 ? a.state : cur;
  // Its device is gone: it stays in ERR (asking for ERR again is harmless).
  if (device_gone) {
    if (next == QpState::err) return {};
    return errc::device_not_found;
  }
  if (next == QpState::sqe || (cur == QpState::err && next != QpState::err && next != QpState::reset))
    return errc::invalid_qp_state;
  if (!transition_exists(cur, next)) return errc::invalid_qp_state;
  if (!modify_allowed(cur, next, mask)) return errc::invalid_argument;

  // Values.
  const DeviceAttr& da = dev.attr;
  if ((mask & kAttrPort) != 0 && a.port_num != 1) return errc::invalid_argument;
  if ((mask & kAttrPkeyIndex) != 0 && a.pkey_index != 0) return errc::invalid_argument;
  if ((mask & kAttrAccessFlags) != 0 &&
      (a.access_flags & ~static_cast<std::uint32_t>(kLocalWrite | kRemoteWrite | kRemoteRead)) != 0)
    return errc::invalid_argument;
  Gid path_sgid{};
  if ((mask & kAttrPath) != 0) {
    if (a.path_mtu < Mtu::mtu256 || a.path_mtu > dev.fabric.options.max_mtu ||
        a.av.port_num != 1)
      return errc::invalid_argument;
    const std::vector<GidEntry> gids = host_gids();
    if (a.av.sgid_index >= gids.size()) return errc::invalid_argument;
    path_sgid = gids[a.av.sgid_index].gid;
  }
  if ((mask & kAttrDestQpn) != 0 && a.dest_qp_num > 0xFFFFFF) return errc::invalid_argument;
  if ((mask & kAttrMaxDestRdAtomic) != 0 && a.max_dest_rd_atomic > da.max_qp_rd_atom)
    return errc::invalid_argument;
  if ((mask & kAttrMaxRdAtomic) != 0 && a.max_rd_atomic > da.max_qp_init_rd_atom)
    return errc::invalid_argument;
  if ((mask & kAttrMinRnrTimer) != 0 && a.min_rnr_timer > 31) return errc::invalid_argument;
  if ((mask & kAttrTimeout) != 0 && a.timeout > 31) return errc::invalid_argument;
  if ((mask & kAttrRetryCnt) != 0 && a.retry_cnt > 7) return errc::invalid_argument;
  if ((mask & kAttrRnrRetry) != 0 && a.rnr_retry > 7) return errc::invalid_argument;

  if (next == QpState::reset) {
    reset_all();
    return {};
  }
  if (next == QpState::err) {
    to_error();
    return {};
  }
  // Apply.
  if (mask & kAttrAccessFlags) attr.access_flags = a.access_flags;
  if (mask & kAttrPort) attr.port_num = a.port_num;
  if (mask & kAttrPath) {
    attr.av = a.av;
    attr.path_mtu = a.path_mtu;
    sgid = path_sgid;
  }
  if (mask & kAttrDestQpn) attr.dest_qp_num = a.dest_qp_num;
  if (mask & kAttrRqPsn) attr.rq_psn = a.rq_psn & wire::kPsnMask;
  if (mask & kAttrSqPsn) attr.sq_psn = a.sq_psn & wire::kPsnMask;
  if (mask & kAttrMaxDestRdAtomic) attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & kAttrMaxRdAtomic) attr.max_rd_atomic = a.max_rd_atomic;
  if (mask & kAttrMinRnrTimer) attr.min_rnr_timer = a.min_rnr_timer;
  if (mask & kAttrTimeout) attr.timeout = a.timeout;
  if (mask & kAttrRetryCnt) attr.retry_cnt = a.retry_cnt;
  if (mask & kAttrRnrRetry) attr.rnr_retry = a.rnr_retry;

  if (cur == QpState::init && next == QpState::rtr) expected_psn_ = attr.rq_psn;
  if (cur == QpState::rtr && next == QpState::rts) {
    sq_base_ = sq_prod_.load(std::memory_order_acquire);
    sq_seen_ = done_ = tx_next_ = acked_ = sq_base_;
    retry_left_ = attr.retry_cnt;
    rnr_left_ = attr.rnr_retry;
  }
  set_state(next);
  if (next == QpState::rts) {
    ensure_link();
    if (req_link_ != nullptr) dev.fabric.engine->want_tx(req_link_);
  }
  return {};
}

void QpCore::reset_all() {
  drop_link(req_link_);
  send_owed_responses();
  drop_link(resp_link_);
  set_state(QpState::reset);
  const auto p = sq_prod_.load(std::memory_order_acquire);
  sq_seen_ = done_ = tx_next_ = acked_ = sq_base_ = p;
  sq_free_.store(p, std::memory_order_release);
  if (rq_) rq_->clear();
  claimed_.valid = false;
  attr = QpAttr{};
  sgid = Gid{};
  expected_psn_ = 0;
  pending_err_idx_ = ~0ull;
  reads_out_ = 0;
  retry_deadline_ = hold_until_ = TimePoint{};
  rewind_pending_ = reconnect_wait_ = link_ready_ = false;
  wakeup_ = TimePoint{};
  resp_head_ = resp_count_ = 0;
  resp_reads_ = 0;
  resp_fatal_ = false;
}

void QpCore::enter_error() {
  if (state() == QpState::err) return;
  set_state(QpState::err);
  if (req_link_ != nullptr) {
    req_link_->qp = nullptr;
    req_link_->close(false);
    req_link_ = nullptr;
  }
  retry_deadline_ = hold_until_ = TimePoint{};
  rewind_pending_ = reconnect_wait_ = false;
}

void QpCore::to_error() {
  enter_error();
  flush_send_queue();
  flush_recvs();
}

void QpCore::remove_device() {
  device_gone = true;
  to_error();
  drop_link(resp_link_);  // the peer's requests find no adapter any more
}

void QpCore::flush_send_queue() {
  sq_seen_ = sq_prod_.load(std::memory_order_acquire);
  for (std::uint64_t i = done_; i < sq_seen_; ++i) complete_send(i, WcStatus::flushed);
  done_ = tx_next_ = acked_ = sq_seen_;
  pending_err_idx_ = ~0ull;
  reads_out_ = 0;
}

void QpCore::flush_recvs() {
  if (claimed_.valid)
    recv_complete(claimed_, WcStatus::flushed, WcOpcode::recv, 0, false, 0, false);
  if (rq_) {
    while (rq_->pop(scratch_recv_))
      recv_complete(scratch_recv_, WcStatus::flushed, WcOpcode::recv, 0, false, 0, false);
  }
}

void QpCore::complete_send(std::uint64_t idx, WcStatus st) {
  SendSlot& s = sq_[idx % std::max<std::uint32_t>(sq_cap_, 1)];
  if (s.op == Opcode::rdma_read && reads_out_ != 0 && idx < tx_next_ && !s.read_done) --reads_out_;
  const bool signaled = sq_sig_all || (s.flags & kSignaled) != 0 || st != WcStatus::success;
  if (signaled) {
    Wc wc;
    wc.wr_id = s.wr_id;
    wc.status = st;
    switch (s.op) {
      case Opcode::rdma_read: wc.opcode = WcOpcode::rdma_read; break;
      case Opcode::rdma_write:
      case Opcode::rdma_write_with_imm: wc.opcode = WcOpcode::rdma_write; break;
      case Opcode::bind_mw: wc.opcode = WcOpcode::bind_mw; break;
      case Opcode::local_inv: wc.opcode = WcOpcode::local_inv; break;
      default: wc.opcode = WcOpcode::send; break;
    }
    wc.byte_len = s.length;
    wc.qp_num = qpn;
    // Unsignaled WRs before this one are released together with it, as a
    // hardware SQ does when the signaled completion is polled. Released
    // before the completion is visible: a poller that sees it may post into
    // the freed slots at once (the slot's contents are in `wc` already).
    sq_free_.store(idx + 1, std::memory_order_release);
    if (!scq || !scq->push(wc, false)) cq_overrun_ = true;
  }
  if (idx + 1 > done_) done_ = idx + 1;
  SIPHON_TRACE(rdma, "soft: QP {:#x}: send {} complete, status {}", qpn, idx, static_cast<int>(st));
}

void QpCore::recv_complete(RecvWork& w, WcStatus st, WcOpcode op, std::uint32_t len, bool imm,
                           std::uint32_t imm_data, bool solicited) {
  Wc wc;
  wc.wr_id = w.wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.byte_len = len;
  wc.has_imm = imm;
  wc.imm_data = imm_data;
  wc.qp_num = qpn;
  w.valid = false;
  if (!rcq || !rcq->push(wc, solicited)) cq_overrun_ = true;
}

void QpCore::check_overrun() {
  if (!cq_overrun_) return;
  cq_overrun_ = false;
  SIPHON_LOG(rdma, 1, "soft: CQ overrun on QP {:#x}: completion lost, QP to ERR", qpn);
  if (state() != QpState::err) to_error();
}

}  // namespace siphon::rdma::soft::detail
