// EventChannel and CmId over librdmacm.
//
// Every event is copied (type, status, private data, connection parameters)
// and acknowledged with rdma_ack_cm_event before get_event returns, so no
// rdma_destroy_id can block on an unacknowledged event. A connect request's
// new rdma_cm_id is wrapped in a CmId owned by the event (CmEvent::new_id);
// dropping it rejects nothing but destroys the id, so the peer sees a
// timeout or reject from the kernel.
//
// On IB and RoCE ports a QP created with CmId::create_qp is user-managed,
// librdmacm's flow for a QP it does not own: ibv_create_qp on the caller's PD
// and CQs, then the provider moves it itself, with rdma_init_qp_attr's
// attributes plus the path selected for the connection (path.cc: source GID
// auto-selected or pinned, SL, path MTU cap):
//   create_qp          INIT (so receives can be posted before connecting);
//   active side        rdma_connect with conn_param.qp_num; on
//                      RDMA_CM_EVENT_CONNECT_RESPONSE INIT, RTR, RTS, then
//                      rdma_establish (the RTU), reported as `established`;
//   passive side       accept: INIT, RTR, RTS, then rdma_accept with qp_num.
// This mirrors librdmacm's ucma_modify_qp_rtr/rts (INIT again first: the
// CM's INIT attributes carry the negotiated remote access). Failures move
// the QP to ERR and reject the connection. Other transports (iWARP) keep
// rdma_create_qp, where the QP belongs to the id: the QueuePair destroys it
// with rdma_destroy_qp, and the id is destroyed with rdma_destroy_id after
// that, whichever of the two C++ objects goes first.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/verbs/verbs_internal.h"

