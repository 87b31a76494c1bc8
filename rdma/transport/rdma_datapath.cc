// RdmaConnection: the data path (docs/rdma-transport.md §Data path).
//
// Outbound, msgr2 bytes (the banner, then whole encoded frames) queue in
// outq_. pump() turns the queue into SENDs: each takes one data credit and
// one registered send buffer, carries as many queued stream bytes as fit the
// peer's receive buffer (small frames coalesce) and piggybacks the credits we
// owe. A MESSAGE whose data segment reaches ms_async_rdma_zero_copy_threshold
// (zero_copy_applies(): 0 = never, and never without data) goes as a
// read_request instead of its data bytes: the data's memory is registered
// just for this transfer (and, where the device has type-2 memory windows,
// exposed only through a window bound to this connection's QP), the peer
// pulls it with RDMA READ into its own pool, and its read_done revokes the
// window and the registration. Both ends bound the transfer with
// ms_async_rdma_transfer_timeout. The transfers themselves -- registrations,
// READs, read_done, the timeout -- are bulk_'s (bulk_transfers.h); this file
// queues and sends what they ask for.
//
// Inbound, every SEND's header is CRC-checked and parsed, and the peer's use
// of our credits and update slots checked, when its completion arrives
// (credits.h, Enforcement: a receive held while paused is consumed all the
// same); then, unless paused, its credits are applied and its receive buffer
// re-posted at once (stream bytes are copied out; they are small). Stream
// bytes and pulled bulk data are fed, in order, to the FrameStream the TCP
// stack uses (banner, then FrameDecoder), so frame boundaries and CRCs are checked
// exactly as on TCP.
//
// Cost per message, steady state (issue 14 item 8 cut what was starred
// here; before/after figures in docs/performance.md, "Per-message cost of
// the RDMA stack"):
//
//   outbound, a MESSAGE below the zero-copy threshold
//     allocations  one 64-byte block for preamble/crcs/epilogue (encode_frame);
//                  one exactly-sized segment for the 41-byte header2, made by
//                  the session layer (connection_io.cc; was a ~4 KiB chunk);
//                  outq_/batch_/sges_ keep their capacity
//     copies       one: the frame's bytes into a registered send buffer
//                  (small frames coalesce into one SEND; frames a handler
//                  sends while drain_inbound() delivers are pumped together
//                  after it, one SEND and one credit for the burst)
//     locks        none; the send pool's mutex only when the worker's cache
//                  of 16 buffers is empty or overfull, or while a connection
//                  waits for a buffer. Never a registration under it: a pool
//                  that runs dry on the data path is grown by its grower
//                  thread (buffer_pool.h, Growth::background)
//     atomics      no shared ones: the counters are the worker's own block
//                  (counters.h: a relaxed load and store each, on a cache line
//                  no other thread writes), and the pool counts buffers in use
//                  per cache, not in one shared atomic. Reference counts of
//                  the frame's segments (BufferList) remain
//     syscalls     none on the post itself (soft fabric: a lock-free ring and
//                  a doorbell, an eventfd write only when the engine sleeps;
//                  a hardware NIC: an MMIO doorbell; rxe: one write(2) per
//                  post_send call); one signaled WR per batch
//     wake-ups     none on the worker; the peer's poller (or its CQ channel)
//   inbound, per SEND
//     checks       CRC32C over the 20-byte header, O(1) credit accounting
//     allocations  BufferList::copy_of of the stream bytes (at least a
//                  4 KiB segment per SEND) plus one copy; new Message per
//                  message in the session layer (not cut: the next items)
//     refcounts    one shared_ptr copy per completion (the worker's
//                  poll_batch(); on_completion takes none)
//     atomics      none shared (the worker's counter block)
//     posts        one receive re-posted per SEND (to the QP or the SRQ)
//   zero-copy, per transfer (a MESSAGE whose data reaches the threshold)
//     sender       per data segment: reg_mr (+ alloc_mw and one bind WR with
//                  windows): on verbs an ioctl that pins the pages; the
//                  descriptor vector, OutTransfer and its map node are heap
//                  allocations; on read_done dealloc_mw + dereg_mr
//     receiver     an InTransfer allocation, one RDMA READ per descriptor
//                  into pool buffers, one read_done SEND
//   waiting        no timer on the data path: a connection out of send
//                  buffers, or whose READ reservation failed, is woken by the
//                  pool when a buffer comes back or a slab is added
//                  (BufferPool::notify_on_release). A drain marker that could
//                  not be posted is retried on the next send-queue
//                  completion, with a 1 ms timer as a backstop (teardown only)
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/transport/rdma_connection.h"

