// Internals of the verbs provider, shared by its .cc files. Not part of the
// layer's interface (include only from rdma/verbs/*.cc).
//
// Ownership is structural. Every verbs object holds a shared reference to
// what it was created from, so the C handles are destroyed in a safe order
// whatever order the caller drops the C++ objects in:
//
//   MemoryRegion ---> PdRef ---> ContextRef          (MR before PD before context)
//   SharedRecvQueue -> SrqRef --> PdRef
//   CompletionQueue -> CqRef ---> ContextRef         (events acked, CQ, then its channel)
//   QueuePair ------> PdRef, CqRef x2, SrqRef, [IdRef] (QP before CQ/SRQ/PD)
//   CmId -----------> IdRef ----> ChannelRef         (cm id before its event channel;
//                                                    its QP is destroyed first)
//
// A ContextRef either owns its ibv_context (opened with ibv_open_device) or
// borrows one of librdmacm's (rdma_get_devices / rdma_cm_id::verbs), which
// librdmacm keeps open for the life of the process.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "rdma/provider.h"
#include "rdma/verbs/verbs_provider.h"

namespace siphon::rdma::verbs::detail {

// ------------------------------------------------------------ conversions

ibv_mtu to_ibv(Mtu m) noexcept;
Mtu mtu_from_ibv(int m) noexcept;
ibv_qp_state to_ibv(QpState s) noexcept;
QpState qp_state_from_ibv(int s) noexcept;
PortState port_state_from_ibv(int s) noexcept;
LinkLayer link_layer_from_ibv(int l) noexcept;
GidType gid_type_from_ibv(std::uint32_t t, LinkLayer link) noexcept;
// errno of a failed setup call -> error (0 becomes io_error, never success).
std::error_code setup_error(int err) noexcept;

// ----------------------------------------------------------------- handles

struct ContextRef {
  ContextRef(ibv_context* c, bool own) noexcept : ctx(c), owned(own) {}
  ContextRef(const ContextRef&) = delete;
  ContextRef& operator=(const ContextRef&) = delete;
  ~ContextRef();
  ibv_context* ctx;
  bool owned;
};

struct PdRef {
  PdRef(std::shared_ptr<ContextRef> c, ibv_pd* p) noexcept : context(std::move(c)), pd(p) {}
  PdRef(const PdRef&) = delete;
  PdRef& operator=(const PdRef&) = delete;
  ~PdRef();
  std::shared_ptr<ContextRef> context;
  ibv_pd* pd;
};

struct CqRef {
  explicit CqRef(std::shared_ptr<ContextRef> c) noexcept : context(std::move(c)) {}
  CqRef(const CqRef&) = delete;
  CqRef& operator=(const CqRef&) = delete;
  ~CqRef();  // acks outstanding events, destroys the CQ, then the channel
  std::shared_ptr<ContextRef> context;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  unsigned unacked = 0;  // events taken with ibv_get_cq_event, not yet acked
};

struct SrqRef {
  explicit SrqRef(std::shared_ptr<PdRef> p) noexcept : pd(std::move(p)) {}
  SrqRef(const SrqRef&) = delete;
  SrqRef& operator=(const SrqRef&) = delete;
  ~SrqRef();
  std::shared_ptr<PdRef> pd;
  ibv_srq* srq = nullptr;
};

struct ChannelRef {
  explicit ChannelRef(rdma_event_channel* c) noexcept : channel(c) {}
  ChannelRef(const ChannelRef&) = delete;
  ChannelRef& operator=(const ChannelRef&) = delete;
  ~ChannelRef();
  rdma_event_channel* channel;
};

class VerbsCmId;

// One rdma_cm_id. rdma_cm_id::context points here (never at the CmId
// object), so an event for an id whose CmId is gone is recognised and
// dropped while a QP still keeps the id alive.
//
// On IB and RoCE ports the id's QP is user-managed (librdmacm's flow for a
// QP it does not own): created with ibv_create_qp, moved through INIT, RTR
// and RTS by the provider with rdma_init_qp_attr plus the selected path
// (cm.cc), and announced with conn_param.qp_num. `qp` is that QP while its
// QueuePair lives; `path` is the selection for the connection.
struct IdRef {
  explicit IdRef(std::shared_ptr<ChannelRef> c) noexcept : channel(std::move(c)) {}
  IdRef(const IdRef&) = delete;
  IdRef& operator=(const IdRef&) = delete;
  ~IdRef();  // rdma_destroy_qp (if the id still has one), then rdma_destroy_id
  std::shared_ptr<ChannelRef> channel;
  rdma_cm_id* id = nullptr;
  VerbsCmId* owner = nullptr;
  ibv_qp* qp = nullptr;                // the user-managed QP (not id->qp)
  std::optional<VerbsPath> path;       // set with `qp`
  std::optional<CmPathReport> applied; // after RTR
  std::optional<std::uint8_t> sl;      // CmId::set_qos: overrides path->sl
};

// ----------------------------------------------------------------- objects

class VerbsDevice final : public Device {
 public:
  // Queries the attributes; nullptr and `ec` when that fails.
  static std::unique_ptr<VerbsDevice> open(std::shared_ptr<ContextRef> ctx, std::error_code& ec);

