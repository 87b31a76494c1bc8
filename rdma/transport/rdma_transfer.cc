// RdmaConnection: zero-copy transfers in both directions (docs/rdma-transport.md
// §Zero-copy): the sender's registrations and read_request, the receiver's
// buffer reservation and RDMA READs, and the transfer timeout.
#include <fmt/format.h>

#include <algorithm>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/transport/rdma_connection.h"

namespace siphon::rdma {

// ----------------------------------------------------------------- send

std::error_code RdmaConnection::queue_bulk(proto::Frame& frame, BufferList&& wire, std::size_t off) {
  // Data that lives in our own receive pool -- an application sending on
  // what it received, as an echo server does -- is copied out of the pool
  // first, and the copy is what the peer reads. Offered in place, the pool
  // buffers would stay held until the peer's read_done, and the peer's
  // READ may itself wait for pool room held the same way by the peer's
  // echoes of our data: two echoing peers then each wait for the other
  // until ms_async_rdma_transfer_timeout (issue 19). The receive pool must
  // only be held by frames being delivered or kept by an application, never
  // by a transfer waiting on the peer (max_read's guarantee, reserve_transfer).
  if (std::any_of(frame.segments[3].ptrs().begin(), frame.segments[3].ptrs().end(),
                  [&](const BufferPtr& p) { return p.segment() != nullptr && shared_.recv_pool->owns(*p.segment()); })) {
    const std::size_t n = frame.segments[3].length();
    BufferList copy;
    frame.segments[3].copy_out(0, n, copy.append_uninitialized(n));
    frame.segments[3] = std::move(copy);
    worker_.counters().zero_copy_pool_copies.add(1);
  }
  const BufferList& data = frame.segments[3];
  // No data, no read_request: the peer refuses one without descriptors.
  if (data.empty() || data.segment_count() > kMaxReadDescriptors) return errc::not_supported;
  OutTransfer t;
  std::vector<ReadDescriptor> regions;
  // Scoped rkeys: each region is bound as a type-2 window to this QP (the
  // bind WR goes just before the read_request SEND, pump()), so its rkey is
  // worthless on any other connection; the MR itself grants no remote access.
  const bool scoped = shared_.scoped_rkeys;
  if (scoped && data.segment_count() + 1 > sq_depth_) return errc::not_supported;
  for (const BufferPtr& p : data.ptrs()) {
    if (p.length() == 0) continue;  // a descriptor of 0 bytes is malformed on the wire
    std::error_code ec;
    auto mr = shared_.pd->reg_mr(const_cast<std::byte*>(p.data()), p.length(), scoped ? kMwBind : kRemoteRead, ec);
    std::unique_ptr<MemoryWindow> mw = mr && scoped ? shared_.pd->alloc_mw(ec) : nullptr;
    if (!mr || (scoped && !mw)) {
      SIPHON_LOG(rdma, 1, "qp {}: {} {} bytes for zero-copy failed ({}); copying instead", qp_num(),
                 mr ? "a memory window for" : "registering", p.length(), ec.message());
      return ec ? ec : make_error_code(errc::memory_registration_failed);
    }
    regions.push_back({reinterpret_cast<std::uint64_t>(p.data()), scoped ? next_rkey(mw->rkey()) : mr->rkey(),
                       static_cast<std::uint32_t>(p.length())});
    t.mrs.push_back(std::move(mr));
    if (mw) t.mws.push_back(std::move(mw));
  }
  const std::uint64_t id = next_transfer_id_++;
  const std::size_t len = data.length();
  t.data = data;
  worker_.counters().zero_copy_transfers.add(1);
  worker_.counters().zero_copy_bytes.add(len);
  worker_.counters().transfer_registrations.add(t.mrs.size());
  out_transfers_.emplace(id, std::move(t));
  queued_bytes_ += wire.length();
  outq_.push_back(OutItem::stream(wire.slice(0, off)));
  OutItem rr = OutItem::control(OutItem::Kind::read_request, id);
  rr.regions = std::move(regions);
  rr.length = len;
  outq_.push_back(std::move(rr));
  outq_.push_back(OutItem::stream(wire.slice(off + len, wire.length() - off - len)));
  return {};
}

// Scoped rkeys: one bind WR per region of transfer `id`, queued just before
// its read_request SEND so send-queue order puts the windows in place before
// the peer can learn their rkeys. Nothing to do without windows, or when the
// transfer is already gone (a read_done that came before its read_request:
// the advertised rkeys are then dead).
void RdmaConnection::add_binds(std::uint64_t id) {
  const auto it = out_transfers_.find(id);
  if (it == out_transfers_.end() || it->second.mws.empty() || it->second.bound) return;
  OutTransfer& t = it->second;
  t.bound = true;
  for (std::size_t i = 0; i < t.mws.size(); ++i) {
    MemoryRegion& mr = *t.mrs[i];
    SendWr wr;
    wr.wr_id = reinterpret_cast<std::uint64_t>(new_ctx(WrCtx::Kind::bind));
    wr.opcode = Opcode::bind_mw;
    wr.rkey = next_rkey(t.mws[i]->rkey());
    wr.bind = MwBind{t.mws[i].get(), &mr, reinterpret_cast<std::uint64_t>(mr.addr()), mr.length(), kRemoteRead};
    batch_.push_back(wr);
    sq_fifo_.push_back(reinterpret_cast<WrCtx*>(wr.wr_id));
  }
  worker_.counters().transfer_windows.add(t.mws.size());
}

// ---------------------------------------------------------------- READs

// Receive buffers a transfer needs (one per buffer_size chunk of each region).
std::size_t RdmaConnection::chunks_needed(const InTransfer& t) const {
  const std::uint64_t chunk = shared_.opts.buffer_size;
  std::size_t n = 0;
  for (const ReadDescriptor& r : t.regions) n += static_cast<std::size_t>((r.length + chunk - 1) / chunk);
  return n;
}

// Every buffer of the transfer, or none. A transfer never holds part of the
// receive pool while it waits for the rest, so transfers (on this and other
// connections) cannot deadlock each other on the pool, and max_read (half
// the pool) guarantees the reservation succeeds once the others are
// delivered and their frames released.
bool RdmaConnection::reserve_transfer(InTransfer& t) {
  const std::size_t n = chunks_needed(t);
  const std::uint64_t chunk = shared_.opts.buffer_size;
  t.chunks.reserve(n);
  for (const ReadDescriptor& r : t.regions)
    for (std::uint64_t off = 0; off < r.length; off += chunk) {
      PoolBuffer* buf = shared_.recv_pool->get(&worker_.recv_cache(), Growth::background);
      if (buf == nullptr) {
        // Back to the shared list, where the wait below counts them (a
        // worker's cache is invisible to notify_on_release).
        for (auto& [b, len] : t.chunks) shared_.recv_pool->put(b, &worker_.recv_cache());
        t.chunks.clear();
        worker_.recv_cache().return_all();
        return false;
      }
      t.chunks.emplace_back(buf, static_cast<std::uint32_t>(std::min(chunk, r.length - off)));
    }
  t.reserved = true;
  return true;
}

void RdmaConnection::issue_reads() {
  if (!open()) return;
  while (!read_queue_.empty()) {
    InTransfer* t = read_queue_.front();
    if (!t->reserved && !reserve_transfer(*t)) {
      flush_batch();
      // Buffers come back as delivered messages are released (or a slab is
      // added): woken then.
      wait_for_buffers(*shared_.recv_pool, &RdmaConnection::recv_buffer_wait_, chunks_needed(*t));
      return;
    }
    if (t->since == MonoClock::time_point{}) transfer_started(t->since);
    while (t->next_chunk < t->chunks.size()) {
      if (sq_fifo_.size() >= sq_depth_) return flush_batch();
      const auto [buf, n] = t->chunks[t->next_chunk];
      const ReadDescriptor& r = t->regions[t->next_region];
      WrCtx* ctx = new_ctx(WrCtx::Kind::read);
      ctx->transfer = t;
      ctx->len = n;
      sges_.push_back({reinterpret_cast<std::uint64_t>(buf->data()), n, buf->keys().lkey});
      SendWr wr;
      wr.wr_id = reinterpret_cast<std::uint64_t>(ctx);
      wr.opcode = Opcode::rdma_read;
      wr.num_sge = 1;
      wr.remote_addr = r.addr + t->next_offset;
      wr.rkey = r.rkey;
      batch_.push_back(wr);
      sq_fifo_.push_back(ctx);
      ++t->next_chunk;
      ++t->reads_outstanding;
      worker_.counters().rdma_reads.add(1);
      t->next_offset += n;
      if (t->next_offset == r.length) {
        ++t->next_region;
        t->next_offset = 0;
      }
    }
    t->issued_all = true;
    read_queue_.pop_front();
  }
  flush_batch();
}

// ------------------------------------------------- transfer timeout
//
// ms_async_rdma_transfer_timeout bounds both halves of a zero-copy transfer:
// the sender waits at most that long, from posting its read_request, for the
// peer's read_done (a peer that never reads keeps our data registered for
// remote access); the receiver waits at most that long, from posting its
// first RDMA READ, for the last READ to complete. Either way the connection
// faults with a reason naming the option, and a lossless session reconnects
// and replays. One timer per connection, armed only while transfers are
// outstanding; the per-transfer cost is one clock read.

void RdmaConnection::transfer_started(MonoClock::time_point& since) {
  since = MonoClock::now();
  const auto timeout = shared_.opts.transfer_timeout;
  if (timeout.count() <= 0 || transfer_timer_armed_) return;
  arm_transfer_timer(timeout);
}

void RdmaConnection::arm_transfer_timer(MonoClock::duration after) {
  if (!transfer_timer_) transfer_timer_ = std::make_unique<boost::asio::steady_timer>(worker_.io());
  transfer_timer_armed_ = true;
  transfer_timer_->expires_after(after);
  transfer_timer_->async_wait(
      [weak = std::weak_ptr<RdmaConnection>(std::static_pointer_cast<RdmaConnection>(shared_from_this()))](
          const boost::system::error_code& e) {
        const auto self = weak.lock();
        if (!self) return;
        self->transfer_timer_armed_ = false;
        if (!e) self->on_transfer_timer();
      });
}

void RdmaConnection::on_transfer_timer() {
  if (!open()) return;
  const auto timeout = shared_.opts.transfer_timeout;
  if (timeout.count() <= 0) return;
  const auto now = MonoClock::now();
  const auto seconds = std::chrono::duration<double>(timeout).count();
  std::optional<MonoClock::time_point> oldest;
  for (const auto& [id, t] : out_transfers_) {
    if (t.since == MonoClock::time_point{}) continue;  // read_request not posted yet
    if (now - t.since >= timeout) {
      shared_.counters.transfer_timeouts.fetch_add(1, std::memory_order_relaxed);
      return fault(make_error_code(errc::timed_out),
                   fmt::format("zero-copy transfer {} ({} bytes): no read_done from the peer within "
                               "ms_async_rdma_transfer_timeout ({} s) of the read_request",
                               id, t.data.length(), seconds));
    }
    if (!oldest || t.since < *oldest) oldest = t.since;
  }
  for (const InItem& item : inq_) {
    const InTransfer* t = item.transfer.get();
    if (t == nullptr || t->ready() || t->since == MonoClock::time_point{}) continue;
    if (now - t->since >= timeout) {
      shared_.counters.transfer_timeouts.fetch_add(1, std::memory_order_relaxed);
      return fault(make_error_code(errc::timed_out),
                   fmt::format("zero-copy transfer {} ({} bytes): RDMA READ from the peer not complete within "
                               "ms_async_rdma_transfer_timeout ({} s)", t->id, t->length, seconds));
    }
    if (!oldest || t->since < *oldest) oldest = t->since;
  }
  if (oldest) arm_transfer_timer(*oldest + timeout - now);
}

}  // namespace siphon::rdma