namespace siphon::rdma::verbs::detail {
namespace {

socklen_t sockaddr_len_of(const sockaddr* sa) noexcept {
  if (sa == nullptr) return 0;
  if (sa->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (sa->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

std::error_code cm_errno() noexcept {
  const int err = errno;
  if (err == 0) return errc::rdma_cm_error;
  const std::error_code ec = from_errno(err);
  return ec == errc::io_error ? make_error_code(errc::rdma_cm_error) : ec;
}

std::error_code check_param(const ConnParam& p, CmPrivateData use) noexcept {
  if (p.private_data.size() > max_private_data(use)) return errc::invalid_argument;
  if (p.retry_count > 7 || p.rnr_retry_count > 7) return errc::invalid_argument;
  return {};
}

rdma_conn_param to_rdma(const ConnParam& p) noexcept {
  rdma_conn_param c{};
  c.private_data = p.private_data.empty() ? nullptr : p.private_data.data();
  c.private_data_len = static_cast<std::uint8_t>(p.private_data.size());
  c.responder_resources = p.responder_resources;
  c.initiator_depth = p.initiator_depth;
  c.flow_control = 1;
  c.retry_count = p.retry_count;
  c.rnr_retry_count = p.rnr_retry_count;
  return c;
}

// Acknowledges an event when it goes out of scope, on every path.
struct EventAck {
  rdma_cm_event* ev = nullptr;
  EventAck() = default;
  EventAck(const EventAck&) = delete;
  EventAck& operator=(const EventAck&) = delete;
  ~EventAck() {
    if (ev != nullptr) ::rdma_ack_cm_event(ev);
  }
};

// librdmacm's ucma_modify_qp_err for a user-managed QP.
void qp_to_err(const IdRef& ref) noexcept {
  if (ref.qp == nullptr) return;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (const int rc = ::ibv_modify_qp(ref.qp, &a, IBV_QP_STATE); rc != 0)
    SIPHON_LOG(rdma, 5, "verbs: ibv_modify_qp(qp {}, ERR) failed: {}", ref.qp->qp_num,
               std::strerror(rc));
}

// One transition of a user-managed QP with rdma_init_qp_attr's attributes;
// `adjust` may change them. On error `why` says which step failed and how.
template <typename Adjust>
std::error_code cm_transition(IdRef& ref, ibv_qp_state state, std::string_view name,
                              std::string& why, Adjust&& adjust) {
  ibv_qp_attr a{};
  int mask = 0;
  a.qp_state = state;
  errno = 0;
  if (::rdma_init_qp_attr(ref.id, &a, &mask) != 0) {
    const int err = errno;
    const std::error_code ec = cm_errno();
    why = fmt::format("rdma_init_qp_attr({}) failed: {}", name,
                      err != 0 ? std::strerror(err) : "unknown error");
    return ec;
  }
  adjust(a, mask);
  if (const int rc = ::ibv_modify_qp(ref.qp, &a, mask); rc != 0) {
    const int err = rc < 0 ? -rc : rc;
    why = fmt::format("ibv_modify_qp(qp {}, {}) failed: {}", ref.qp->qp_num, name,
                      std::strerror(err));
    return err == EINVAL ? make_error_code(errc::invalid_argument) : setup_error(err);
  }
  return {};
}

std::mutex g_applied_mu;
std::string g_applied_logged;  // the last applied path logged at level 1

// INIT, RTR with the selected path, RTS (ucma_modify_qp_rtr/rts). Passive
// side: `resp_res` and `init_depth` are what accept announces. On error the
// QP is in ERR and `why` names the cause and the remedy.
std::error_code ready_user_qp(IdRef& ref, std::optional<std::uint8_t> resp_res,
                              std::optional<std::uint8_t> init_depth, std::string& why) {
  if (ref.qp == nullptr || !ref.path) {
    why = "the id has no QP";
    return errc::invalid_argument;
  }
  VerbsPath path = *ref.path;
  auto failed = [&](std::error_code ec) {
    qp_to_err(ref);
    return ec;
  };
  if (ref.sl) path.sl = *ref.sl;
  if (auto ec = cm_transition(ref, IBV_QPS_INIT, "INIT", why, [](ibv_qp_attr&, int&) {}))
    return failed(ec);
  ibv_port_attr port{};
  const bool ib_link = ::ibv_query_port(ref.id->verbs, ref.id->port_num, &port) == 0 &&
                       port.link_layer == IBV_LINK_LAYER_INFINIBAND;
  if (!ib_link && path.sl > 7) {
    why = fmt::format("ms_async_rdma_sl = {} is out of range for RoCE on {} (0-7: the 802.1p "
                      "priority)",
                      path.sl, path.device);
    return failed(make_error_code(errc::config_error));
  }
  CmPathAttr proposed, applied;
  auto rtr = [&](ibv_qp_attr& a, int& mask) {
    // librdmacm's workaround for an old rdma_ucm bug: bits 21-24 are RoCE's.
    if (ib_link) mask &= ~0xe00000;
    proposed.sgid_index = a.ah_attr.grh.sgid_index;
    proposed.sl = a.ah_attr.sl;
    proposed.path_mtu = mtu_from_ibv(a.path_mtu);
    proposed.traffic_class = a.ah_attr.grh.traffic_class;
    proposed.hop_limit = a.ah_attr.grh.hop_limit;
    applied = apply_selected_path(proposed, path);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(applied.sgid_index);
    a.ah_attr.sl = applied.sl;
    a.path_mtu = to_ibv(applied.path_mtu);
    if (resp_res) a.max_dest_rd_atomic = *resp_res;
  };
  if (auto ec = cm_transition(ref, IBV_QPS_RTR, "RTR", why, rtr)) {
    const sockaddr* peer = ::rdma_get_peer_addr(ref.id);
    why += fmt::format(
        " with GID[{}] {} {} towards {}: the selected source GID must reach the peer's address "
        "(the same IP family and RoCE version; {}); check ms_async_rdma_gid_idx and "
        "ms_async_rdma_local_gid, or unset them to select automatically",
        applied.sgid_index, format_gid(path.sgid.gid), to_string(path.sgid.type),
        NetAddress::from_sockaddr(peer, sockaddr_len_of(peer)).to_string(), path.how);
    return failed(ec);
  }
  auto rts = [&](ibv_qp_attr& a, int&) {
    if (init_depth) a.max_rd_atomic = *init_depth;
  };
  if (auto ec = cm_transition(ref, IBV_QPS_RTS, "RTS", why, rts)) return failed(ec);
  CmPathReport report{proposed, applied, describe_applied(proposed, applied, path)};
  SIPHON_LOG(rdma, 5, "verbs: rdma_cm connection qp {}: {}", ref.qp->qp_num, report.description);
  {
    std::lock_guard lk(g_applied_mu);
    if (g_applied_logged != report.description) {
      g_applied_logged = report.description;
      SIPHON_LOG(rdma, 1, "verbs: rdma_cm connections use {}", report.description);
      for (const auto& w : path.warnings) SIPHON_LOG(rdma, 1, "verbs: {}", w);
    }
  }
  ref.applied = std::move(report);
  return {};
}

}  // namespace

// ---------------------------------------------------------------- handles

ChannelRef::~ChannelRef() {
  if (channel != nullptr) ::rdma_destroy_event_channel(channel);
}

IdRef::~IdRef() {
  if (id == nullptr) return;
  if (id->qp != nullptr) ::rdma_destroy_qp(id);  // only if no QueuePair took it
  if (::rdma_destroy_id(id) != 0)
    SIPHON_LOG(rdma, 0, "verbs: rdma_destroy_id failed: {}", std::strerror(errno));
}

// ------------------------------------------------------------------- CmId

class VerbsCmId final : public CmId {
 public:
  VerbsCmId(std::shared_ptr<IdRef> ref, std::shared_ptr<const VerbsPathOptions> options) noexcept
      : ref_(std::move(ref)), options_(std::move(options)) {
    ref_->owner = this;
  }
  VerbsCmId(const VerbsCmId&) = delete;
  VerbsCmId& operator=(const VerbsCmId&) = delete;
  // The rdma_cm id goes with the last reference: here, or with its QP.
  ~VerbsCmId() override { ref_->owner = nullptr; }

  std::error_code bind(const NetAddress& addr) override {
    if (::rdma_bind_addr(id(), const_cast<sockaddr*>(addr.sockaddr_ptr())) == 0) return {};
    const int err = errno;
    const auto ec = cm_errno();
    SIPHON_LOG(rdma, 1, "verbs: rdma_bind_addr({}) failed: {}{}", addr.to_string(),
               std::strerror(err),
               err == ENODEV || err == EADDRNOTAVAIL
                   ? ": the address must belong to an RDMA device's netdev (rdma link show)"
                   : "");
    return ec;
  }

  std::error_code listen(int backlog) override {
    return ::rdma_listen(id(), backlog) == 0 ? std::error_code{} : cm_errno();
  }

  std::error_code resolve_addr(const NetAddress* src, const NetAddress& dst,
                               int timeout_ms) override {
    sockaddr* s = src != nullptr ? const_cast<sockaddr*>(src->sockaddr_ptr()) : nullptr;
    return ::rdma_resolve_addr(id(), s, const_cast<sockaddr*>(dst.sockaddr_ptr()), timeout_ms) == 0
               ? std::error_code{}
               : cm_errno();
  }

  std::error_code resolve_route(int timeout_ms) override {
    return ::rdma_resolve_route(id(), timeout_ms) == 0 ? std::error_code{} : cm_errno();
  }

  Device* device() noexcept override {
    ibv_context* ctx = id()->verbs;
    if (ctx == nullptr) return nullptr;
    if (device_ && device_->context() == ctx) return device_.get();
    try {
      std::error_code ec;
      // librdmacm owns the context (it stays open for the process).
      auto dev = VerbsDevice::open(std::make_shared<ContextRef>(ctx, /*owned=*/false), ec);
      if (!dev) return nullptr;
      if (device_) retired_.push_back(std::move(device_));  // keep handed-out pointers valid
      device_ = std::move(dev);
    } catch (...) {
      return nullptr;
    }
    return device_.get();
  }

  std::uint8_t port_num() const noexcept override { return ref_->id->port_num; }

  std::unique_ptr<QueuePair> create_qp(ProtectionDomain& pd, const QpInit& init,
                                       std::error_code& ec) override {
    auto* vpd = dynamic_cast<VerbsPd*>(&pd);
    if (vpd == nullptr || id()->verbs == nullptr) {
      SIPHON_LOG(rdma, 1,
                 "verbs: CmId::create_qp needs a verbs PD and an id with a device (bind or "
                 "resolve the address first)");
      ec = errc::invalid_argument;
      return nullptr;
    }
    if (!user_managed()) return create_rc_qp(vpd->ref(), init, ref_, false, ec);
    if (ref_->qp != nullptr || id()->qp != nullptr) {
      SIPHON_LOG(rdma, 1, "verbs: create_qp: the rdma_cm id already has a QP");
      ec = errc::invalid_argument;
      return nullptr;
    }
    // The path of this connection: the source GID for the local address in
    // use (or the pinned one), SL and MTU cap from the options.
    Device* dev = device();
    const NetAddress local = local_address();
    VerbsPath path;
    std::string why;
    if (dev == nullptr) {
      ec = errc::no_device;
      SIPHON_LOG(rdma, 1, "verbs: create_qp: cannot query the rdma_cm id's device");
      return nullptr;
    }
    if (auto e = resolve_path(*dev, port_num(), local, *options_, path, why)) {
      SIPHON_LOG(rdma, 1, "verbs: no path for the rdma_cm connection from {}: {}",
                 local.to_string(), why);
      ec = e;
      return nullptr;
    }
    auto qp = create_rc_qp(vpd->ref(), init, ref_, true, ec);
    if (!qp) return nullptr;
    ref_->path = std::move(path);
    // INIT now, as rdma_create_qp does, so receives can be posted before
    // the connection is made.
    if (auto e = cm_transition(*ref_, IBV_QPS_INIT, "INIT", why, [](ibv_qp_attr&, int&) {})) {
      SIPHON_LOG(rdma, 1, "verbs: create_qp: {}", why);
      ref_->path.reset();
      ec = e;
      return nullptr;  // the QueuePair destroys the QP and clears ref_->qp
    }
    ec.clear();
    return qp;
  }

  std::error_code connect(const ConnParam& param) override {
    if (auto ec = check_param(param, CmPrivateData::connect)) return ec;
    rdma_conn_param c = to_rdma(param);
    if (ref_->qp != nullptr) {  // user-managed: announce it; RTR/RTS on CONNECT_RESPONSE
      c.qp_num = ref_->qp->qp_num;
      c.srq = ref_->qp->srq != nullptr ? 1 : 0;
    }
    return ::rdma_connect(id(), &c) == 0 ? std::error_code{} : cm_errno();
  }

  std::error_code accept(const ConnParam& param) override {
    if (auto ec = check_param(param, CmPrivateData::accept)) return ec;
    rdma_conn_param c = to_rdma(param);
    if (ref_->qp != nullptr) {
      std::string why;
      if (auto ec = ready_user_qp(*ref_, param.responder_resources, param.initiator_depth, why)) {
        SIPHON_LOG(rdma, 1, "verbs: rejecting the connection from {}: {}",
                   peer_address().to_string(), why);
        ::rdma_reject(id(), nullptr, 0);
        return ec;
      }
      c.qp_num = ref_->qp->qp_num;
      c.srq = ref_->qp->srq != nullptr ? 1 : 0;
    }
    if (::rdma_accept(id(), &c) == 0) return {};
    const auto ec = cm_errno();
    qp_to_err(*ref_);
    return ec;
  }

  std::error_code reject(std::span<const std::uint8_t> private_data) override {
    if (private_data.size() > max_private_data(CmPrivateData::reject)) return errc::invalid_argument;
    const void* data = private_data.empty() ? nullptr : private_data.data();
    return ::rdma_reject(id(), data, static_cast<std::uint8_t>(private_data.size())) == 0
               ? std::error_code{}
               : cm_errno();
  }

  std::error_code disconnect() override {
    qp_to_err(*ref_);  // as rdma_disconnect does for a QP it owns
    return ::rdma_disconnect(id()) == 0 ? std::error_code{} : cm_errno();
  }

  // rdma_set_option: the TOS byte (RoCEv2 traffic class) and the ACK
  // timeout. librdmacm has no per-id service-level option; the provider
  // writes the service level into the QP's path itself (user-managed QPs,
  // IB and RoCE), else it is reported back as not applied.
  std::error_code set_qos(const CmQos& qos, std::string* not_applied) override {
    if (not_applied != nullptr) not_applied->clear();
    if (qos.traffic_class) {
      std::uint8_t tos = *qos.traffic_class;
      if (::rdma_set_option(id(), RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos) != 0) {
        const auto ec = cm_errno();
        SIPHON_LOG(rdma, 1, "verbs: rdma_set_option(TOS {}) failed: {}", tos, ec.message());
        return ec;
      }
    }
    std::string missing;
    if (qos.ack_timeout) {
      // Older kernels lack the option: the connection keeps rdma-cm's
      // default timeout, which is reported rather than failing it.
      std::uint8_t t = *qos.ack_timeout;
      if (::rdma_set_option(id(), RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof t) != 0)
        missing = "ack_timeout";
    }
    if (qos.service_level) {
      if (*qos.service_level > 15) return errc::invalid_argument;
      // Used at RTR by user-managed QPs (the id may not know its device yet).
      ref_->sl = *qos.service_level;
      if (id()->verbs != nullptr && !user_managed())
        missing += missing.empty() ? "service_level" : ", service_level";
    }
    if (not_applied != nullptr) *not_applied = std::move(missing);
    return {};
  }

  NetAddress local_address() const override {
    const sockaddr* sa = ::rdma_get_local_addr(ref_->id);
    return NetAddress::from_sockaddr(sa, sockaddr_len_of(sa));
  }

  NetAddress peer_address() const override {
    const sockaddr* sa = ::rdma_get_peer_addr(ref_->id);
    return NetAddress::from_sockaddr(sa, sockaddr_len_of(sa));
  }

  const IdRef& ref() const noexcept { return *ref_; }

 private:
  rdma_cm_id* id() const noexcept { return ref_->id; }
  // IB and RoCE: the provider moves the QP itself (user-managed QP).
  bool user_managed() const noexcept {
    return id()->verbs != nullptr && id()->verbs->device->transport_type == IBV_TRANSPORT_IB;
  }

  std::shared_ptr<IdRef> ref_;
  std::shared_ptr<const VerbsPathOptions> options_;
  std::unique_ptr<VerbsDevice> device_;
  std::vector<std::unique_ptr<VerbsDevice>> retired_;
};

// --------------------------------------------------------- event channel

namespace {

class VerbsEventChannel final : public EventChannel {
 public:
  VerbsEventChannel(std::shared_ptr<ChannelRef> ch,
                    std::shared_ptr<const VerbsPathOptions> options) noexcept
      : ch_(std::move(ch)),
        options_(std::move(options)),
        tos_(static_cast<std::uint8_t>(options_->dscp << 2)) {}

  int fd() const noexcept override { return ch_->channel->fd; }

  std::unique_ptr<CmId> create_id(std::error_code& ec) override {
    auto ref = std::make_shared<IdRef>(ch_);
    if (::rdma_create_id(ch_->channel, &ref->id, ref.get(), RDMA_PS_TCP) != 0) {
      ref->id = nullptr;
      ec = cm_errno();
      SIPHON_LOG(rdma, 1, "verbs: rdma_create_id failed: {}", std::strerror(errno));
      return nullptr;
    }
    apply_tos(ref->id);
    ec.clear();
    return std::make_unique<VerbsCmId>(std::move(ref), options_);
  }

  bool get_event(CmEvent& out) override {
    for (;;) {
      EventAck ack;
      if (::rdma_get_cm_event(ch_->channel, &ack.ev) != 0) {
        ack.ev = nullptr;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          SIPHON_LOG(rdma, 1, "verbs: rdma_get_cm_event failed: {}", std::strerror(errno));
        return false;
      }
      const rdma_cm_event& ev = *ack.ev;
      const int raw = ev.event;
      if (raw == RDMA_CM_EVENT_CONNECT_REQUEST) {
        if (take_connect_request(ev, out)) return true;
        continue;
      }
      auto* ref = static_cast<IdRef*>(ev.id != nullptr ? ev.id->context : nullptr);
      if (ref == nullptr || ref->owner == nullptr) {
        SIPHON_LOG(rdma, 5, "verbs: dropping {} for an id that is being destroyed",
                   ::rdma_event_str(ev.event));
        continue;
      }
      std::optional<CmEventType> type = cm_event_from_rdma(raw);
      std::error_code status = type ? cm_event_error(*type, ev.status) : std::error_code{};
      if (raw == RDMA_CM_EVENT_CONNECT_RESPONSE) {
        // Every id's QP is user-managed (or absent): RTR and RTS with the
        // selected path, then the RTU (rdma_establish).
        std::string why;
        if (ref->qp != nullptr) {
          if (auto ec = ready_user_qp(*ref, std::nullopt, std::nullopt, why)) {
            SIPHON_LOG(rdma, 1, "verbs: rejecting the connection to {}: {}",
                       ref->owner->peer_address().to_string(), why);
            ::rdma_reject(ev.id, nullptr, 0);
            type = CmEventType::connect_error;
            status = ec;
          }
        }
        if (!status) {
          if (::rdma_establish(ev.id) == 0) {
            type = CmEventType::established;
          } else {
            type = CmEventType::connect_error;
            status = cm_errno();
            qp_to_err(*ref);
          }
        }
      }
      if (raw == RDMA_CM_EVENT_REJECTED || raw == RDMA_CM_EVENT_UNREACHABLE ||
          raw == RDMA_CM_EVENT_CONNECT_ERROR)
        qp_to_err(*ref);  // as librdmacm does for a QP it owns
      if (!type) {  // multicast, address change: not part of the seam
        SIPHON_LOG(rdma, 5, "verbs: ignoring rdma_cm event {} (status {})",
                   ::rdma_event_str(ev.event), ev.status);
        continue;
      }
      if (*type == CmEventType::device_removal)
        SIPHON_LOG(rdma, 1, "verbs: RDMA device removed under an rdma_cm id");
      out = CmEvent{};
      out.type = *type;
      out.id = ref->owner;
      out.status = status;
      if (*type == CmEventType::established || *type == CmEventType::rejected)
        copy_private_data(ev, out.private_data);
      return true;
    }
  }

 private:
  static void copy_private_data(const rdma_cm_event& ev, std::vector<std::uint8_t>& out) {
    const auto* p = static_cast<const std::uint8_t*>(ev.param.conn.private_data);
    // librdmacm never reports more than RDMA_MAX_PRIVATE_DATA (256).
    const std::size_t n = std::min<std::size_t>(ev.param.conn.private_data_len, 256);
    if (p != nullptr && n != 0) out.assign(p, p + n);
  }

  // Wraps the new id of a connect request. False when the event was dropped.
  bool take_connect_request(const rdma_cm_event& ev, CmEvent& out) {
    rdma_cm_id* new_id = ev.id;  // inherits the listener's context until re-pointed
    auto* listener = static_cast<IdRef*>(ev.listen_id != nullptr ? ev.listen_id->context : nullptr);
    std::shared_ptr<IdRef> ref;
    try {
      ref = std::make_shared<IdRef>(ch_);
    } catch (...) {
      ::rdma_reject(new_id, nullptr, 0);
      ::rdma_destroy_id(new_id);  // its own event is the listener's: no wait
      throw;
    }
    ref->id = new_id;
    new_id->context = ref.get();
    if (listener == nullptr || listener->owner == nullptr) {
      SIPHON_LOG(rdma, 5, "verbs: rejecting a connect request on a listener being destroyed");
      ::rdma_reject(new_id, nullptr, 0);
      return false;  // `ref` destroys the id
    }
    apply_tos(new_id);
    out = CmEvent{};
    out.type = CmEventType::connect_request;
    out.id = listener->owner;
    out.new_id = std::make_unique<VerbsCmId>(std::move(ref), options_);
    copy_private_data(ev, out.private_data);
    out.param.private_data = out.private_data;
    out.param.responder_resources = ev.param.conn.responder_resources;
    out.param.initiator_depth = ev.param.conn.initiator_depth;
    out.param.retry_count = ev.param.conn.retry_count;
    out.param.rnr_retry_count = ev.param.conn.rnr_retry_count;
    return true;
  }

  void apply_tos(rdma_cm_id* id) const noexcept {
    if (!tos_) return;
    std::uint8_t tos = *tos_;
    if (::rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)) != 0)
      SIPHON_LOG(rdma, 5, "verbs: rdma_set_option(TOS {}) failed: {}", tos, std::strerror(errno));
  }

  std::shared_ptr<ChannelRef> ch_;
  std::shared_ptr<const VerbsPathOptions> options_;
  std::optional<std::uint8_t> tos_;
};

}  // namespace

std::unique_ptr<EventChannel> make_event_channel(std::shared_ptr<ChannelRef> channel,
                                                 const VerbsPathOptions& options) {
  return std::make_unique<VerbsEventChannel>(
      std::move(channel), std::make_shared<const VerbsPathOptions>(options));
}

}  // namespace siphon::rdma::verbs::detail

namespace siphon::rdma::verbs {

bool applied_path(const CmId& id, CmPathReport& out) {
  const auto* v = dynamic_cast<const detail::VerbsCmId*>(&id);
  if (v == nullptr || !v->ref().applied) return false;
  out = *v->ref().applied;
  return true;
}

}  // namespace siphon::rdma::verbs
