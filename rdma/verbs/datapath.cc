// The verbs data path: post_send / post_recv / SRQ post_recv, poll, arm and
// completion-channel events. Nothing here allocates, locks (beyond what
// libibverbs does) or logs above trace level on success: work requests are
// converted into ibv_send_wr / ibv_recv_wr / ibv_sge arrays on the stack, a
// bounded chunk at a time, and each chunk is one ibv_post_* call.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/verbs/verbs_internal.h"

namespace siphon::rdma::verbs::detail {
namespace {

// Per ibv_post_* call: at most this many WRs and SGEs (about 8 KiB of stack
// for sends). A WR never straddles two chunks.
constexpr std::size_t kWrChunk = 32;
constexpr std::size_t kSgeChunk = 256;
constexpr std::size_t kPollChunk = 32;

constexpr std::uint32_t kKnownSendFlags = kSignaled | kInline | kFence | kSolicited;

ibv_wr_opcode to_ibv(Opcode op) noexcept {
  switch (op) {
    case Opcode::send: return IBV_WR_SEND;
    case Opcode::send_with_imm: return IBV_WR_SEND_WITH_IMM;
    case Opcode::rdma_write: return IBV_WR_RDMA_WRITE;
    case Opcode::rdma_write_with_imm: return IBV_WR_RDMA_WRITE_WITH_IMM;
    case Opcode::rdma_read: return IBV_WR_RDMA_READ;
    case Opcode::bind_mw: return IBV_WR_BIND_MW;
    case Opcode::local_inv: return IBV_WR_LOCAL_INV;
  }
  return IBV_WR_SEND;
}

unsigned send_flags(std::uint32_t f) noexcept {
  unsigned out = 0;
  if (f & kSignaled) out |= IBV_SEND_SIGNALED;
  if (f & kInline) out |= IBV_SEND_INLINE;
  if (f & kFence) out |= IBV_SEND_FENCE;
  if (f & kSolicited) out |= IBV_SEND_SOLICITED;
  return out;
}

// What verbs would reject (or, on some providers, accept and misbehave on),
// checked before posting so every provider reports it the same way.
std::error_code check_send(const SendWr& wr, const QpCaps& caps) noexcept {
  if (static_cast<unsigned>(wr.opcode) > static_cast<unsigned>(Opcode::local_inv))
    return errc::invalid_argument;
  if ((wr.flags & ~kKnownSendFlags) != 0) return errc::invalid_argument;
  if (wr.opcode == Opcode::bind_mw || wr.opcode == Opcode::local_inv) {
    if (wr.num_sge != 0 || (wr.flags & kInline) != 0) return errc::invalid_argument;
    if (wr.opcode == Opcode::local_inv) return {};
    const auto* mw = dynamic_cast<const VerbsMw*>(wr.bind.mw);
    const auto* mr = dynamic_cast<const VerbsMr*>(wr.bind.mr);
    if (mw == nullptr || mr == nullptr || (wr.rkey >> 8) != (mw->rkey() >> 8)) return errc::invalid_argument;
    if ((wr.bind.access & ~std::uint32_t{kRemoteRead | kRemoteWrite}) != 0) return errc::invalid_argument;
    return {};
  }
  if (wr.num_sge > caps.max_send_sge || wr.num_sge > kSgeChunk) return errc::invalid_argument;
  if (wr.num_sge != 0 && wr.sg_list == nullptr) return errc::invalid_argument;
  if ((wr.flags & kInline) != 0) {
    if (wr.opcode == Opcode::rdma_read) return errc::invalid_argument;
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
    if (total > caps.max_inline_data) return errc::invalid_argument;
  }
  return {};
}

std::error_code check_recv(const RecvWr& wr, std::uint32_t max_sge) noexcept {
  if (wr.num_sge > max_sge || wr.num_sge > kSgeChunk) return errc::invalid_argument;
  if (wr.num_sge != 0 && wr.sg_list == nullptr) return errc::invalid_argument;
  return {};
}

void copy_sges(const Sge* from, std::uint32_t n, ibv_sge* to) noexcept {
  for (std::uint32_t i = 0; i < n; ++i) {
    to[i].addr = from[i].addr;
    to[i].length = from[i].length;
    to[i].lkey = from[i].lkey;
  }
}

// Index (in the caller's span) of the first WR the provider did not take.
template <typename Wr>
std::size_t failed_index(const Wr* chunk, std::size_t n, const Wr* bad_wr,
                         std::size_t chunk_start) noexcept {
  if (bad_wr >= chunk && bad_wr < chunk + n) return chunk_start + static_cast<std::size_t>(bad_wr - chunk);
  return chunk_start;  // unknown: report the chunk as not posted
}

// Posts `wrs` a chunk at a time: `check(wr)` validates one WR,
// `fill(wr, ibv_wr)` converts it (sg_list, num_sge and next are set here),
// `post(first, &bad)` is one ibv_post_* call. On failure *bad is the index
// (in `wrs`) of the first WR not posted.
template <typename IbvWr, typename Wr, typename CheckFn, typename FillFn, typename PostFn>
std::error_code post_chunks(std::span<const Wr> wrs, std::size_t* bad, CheckFn&& check,
                            FillFn&& fill, PostFn&& post) noexcept {
  IbvWr chunk[kWrChunk];
  ibv_sge sges[kSgeChunk];
  std::size_t i = 0;
  while (i < wrs.size()) {
    const std::size_t start = i;
    std::size_t n = 0;
    std::size_t used = 0;
    std::error_code invalid;
    while (i < wrs.size() && n < kWrChunk) {
      const Wr& wr = wrs[i];
      if ((invalid = check(wr))) break;
      if (used + wr.num_sge > kSgeChunk) break;  // next chunk
      IbvWr& w = chunk[n];
      std::memset(&w, 0, sizeof(w));
      fill(wr, w);
      w.sg_list = wr.num_sge != 0 ? &sges[used] : nullptr;
      w.num_sge = static_cast<int>(wr.num_sge);
      copy_sges(wr.sg_list, wr.num_sge, &sges[used]);
      if (n > 0) chunk[n - 1].next = &w;
      used += wr.num_sge;
      ++n;
      ++i;
    }
    if (n > 0) {
      IbvWr* bad_wr = nullptr;
      if (const int rc = post(chunk, &bad_wr); rc != 0) {
        if (bad != nullptr) *bad = failed_index<IbvWr>(chunk, n, bad_wr, start);
        return post_error(rc);
      }
    }
    if (invalid) {
      if (bad != nullptr) *bad = i;
      return invalid;
    }
  }
  return {};
}

// Posts receive WRs through `post(ibv_recv_wr*, ibv_recv_wr**)` (QP or SRQ).
template <typename PostFn>
std::error_code post_recv_chunks(std::span<const RecvWr> wrs, std::uint32_t max_sge,
                                 std::size_t* bad, PostFn&& post) noexcept {
  return post_chunks<ibv_recv_wr>(
      wrs, bad, [max_sge](const RecvWr& wr) { return check_recv(wr, max_sge); },
      [](const RecvWr& wr, ibv_recv_wr& w) { w.wr_id = wr.wr_id; }, post);
}

}  // namespace

// -------------------------------------------------------------------- QP

namespace {
std::error_code post_send_chunks(std::span<const SendWr> wrs, std::size_t* bad, const QpCaps& caps,
                                 ibv_qp* qp) noexcept {
  return post_chunks<ibv_send_wr>(
      wrs, bad, [&caps](const SendWr& wr) { return check_send(wr, caps); },
      [](const SendWr& wr, ibv_send_wr& w) {
        w.wr_id = wr.wr_id;
        w.opcode = to_ibv(wr.opcode);
        w.send_flags = send_flags(wr.flags);
        if (wr.opcode == Opcode::send_with_imm || wr.opcode == Opcode::rdma_write_with_imm)
          w.imm_data = htonl(wr.imm_data);  // the wire carries it in network order
        if (wr.opcode == Opcode::rdma_write || wr.opcode == Opcode::rdma_write_with_imm ||
            wr.opcode == Opcode::rdma_read) {
          w.wr.rdma.remote_addr = wr.remote_addr;
          w.wr.rdma.rkey = wr.rkey;
        } else if (wr.opcode == Opcode::bind_mw) {  // check_send verified the casts
          w.bind_mw.mw = static_cast<const VerbsMw*>(wr.bind.mw)->raw();
          w.bind_mw.rkey = wr.rkey;
          w.bind_mw.bind_info.mr = static_cast<const VerbsMr*>(wr.bind.mr)->raw();
          w.bind_mw.bind_info.addr = wr.bind.addr;
          w.bind_mw.bind_info.length = wr.bind.length;
          unsigned access = 0;
          if (wr.bind.access & kRemoteRead) access |= IBV_ACCESS_REMOTE_READ;
          if (wr.bind.access & kRemoteWrite) access |= IBV_ACCESS_REMOTE_WRITE;
          w.bind_mw.bind_info.mw_access_flags = access;
        } else if (wr.opcode == Opcode::local_inv) {
          w.invalidate_rkey = wr.rkey;
        }
      },
      [qp](ibv_send_wr* w, ibv_send_wr** b) { return ::ibv_post_send(qp, w, b); });
}
}  // namespace

std::error_code VerbsQp::post_send(std::span<const SendWr> wrs, std::size_t* bad) noexcept {
  if (wrs.empty()) return {};
  // Before RTS verbs providers differ (rxe queues the WR and fails the
  // doorbell); the seam promises invalid_qp_state. qp_->state is libibverbs'
  // cache, updated by every modify and query (including rdma_cm's).
  if (qp_->state < IBV_QPS_RTS) {
    if (bad != nullptr) *bad = 0;
    return errc::invalid_qp_state;
  }
  const QpCaps& caps = caps_;
  ibv_qp* qp = qp_;
  std::size_t first_bad = wrs.size();
  const std::error_code ec = post_send_chunks(wrs, &first_bad, caps, qp);
  if (bad != nullptr) *bad = first_bad;
  // A bind WR that was posted gave its window the new rkey (ibv_mw::rkey is
  // ours to keep for type-2 windows).
  for (std::size_t i = 0; i < first_bad && i < wrs.size(); ++i)
    if (wrs[i].opcode == Opcode::bind_mw) static_cast<VerbsMw*>(wrs[i].bind.mw)->raw()->rkey = wrs[i].rkey;
  return ec;
}

std::error_code VerbsQp::post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept {
  if (wrs.empty()) return {};
  if (refs_.srq) {  // receives come from the SRQ
    if (bad != nullptr) *bad = 0;
    return errc::invalid_argument;
  }
  if (qp_->state == IBV_QPS_RESET) {  // C10-97.2.1: not before INIT
    if (bad != nullptr) *bad = 0;
    return errc::invalid_qp_state;
  }
  ibv_qp* qp = qp_;
  return post_recv_chunks(wrs, caps_.max_recv_sge, bad,
                          [qp](ibv_recv_wr* w, ibv_recv_wr** b) { return ::ibv_post_recv(qp, w, b); });
}

// ------------------------------------------------------------------- SRQ

std::error_code VerbsSrq::post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept {
  if (wrs.empty()) return {};
  ibv_srq* srq = srq_->srq;
  return post_recv_chunks(wrs, max_sge_, bad, [srq](ibv_recv_wr* w, ibv_recv_wr** b) {
    return ::ibv_post_srq_recv(srq, w, b);
  });
}

// -------------------------------------------------------------------- CQ

std::size_t VerbsCq::poll(std::span<Wc> out) noexcept {
  ibv_wc wc[kPollChunk];
  std::size_t total = 0;
  while (total < out.size()) {
    const int want = static_cast<int>(std::min(kPollChunk, out.size() - total));
    const int n = ::ibv_poll_cq(cq_->cq, want, wc);
    if (n < 0) {
      SIPHON_LOG(rdma, 1, "verbs: ibv_poll_cq failed ({}): the CQ is in error (overrun?)", n);
      break;
    }
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[i];
      Wc& c = out[total + static_cast<std::size_t>(i)];
      c.wr_id = w.wr_id;
      c.status = wc_status_from_ibv(w.status);
      c.qp_num = w.qp_num;
      c.vendor_err = w.vendor_err;
      // Only wr_id, status, qp_num and vendor_err are defined for errors.
      const bool ok = w.status == IBV_WC_SUCCESS;
      c.opcode = wc_opcode_from_ibv(w.opcode);
      c.byte_len = ok ? w.byte_len : 0;
      c.has_imm = ok && (w.wc_flags & IBV_WC_WITH_IMM) != 0;
      c.imm_data = c.has_imm ? ntohl(w.imm_data) : 0;
    }
    total += static_cast<std::size_t>(n);
    if (n < want) break;
  }
  return total;
}

std::error_code VerbsCq::arm(bool solicited_only) noexcept {
  const int rc = ::ibv_req_notify_cq(cq_->cq, solicited_only ? 1 : 0);
  return rc == 0 ? std::error_code{} : post_error(rc);
}

std::size_t VerbsCq::consume_events() noexcept {
  // The channel is this CQ's own and non-blocking: read until EAGAIN, then
  // acknowledge everything with one ibv_ack_cq_events (it takes a lock).
  std::size_t n = 0;
  for (;;) {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (::ibv_get_cq_event(cq_->channel, &ev_cq, &ev_ctx) != 0) break;
    ++cq_->unacked;
    ++n;
  }
  if (cq_->unacked != 0) {
    ::ibv_ack_cq_events(cq_->cq, cq_->unacked);
    cq_->unacked = 0;
  }
  return n;
}

}  // namespace siphon::rdma::verbs::detail
