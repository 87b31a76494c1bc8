// RdmaConnection: connection management and teardown.
//
//   client:  resolving --ADDR_RESOLVED--> (resolve route) --ROUTE_RESOLVED-->
//            create QP, post receives, connect(private data) = connecting
//            --ESTABLISHED(peer's ConnectInfo)--> established
//   server:  CONNECT_REQUEST(peer's ConnectInfo) -> create QP, post
//            receives, accept(private data) = accepting --ESTABLISHED-->
//            established
//   any:     --error / REJECTED / DISCONNECTED / close()--> closing: QP to
//            ERR, every posted WR completes (flushed), then the QP and the
//            id are destroyed = closed. Nothing is destroyed while the
//            device may still touch its memory, and the worker never blocks.
#include <fmt/format.h>

#include <algorithm>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/transport/rdma_connection.h"

namespace siphon::rdma {

RdmaConnection::RdmaConnection(RdmaShared& shared, RdmaWorker& worker, std::unique_ptr<CmId> id,
                               bool client, NetAddress peer)
    : keep_shared_(shared.shared_from_this()),
      keep_worker_(worker.shared_from_this()),
      shared_(shared),
      worker_(worker),
      id_(std::move(id)),
      client_(client),
      peer_(std::move(peer)),
      state_(client ? State::resolving : State::accepting),
      stream_(shared.opts.common.frame_limits),
      bulk_(shared, worker.recv_cache(), worker.counters(), worker.io(), BulkPort{*this}) {
  shared_.connections.fetch_add(1, std::memory_order_relaxed);
  shared_.counters.connections_created.fetch_add(1, std::memory_order_relaxed);
}

RdmaConnection::~RdmaConnection() {
  release_device_objects();
  if (counted_active_) shared_.counters.connections_active.fetch_sub(1, std::memory_order_relaxed);
  shared_.connections.fetch_sub(1, std::memory_order_relaxed);
  shared_.refresh_gauges();
}

void RdmaConnection::release_device_objects() noexcept {
  // The windows bound for what we offered go before the QP they are bound
  // to (provider.h, MemoryWindow: rxe blocks 50 s destroying a QP that a
  // window still holds). The closing path stopped them already; this covers
  // the paths that skip it (a worker shut down mid-drain).
  bulk_.stop();
  if (qp_) {
    shared_.counters.qps_active.fetch_sub(1, std::memory_order_relaxed);
    qp_.reset();  // before the id that owns it, and before its buffers go back
  }
  if (id_) {
    {
      std::lock_guard lk(shared_.mu);
      shared_.by_id.erase(id_.get());
    }
    id_.reset();
  }
  for (auto& ctx : ctx_storage_)
    if (ctx->buf != nullptr) {
      (ctx->kind == WrCtx::Kind::send ? *shared_.send_pool : *shared_.recv_pool).put(ctx->buf);
      ctx->buf = nullptr;
    }
  bulk_.release_buffers();
  if (std::exchange(cq_reserved_, false)) worker_.release_cq(cq_entries_);
  release_srq_reservation();
}

void RdmaConnection::device_removed() {
  auto self = std::static_pointer_cast<RdmaConnection>(shared_from_this());
  const std::string why = fmt::format("the RDMA device {} was removed", shared_.device_name);
  if (open()) fault(make_error_code(errc::device_not_found), why);
  else fail_setup(make_error_code(errc::device_not_found), why);
  // Whatever the drain still waits for (flushes) is not coming from a device
  // that is gone: the QP and the id go now.
  if (state_ != State::closed) {
    state_ = State::closed;
    worker_.remove(this);
  }
  bulk_.stop();  // what we offered for READ: its windows and registrations are on the PD
  release_device_objects();
}

transport::Worker& RdmaConnection::worker() noexcept { return worker_; }

ConnectInfo RdmaConnection::my_info() const noexcept {
  ConnectInfo c;
  c.update_slots = kUpdateSlots;
  c.credits = shared_.window();
  if (worker_.srq() != nullptr) c.flags |= ConnectInfo::kFlagSrq;  // informational
  c.recv_buffer_size = static_cast<std::uint32_t>(shared_.opts.buffer_size);
  c.max_inline = max_inline_;
  c.max_frame = static_cast<std::uint32_t>(std::min<std::uint64_t>(shared_.opts.common.frame_limits.max_frame,
                                                                   UINT32_MAX));
  c.zero_copy_threshold = static_cast<std::uint32_t>(shared_.opts.zero_copy_threshold);
  c.max_read = shared_.max_read();
  return c;
}

std::error_code RdmaConnection::create_qp() {
  Device* dev = id_->device();
  if (dev == nullptr || dev->attr().name != shared_.attr.name) {
    const std::string on = dev != nullptr ? dev->attr().name : std::string("no RDMA device");
    SIPHON_LOG(rdma, 1, "{}: the address is on {}, but this stack uses {} (ms_async_rdma_device_name)",
               peer_.to_string(), on, shared_.attr.name);
    return errc::device_not_found;
  }
  const DeviceAttr& a = shared_.attr;
  QpInit init;
  init.send_cq = &worker_.cq();
  init.recv_cq = &worker_.cq();
  (void)a;
  init.caps.max_send_wr = shared_.sq_depth();
  init.caps.max_recv_wr = shared_.recvs_per_qp();
  init.caps.max_send_sge = 1;
  init.caps.max_recv_sge = 1;
  if (SharedReceiveQueue* srq = worker_.srq()) {
    // SRQ mode: the credits we grant are a reservation of receives already
    // posted on the worker's SRQ; admitting the connection takes them.
    init.srq = srq;
    init.caps.max_recv_wr = 0;
    init.caps.max_recv_sge = 0;
    const std::uint32_t need = shared_.recvs_per_qp();
    if (!worker_.reserve_srq(need)) {
      shared_.counters.srq_refusals.fetch_add(1, std::memory_order_relaxed);
      setup_why_ = fmt::format(
          "worker {}'s shared receive queue is fully reserved ({} of {} receives reserved; a connection "
          "needs {} = ms_async_rdma_credits + {}): raise ms_async_rdma_receive_queue_len (the SRQ depth "
          "per worker), lower ms_async_rdma_credits, or add workers (ms_async_op_threads)",
          worker_.index(), worker_.srq_reserved(), worker_.srq_posted(), need, kUpdateSlots);
      return errc::resource_exhausted;
    }
    srq_reserved_ = true;
  }
  init.caps.max_inline_data =
      static_cast<std::uint32_t>(std::min<std::size_t>(shared_.opts.inline_threshold, 0xFFFFFFFFu));
  cq_entries_ = shared_.cq_entries_per_qp();
  if (!worker_.reserve_cq(cq_entries_)) {
    setup_why_ = fmt::format(
        "worker {}'s completion queue is full ({} of {} entries reserved; a connection needs {}): "
        "raise ms_async_rdma_cq_depth or ms_async_rdma_max_connections (which size it; device max_cqe {}), "
        "add workers (ms_async_op_threads) or lower ms_async_rdma_send_queue_depth",
        worker_.index(), worker_.cq_reserved(), worker_.cq_capacity(), cq_entries_, a.max_cqe);
    return errc::resource_exhausted;
  }
  cq_reserved_ = true;
  std::error_code ec;
  qp_ = id_->create_qp(*shared_.pd, init, ec);
  if (!qp_) {  // some devices (rxe, iWARP) take no inline data: try without
    init.caps.max_inline_data = 0;
    qp_ = id_->create_qp(*shared_.pd, init, ec);
  }
  if (!qp_) return ec ? ec : make_error_code(errc::resource_exhausted);
  shared_.counters.qps_created.fetch_add(1, std::memory_order_relaxed);
  shared_.counters.qps_active.fetch_add(1, std::memory_order_relaxed);
  // One slot stays free for the drain marker (begin_drain).
  sq_depth_ = std::max<std::uint32_t>(qp_->caps().max_send_wr, 2) - 1;
  max_inline_ = qp_->caps().max_inline_data;
  local_ = id_->local_address();
  // Receive-side credit enforcement holds from the first receive; the
  // peer's grant is set when the connection is established.
  credits_.emplace(0, shared_.window());
  worker_.add_qp(std::static_pointer_cast<RdmaConnection>(shared_from_this()));
  return post_initial_receives();
}

ConnParam conn_param(const RdmaShared& s, const ConnectInfo& info) {
  ConnParam p;
  const auto b = info.encode();
  p.private_data.assign(b.begin(), b.end());
  const std::uint32_t rd = std::clamp<std::uint32_t>(s.attr.max_qp_rd_atom, 1, 16);
  p.responder_resources = static_cast<std::uint8_t>(rd);
  p.initiator_depth = static_cast<std::uint8_t>(
      std::clamp<std::uint32_t>(s.attr.max_qp_init_rd_atom, 1, 16));
  p.rnr_retry_count = s.opts.rnr_retry;
  p.retry_count = s.opts.retry_count;
  return p;
}

// ms_async_rdma_dscp (the whole TOS byte, as in Ceph), ms_async_rdma_sl and
// ms_async_rdma_timeout, on the id before its route is resolved (client) or
// before it accepts (server).
std::error_code RdmaConnection::apply_qos() {
  CmQos q;
  q.traffic_class = shared_.opts.dscp;
  q.service_level = shared_.opts.sl;
  q.ack_timeout = shared_.opts.ack_timeout;
  std::string not_applied;
  const auto ec = id_->set_qos(q, &not_applied);
  if (!ec && !not_applied.empty() && !shared_.qos_noted.exchange(true))
    SIPHON_LOG(rdma, 5, "{}: {} not applied by the {} provider (on RoCE the priority follows the traffic class)",
               shared_.attr.name, not_applied, shared_.provider.name());
  return ec;
}

void RdmaConnection::begin_connect() {
  SIPHON_LOG(rdma, 10, "connecting to {}", peer_.to_string());
  worker_.adopt(std::static_pointer_cast<RdmaConnection>(shared_from_this()));
  if (shared_.stopping) return fail_setup(errc::shutting_down, "the stack is stopping");
  if (!shared_.device_open())
    return fail_setup(errc::device_not_found, fmt::format("the RDMA device {} was removed", shared_.device_name));
  if (const auto ec = apply_qos()) return fail_setup(ec, "cannot set the connection's traffic class");
  if (const auto ec = id_->resolve_addr(nullptr, peer_, static_cast<int>(shared_.opts.cm_timeout.count())))
    fail_setup(ec, "cannot resolve the address");
}

void RdmaConnection::on_cm_event(CmEvent& ev) {
  SIPHON_ASSERT_ON_WORKER(worker_);
  static constexpr const char* kStates[] = {"resolving", "connecting", "accepting", "established", "running", "closing", "closed"};
  SIPHON_LOG(rdma, 10, "{}: cm event {} while {}", peer_.to_string(), to_string(ev.type),
             kStates[static_cast<int>(state_)]);
  if (state_ == State::closed) return;
  switch (ev.type) {
    case CmEventType::addr_resolved:
      if (const auto ec = id_->resolve_route(static_cast<int>(shared_.opts.cm_timeout.count())))
        fail_setup(ec, "cannot resolve the route");
      return;
    case CmEventType::route_resolved: {
      if (const auto ec = create_qp())
        return fail_setup(ec, setup_why_.empty() ? std::string("cannot create the queue pair") : setup_why_);
      state_ = State::connecting;
      if (const auto ec = id_->connect(conn_param(shared_, my_info())))
        fail_setup(ec, "rdma connect failed");
      return;
    }
    case CmEventType::established: {
      if (client_) {
        std::string_view why;
        ConnectInfo info;
        if (const auto ec = ConnectInfo::decode(ev.private_data, info, &why))
          return fail_setup(ec, fmt::format("bad accept data from the peer: {}", why));
        peer_info_ = info;
      }
      established(peer_info_);
      return;
    }
    case CmEventType::rejected: {
      RejectInfo r;
      const std::string why = RejectInfo::decode(ev.private_data, r)
                                  ? fmt::format("rejected by the peer: {}", to_string(r.reason))
                                  : std::string("rejected (no RDMA listener at that address?)");
      return fail_setup(errc::connection_refused, why);
    }
    case CmEventType::addr_error:
    case CmEventType::route_error:
    case CmEventType::unreachable:
    case CmEventType::connect_error:
      return fail_setup(ev.status ? ev.status : make_error_code(errc::connection_refused),
                        fmt::format("connection manager: {}", to_string(ev.type)));
    case CmEventType::disconnected:
      // The peer closed (or its process went away): for this end an
      // ordinary close, logged as one; the session layer still hears of it
      // (on_fault) and decides whether to reconnect.
      if (open())
        return fault(errc::connection_reset, "peer closed the connection (DISCONNECTED)", /*clean=*/true);
      if (state_ == State::closing) return;
      return fail_setup(errc::connection_reset, fmt::format("connection manager: {}", to_string(ev.type)));
    case CmEventType::device_removal: {
      // Our own device went away (the stack releases it: device_removed()
      // follows from the worker's detach).
      const std::string why = fmt::format("the RDMA device {} was removed (DEVICE_REMOVAL)", shared_.device_name);
      if (open()) return fault(errc::device_not_found, why);
      if (state_ == State::closing) return;
      return fail_setup(errc::device_not_found, why);
    }
    case CmEventType::timewait_exit:
    case CmEventType::connect_request:
      return;
  }
}

void RdmaConnection::accept_request(const ConnectInfo& peer_info, transport::AcceptHandler on_accept) {
  peer_info_ = peer_info;
  accept_done_ = std::move(on_accept);
  worker_.adopt(std::static_pointer_cast<RdmaConnection>(shared_from_this()));
  if (!shared_.device_open()) {
    const auto r = RejectInfo{RejectReason::shutting_down, 0}.encode();
    (void)id_->reject(r);
    shared_.counters.connections_rejected.fetch_add(1, std::memory_order_relaxed);
    return fail_setup(errc::device_not_found, fmt::format("incoming connection: the RDMA device {} was removed",
                                                          shared_.device_name));
  }
  if (const auto ec = create_qp()) {
    const auto r = RejectInfo{RejectReason::no_resources, 0}.encode();
    (void)id_->reject(r);
    shared_.counters.connections_rejected.fetch_add(1, std::memory_order_relaxed);
    return fail_setup(ec, setup_why_.empty() ? std::string("cannot create the queue pair for an incoming connection")
                                             : "incoming connection: " + setup_why_);
  }
  if (const auto ec = apply_qos()) return fail_setup(ec, "cannot set the connection's traffic class");
  if (const auto ec = id_->accept(conn_param(shared_, my_info()))) fail_setup(ec, "rdma accept failed");
}

void RdmaConnection::established(const ConnectInfo& peer) {
  if (!credits_) credits_.emplace(0, shared_.window());
  // The peer's update slots (1..64, checked by ConnectInfo::decode) are
  // honoured: with 1 our explicit updates wait for a whole window (credits.h).
  credits_->peer_granted(peer.credits, peer.update_slots);
  state_ = State::established;
  if (QpPath p; qp_ && !qp_->query_path(p)) {
    path_ = p;
  } else if (qp_) {
    SIPHON_LOG(rdma, 5, "qp {}: the provider cannot report its path; messenger dump shows no peer QPN, GIDs or MTU",
               qp_num());
  }
  counted_active_ = true;
  shared_.counters.connections_active.fetch_add(1, std::memory_order_relaxed);
  shared_.refresh_gauges();
  SIPHON_LOG(rdma, 5, "{} {}: established, qp {}, {} credits x {} B each way{}", client_ ? "connected to" : "accepted",
             peer_.to_string(), qp_num(), peer.credits, peer.recv_buffer_size,
             worker_.srq() != nullptr ? fmt::format(" (receives on worker {}'s SRQ)", worker_.index()) : "");
  auto self = std::static_pointer_cast<RdmaConnection>(shared_from_this());
  if (client_) {
    if (auto done = std::exchange(connect_done_, nullptr)) done({}, self);
  } else if (auto done = std::exchange(accept_done_, nullptr)) {
    done(self);
  }
  pump();
}

void RdmaConnection::fail_setup(std::error_code ec, std::string reason) {
  if (state_ == State::closing || state_ == State::closed) return;
  SIPHON_LOG(rdma, 1, "RDMA connection {} {}: {} ({})", client_ ? "to" : "from", peer_.to_string(), reason,
             ec.message());
  auto self = std::static_pointer_cast<RdmaConnection>(shared_from_this());
  if (auto done = std::exchange(connect_done_, nullptr)) done(ec, nullptr);
  accept_done_ = nullptr;
  if (handler_ != nullptr) return fault(ec, std::move(reason));
  begin_drain();
}

void RdmaConnection::fault(std::error_code ec, std::string reason, bool clean) {
  if (state_ == State::closing || state_ == State::closed) return;
  if (clean)
    SIPHON_LOG(rdma, 5, "RDMA connection {} {} closed by the peer", client_ ? "to" : "from", peer_.to_string());
  else
    SIPHON_LOG(rdma, 1, "RDMA connection {} {} faulted: {} ({})", client_ ? "to" : "from", peer_.to_string(),
               reason, ec.message());
  if (!clean) worker_.counters().connection_faults.add(1);
  transport::ConnectionHandler* h = std::exchange(handler_, nullptr);
  auto self = std::static_pointer_cast<RdmaConnection>(shared_from_this());
  begin_drain();
  if (h == nullptr) {
    // Not started yet (an accepted connection whose peer lied or left
    // before start()): start() tells the handler. Closed: nobody to tell.
    if (!user_closed_) early_fault_ = transport::Fault{ec, std::move(reason)};
    return;
  }
  if (in_call_ > 0) {
    // Inside a call into the connection (send's post can fail): the handler
    // hears of it from the event loop, unless it closes first.
    boost::asio::post(worker_.io(), [self, h, f = transport::Fault{ec, std::move(reason)}] {
      if (!self->user_closed_) h->on_fault(f);
    });
    return;
  }
  h->on_fault({ec, std::move(reason)});
}

void RdmaConnection::shutdown() {
  if (connect_done_ && !open()) return fail_setup(errc::shutting_down, "the stack is stopping");
  close();
}

void RdmaConnection::close() {
  SIPHON_ASSERT_ON_WORKER(worker_);
  if (!worker_.in_worker_thread()) {
    // A caller's bug (asserted above in debug builds): touch nothing from
    // this thread; the close happens on the worker.
    worker_.post([self = std::static_pointer_cast<RdmaConnection>(shared_from_this())] { self->close(); });
    return;
  }
  user_closed_ = true;
  handler_ = nullptr;  // no callbacks after close()
  connect_done_ = nullptr;
  accept_done_ = nullptr;
  // Frames the handler sent while drain_inbound() delivered are still only
  // queued (the pump after the delivery would post them): they are posted
  // now, ahead of the disconnect, as when send() posted at once (a reply
  // and then close() from the same on_frame). Best effort, as before and as
  // on TCP: the QP going to ERR flushes what the fabric has not sent yet.
  // After handler_ is cleared: the pump's on_writable must not reach the
  // closing caller.
  pump();
  if (state_ == State::closing || state_ == State::closed) return;
  begin_drain();
}

void RdmaConnection::begin_drain() {
  if (state_ == State::closing || state_ == State::closed) return;
  state_ = State::closing;
  auto self = std::static_pointer_cast<RdmaConnection>(shared_from_this());
  (void)id_->disconnect();
  if (qp_) {
    QpAttr attr;
    attr.state = QpState::err;
    if (const auto ec = qp_->modify(attr, kAttrState))
      SIPHON_LOG(rdma, 1, "qp {}: moving to ERR failed: {}", qp_num(), ec.message());
  }
  // SRQ mode: receives held while paused belong to the worker's SRQ; they
  // go back now (the flush of the QP does not return SRQ receives).
  if (worker_.srq() != nullptr) {
    for (auto& held : held_) worker_.srq_repost(held.ctx);
    held_.clear();
  }
  outq_.clear();
  queued_bytes_ = 0;
  stream_.reset();
  bulk_.stop();  // the QP is in ERR: the peer can no longer read what we offered
  post_drain_marker();
  finish_if_drained();
}

// Unsignaled WRs that completed before the QP went to ERR raise no
// completion, and nothing later may be signaled to account for them (a
// batch whose post failed part-way lost its signaled last WR). So, as
// ib_drain_sq does, a signaled marker goes in after the QP is in ERR: its
// flush completion comes after every earlier WR's, and retires them all.
// A zero-length RDMA WRITE, so it could consume nothing at the peer even if
// the QP were not in ERR after all.
void RdmaConnection::post_drain_marker() {
  if (!qp_ || sq_fifo_.empty() || drain_marker_posted_) return;
  WrCtx* ctx = new_ctx(WrCtx::Kind::drain);
  SendWr wr;
  wr.wr_id = reinterpret_cast<std::uint64_t>(ctx);
  wr.opcode = Opcode::rdma_write;
  wr.flags = kSignaled;
  std::size_t bad = 0;
  if (const auto ec = qp_->post_send({&wr, 1}, &bad)) {
    free_ctx(ctx);
    SIPHON_LOG(rdma, 10, "qp {}: posting the drain marker failed ({}); retrying", qp_num(), ec.message());
    return schedule_retry();
  }
  drain_marker_posted_ = true;
  sq_fifo_.push_back(ctx);
}

void RdmaConnection::release_srq_reservation() noexcept {
  if (!std::exchange(srq_reserved_, false)) return;
  worker_.release_srq(shared_.recvs_per_qp());
}

bool RdmaConnection::drained() const noexcept { return !qp_ || (sq_fifo_.empty() && posted_recvs_ == 0); }

void RdmaConnection::finish_if_drained() {
  if (state_ != State::closing || !drained()) return;
  state_ = State::closed;
  auto self = std::static_pointer_cast<RdmaConnection>(shared_from_this());
  release_srq_reservation();  // closing releases the credits it held in the SRQ
  worker_.remove(this);
  // Flushed, nothing is outstanding: the QP and then the id go from the
  // event loop (not inside whatever call drained us, which may still hold
  // the QP), not with the last reference.
  boost::asio::post(worker_.io(), [self] { self->release_device_objects(); });
}

transport::TransportInfo RdmaConnection::info() const {
  transport::TransportInfo i = transport::Connection::info();
  transport::RdmaInfo r;
  r.local_qpn = qp_num();
  if (path_) {
    r.remote_qpn = path_->dest_qp_num;
    r.local_gid = to_string(path_->sgid);
    r.remote_gid = to_string(path_->dgid);
    r.path_mtu = mtu_bytes(path_->path_mtu);
  }
  if (credits_) {
    r.send_credits = credits_->credits();
    r.peer_window = credits_->peer_window();
    r.credits_owed = credits_->owed();
    r.my_window = credits_->my_window();
  }
  r.outstanding_transfers_out = bulk_.out_count();
  r.outstanding_transfers_in = bulk_.in_count();
  r.send_wrs_in_flight = static_cast<std::uint32_t>(sq_fifo_.size());
  r.posted_recvs = posted_recvs_;
  r.srq_reserved = srq_reserved_;
  r.stalled = stalled_;
  i.rdma = std::move(r);
  return i;
}

}  // namespace siphon::rdma
