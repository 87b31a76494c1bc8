// THE SEAM between the RDMA stack and an RDMA implementation
// (docs/architecture.md §1, §4). Two providers implement it:
//   rdma/verbs  real hardware (and kernel Soft-RoCE) through libibverbs and
//               librdmacm -- the only code that includes rdma-core headers;
//   rdma/soft   the software RC fabric: a user-space RC HCA whose "wire" is a
//               stream socket, for hosts without RDMA.
// The RDMA stack (rdma/transport) uses only this header and must not be able
// to tell the providers apart except by speed.
//
// Shapes follow verbs closely: work requests and completions are plain
// structs like ibv_send_wr / ibv_wc, and the data path takes batches (a span
// of WRs, poll N completions) so one virtual call is amortised over a batch.
//
// Errors: data-path calls return std::error_code (siphon category) and never
// throw. Setup calls (open, create) also return error codes; the stack turns
// them into SetupError with a remedy. Nothing here aborts on bad input.
//
// Threading: a Device and the objects created from it may be used from any
// thread, but a QP, CQ or SRQ must not be used concurrently from two threads
// (the stack gives each to one worker), as with verbs without locking.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "msgr/base/address.h"

namespace siphon::rdma {

// ---------------------------------------------------------------- data path

// bind_mw and local_inv are memory-window operations (type-2 windows, see
// MemoryWindow): they execute in send-queue order like the others and
// complete with WcOpcode::bind_mw / local_inv.
enum class Opcode : std::uint8_t {
  send, send_with_imm, rdma_write, rdma_write_with_imm, rdma_read, bind_mw, local_inv,
};

// Send flags (bit values are Siphon's, not ibv's).
enum SendFlags : std::uint32_t {
  kSignaled = 1u << 0,  // generate a completion (else only on error)
  kInline = 1u << 1,    // copy the payload at post time (<= max_inline_data)
  kFence = 1u << 2,     // wait for prior RDMA READs to complete
  kSolicited = 1u << 3,
};

// Memory access rights (same bit values as ibv_access_flags).
enum Access : std::uint32_t {
  kLocalWrite = 1u << 0,
  kRemoteWrite = 1u << 1,
  kRemoteRead = 1u << 2,
  kMwBind = 1u << 4,  // IBV_ACCESS_MW_BIND: memory windows may be bound to the MR
};

class MemoryWindow;
class MemoryRegion;

// The window of an Opcode::bind_mw work request. The window covers
// [addr, addr + length) of `mr` (which must be in the QP's PD and registered
// with kMwBind) and grants `access` (kRemoteRead and/or kRemoteWrite; remote
// write needs kLocalWrite on the MR). The window becomes usable with the
// SendWr's `rkey` (next_rkey(mw->rkey())) by the peer of THIS QP only.
struct MwBind {
  MemoryWindow* mw = nullptr;
  const MemoryRegion* mr = nullptr;
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
  std::uint32_t access = 0;
};

// ibv_inc_rkey: the same window index with the next 8-bit key, the rkey a
// (re)bind gives a window so that rkeys of its earlier binds stay dead.
constexpr std::uint32_t next_rkey(std::uint32_t rkey) noexcept {
  return (rkey & 0xFFFFFF00u) | ((rkey + 1u) & 0xFFu);
}

struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

struct SendWr {
  std::uint64_t wr_id = 0;
  Opcode opcode = Opcode::send;
  std::uint32_t flags = 0;        // SendFlags
  const Sge* sg_list = nullptr;
  std::uint32_t num_sge = 0;
  std::uint32_t imm_data = 0;     // host byte order; providers convert
  std::uint64_t remote_addr = 0;  // RDMA_WRITE / RDMA_READ
  // RDMA_WRITE / RDMA_READ: the remote key; bind_mw: the window's new rkey
  // (next_rkey(bind.mw->rkey())); local_inv: the rkey to invalidate.
  std::uint32_t rkey = 0;
  MwBind bind;                    // bind_mw only
};

struct RecvWr {
  std::uint64_t wr_id = 0;
  const Sge* sg_list = nullptr;
  std::uint32_t num_sge = 0;
};

enum class WcStatus : std::uint8_t {
  success,
  local_length_error,
  local_qp_operation_error,
  local_protection_error,
  flushed,                 // IBV_WC_WR_FLUSH_ERR
  bad_response,
  remote_invalid_request,
  remote_access_error,
  remote_operation_error,
  retry_exceeded,          // IBV_WC_RETRY_EXC_ERR
  rnr_retry_exceeded,      // IBV_WC_RNR_RETRY_EXC_ERR
  general_error,
};
std::string_view to_string(WcStatus s) noexcept;
// errc value for a completion status (success -> empty error_code).
std::error_code to_error(WcStatus s) noexcept;

enum class WcOpcode : std::uint8_t {
  send, rdma_write, rdma_read, recv, recv_rdma_with_imm, bind_mw, local_inv,
};

struct Wc {
  std::uint64_t wr_id = 0;
  WcStatus status = WcStatus::success;
  WcOpcode opcode = WcOpcode::send;
  std::uint32_t byte_len = 0;     // receives: bytes placed
  std::uint32_t imm_data = 0;     // host byte order, valid when has_imm
  bool has_imm = false;
  std::uint32_t qp_num = 0;       // the local QP the completion belongs to
  std::uint32_t vendor_err = 0;
};

// ------------------------------------------------------------- attributes

enum class Mtu : std::uint8_t { mtu256 = 1, mtu512, mtu1024, mtu2048, mtu4096 };
constexpr std::uint32_t mtu_bytes(Mtu m) noexcept { return 128u << static_cast<unsigned>(m); }

enum class PortState : std::uint8_t { nop, down, init, armed, active, active_defer };
enum class LinkLayer : std::uint8_t { unspecified, infiniband, ethernet };
enum class GidType : std::uint8_t { ib, roce_v1, roce_v2 };

struct DeviceAttr {
  std::string name;        // "mlx5_0", "rxe0", "soft0"
  std::uint64_t node_guid = 0;
  std::string fw_ver;
  std::uint32_t vendor_id = 0, vendor_part_id = 0;
  std::uint64_t max_mr_size = 0;
  std::uint32_t max_qp = 0, max_qp_wr = 0, max_sge = 0, max_cq = 0, max_cqe = 0,
                max_mr = 0, max_pd = 0, max_srq = 0, max_srq_wr = 0, max_srq_sge = 0,
                max_qp_rd_atom = 0, max_qp_init_rd_atom = 0;
  std::uint32_t max_mw = 0;
  // Type-2 memory windows (ProtectionDomain::alloc_mw, Opcode::bind_mw /
  // local_inv) work on this device. False: alloc_mw fails with not_supported.
  bool mw_type2 = false;
  std::uint8_t phys_port_cnt = 0;
};

struct PortAttr {
  PortState state = PortState::nop;
  Mtu max_mtu = Mtu::mtu1024;
  Mtu active_mtu = Mtu::mtu1024;
  LinkLayer link_layer = LinkLayer::unspecified;
  std::uint16_t lid = 0;
  std::uint32_t gid_tbl_len = 0;
};

using Gid = std::array<std::uint8_t, 16>;
// "fe80:0000:0000:0000:5054:00ff:fe12:3456": eight groups of four hex
// digits, as ibv_devinfo -v prints GIDs (and as Ceph's options take them).
std::string to_string(const Gid& gid);

struct GidEntry {
  std::uint32_t index = 0;
  Gid gid{};
  GidType type = GidType::roce_v2;
  std::string netdev;  // the network interface the GID belongs to (may be empty)
};

// ------------------------------------------------------------------ objects

class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;  // deregisters
  virtual void* addr() const noexcept = 0;
  virtual std::size_t length() const noexcept = 0;
  virtual std::uint32_t lkey() const noexcept = 0;
  virtual std::uint32_t rkey() const noexcept = 0;
  virtual std::uint32_t access() const noexcept = 0;
};