namespace siphon::rdma {
namespace {
constexpr std::uint32_t kSignalEvery = 16;
}  // namespace

WrCtx* RdmaConnection::new_ctx(WrCtx::Kind kind) {
  if (ctx_free_.empty()) {
    ctx_storage_.push_back(std::make_unique<WrCtx>());
    ctx_free_.push_back(ctx_storage_.back().get());
  }
  WrCtx* c = ctx_free_.back();
  ctx_free_.pop_back();
  *c = WrCtx{kind};
  return c;
}

void RdmaConnection::free_ctx(WrCtx* ctx) noexcept {
  ctx->buf = nullptr;
  ctx->transfer = nullptr;
  ctx_free_.push_back(ctx);
}

void RdmaConnection::drop_recv(WrCtx* ctx) noexcept {
  if (worker_.srq() != nullptr) return worker_.srq_repost(ctx);  // not ours: the worker's
  shared_.recv_pool->put(ctx->buf, &worker_.recv_cache());
  free_ctx(ctx);
}

std::error_code RdmaConnection::post_initial_receives() {
  if (worker_.srq() != nullptr) return {};  // the worker's SRQ is filled already
  for (std::uint32_t i = 0; i < shared_.recvs_per_qp(); ++i) {
    PoolBuffer* buf = shared_.recv_pool->get(&worker_.recv_cache());
    if (buf == nullptr) return errc::resource_exhausted;
    WrCtx* ctx = new_ctx(WrCtx::Kind::recv);
    ctx->buf = buf;
    const Sge sge{reinterpret_cast<std::uint64_t>(buf->data()), static_cast<std::uint32_t>(buf->capacity()),
                  buf->keys().lkey};
    const RecvWr wr{reinterpret_cast<std::uint64_t>(ctx), &sge, 1};
    std::size_t bad = 0;
    if (const auto ec = qp_->post_recv({&wr, 1}, &bad)) {
      shared_.recv_pool->put(buf, &worker_.recv_cache());
      free_ctx(ctx);
      return ec;
    }
    ++posted_recvs_;
  }
  return {};
}

void RdmaConnection::repost(WrCtx* ctx, bool data_class) {
  if (state_ == State::closing || state_ == State::closed) return drop_recv(ctx);
  if (worker_.srq() != nullptr) {
    // Back on the SRQ: the reservation this connection holds is whole again.
    worker_.srq_repost(ctx);
    if (data_class) credits_->on_data_reposted();
    else credits_->on_update_reposted();
    return;
  }
  const Sge sge{reinterpret_cast<std::uint64_t>(ctx->buf->data()), static_cast<std::uint32_t>(ctx->buf->capacity()),
                ctx->buf->keys().lkey};
  const RecvWr wr{reinterpret_cast<std::uint64_t>(ctx), &sge, 1};
  std::size_t bad = 0;
  if (const auto ec = qp_->post_recv({&wr, 1}, &bad)) {
    drop_recv(ctx);
    return fault(ec, "re-posting a receive failed");
  }
  ++posted_recvs_;
  if (data_class) credits_->on_data_reposted();
  else credits_->on_update_reposted();
}

// ---------------------------------------------------------------- start

void RdmaConnection::start(transport::ConnectionHandler& handler, const proto::Banner& mine) {
  SIPHON_ASSERT_ON_WORKER(worker_);
  if (early_fault_) {
    // Faulted before this call: the handler hears of it from the event
    // loop (never inside start), unless it closes first. Nothing is sent.
    boost::asio::post(worker_.io(), [self = std::static_pointer_cast<RdmaConnection>(shared_from_this()), h = &handler,
                                     f = *std::exchange(early_fault_, std::nullopt)] {
      if (!self->user_closed_) h->on_fault(f);
    });
    return;
  }
  const CallScope call(*this);
  handler_ = &handler;
  stream_.set_mine(mine);
  if (state_ == State::established) state_ = State::running;
  BufferList b = proto::encode_banner(mine);
  // Stream bytes like the frames (rx_bytes counts the peer's banner too).
  worker_.counters().tx_bytes.add(b.length());
  worker_.perf().inc(transport::l_msgr_send_bytes, b.length());
  queued_bytes_ += b.length();
  outq_.push_back(OutItem::stream(std::move(b)));
  pump();
  if (!paused_) post_kick();  // processes completions held until now, from the event loop
}

void RdmaConnection::pause_receive(bool paused) {
  SIPHON_ASSERT_ON_WORKER(worker_);
  paused_ = paused;
  if (paused_ || state_ != State::running) return;
  post_kick();  // resumes from the event loop, never inside this call
}

void RdmaConnection::post_kick() {
  if (kick_posted_) return;  // one post per occasion, not per frame
  kick_posted_ = true;
  boost::asio::post(worker_.io(), [self = std::static_pointer_cast<RdmaConnection>(shared_from_this())] {
    self->kick_posted_ = false;
    self->kick();
  });
}

void RdmaConnection::kick() {
  if (handler_ == nullptr || !open()) return;  // closed meanwhile: nothing more
  maybe_writable();
  if (paused_ || state_ != State::running) return;
  // Oldest bytes first: frames already decoded, then queued stream bytes,
  // and only then the held receives -- one at a time, stopping as soon as
  // the handler pauses us again. A held receive processed is a credit
  // returned; processing them all up front (as this did) returned a window
  // of credits per resume while the handler took one frame before pausing
  // again, so a peer flooding small frames grew inq_ without bound.
  deliver_frames();
  drain_inbound();
  while (!held_.empty() && !paused_ && handler_ != nullptr) {
    const Held held = held_.front();
    held_.pop_front();
    process_recv(held.wc, held.ctx, held.h);  // feeds what it can (drain_inbound)
  }
}

// ----------------------------------------------------------------- send

std::error_code RdmaConnection::send(proto::Frame&& frame) {
  SIPHON_ASSERT_ON_WORKER(worker_);
  if (!open() || (state_ == State::running && handler_ == nullptr)) return errc::not_connected;
  const CallScope call(*this);
  if (!stream_.banner_done()) {
    // The banners decide the revision: the frame waits unencoded and goes
    // out first, in order, once it is known (feed).
    stream_.hold_early(std::move(frame));
    if (queued_bytes() > shared_.opts.common.send_queue_high_water) over_high_water_ = true;
    return {};
  }
  const std::size_t data_len = frame.segments[3].length();
  BufferList wire;
  std::string why;
  if (!stream_.encode(frame, wire, why)) {
    // Secure mode ran out of nonces: this connection is done.
    fault(errc::resource_exhausted, why);
    return errc::resource_exhausted;
  }
  worker_.counters().tx_messages.add(1);
  worker_.counters().tx_bytes.add(wire.length());
  worker_.perf().inc(transport::l_msgr_send_bytes, wire.length());
  bool queued = false;
  // Secure mode sends every byte through SENDs: the data segment is
  // ciphertext inside the last GCM message, with no offset of its own for a
  // peer to READ (and plaintext never sits in a region the peer can read).
  if (frame.tag == proto::Tag::message && !stream_.secure() &&
      zero_copy_applies(shared_.opts.zero_copy_threshold, data_len) && data_len <= peer_info_.max_read) {
    const std::size_t off = proto::segment_offset(frame, stream_.rev(), 3);
    queued = !queue_bulk(frame, std::move(wire), off);
    if (!queued) wire = proto::encode_frame(frame, stream_.rev());
  }
  if (!queued) {
    worker_.counters().tx_copied_bytes.add(data_len);
    queued_bytes_ += wire.length();
    outq_.push_back(OutItem::stream(std::move(wire)));
  }
  if (queued_bytes_ > shared_.opts.common.send_queue_high_water) over_high_water_ = true;
  if (!delivering_) pump();  // else drain_inbound() pumps once the handler has had every frame
  return {};
}

// The data's registrations (and windows) are bulk_'s until the peer's
// read_done; the outbound queue gets the frame's bytes up to the data, the
// read_request in the data's place, and the rest of the frame.
std::error_code RdmaConnection::queue_bulk(proto::Frame& frame, BufferList&& wire, std::size_t off) {
  std::uint64_t id = 0;
  std::vector<ReadDescriptor> regions;
  if (const auto ec = bulk_.offer(frame, id, regions)) return ec;
  const std::size_t len = frame.segments[3].length();
  queued_bytes_ += wire.length();
  outq_.push_back(OutItem::stream(wire.slice(0, off)));
  OutItem rr = OutItem::control(OutItem::Kind::read_request, id);
  rr.regions = std::move(regions);
  rr.length = len;
  outq_.push_back(std::move(rr));
  outq_.push_back(OutItem::stream(wire.slice(off + len, wire.length() - off - len)));
  return {};
}

void RdmaConnection::add_send(SendHeader& h, PoolBuffer* buf, std::uint32_t payload) {
  h.encode(reinterpret_cast<std::uint8_t*>(buf->data()));
  WrCtx* ctx = new_ctx(WrCtx::Kind::send);
  ctx->buf = buf;
  const std::uint32_t total = static_cast<std::uint32_t>(SendHeader::kSize) + payload;
  sges_.push_back({reinterpret_cast<std::uint64_t>(buf->data()), total, buf->keys().lkey});
  SendWr wr;
  wr.wr_id = reinterpret_cast<std::uint64_t>(ctx);
  wr.opcode = Opcode::send;
  wr.num_sge = 1;
  wr.flags = total <= max_inline_ ? std::uint32_t{kInline} : 0u;
  batch_.push_back(wr);
  sq_fifo_.push_back(ctx);
  worker_.counters().tx_sends.add(1);
}

void RdmaConnection::flush_batch() {
  if (batch_.empty()) return;
  // sg_list pointers are fixed up here: sges_ may have grown while building.
  std::size_t sge_index = 0;
  for (SendWr& wr : batch_) {
    if (wr.opcode != Opcode::rdma_read || wr.sg_list == nullptr) wr.sg_list = &sges_[sge_index];
    sge_index += wr.num_sge;
    if (++unsignaled_ >= kSignalEvery || wr.opcode == Opcode::rdma_read) {
      wr.flags |= kSignaled;
      unsignaled_ = 0;
    }
  }
  batch_.back().flags |= kSignaled;  // every batch ends signaled: buffers come back promptly
  unsignaled_ = 0;
  const std::size_t n = batch_.size();
  std::size_t bad = 0;
  const std::error_code ec = qp_->post_send(batch_, &bad);
  batch_.clear();
  sges_.clear();
  if (!ec) return;
  // WRs from `bad` on were not posted and will never complete: they are the
  // newest entries of sq_fifo_. Release them, or the drain waits forever.
  for (std::size_t i = std::min(bad, n); i < n; ++i) {
    WrCtx* e = sq_fifo_.back();
    sq_fifo_.pop_back();
    if (e->kind == WrCtx::Kind::send) shared_.send_pool->put(e->buf, &worker_.send_cache());
    else if (e->transfer != nullptr) BulkTransfers<BulkPort>::read_unposted(*e->transfer);
    free_ctx(e);
  }
  fault(ec, "posting to the send queue failed");
}

void RdmaConnection::pump() {
  if (!open() || !credits_) return;
  const std::size_t cap_peer = peer_info_.recv_buffer_size;
  bool stalled_now = false;
  while (!outq_.empty()) {
    if (sq_fifo_.size() >= sq_depth_) break;
    if (shared_.scoped_rkeys && outq_.front().kind == OutItem::Kind::read_request &&
        sq_fifo_.size() + outq_.front().regions.size() + 1 > sq_depth_)
      break;  // its window binds and the SEND go together (queue_bulk made sure they fit)
    if (!credits_->can_send_data()) {
      stalled_now = true;
      break;
    }
    PoolBuffer* buf = shared_.send_pool->get(&worker_.send_cache(), Growth::background);
    if (buf == nullptr) {
      worker_.counters().send_buffer_stalls.add(1);
      wait_for_buffers(*shared_.send_pool, &RdmaConnection::send_buffer_wait_);
      break;
    }
    const std::size_t room = std::min(cap_peer, buf->capacity()) - SendHeader::kSize;
    auto* out = reinterpret_cast<std::uint8_t*>(buf->data()) + SendHeader::kSize;
    SendHeader h;
    std::uint32_t payload = 0;
    OutItem& item = outq_.front();
    switch (item.kind) {
      case OutItem::Kind::stream:
        h.type = SendType::stream;
        while (!outq_.empty() && outq_.front().kind == OutItem::Kind::stream && payload < room) {
          OutItem& s = outq_.front();
          const std::size_t n = std::min(room - payload, s.bytes.length());
          s.bytes.copy_out(0, n, out + payload);
          s.bytes.consume_front(n);
          payload += static_cast<std::uint32_t>(n);
          queued_bytes_ -= n;
          if (s.bytes.empty()) outq_.pop_front();
        }
        h.length = payload;
        break;
      case OutItem::Kind::read_request:
        bulk_.read_request_sent(item.id);  // its window binds first; its read_done due from now
        h.type = SendType::read_request;
        h.id = item.id;
        h.length = static_cast<std::uint32_t>(item.length);
        for (const ReadDescriptor& d : item.regions) {
          d.encode(out + payload);
          payload += ReadDescriptor::kSize;
        }
        payload = static_cast<std::uint32_t>(ReadDescriptor::seal(out, item.regions.size()));
        queued_bytes_ -= item.length;
        outq_.pop_front();
        break;
      case OutItem::Kind::read_done:
        h.type = SendType::read_done;
        h.id = item.id;
        outq_.pop_front();
        break;
    }
    credits_->spend_data();
    h.credits_returned = credits_->take_owed();
    worker_.counters().credits_spent.add(1);
    worker_.counters().credits_granted.add(h.credits_returned);
    add_send(h, buf, payload);
  }
  // Credit stall accounting.
  if (stalled_now && !stalled_) {
    stalled_ = true;
    stalled_since_ = MonoClock::now();
    worker_.counters().credit_stalls.add(1);
  } else if (!stalled_now && stalled_) {
    stalled_ = false;
    worker_.counters().credit_stall_ns.add(static_cast<std::uint64_t>((MonoClock::now() - stalled_since_).count()));
  }
  // An explicit update when half a window is owed and no data SEND carries it.
  if (credits_->should_send_update(!outq_.empty()) && sq_fifo_.size() < sq_depth_) {
    if (PoolBuffer* buf = shared_.send_pool->get(&worker_.send_cache(), Growth::background)) {
      SendHeader h;
      h.type = SendType::credit_update;
      h.credits_returned = credits_->take_owed();
      worker_.counters().credit_updates_sent.add(1);
      worker_.counters().credits_granted.add(h.credits_returned);
      add_send(h, buf, 0);
    } else {
      wait_for_buffers(*shared_.send_pool, &RdmaConnection::send_buffer_wait_);
    }
  }
  flush_batch();
  maybe_writable();
}

void RdmaConnection::maybe_writable() {
  if (!over_high_water_ || queued_bytes_ + stream_.early_bytes() > shared_.opts.common.send_queue_low_water) return;
  if (in_call_ > 0) return post_kick();  // e.g. inside send(): from the event loop instead
  over_high_water_ = false;
  if (handler_ != nullptr) handler_->on_writable();
}

void RdmaConnection::wait_for_buffers(BufferPool& pool, bool RdmaConnection::*pending, std::size_t want) {
  if (this->*pending) return;
  this->*pending = true;
  // Called on whatever thread returns a buffer (or now): back to our worker.
  pool.notify_on_release([weak = weak_from_this(), pending] {
    auto c = weak.lock();
    if (!c) return;  // gone: nothing waits any more
    auto self = std::static_pointer_cast<RdmaConnection>(std::move(c));
    RdmaWorker& w = self->worker_;
    boost::asio::post(w.io(), [self = std::move(self), pending] {
      (*self).*pending = false;
      if (!self->open()) return;
      self->bulk_.issue_reads();
      self->pump();
    });
  }, want);
}

void RdmaConnection::schedule_retry() {
  if (retry_pending_) return;
  if (!retry_timer_) retry_timer_ = std::make_unique<boost::asio::steady_timer>(worker_.io());
  retry_pending_ = true;
  retry_timer_->expires_after(std::chrono::milliseconds(1));
  retry_timer_->async_wait([self = std::static_pointer_cast<RdmaConnection>(shared_from_this())](
                               const boost::system::error_code& e) {
    self->retry_pending_ = false;
    if (e) return;
    if (self->state_ == State::closing) return self->post_drain_marker();
    self->bulk_.issue_reads();
    self->pump();
  });
}

// ---------------------------------------------------------- completions

void RdmaConnection::on_completion(const Wc& wc) {
  SIPHON_ASSERT_ON_WORKER(worker_);
  auto* ctx = reinterpret_cast<WrCtx*>(wc.wr_id);
  // No reference taken here: the worker's poll_batch() holds one across this
  // call (the only reference-count round trip per completion).
  if (wc.status != WcStatus::success) {
    if (wc.status == WcStatus::flushed) {
      worker_.counters().wc_flushed.add(1);
    } else {
      worker_.counters().wc_errors.add(1);
      if (wc.status == WcStatus::retry_exceeded) worker_.counters().wc_retry_exceeded.add(1);
      else if (wc.status == WcStatus::remote_access_error) worker_.counters().wc_remote_access.add(1);
      else if (wc.status == WcStatus::rnr_retry_exceeded) worker_.counters().rnr_events.add(1);
      else worker_.counters().wc_other_errors.add(1);
    }
  }
  if (ctx->kind == WrCtx::Kind::recv) {
    if (worker_.srq() == nullptr) --posted_recvs_;
    on_recv(wc, ctx);
  } else {
    on_send_queue_completion(wc, ctx);
  }
  // A flush we did not cause: the QP went to ERR under us (an asynchronous
  // QP error, or the CM moved it there on a disconnect). Error completions
  // fault first with their own reason; this catches a QP that failed with
  // nothing but flushes, which would otherwise leave the connection silent.
  // The commonest such cause is the device going away (its DEVICE_REMOVAL
  // may come after the flushes): the reason says so when it is unlisted.
  if (wc.status == WcStatus::flushed && open()) {
    if (!shared_.device_open() || !shared_.device_listed())
      fault(errc::device_not_found, fmt::format("the RDMA device {} was removed (work requests flushed)",
                                                shared_.device_name));
    else
      fault(errc::work_request_flushed, "the queue pair moved to the error state (work requests flushed)");
  }
  if (state_ == State::closing) {
    post_drain_marker();  // no-op once posted; a failed post proceeds here, when the queue moved
    finish_if_drained();
  }
}

void RdmaConnection::on_recv(const Wc& wc, WrCtx* ctx) {
  if (wc.status != WcStatus::success || state_ == State::closing || state_ == State::closed) {
    drop_recv(ctx);
    if (wc.status != WcStatus::success && wc.status != WcStatus::flushed)
      fault(to_error(wc.status), fmt::format("receive completed with {}", to_string(wc.status)));
    return;
  }
  // At arrival, paused or not: this receive is consumed now, so this is the
  // moment the peer's right to it is checked (credits.h, Enforcement). The
  // header is checked before anything in it is used.
  const auto* p = reinterpret_cast<const std::uint8_t*>(ctx->buf->data());
  const std::size_t received = std::min<std::size_t>(wc.byte_len, ctx->buf->capacity());
  SendHeader h;
  std::string_view why;
  if (const auto ec = SendHeader::decode({p, received}, h, &why)) {
    drop_recv(ctx);
    if (ec == errc::bad_crc) {
      worker_.counters().header_crc_errors.add(1);
      return fault(ec, fmt::format("damaged SEND from the peer: {}", why));
    }
    return fault(ec, fmt::format("malformed SEND from the peer: {}", why));
  }
  const bool update = h.type == SendType::credit_update;
  if (!(update ? credits_->on_update_arrived() : credits_->on_data_arrived())) {
    drop_recv(ctx);  // SRQ mode: straight back on the SRQ
    worker_.counters().credit_violations.add(1);
    return fault(errc::out_of_credits,
                 update ? fmt::format("credit violation: the peer sent a credit update with all {} of its update "
                                      "slots still held",
                                      kUpdateSlots)
                        : fmt::format("credit violation: the peer sent a data SEND without a credit (all {} "
                                      "credits granted are outstanding)",
                                      credits_->my_window()));
  }
  if (paused_ || state_ != State::running || !held_.empty()) {
    // Not re-posted: no credits go back while paused. Behind older held
    // receives it waits its turn (kick() processes them in order).
    held_.push_back({wc, ctx, h});
    return;
  }
  process_recv(wc, ctx, h);
}

void RdmaConnection::process_recv(const Wc& wc, WrCtx* ctx, const SendHeader& h) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(ctx->buf->data());
  const std::size_t received = std::min<std::size_t>(wc.byte_len, ctx->buf->capacity());
  worker_.counters().rx_sends.add(1);
  if (!credits_->on_returned(h.credits_returned)) {
    drop_recv(ctx);
    return fault(errc::malformed_frame, "peer returned more credits than it was granted");
  }
  worker_.counters().credits_returned.add(h.credits_returned);
  bool data_class = true;
  switch (h.type) {
    case SendType::stream:
      inq_.push_back({BufferList::copy_of(p + SendHeader::kSize, h.length), false});
      break;
    case SendType::read_request: {
      std::string why;
      if (const auto ec = bulk_.on_read_request(h, p, received, why)) {
        drop_recv(ctx);
        return fault(ec, std::move(why));
      }
      inq_.push_back({BufferList{}, true});
      break;
    }
    case SendType::read_done: {
      std::string why;
      if (const auto ec = bulk_.on_read_done(h.id, why)) {
        drop_recv(ctx);
        return fault(ec, std::move(why));
      }
      break;
    }
    case SendType::credit_update:
      data_class = false;
      break;
  }
  repost(ctx, data_class);
  bulk_.issue_reads();
  drain_inbound();
  pump();
}

