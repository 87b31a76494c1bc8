// Mappings between rdma-core's values and provider.h / the siphon error
// category. Pure functions; the only rdma-core dependency is the enum values
// (and ibv_wc_status_str for names).
#include <cerrno>

#include "msgr/base/error.h"
#include "rdma/verbs/verbs_internal.h"
#include "rdma/verbs/verbs_provider.h"

namespace siphon::rdma::verbs {

WcStatus wc_status_from_ibv(int status) noexcept {
  switch (static_cast<ibv_wc_status>(status)) {
    case IBV_WC_SUCCESS: return WcStatus::success;
    case IBV_WC_LOC_LEN_ERR: return WcStatus::local_length_error;
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR: return WcStatus::local_qp_operation_error;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_MW_BIND_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_LOC_RDD_VIOL_ERR: return WcStatus::local_protection_error;
    case IBV_WC_WR_FLUSH_ERR: return WcStatus::flushed;
    case IBV_WC_BAD_RESP_ERR: return WcStatus::bad_response;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR: return WcStatus::remote_invalid_request;
    case IBV_WC_REM_ACCESS_ERR: return WcStatus::remote_access_error;
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_ABORT_ERR: return WcStatus::remote_operation_error;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR: return WcStatus::retry_exceeded;
    case IBV_WC_RNR_RETRY_EXC_ERR: return WcStatus::rnr_retry_exceeded;
    case IBV_WC_INV_EECN_ERR:
    case IBV_WC_INV_EEC_STATE_ERR:
    case IBV_WC_FATAL_ERR:
    case IBV_WC_GENERAL_ERR:
    case IBV_WC_TM_ERR:
    case IBV_WC_TM_RNDV_INCOMPLETE: return WcStatus::general_error;
  }
  return WcStatus::general_error;
}

std::string_view ibv_wc_status_name(int status) noexcept {
  const char* s = ::ibv_wc_status_str(static_cast<ibv_wc_status>(status));
  return s != nullptr ? std::string_view(s) : std::string_view("unknown");
}

WcOpcode wc_opcode_from_ibv(int opcode) noexcept {
  switch (static_cast<ibv_wc_opcode>(opcode)) {
    case IBV_WC_SEND: return WcOpcode::send;
    case IBV_WC_RDMA_WRITE: return WcOpcode::rdma_write;
    case IBV_WC_RDMA_READ: return WcOpcode::rdma_read;
    case IBV_WC_RECV: return WcOpcode::recv;
    case IBV_WC_RECV_RDMA_WITH_IMM: return WcOpcode::recv_rdma_with_imm;
    case IBV_WC_BIND_MW: return WcOpcode::bind_mw;
    case IBV_WC_LOCAL_INV: return WcOpcode::local_inv;
    default: break;
  }
  // Opcodes the seam never posts (atomics, binds, tag matching, ...): sort
  // them by the receive bit so a completion lands on the right side.
  return (opcode & IBV_WC_RECV) != 0 ? WcOpcode::recv : WcOpcode::send;
}

std::error_code post_error(int err) noexcept {
  if (err < 0) err = -err;  // some providers return -errno
  switch (err) {
    case 0: return {};
    case ENOMEM: return errc::queue_full;  // the documented "queue full" of ibv_post_*
    case EINVAL: return errc::invalid_argument;
    default: break;
  }
  const std::error_code ec = from_errno(err);
  return ec ? ec : make_error_code(errc::io_error);
}

int ibv_qp_attr_mask(std::uint32_t mask) noexcept {
  int m = 0;
  if (mask & kAttrState) m |= IBV_QP_STATE;
  if (mask & kAttrAccessFlags) m |= IBV_QP_ACCESS_FLAGS;
  if (mask & kAttrPort) m |= IBV_QP_PORT;
  if (mask & kAttrPath) m |= IBV_QP_AV | IBV_QP_PATH_MTU;
  if (mask & kAttrDestQpn) m |= IBV_QP_DEST_QPN;
  if (mask & kAttrRqPsn) m |= IBV_QP_RQ_PSN;
  if (mask & kAttrSqPsn) m |= IBV_QP_SQ_PSN;
  if (mask & kAttrMaxDestRdAtomic) m |= IBV_QP_MAX_DEST_RD_ATOMIC;
  if (mask & kAttrMaxRdAtomic) m |= IBV_QP_MAX_QP_RD_ATOMIC;
  if (mask & kAttrMinRnrTimer) m |= IBV_QP_MIN_RNR_TIMER;
  if (mask & kAttrTimeout) m |= IBV_QP_TIMEOUT;
  if (mask & kAttrRetryCnt) m |= IBV_QP_RETRY_CNT;
  if (mask & kAttrRnrRetry) m |= IBV_QP_RNR_RETRY;
  if (mask & kAttrPkeyIndex) m |= IBV_QP_PKEY_INDEX;
  return m;
}

std::optional<int> ibv_access(std::uint32_t access) noexcept {
  constexpr std::uint32_t kKnown = kLocalWrite | kRemoteWrite | kRemoteRead | kMwBind;
  if ((access & ~kKnown) != 0) return std::nullopt;
  if ((access & kRemoteWrite) != 0 && (access & kLocalWrite) == 0) return std::nullopt;
  int flags = 0;
  if (access & kLocalWrite) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (access & kRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  if (access & kMwBind) flags |= IBV_ACCESS_MW_BIND;
  return flags;
}

bool is_valid_transition(QpState from, QpState to) noexcept {
  if (to == QpState::reset || to == QpState::err) return true;  // from any state
  switch (from) {
    case QpState::reset: return to == QpState::init;
    case QpState::init: return to == QpState::init || to == QpState::rtr;
    case QpState::rtr: return to == QpState::rts;
    case QpState::rts: return to == QpState::rts || to == QpState::sqd;
    case QpState::sqd: return to == QpState::rts || to == QpState::sqd;
    case QpState::sqe: return to == QpState::rts;
    case QpState::err: return false;
  }
  return false;
}

std::optional<CmEventType> cm_event_from_rdma(int type) noexcept {
  switch (static_cast<rdma_cm_event_type>(type)) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return CmEventType::addr_resolved;
    case RDMA_CM_EVENT_ADDR_ERROR: return CmEventType::addr_error;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return CmEventType::route_resolved;
    case RDMA_CM_EVENT_ROUTE_ERROR: return CmEventType::route_error;
    case RDMA_CM_EVENT_CONNECT_REQUEST: return CmEventType::connect_request;
    case RDMA_CM_EVENT_CONNECT_ERROR: return CmEventType::connect_error;
    case RDMA_CM_EVENT_UNREACHABLE: return CmEventType::unreachable;
    case RDMA_CM_EVENT_REJECTED: return CmEventType::rejected;
    case RDMA_CM_EVENT_ESTABLISHED: return CmEventType::established;
    case RDMA_CM_EVENT_DISCONNECTED: return CmEventType::disconnected;
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return CmEventType::device_removal;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return CmEventType::timewait_exit;
    // Not carried by the seam. CONNECT_RESPONSE only comes for an id that
    // connected without a QP; the channel completes it with rdma_establish
    // and reports established (or connect_error).
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
    case RDMA_CM_EVENT_MULTICAST_JOIN:
    case RDMA_CM_EVENT_MULTICAST_ERROR:
    case RDMA_CM_EVENT_ADDR_CHANGE: return std::nullopt;
  }
  return std::nullopt;
}

std::string_view rdma_cm_event_name(int type) noexcept {
  const char* s = ::rdma_event_str(static_cast<rdma_cm_event_type>(type));
  return s != nullptr ? std::string_view(s) : std::string_view("unknown");
}

std::error_code cm_event_error(CmEventType type, int status) noexcept {
  const bool error_event = type == CmEventType::addr_error || type == CmEventType::route_error ||
                           type == CmEventType::connect_error ||
                           type == CmEventType::unreachable || type == CmEventType::rejected;
  // REJECTED carries the IB CM reject reason (positive), e.g. 28 for a
  // consumer reject or 8 when nobody listens on the port.
  if (type == CmEventType::rejected) return errc::connection_refused;
  if (status == 0) return error_event ? make_error_code(errc::rdma_cm_error) : std::error_code{};
  if (status < 0) {
    const std::error_code ec = from_errno(-status);
    return ec == errc::io_error ? make_error_code(errc::rdma_cm_error) : ec;
  }
  return errc::rdma_cm_error;
}

std::size_t max_private_data(CmPrivateData use) noexcept {
  switch (use) {
    case CmPrivateData::connect: return 56;   // IB CM REQ 92 - rdma_cm header 36
    case CmPrivateData::accept: return 196;   // IB CM REP
    case CmPrivateData::reject: return 148;   // IB CM REJ
  }
  return 0;
}

std::error_code check_port_number(std::uint8_t port, std::uint8_t phys_port_cnt) noexcept {
  if (port == 0 || port > phys_port_cnt) return errc::invalid_argument;
  return {};
}

const char* port_answer_problem(const RawPortAnswer& a) noexcept {
  if (a.state < IBV_PORT_DOWN || a.state > IBV_PORT_ACTIVE_DEFER) return "undefined port state";
  if (a.max_mtu < IBV_MTU_256 || a.max_mtu > IBV_MTU_4096) return "max MTU out of range";
  if (a.active_mtu < IBV_MTU_256 || a.active_mtu > IBV_MTU_4096) return "active MTU out of range";
  if (a.link_layer != IBV_LINK_LAYER_UNSPECIFIED && a.link_layer != IBV_LINK_LAYER_INFINIBAND &&
      a.link_layer != IBV_LINK_LAYER_ETHERNET)
    return "unknown link layer";
  if (a.gid_tbl_len <= 0) return "empty GID table";
  return nullptr;
}

namespace detail {

ibv_mtu to_ibv(Mtu m) noexcept { return static_cast<ibv_mtu>(static_cast<int>(m)); }

Mtu mtu_from_ibv(int m) noexcept {
  if (m < IBV_MTU_256) return Mtu::mtu256;
  if (m > IBV_MTU_4096) return Mtu::mtu4096;
  return static_cast<Mtu>(m);
}

ibv_qp_state to_ibv(QpState s) noexcept {
  switch (s) {
    case QpState::reset: return IBV_QPS_RESET;
    case QpState::init: return IBV_QPS_INIT;
    case QpState::rtr: return IBV_QPS_RTR;
    case QpState::rts: return IBV_QPS_RTS;
    case QpState::sqd: return IBV_QPS_SQD;
    case QpState::sqe: return IBV_QPS_SQE;
    case QpState::err: return IBV_QPS_ERR;
  }
  return IBV_QPS_ERR;
}

QpState qp_state_from_ibv(int s) noexcept {
  switch (static_cast<ibv_qp_state>(s)) {
    case IBV_QPS_RESET: return QpState::reset;
    case IBV_QPS_INIT: return QpState::init;
    case IBV_QPS_RTR: return QpState::rtr;
    case IBV_QPS_RTS: return QpState::rts;
    case IBV_QPS_SQD: return QpState::sqd;
    case IBV_QPS_SQE: return QpState::sqe;
    case IBV_QPS_ERR:
    case IBV_QPS_UNKNOWN: return QpState::err;
  }
  return QpState::err;
}

PortState port_state_from_ibv(int s) noexcept {
  switch (static_cast<ibv_port_state>(s)) {
    case IBV_PORT_NOP: return PortState::nop;
    case IBV_PORT_DOWN: return PortState::down;
    case IBV_PORT_INIT: return PortState::init;
    case IBV_PORT_ARMED: return PortState::armed;
    case IBV_PORT_ACTIVE: return PortState::active;
    case IBV_PORT_ACTIVE_DEFER: return PortState::active_defer;
  }
  return PortState::nop;
}

LinkLayer link_layer_from_ibv(int l) noexcept {
  switch (l) {
    case IBV_LINK_LAYER_INFINIBAND: return LinkLayer::infiniband;
    case IBV_LINK_LAYER_ETHERNET: return LinkLayer::ethernet;
    default: return LinkLayer::unspecified;
  }
}

GidType gid_type_from_ibv(std::uint32_t t, LinkLayer link) noexcept {
  switch (t) {
    case IBV_GID_TYPE_ROCE_V2: return GidType::roce_v2;
    case IBV_GID_TYPE_ROCE_V1: return GidType::roce_v1;
    default:
      // sysfs says "IB/RoCE v1" for both: on Ethernet it is RoCE v1.
      return link == LinkLayer::ethernet ? GidType::roce_v1 : GidType::ib;
  }
}

std::error_code setup_error(int err) noexcept {
  const std::error_code ec = from_errno(err < 0 ? -err : err);
  return ec ? ec : make_error_code(errc::io_error);
}

}  // namespace detail
}  // namespace siphon::rdma::verbs