// A type-2 memory window (IBV_MW_TYPE_2): a remote key onto part of an MR,
// bound by a work request (Opcode::bind_mw) to the QP that posted it. The
// responder honours its rkey only on requests arriving on that QP, within
// the bound range and rights, and only until it is invalidated
// (Opcode::local_inv on the same QP, or destroying the window); any other
// use completes at the requester with remote_access_error. A type-2 window
// must be invalidated before it is bound again. An MR cannot be deregistered
// on every device while windows are bound to it (rxe refuses): destroy or
// invalidate the windows first. The same goes for the QP a window is bound
// to: on rxe (Linux 6.1) a bound type-2 window holds a reference on its QP,
// and destroying the QP first blocks in the kernel for 50 s (then WARNs).
class MemoryWindow {
 public:
  virtual ~MemoryWindow() = default;  // deallocates; a bound window is invalidated
  // The rkey of the last bind posted successfully (before any: the rkey the
  // window was allocated with, which grants nothing). A bind WR's rkey is
  // next_rkey(rkey()); post_send records it here when it takes the WR.
  virtual std::uint32_t rkey() const noexcept = 0;
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Fills up to out.size() completions; returns how many (0 if none).
  virtual std::size_t poll(std::span<Wc> out) noexcept = 0;
  // Arms the CQ: the channel fd becomes readable at the next completion.
  virtual std::error_code arm(bool solicited_only = false) noexcept = 0;
  // The completion channel's fd (non-blocking), for an Asio descriptor.
  virtual int channel_fd() const noexcept = 0;
  // Consumes pending notifications after the fd became readable (acks them).
  // Returns how many were consumed; the CQ must be re-armed to get another.
  virtual std::size_t consume_events() noexcept = 0;
  virtual std::uint32_t capacity() const noexcept = 0;