void RdmaConnection::on_send_queue_completion(const Wc& wc, WrCtx* ctx) {
  // Completions on the send queue arrive in posting order; an unsignaled WR
  // is complete once a later one is.
  while (!sq_fifo_.empty()) {
    WrCtx* e = sq_fifo_.front();
    sq_fifo_.pop_front();
    if (e->kind == WrCtx::Kind::send) {
      shared_.send_pool->put(e->buf, &worker_.send_cache());
    } else if (e->kind == WrCtx::Kind::read && e->transfer != nullptr) {
      bulk_.read_retired(*e->transfer, wc.status == WcStatus::success);  // the last: read_done queued
    }
    free_ctx(e);
    if (e == ctx) break;
  }
  if (wc.status != WcStatus::success) {
    if (wc.status == WcStatus::flushed) return;
    std::string why = fmt::format("{} completed with {}",
                                  ctx->kind == WrCtx::Kind::read   ? "RDMA READ"
                                  : ctx->kind == WrCtx::Kind::bind ? "memory window bind"
                                                                   : "SEND",
                                  to_string(wc.status));
    if (wc.status == WcStatus::remote_access_error && ctx->kind == WrCtx::Kind::read)
      why += " (the peer advertised memory outside what it registered)";
    else if (wc.status == WcStatus::retry_exceeded)
      why += " (the peer stopped answering)";
    else if (wc.status == WcStatus::rnr_retry_exceeded)
      why += " (receiver not ready: a credit accounting bug)";
    return fault(to_error(wc.status), std::move(why));
  }
  bulk_.issue_reads();
  drain_inbound();
  pump();
}