  const DeviceAttr& attr() const noexcept override { return attr_; }
  std::error_code query_port(std::uint8_t port, PortAttr& out) const override;
  std::error_code query_gids(std::uint8_t port, std::vector<GidEntry>& out) const override;
  std::unique_ptr<ProtectionDomain> alloc_pd(std::error_code& ec) override;
  std::unique_ptr<CompletionQueue> create_cq(std::uint32_t cqe, std::error_code& ec) override;

  ibv_context* context() const noexcept { return ctx_->ctx; }

 private:
  VerbsDevice(std::shared_ptr<ContextRef> ctx, DeviceAttr attr)
      : ctx_(std::move(ctx)), attr_(std::move(attr)) {}
  std::shared_ptr<ContextRef> ctx_;
  DeviceAttr attr_;
};

class VerbsPd final : public ProtectionDomain {
 public:
  explicit VerbsPd(std::shared_ptr<PdRef> pd) noexcept : pd_(std::move(pd)) {}
  std::unique_ptr<MemoryRegion> reg_mr(void* addr, std::size_t len, std::uint32_t access,
                                       std::error_code& ec) override;
  std::unique_ptr<SharedReceiveQueue> create_srq(const SrqInit& init, std::error_code& ec) override;
  std::unique_ptr<QueuePair> create_qp(const QpInit& init, std::error_code& ec) override;
  std::unique_ptr<MemoryWindow> alloc_mw(std::error_code& ec) override;
  const std::shared_ptr<PdRef>& ref() const noexcept { return pd_; }

 private:
  std::shared_ptr<PdRef> pd_;
};

class VerbsMr final : public MemoryRegion {
 public:
  VerbsMr(std::shared_ptr<PdRef> pd, ibv_mr* mr, std::uint32_t access) noexcept
      : pd_(std::move(pd)), mr_(mr), access_(access) {}
  VerbsMr(const VerbsMr&) = delete;
  VerbsMr& operator=(const VerbsMr&) = delete;
  ~VerbsMr() override;
  void* addr() const noexcept override { return mr_->addr; }
  std::size_t length() const noexcept override { return mr_->length; }
  std::uint32_t lkey() const noexcept override { return mr_->lkey; }
  std::uint32_t rkey() const noexcept override { return mr_->rkey; }
  std::uint32_t access() const noexcept override { return access_; }
  ibv_mr* raw() const noexcept { return mr_; }

 private:
  std::shared_ptr<PdRef> pd_;
  ibv_mr* mr_;
  std::uint32_t access_;
};

// A type-2 memory window (ibv_alloc_mw(pd, IBV_MW_TYPE_2)). ibv_post_send
// does not update ibv_mw::rkey for a bind WR (ibv_bind_mw does, for type 1);
// VerbsQp::post_send stores the bind's rkey there once the WR is posted, as
// the next bind's "current rkey" (rxe checks it).
class VerbsMw final : public MemoryWindow {
 public:
  VerbsMw(std::shared_ptr<PdRef> pd, ibv_mw* mw) noexcept : pd_(std::move(pd)), mw_(mw) {}
  VerbsMw(const VerbsMw&) = delete;
  VerbsMw& operator=(const VerbsMw&) = delete;
  ~VerbsMw() override;  // ibv_dealloc_mw: a bound window is invalidated
  std::uint32_t rkey() const noexcept override { return mw_->rkey; }
  ibv_mw* raw() const noexcept { return mw_; }
  ibv_pd* pd() const noexcept { return pd_->pd; }