  // Driven progress. A provider whose device does its own work (verbs) has
  // none: progress_fd() is -1 and the rest does nothing. The soft fabric's
  // driven engine (docs/rdma-provider.md) is run by the threads that poll
  // its CQs instead of a thread of its own:
  //  - attach_progress(true, kick, arg) makes the calling thread a driver
  //    (detach with false, on the same thread). While attached, poll() also
  //    runs the engine's pending work, and the provider calls kick(arg) on
  //    this thread when it queued work that only a driver pushes (a SEND
  //    posted from a handler): call progress() soon.
  //  - progress_fd() becomes readable when the engine has events (a peer's
  //    bytes, a timer); then call progress(true, false). Its readiness is an
  //    edge: call progress() every time it fires.
  //  - progress(io, before_sleep): one round. before_sleep: the caller is
  //    about to wait on its fds and poll no more (what would be polled is
  //    armed). Returns true when work is left: do not sleep, poll again.
  // Completions that progress() adds to this CQ raise no channel event for
  // the attached thread: it polls after every progress() call.
  virtual int progress_fd() const noexcept { return -1; }
  virtual void attach_progress(bool /*on*/, void (*/*kick*/)(void*), void* /*arg*/) noexcept {}
  virtual bool progress(bool /*io*/, bool /*before_sleep*/) noexcept { return false; }
};

struct SrqInit {
  std::uint32_t max_wr = 0;
  std::uint32_t max_sge = 1;
};

class SharedReceiveQueue {
 public:
  virtual ~SharedReceiveQueue() = default;
  // Posts receives in order; on error `*bad` is the index of the first WR
  // not posted.
  virtual std::error_code post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept = 0;
  virtual std::uint32_t max_wr() const noexcept = 0;  // actual, read back
};

struct QpCaps {
  std::uint32_t max_send_wr = 0;
  std::uint32_t max_recv_wr = 0;
  std::uint32_t max_send_sge = 1;
  std::uint32_t max_recv_sge = 1;
  std::uint32_t max_inline_data = 0;
};

struct QpInit {
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  SharedReceiveQueue* srq = nullptr;  // receives come from the SRQ when set
  QpCaps caps;                        // requested; actual caps read back
  bool sq_sig_all = false;
};

enum class QpState : std::uint8_t { reset, init, rtr, rts, sqd, sqe, err };
std::string_view to_string(QpState s) noexcept;

// Address vector for an RC QP's path (RoCE: GIDs).
struct AddressVector {
  Gid dgid{};
  std::uint8_t sgid_index = 0;
  std::uint8_t hop_limit = 64;
  std::uint8_t traffic_class = 0;  // DSCP << 2
  std::uint8_t sl = 0;
  std::uint32_t flow_label = 0;
  std::uint8_t port_num = 1;
  std::uint16_t dlid = 0;          // InfiniBand only
};

// Attributes for QueuePair::modify. `mask` says which are meant (QpAttrMask).
enum QpAttrMask : std::uint32_t {
  kAttrState = 1u << 0,
  kAttrAccessFlags = 1u << 1,
  kAttrPort = 1u << 2,
  kAttrPath = 1u << 3,          // av + path_mtu
  kAttrDestQpn = 1u << 4,
  kAttrRqPsn = 1u << 5,
  kAttrSqPsn = 1u << 6,
  kAttrMaxDestRdAtomic = 1u << 7,
  kAttrMaxRdAtomic = 1u << 8,
  kAttrMinRnrTimer = 1u << 9,
  kAttrTimeout = 1u << 10,
  kAttrRetryCnt = 1u << 11,
  kAttrRnrRetry = 1u << 12,
  kAttrPkeyIndex = 1u << 13,
};