// --------------------------------------------------------------- inbound

void RdmaConnection::drain_inbound() {
  const bool outer = !delivering_;  // feed() can reach here again (a handler's call)
  delivering_ = true;
  while (!inq_.empty() && !paused_ && handler_ != nullptr && open()) {
    InItem& item = inq_.front();
    BufferList bytes;
    if (item.transfer) {
      // Transfers leave bulk_ in the order they arrived, as the stream does.
      if (!bulk_.front_ready()) break;
      bytes = bulk_.take_front();
    } else {
      bytes = std::move(item.bytes);
    }
    inq_.pop_front();
    feed(std::move(bytes));
  }
  if (!outer) return;  // the outermost call pumps
  delivering_ = false;
  pump();
}

std::error_code RdmaConnection::start_secure(std::span<const std::uint8_t> secret, std::string& why) {
  SIPHON_ASSERT_ON_WORKER(worker_);
  if (!open() || !stream_.banner_done()) {
    why = "secure mode asked for on a connection that is not established";
    return errc::not_connected;
  }
  return stream_.start_secure(secret, client_, why);
}

void RdmaConnection::feed(BufferList&& bytes) {
  worker_.counters().rx_bytes.add(bytes.length());
  worker_.perf().inc(transport::l_msgr_recv_bytes, bytes.length());
  switch (stream_.feed(std::move(bytes))) {
    case transport::FrameStream::Fed::error:
      return fault(stream_.error(), stream_.error_reason());
    case transport::FrameStream::Fed::more:
      break;
    case transport::FrameStream::Fed::established:
      // Frames sent before the revision was known go out first, in order.
      for (proto::Frame& f : stream_.take_early()) (void)send(std::move(f));
      if (handler_ == nullptr) return;  // sending them faulted
      handler_->on_established(stream_.negotiated());
      if (handler_ == nullptr) return;
      break;
  }
  deliver_frames();
}

void RdmaConnection::deliver_frames() {
  if (!stream_.banner_done()) return;
  while (handler_ != nullptr && !paused_ && open()) {
    proto::Frame f;
    switch (stream_.next(f)) {
      case proto::FrameDecoder::Status::need_more:
        return;
      case proto::FrameDecoder::Status::error:
        return fault(stream_.decoder_error(), std::string(stream_.decoder_error_reason()));
      case proto::FrameDecoder::Status::frame:
        worker_.counters().rx_messages.add(1);
        handler_->on_frame(std::move(f));
        break;
    }
  }
}

}  // namespace siphon::rdma