 private:
  std::shared_ptr<PdRef> pd_;
  ibv_mw* mw_;
};

class VerbsCq final : public CompletionQueue {
 public:
  explicit VerbsCq(std::shared_ptr<CqRef> cq) noexcept : cq_(std::move(cq)) {}
  std::size_t poll(std::span<Wc> out) noexcept override;
  std::error_code arm(bool solicited_only) noexcept override;
  int channel_fd() const noexcept override { return cq_->channel->fd; }
  std::size_t consume_events() noexcept override;
  std::uint32_t capacity() const noexcept override {
    return static_cast<std::uint32_t>(cq_->cq->cqe);
  }
  const std::shared_ptr<CqRef>& ref() const noexcept { return cq_; }

 private:
  std::shared_ptr<CqRef> cq_;
};

class VerbsSrq final : public SharedReceiveQueue {
 public:
  VerbsSrq(std::shared_ptr<SrqRef> srq, std::uint32_t max_wr, std::uint32_t max_sge) noexcept
      : srq_(std::move(srq)), max_wr_(max_wr), max_sge_(max_sge) {}
  std::error_code post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept override;
  std::uint32_t max_wr() const noexcept override { return max_wr_; }
  const std::shared_ptr<SrqRef>& ref() const noexcept { return srq_; }

 private:
  std::shared_ptr<SrqRef> srq_;
  std::uint32_t max_wr_;
  std::uint32_t max_sge_;
};

// An RC QP, created on a PD (destroyed with ibv_destroy_qp) or on an rdma_cm
// id (owned by the id: destroyed with rdma_destroy_qp, before the id).
class VerbsQp final : public QueuePair {
 public:
  struct Refs {
    std::shared_ptr<PdRef> pd;
    std::shared_ptr<CqRef> send_cq, recv_cq;
    std::shared_ptr<SrqRef> srq;
    std::shared_ptr<IdRef> id;  // set for rdma_cm QPs
  };
  VerbsQp(Refs refs, ibv_qp* qp, const QpCaps& caps) noexcept
      : refs_(std::move(refs)), qp_(qp), caps_(caps) {}
  VerbsQp(const VerbsQp&) = delete;
  VerbsQp& operator=(const VerbsQp&) = delete;
  ~VerbsQp() override;

  std::uint32_t qp_num() const noexcept override { return qp_->qp_num; }
  ibv_qp* raw() const noexcept { return qp_; }
  QpState state() const noexcept override;
  const QpCaps& caps() const noexcept override { return caps_; }
  std::error_code modify(const QpAttr& attr, std::uint32_t mask) noexcept override;
  std::error_code query_path(QpPath& out) const override;
  std::error_code post_send(std::span<const SendWr> wrs, std::size_t* bad) noexcept override;
  std::error_code post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept override;

 private:
  Refs refs_;  // released after the QP is destroyed (members go after the body)
  ibv_qp* qp_;
  QpCaps caps_;
};

// Creates an RC QP on `pd`: with ibv_create_qp, or with rdma_create_qp when
// `id` is set and `user_managed` is not (then ibv_create_qp too, and the QP
// is recorded in id->qp for the id's connection). Reads the granted caps back.
std::unique_ptr<QueuePair> create_rc_qp(const std::shared_ptr<PdRef>& pd, const QpInit& init,
                                        const std::shared_ptr<IdRef>& id, bool user_managed,
                                        std::error_code& ec);

// The rdma_cm event channel; `options.dscp` is the TOS of every id it
// creates, and `options` the path of every connection's QP.
std::unique_ptr<EventChannel> make_event_channel(std::shared_ptr<ChannelRef> channel,
                                                 const VerbsPathOptions& options);

}  // namespace siphon::rdma::verbs::detail