struct QpAttr {
  QpState state = QpState::reset;
  std::uint32_t access_flags = 0;  // Access bits for remote operations
  std::uint8_t port_num = 1;
  std::uint16_t pkey_index = 0;
  AddressVector av;
  Mtu path_mtu = Mtu::mtu1024;
  std::uint32_t dest_qp_num = 0;
  std::uint32_t rq_psn = 0;
  std::uint32_t sq_psn = 0;
  std::uint8_t max_dest_rd_atomic = 1;
  std::uint8_t max_rd_atomic = 1;
  std::uint8_t min_rnr_timer = 12;
  std::uint8_t timeout = 14;
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;       // 7 = infinite on hardware; Siphon uses small values
};

// What a connected RC QP uses (QueuePair::query_path): the peer's QP number,
// the source and destination GIDs and the path MTU, as the provider applied
// them at RTR. For operators (`messenger dump`), not for the data path.
struct QpPath {
  std::uint32_t dest_qp_num = 0;
  Gid sgid{}, dgid{};
  Mtu path_mtu = Mtu::mtu1024;
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual std::uint32_t qp_num() const noexcept = 0;
  virtual QpState state() const noexcept = 0;
  // The capabilities actually granted (may exceed those requested).
  virtual const QpCaps& caps() const noexcept = 0;
  virtual std::error_code modify(const QpAttr& attr, std::uint32_t mask) noexcept = 0;
  // The path the QP was connected with (valid from RTR on; errc::invalid_qp_state
  // before). May make a system call (verbs: ibv_query_qp, ibv_query_gid): not
  // for the data path.
  virtual std::error_code query_path(QpPath& out) const = 0;
  // Posts in order; on error `*bad` is the index of the first WR not posted
  // (errc::queue_full when the send queue is full, invalid_qp_state before
  // RTS, invalid_argument for too many SGEs or an over-long inline payload).
  virtual std::error_code post_send(std::span<const SendWr> wrs, std::size_t* bad) noexcept = 0;
  virtual std::error_code post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept = 0;
};

class ProtectionDomain {
 public:
  virtual ~ProtectionDomain() = default;
  virtual std::unique_ptr<MemoryRegion> reg_mr(void* addr, std::size_t len, std::uint32_t access,
                                               std::error_code& ec) = 0;
  virtual std::unique_ptr<SharedReceiveQueue> create_srq(const SrqInit& init,
                                                         std::error_code& ec) = 0;
  // A type-2 memory window on this PD (unbound). errc::not_supported when
  // the device has none (DeviceAttr::mw_type2 false).
  virtual std::unique_ptr<MemoryWindow> alloc_mw(std::error_code& ec) = 0;
  // An RC QP in RESET, for out-of-band setups (connection parameters swapped
  // by other means and applied with modify()). QPs for rdma-cm connections
  // come from CmId::create_qp instead.
  virtual std::unique_ptr<QueuePair> create_qp(const QpInit& init, std::error_code& ec) = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceAttr& attr() const noexcept = 0;
  virtual std::error_code query_port(std::uint8_t port, PortAttr& out) const = 0;
  virtual std::error_code query_gids(std::uint8_t port, std::vector<GidEntry>& out) const = 0;
  virtual std::unique_ptr<ProtectionDomain> alloc_pd(std::error_code& ec) = 0;
  virtual std::unique_ptr<CompletionQueue> create_cq(std::uint32_t cqe, std::error_code& ec) = 0;
};

// ------------------------------------------------------ connection manager
// Shaped like librdmacm: ids on an event channel whose fd Asio can wait on.

enum class CmEventType : std::uint8_t {
  addr_resolved, addr_error, route_resolved, route_error,
  connect_request, connect_error, unreachable, rejected,
  established, disconnected, device_removal, timewait_exit,
};
std::string_view to_string(CmEventType t) noexcept;

struct ConnParam {
  std::vector<std::uint8_t> private_data;  // at most 56 bytes (RC connect)
  std::uint8_t responder_resources = 1;
  std::uint8_t initiator_depth = 1;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry_count = 7;
};

// Quality of service of one id's connection (CmId::set_qos), set before
// resolve_route on the active side and before accept on the passive side.
// Unset fields keep the provider's default.
struct CmQos {
  std::optional<std::uint8_t> traffic_class;  // the IP TOS byte: DSCP << 2 | ECN (RoCEv2)
  std::optional<std::uint8_t> service_level;  // SL of the QP's path (RoCE: 0-7, the 802.1p priority)
  std::optional<std::uint8_t> ack_timeout;    // local ACK timeout, 4.096 us x 2^n
};

class CmId;

