// Setup and teardown of the verbs objects hanging off a PD: memory regions,
// shared receive queues and RC queue pairs (creation, caps read back,
// modify, state). The data path of the same objects is in datapath.cc.
#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/verbs/verbs_internal.h"

namespace siphon::rdma::verbs::detail {
namespace {

std::string memlock_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return "unknown";
  if (rl.rlim_cur == RLIM_INFINITY) return "unlimited";
  return std::to_string(rl.rlim_cur / 1024) + " KiB";
}

bool is_zero(const Gid& g) noexcept {
  for (const auto b : g)
    if (b != 0) return false;
  return true;
}

}  // namespace

// ---------------------------------------------------------------- handles

SrqRef::~SrqRef() {
  if (srq != nullptr) {
    if (const int rc = ::ibv_destroy_srq(srq); rc != 0)
      SIPHON_LOG(rdma, 0, "verbs: ibv_destroy_srq failed: {} (a QP still uses it)",
                 std::strerror(rc));
  }
}

VerbsMr::~VerbsMr() {
  if (const int rc = ::ibv_dereg_mr(mr_); rc != 0)
    SIPHON_LOG(rdma, 0, "verbs: ibv_dereg_mr failed: {}", std::strerror(rc));
}

VerbsMw::~VerbsMw() {
  if (const int rc = ::ibv_dealloc_mw(mw_); rc != 0)
    SIPHON_LOG(rdma, 0, "verbs: ibv_dealloc_mw failed: {}", std::strerror(rc));
}

VerbsQp::~VerbsQp() {
  if (refs_.id && refs_.id->qp == qp_) {
    // A user-managed QP of an rdma_cm id: the id forgets it, then it goes.
    refs_.id->qp = nullptr;
    if (const int rc = ::ibv_destroy_qp(qp_); rc != 0)
      SIPHON_LOG(rdma, 0, "verbs: ibv_destroy_qp({}) failed: {}", qp_->qp_num, std::strerror(rc));
  } else if (refs_.id) {
    // The QP belongs to the rdma_cm id: rdma_destroy_qp also clears id->qp,
    // so the id can be destroyed afterwards (refs_.id may be its last owner).
    ::rdma_destroy_qp(refs_.id->id);
  } else if (const int rc = ::ibv_destroy_qp(qp_); rc != 0) {
    SIPHON_LOG(rdma, 0, "verbs: ibv_destroy_qp({}) failed: {}", qp_->qp_num, std::strerror(rc));
  }
}

// --------------------------------------------------------------------- MR

std::unique_ptr<MemoryRegion> VerbsPd::reg_mr(void* addr, std::size_t len, std::uint32_t access,
                                              std::error_code& ec) {
  const auto flags = ibv_access(access);
  if (!flags) {
    SIPHON_LOG(rdma, 1,
               "verbs: reg_mr: access {:#x} is invalid (known bits: local write, remote write, "
               "remote read; remote write needs local write)",
               access);
    ec = errc::invalid_argument;
    return nullptr;
  }
  errno = 0;
  ibv_mr* mr = ::ibv_reg_mr(pd_->pd, addr, len, *flags);
  if (mr == nullptr) {
    const int err = errno;
    ec = err == EINVAL ? make_error_code(errc::invalid_argument)
                       : make_error_code(errc::memory_registration_failed);
    SIPHON_LOG(rdma, 1,
               "verbs: ibv_reg_mr({} bytes) failed: {}: pinned memory is limited by "
               "RLIMIT_MEMLOCK (now {}; raise it with ulimit -l or LimitMEMLOCK= in the unit)",
               len, err != 0 ? std::strerror(err) : "unknown error", memlock_limit());
    return nullptr;
  }
  // Construct the owner before anything else can fail.
  std::unique_ptr<VerbsMr> out;
  try {
    out = std::make_unique<VerbsMr>(pd_, mr, access);
  } catch (...) {
    ::ibv_dereg_mr(mr);
    throw;
  }
  ec.clear();
  return out;
}

// -------------------------------------------------------------------- SRQ

