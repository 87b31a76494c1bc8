// BulkTransfers' member functions (bulk_transfers.h has the design).
// Included by bulk_transfers.cc, which instantiates them for the
// connection's port, and by tests that instantiate them for their own.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/transport/bulk_transfers.h"

namespace siphon::rdma {

// ----------------------------------------------------------------- send

template <typename Port>
std::error_code BulkTransfers<Port>::offer(proto::Frame& frame, std::uint64_t& id,
                                           std::vector<ReadDescriptor>& regions) {
  // Data that lives in our own receive pool -- an application sending on
  // what it received, as an echo server does -- is copied out of the pool
  // first, and the copy is what the peer reads. Offered in place, the pool
  // buffers would stay held until the peer's read_done, and the peer's
  // READ may itself wait for pool room held the same way by the peer's
  // echoes of our data: two echoing peers then each wait for the other
  // until ms_async_rdma_transfer_timeout (issue 19). The receive pool must
  // only be held by frames being delivered or kept by an application, never
  // by a transfer waiting on the peer (max_read's guarantee, reserve()).
  if (std::any_of(frame.segments[3].ptrs().begin(), frame.segments[3].ptrs().end(),
                  [&](const BufferPtr& p) { return p.segment() != nullptr && shared_.recv_pool->owns(*p.segment()); })) {
    const std::size_t n = frame.segments[3].length();
    BufferList copy;
    frame.segments[3].copy_out(0, n, copy.append_uninitialized(n));
    frame.segments[3] = std::move(copy);
    counters_.zero_copy_pool_copies.add(1);
  }
  const BufferList& data = frame.segments[3];
  // No data, no read_request: the peer refuses one without descriptors.
  if (data.empty() || data.segment_count() > kMaxReadDescriptors) return errc::not_supported;
  OutTransfer t;
  // Scoped rkeys: each region is bound as a type-2 window to this QP (the
  // bind WR goes just before the read_request SEND, read_request_sent()), so
  // its rkey is worthless on any other connection; the MR itself grants no
  // remote access.
  const bool scoped = shared_.scoped_rkeys;
  if (scoped && data.segment_count() + 1 > port_.send_queue_depth()) return errc::not_supported;
  for (const BufferPtr& p : data.ptrs()) {
    if (p.length() == 0) continue;  // a descriptor of 0 bytes is malformed on the wire
    std::error_code ec;
    auto mr = shared_.pd->reg_mr(const_cast<std::byte*>(p.data()), p.length(), scoped ? kMwBind : kRemoteRead, ec);
    std::unique_ptr<MemoryWindow> mw = mr && scoped ? shared_.pd->alloc_mw(ec) : nullptr;
    if (!mr || (scoped && !mw)) {
      SIPHON_LOG(rdma, 1, "qp {}: {} {} bytes for zero-copy failed ({}); copying instead", port_.qp_num(),
                 mr ? "a memory window for" : "registering", p.length(), ec.message());
      return ec ? ec : make_error_code(errc::memory_registration_failed);
    }
    regions.push_back({reinterpret_cast<std::uint64_t>(p.data()), scoped ? next_rkey(mw->rkey()) : mr->rkey(),
                       static_cast<std::uint32_t>(p.length())});
    t.mrs.push_back(std::move(mr));
    if (mw) t.mws.push_back(std::move(mw));
  }
  id = next_id_++;
  const std::size_t len = data.length();
  t.data = data;
  counters_.zero_copy_transfers.add(1);
  counters_.zero_copy_bytes.add(len);
  counters_.transfer_registrations.add(t.mrs.size());
  out_.emplace(id, std::move(t));
  return {};
}

template <typename Port>
void BulkTransfers<Port>::read_request_sent(std::uint64_t id) {
  const auto it = out_.find(id);
  // Gone already: a read_done that came before its read_request (the
  // advertised rkeys are then dead). Nothing to bind, nothing to time.
  if (it == out_.end()) return;
  add_binds(it->second);
  started(it->second.since);
}

// Scoped rkeys: one bind WR per region, queued just before the transfer's
// read_request SEND so send-queue order puts the windows in place before
// the peer can learn their rkeys. Nothing to do without windows.
template <typename Port>
void BulkTransfers<Port>::add_binds(OutTransfer& t) {
  if (t.mws.empty() || t.bound) return;
  t.bound = true;
  for (std::size_t i = 0; i < t.mws.size(); ++i) {
    MemoryRegion& mr = *t.mrs[i];
    SendWr wr;
    wr.opcode = Opcode::bind_mw;
    wr.rkey = next_rkey(t.mws[i]->rkey());
    wr.bind = MwBind{t.mws[i].get(), &mr, reinterpret_cast<std::uint64_t>(mr.addr()), mr.length(), kRemoteRead};
    port_.post(WrCtx::Kind::bind, wr, nullptr);
  }
  counters_.transfer_windows.add(t.mws.size());
}

// ---------------------------------------------------------------- READs

template <typename Port>
std::error_code BulkTransfers<Port>::on_read_request(const SendHeader& h, const std::uint8_t* p, std::size_t received,
                                                     std::string& why) {
  auto t = std::make_unique<InTransfer>();
  t->id = h.id;
  t->length = h.length;
  const std::size_t n = (received - SendHeader::kSize - ReadDescriptor::kCrcSize) / ReadDescriptor::kSize;
  std::uint64_t total = 0;
  bool ok = n <= kMaxReadDescriptors;
  for (std::size_t i = 0; ok && i < n; ++i) {
    const ReadDescriptor d = ReadDescriptor::decode(p + SendHeader::kSize + i * ReadDescriptor::kSize);
    ok = d.length > 0;
    total += d.length;
    t->regions.push_back(d);
  }
  const std::uint64_t limit = shared_.max_read();
  if (!ok || total != h.length || total > limit) {
    why = total > limit ? fmt::format("peer offered a {}-byte zero-copy transfer; we take at most {}", total, limit)
                        : std::string("read request descriptors disagree with its length");
    return errc::malformed_frame;
  }
  in_.push_back(std::move(t));
  return {};
}

// Receive buffers a transfer needs (one per buffer_size chunk of each region).
template <typename Port>
std::size_t BulkTransfers<Port>::chunks_needed(const InTransfer& t) const {
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
template <typename Port>
bool BulkTransfers<Port>::reserve(InTransfer& t) {
  const std::size_t n = chunks_needed(t);
  const std::uint64_t chunk = shared_.opts.buffer_size;
  t.chunks.reserve(n);
  for (const ReadDescriptor& r : t.regions)
    for (std::uint64_t off = 0; off < r.length; off += chunk) {
      PoolBuffer* buf = shared_.recv_pool->get(&recv_cache_, Growth::background);
      if (buf == nullptr) {
        // Back to the shared list, where the wait below counts them (a
        // worker's cache is invisible to notify_on_release).
        for (auto& [b, len] : t.chunks) shared_.recv_pool->put(b, &recv_cache_);
        t.chunks.clear();
        recv_cache_.return_all();
        return false;
      }
      t.chunks.emplace_back(buf, static_cast<std::uint32_t>(std::min(chunk, r.length - off)));
    }
  t.reserved = true;
  return true;
}

template <typename Port>
void BulkTransfers<Port>::issue_reads() {
  if (!port_.open()) return;
  while (next_issue_ < in_.size()) {
    InTransfer* t = in_[next_issue_].get();
    if (!t->reserved && !reserve(*t)) {
      port_.flush();
      // Buffers come back as delivered messages are released (or a slab is
      // added): woken then.
      port_.wait_for_recv_buffers(chunks_needed(*t));
      return;
    }
    if (t->since == MonoClock::time_point{}) started(t->since);
    while (t->next_chunk < t->chunks.size()) {
      if (port_.send_queue_full()) return port_.flush();
      const auto [buf, n] = t->chunks[t->next_chunk];
      const ReadDescriptor& r = t->regions[t->next_region];
      const Sge sge{reinterpret_cast<std::uint64_t>(buf->data()), n, buf->keys().lkey};
      SendWr wr;
      wr.opcode = Opcode::rdma_read;
      wr.num_sge = 1;
      wr.remote_addr = r.addr + t->next_offset;
      wr.rkey = r.rkey;
      WrCtx* ctx = port_.post(WrCtx::Kind::read, wr, &sge);
      ctx->transfer = t;
      ctx->len = n;
      ++t->next_chunk;
      ++t->reads_outstanding;
      counters_.rdma_reads.add(1);
      t->next_offset += n;
      if (t->next_offset == r.length) {
        ++t->next_region;
        t->next_offset = 0;
      }
    }
    t->issued_all = true;
    ++next_issue_;
  }
  port_.flush();
}

// ------------------------------------------------------------ lifetime

template <typename Port>
void BulkTransfers<Port>::stop() {
  if (timer_) timer_->cancel();
  next_issue_ = in_.size();
  out_.clear();
}

template <typename Port>
void BulkTransfers<Port>::release_buffers() noexcept {
  for (auto& t : in_) {
    for (auto& [buf, len] : t->chunks) shared_.recv_pool->put(buf);
    t->chunks.clear();
  }
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

template <typename Port>
void BulkTransfers<Port>::started(MonoClock::time_point& since) {
  since = MonoClock::now();
  const auto timeout = shared_.opts.transfer_timeout;
  if (timeout.count() <= 0 || timer_armed_) return;
  arm_timer(timeout);
}

template <typename Port>
void BulkTransfers<Port>::arm_timer(MonoClock::duration after) {
  if (!timer_) timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  timer_armed_ = true;
  timer_->expires_after(after);
  // `this` lives as long as the connection the port keeps alive.
  timer_->async_wait([this, weak = port_.keepalive()](const boost::system::error_code& e) {
    const auto self = weak.lock();
    if (!self) return;
    timer_armed_ = false;
    if (!e) on_timer();
  });
}

template <typename Port>
void BulkTransfers<Port>::on_timer() {
  if (!port_.open()) return;
  const auto timeout = shared_.opts.transfer_timeout;
  if (timeout.count() <= 0) return;
  const auto now = MonoClock::now();
  const auto seconds = std::chrono::duration<double>(timeout).count();
  std::optional<MonoClock::time_point> oldest;
  for (const auto& [id, t] : out_) {
    if (t.since == MonoClock::time_point{}) continue;  // read_request not posted yet
    if (now - t.since >= timeout) {
      shared_.counters.transfer_timeouts.fetch_add(1, std::memory_order_relaxed);
      return port_.fault(make_error_code(errc::timed_out),
                         fmt::format("zero-copy transfer {} ({} bytes): no read_done from the peer within "
                                     "ms_async_rdma_transfer_timeout ({} s) of the read_request",
                                     id, t.data.length(), seconds));
    }
    if (!oldest || t.since < *oldest) oldest = t.since;
  }
  for (const auto& p : in_) {
    const InTransfer* t = p.get();
    if (t->ready() || t->since == MonoClock::time_point{}) continue;
    if (now - t->since >= timeout) {
      shared_.counters.transfer_timeouts.fetch_add(1, std::memory_order_relaxed);
      return port_.fault(make_error_code(errc::timed_out),
                         fmt::format("zero-copy transfer {} ({} bytes): RDMA READ from the peer not complete within "
                                     "ms_async_rdma_transfer_timeout ({} s)", t->id, t->length, seconds));
    }
    if (!oldest || t->since < *oldest) oldest = t->since;
  }
  if (oldest) arm_timer(*oldest + timeout - now);
}

}  // namespace siphon::rdma