struct CmEvent {
  CmEventType type = CmEventType::addr_error;
  CmId* id = nullptr;                 // the id the event is about
  std::unique_ptr<CmId> new_id;       // connect_request: the id for the new connection
  std::error_code status;             // for *_error, unreachable, rejected
  // connect_request, established, rejected: starts with the bytes the peer
  // sent, but may be longer. rdma_cm over IB/RoCE delivers the whole CM field
  // zero-padded (56 bytes for connect_request, 196 for established, 148 for
  // rejected): the sender's length does not cross the wire, so a protocol
  // carried in private data must encode its own length.
  std::vector<std::uint8_t> private_data;
  ConnParam param;                    // connect_request: the initiator's values
};

class CmId {
 public:
  virtual ~CmId() = default;  // destroys the id (and its QP if still owned here)
  virtual std::error_code bind(const NetAddress& addr) = 0;
  virtual std::error_code listen(int backlog) = 0;
  virtual std::error_code resolve_addr(const NetAddress* src, const NetAddress& dst,
                                       int timeout_ms) = 0;
  virtual std::error_code resolve_route(int timeout_ms) = 0;
  // The device the bound or resolved address belongs to (nullptr before).
  // PDs and CQs for this id's QP must come from this device.
  virtual Device* device() noexcept = 0;
  virtual std::uint8_t port_num() const noexcept = 0;
  // Creates the connection's RC QP; connect/accept move it through INIT, RTR
  // and RTS (as rdma_create_qp + rdma_connect do). The QP must not outlive
  // the id.
  virtual std::unique_ptr<QueuePair> create_qp(ProtectionDomain& pd, const QpInit& init,
                                               std::error_code& ec) = 0;
  virtual std::error_code connect(const ConnParam& param) = 0;
  virtual std::error_code accept(const ConnParam& param) = 0;
  virtual std::error_code reject(std::span<const std::uint8_t> private_data) = 0;
  virtual std::error_code disconnect() = 0;
  // Applies `qos` to this id's connection (see CmQos). A field the provider
  // cannot apply is reported in `*not_applied` (its name), not as an error.
  virtual std::error_code set_qos(const CmQos& qos, std::string* not_applied) = 0;
  virtual NetAddress local_address() const = 0;
  virtual NetAddress peer_address() const = 0;

  void* context = nullptr;  // owner's cookie, free for the caller to use
};

class EventChannel {
 public:
  virtual ~EventChannel() = default;
  virtual int fd() const noexcept = 0;  // readable while events are pending (non-blocking)
  virtual std::unique_ptr<CmId> create_id(std::error_code& ec) = 0;
  // Takes the next event; returns false when none is pending.
  virtual bool get_event(CmEvent& out) = 0;
};

// ---------------------------------------------------------------- provider

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string_view name() const noexcept = 0;  // "verbs", "soft"
  // True when completions are produced by a thread of this process (the soft
  // fabric's engine) rather than by an adapter: a thread busy-polling a CQ
  // then takes CPU from the thread that fills it, so the RDMA stack does not
  // spin by default (docs/rdma-transport.md, Polling).
  virtual bool completions_from_process_thread() const noexcept { return false; }
  // True when the provider's work runs on the threads that poll its CQs
  // (the soft fabric's driven engine, CompletionQueue::attach_progress): a
  // worker that sleeps then costs a wake-up on both ends of every exchange,
  // so the stack spins briefly by default (docs/rdma-transport.md, Polling).
  virtual bool progress_by_pollers() const noexcept { return false; }
  virtual std::vector<std::string> list_devices() = 0;
  // Opens a device by name. errc::no_device when the provider has none at all,
  // errc::device_not_found when others exist; `ec`'s message plus
  // list_devices() let the caller name the remedy.
  virtual std::unique_ptr<Device> open_device(std::string_view name, std::error_code& ec) = 0;
  virtual std::unique_ptr<EventChannel> create_event_channel(std::error_code& ec) = 0;
  // Called once a user has destroyed every object of a device that went
  // away (DEVICE_REMOVAL): the provider lets go of what it still holds of
  // that device on its own (the verbs provider: librdmacm's context of it,
  // so the kernel's unregistration can finish). Default: nothing.
  virtual void release_removed_devices() noexcept {}
};

// The device ms_async_rdma_device_name selects among `listed` (a provider's
// list_devices(), in any order): the named one, or the one whose name sorts
// first when the name is empty (Ceph takes ibv_get_device_list()'s first,
// which follows sysfs readdir order; a sorted rule gives the same answer to
// every caller and every boot). nullopt when there is none (no device, or the named one absent).
// The one rule for every caller: the RDMA stack, the verbs provider's
// open_device, and siphon-doctor over facts read from sysfs.
std::optional<std::string> choose_device(std::string_view configured, std::span<const std::string> listed);

}  // namespace siphon::rdma