std::unique_ptr<SharedReceiveQueue> VerbsPd::create_srq(const SrqInit& init, std::error_code& ec) {
  auto ref = std::make_shared<SrqRef>(pd_);
  ibv_srq_init_attr a{};
  a.attr.max_wr = init.max_wr;
  a.attr.max_sge = init.max_sge;
  a.attr.srq_limit = 0;
  errno = 0;
  ref->srq = ::ibv_create_srq(pd_->pd, &a);
  if (ref->srq == nullptr) {
    const int err = errno;
    ec = (err == ENOSYS || err == EOPNOTSUPP) ? make_error_code(errc::not_supported)
                                              : setup_error(err);
    SIPHON_LOG(rdma, 1, "verbs: ibv_create_srq(max_wr {}, max_sge {}) failed: {}", init.max_wr,
               init.max_sge, std::strerror(err));
    return nullptr;
  }
  // ibv_create_srq writes the granted sizes back; ask again to be sure.
  ibv_srq_attr granted = a.attr;
  if (::ibv_query_srq(ref->srq, &granted) != 0) granted = a.attr;
  ec.clear();
  return std::make_unique<VerbsSrq>(std::move(ref), granted.max_wr, granted.max_sge);
}

// --------------------------------------------------------------------- QP

// --------------------------------------------------------------------- MW

std::unique_ptr<MemoryWindow> VerbsPd::alloc_mw(std::error_code& ec) {
  errno = 0;
  ibv_mw* mw = ::ibv_alloc_mw(pd_->pd, IBV_MW_TYPE_2);
  if (mw == nullptr) {
    const int err = errno;
    ec = (err == ENOSYS || err == EOPNOTSUPP || err == 0) ? make_error_code(errc::not_supported)
                                                           : setup_error(err);
    SIPHON_LOG(rdma, 1, "verbs: ibv_alloc_mw(type 2) failed: {}",
               err != 0 ? std::strerror(err) : "not supported by the provider");
    return nullptr;
  }
  ec.clear();
  return std::make_unique<VerbsMw>(pd_, mw);
}

std::unique_ptr<QueuePair> VerbsPd::create_qp(const QpInit& init, std::error_code& ec) {
  return create_rc_qp(pd_, init, nullptr, false, ec);
}

std::unique_ptr<QueuePair> create_rc_qp(const std::shared_ptr<PdRef>& pd, const QpInit& init,
                                        const std::shared_ptr<IdRef>& id, bool user_managed,
                                        std::error_code& ec) {
  auto* scq = dynamic_cast<VerbsCq*>(init.send_cq);
  auto* rcq = dynamic_cast<VerbsCq*>(init.recv_cq);
  auto* srq = init.srq != nullptr ? dynamic_cast<VerbsSrq*>(init.srq) : nullptr;
  if (scq == nullptr || rcq == nullptr || (init.srq != nullptr && srq == nullptr)) {
    SIPHON_LOG(rdma, 1,
               "verbs: create_qp needs a send CQ and a receive CQ (and optional SRQ) from the "
               "verbs provider");
    ec = errc::invalid_argument;
    return nullptr;
  }
  ibv_context* ctx = pd->context->ctx;
  if (scq->ref()->context->ctx != ctx || rcq->ref()->context->ctx != ctx ||
      (srq != nullptr && srq->ref()->pd->context->ctx != ctx) ||
      (id && id->id->verbs != ctx)) {
    SIPHON_LOG(rdma, 1,
               "verbs: create_qp: the PD, CQs{} must come from the same device{}", 
               srq != nullptr ? ", SRQ" : "", id ? " as the rdma_cm id (use CmId::device())" : "");
    ec = errc::invalid_argument;
    return nullptr;
  }
  VerbsQp::Refs refs{pd, scq->ref(), rcq->ref(), srq != nullptr ? srq->ref() : nullptr, id};

  ibv_qp_init_attr a{};
  a.send_cq = scq->ref()->cq;
  a.recv_cq = rcq->ref()->cq;
  a.srq = srq != nullptr ? srq->ref()->srq : nullptr;
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = init.sq_sig_all ? 1 : 0;
  a.cap.max_send_wr = init.caps.max_send_wr;
  a.cap.max_send_sge = init.caps.max_send_sge;
  a.cap.max_inline_data = init.caps.max_inline_data;
  a.cap.max_recv_wr = srq != nullptr ? 0 : init.caps.max_recv_wr;
  a.cap.max_recv_sge = srq != nullptr ? 0 : init.caps.max_recv_sge;

  ibv_qp* qp = nullptr;
  errno = 0;
  if (id) {
    if (id->id->qp != nullptr || id->qp != nullptr) {
      SIPHON_LOG(rdma, 1, "verbs: create_qp: the rdma_cm id already has a QP");
      ec = errc::invalid_argument;
      return nullptr;
    }
    if (user_managed)
      qp = ::ibv_create_qp(pd->pd, &a);
    else if (::rdma_create_qp(id->id, pd->pd, &a) == 0)
      qp = id->id->qp;
  } else {
    qp = ::ibv_create_qp(pd->pd, &a);
  }
  if (qp == nullptr) {
    const int err = errno;
    ec = setup_error(err);
    SIPHON_LOG(rdma, 1,
               "verbs: {}(send_wr {}, recv_wr {}, send_sge {}, recv_sge {}, inline {}) failed: "
               "{}",
               id && !user_managed ? "rdma_create_qp" : "ibv_create_qp", init.caps.max_send_wr,
               init.caps.max_recv_wr, init.caps.max_send_sge, init.caps.max_recv_sge,
               init.caps.max_inline_data, err != 0 ? std::strerror(err) : "unknown error");
    return nullptr;
  }
  // The granted caps: what ibv_query_qp reports, else what create wrote back.
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  const ibv_qp_cap& cap = ::ibv_query_qp(qp, &q, IBV_QP_CAP, &qi) == 0 ? q.cap : a.cap;
  QpCaps caps;
  caps.max_send_wr = cap.max_send_wr;
  caps.max_recv_wr = srq != nullptr ? 0 : cap.max_recv_wr;
  caps.max_send_sge = cap.max_send_sge;
  caps.max_recv_sge = srq != nullptr ? 0 : cap.max_recv_sge;
  caps.max_inline_data = cap.max_inline_data;
  std::unique_ptr<VerbsQp> out;
  try {
    out = std::make_unique<VerbsQp>(std::move(refs), qp, caps);
  } catch (...) {
    if (id && !user_managed) ::rdma_destroy_qp(id->id); else ::ibv_destroy_qp(qp);
    throw;
  }
  if (id && user_managed) id->qp = qp;
  ec.clear();
  return out;
}

QpState VerbsQp::state() const noexcept {
  // Ask the device: a QP moves to ERR by itself after an error completion.
  // (libibverbs also caches the answer in qp_->state for post_*.)
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (::ibv_query_qp(qp_, &a, IBV_QP_STATE, &ia) == 0) return qp_state_from_ibv(a.qp_state);
  return qp_state_from_ibv(qp_->state);
}

std::error_code VerbsQp::query_path(QpPath& out) const {
  // What the QP carries, as the device reports it: the destination QPN and
  // GID and the path MTU set at RTR, and the source GID its sgid_index
  // names in the port's table (the one rdma-cm or the selection applied).
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (const int rc = ::ibv_query_qp(qp_, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_PORT,
                                    &ia);
      rc != 0)
    return setup_error(rc);
  if (a.qp_state == IBV_QPS_RESET || a.qp_state == IBV_QPS_INIT) return errc::invalid_qp_state;
  const std::uint8_t port = a.ah_attr.port_num != 0 ? a.ah_attr.port_num : a.port_num;
  ibv_gid sgid{};
  if (::ibv_query_gid(qp_->context, port, a.ah_attr.grh.sgid_index, &sgid) != 0)
    return setup_error(errno != 0 ? errno : EINVAL);
  out = QpPath{};
  out.dest_qp_num = a.dest_qp_num;
  std::memcpy(out.sgid.data(), sgid.raw, out.sgid.size());
  std::memcpy(out.dgid.data(), a.ah_attr.grh.dgid.raw, out.dgid.size());
  out.path_mtu = mtu_from_ibv(a.path_mtu);
  return {};
}

std::error_code VerbsQp::modify(const QpAttr& attr, std::uint32_t mask) noexcept {
  constexpr std::uint32_t kKnownMask = (kAttrPkeyIndex << 1) - 1;
  if ((mask & ~kKnownMask) != 0) return errc::invalid_argument;
  if ((mask & kAttrState) != 0 && !is_valid_transition(qp_state_from_ibv(qp_->state), attr.state))
    return errc::invalid_qp_state;

  ibv_qp_attr a{};
  a.qp_state = to_ibv(attr.state);
  if ((mask & kAttrAccessFlags) != 0) {
    constexpr std::uint32_t kQpAccess = kLocalWrite | kRemoteWrite | kRemoteRead;
    if ((attr.access_flags & ~kQpAccess) != 0) return errc::invalid_argument;
    a.qp_access_flags = (attr.access_flags & kRemoteWrite ? IBV_ACCESS_REMOTE_WRITE : 0) |
                        (attr.access_flags & kRemoteRead ? IBV_ACCESS_REMOTE_READ : 0) |
                        (attr.access_flags & kLocalWrite ? IBV_ACCESS_LOCAL_WRITE : 0);
  }
  a.port_num = attr.port_num;
  a.pkey_index = attr.pkey_index;
  if ((mask & kAttrPath) != 0) {
    const AddressVector& av = attr.av;
    a.path_mtu = to_ibv(attr.path_mtu);
    a.ah_attr.is_global = is_zero(av.dgid) ? 0 : 1;  // RoCE always has a GRH
    std::memcpy(a.ah_attr.grh.dgid.raw, av.dgid.data(), av.dgid.size());
    a.ah_attr.grh.sgid_index = av.sgid_index;
    a.ah_attr.grh.hop_limit = av.hop_limit;
    a.ah_attr.grh.traffic_class = av.traffic_class;
    a.ah_attr.grh.flow_label = av.flow_label;
    a.ah_attr.sl = av.sl;
    a.ah_attr.dlid = av.dlid;
    a.ah_attr.src_path_bits = 0;
    a.ah_attr.static_rate = 0;
    a.ah_attr.port_num = av.port_num;
  }
  a.dest_qp_num = attr.dest_qp_num;
  a.rq_psn = attr.rq_psn & 0xffffff;
  a.sq_psn = attr.sq_psn & 0xffffff;
  a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  a.max_rd_atomic = attr.max_rd_atomic;
  a.min_rnr_timer = attr.min_rnr_timer;
  a.timeout = attr.timeout;
  a.retry_cnt = attr.retry_cnt;
  a.rnr_retry = attr.rnr_retry;

  const int rc = ::ibv_modify_qp(qp_, &a, ibv_qp_attr_mask(mask));
  if (rc == 0) return {};
  const int err = rc < 0 ? -rc : rc;
  SIPHON_LOG(rdma, 1, "verbs: ibv_modify_qp(qp {}, {} -> {}, mask {:#x}) failed: {}", qp_->qp_num,
             to_string(qp_state_from_ibv(qp_->state)),
             (mask & kAttrState) != 0 ? to_string(attr.state) : std::string_view("same"), mask,
             std::strerror(err));
  if (err == EINVAL && (mask & kAttrState) != 0 && !is_valid_transition(state(), attr.state))
    return errc::invalid_qp_state;  // the QP had moved on by itself (e.g. to ERR)
  return err == EINVAL ? make_error_code(errc::invalid_argument) : setup_error(err);
}

}  // namespace siphon::rdma::verbs::detail

namespace siphon::rdma::verbs {

std::error_code query_qp_path(const QueuePair& qp, QpPathInfo& out) {
  const auto* v = dynamic_cast<const detail::VerbsQp*>(&qp);
  if (v == nullptr) return errc::invalid_argument;
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (const int rc = ::ibv_query_qp(v->raw(), &a,
                                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN,
                                    &ia);
      rc != 0)
    return detail::setup_error(rc);
  out = QpPathInfo{};
  out.state = detail::qp_state_from_ibv(a.qp_state);
  out.dest_qp_num = a.dest_qp_num;
  std::memcpy(out.dgid.data(), a.ah_attr.grh.dgid.raw, out.dgid.size());
  out.path.sgid_index = a.ah_attr.grh.sgid_index;
  out.path.sl = a.ah_attr.sl;
  out.path.path_mtu = detail::mtu_from_ibv(a.path_mtu);
  out.path.traffic_class = a.ah_attr.grh.traffic_class;
  out.path.hop_limit = a.ah_attr.grh.hop_limit;
  return {};
}

}  // namespace siphon::rdma::verbs
