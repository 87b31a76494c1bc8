// BulkTransfers: one connection's zero-copy transfers, both directions
// (internal; docs/rdma-transport.md §5 "Zero copy").
//
// A MESSAGE whose data segment reaches ms_async_rdma_zero_copy_threshold is
// not copied through SENDs: the sender registers the data where it lies
// (offer()), advertises it in a read_request, and keeps it registered -- an
// OutTransfer -- until the peer's read_done (on_read_done()). The receiver
// takes the read_request (on_read_request()), reserves receive-pool buffers
// for the whole transfer at once, pulls the data with RDMA READs
// (issue_reads()), answers read_done as soon as the last READ completes
// (read_retired()) and hands the chunks to the byte stream in order
// (front_ready(), take_front()). ms_async_rdma_transfer_timeout bounds both
// halves with one timer per connection.
//
// What this class owns: the two transfer tables (out_: id -> OutTransfer;
// in_: the InTransfers in arrival order, next_issue_ the first with READs
// left to issue), the transfer ids, the all-or-nothing reservation and the
// timeout timer. What it does not: the QP, the send-queue FIFO and the WR
// batch, the outbound queue, the fault path and the wait for pool buffers,
// which the send pump shares. It reaches those through `Port`, a small
// concrete type the connection supplies (RdmaConnection::BulkPort, one
// reference to the connection, every function inline):
//
//   bool open() const                 frames may move (not closing)
//   std::uint32_t qp_num() const      for log lines
//   std::uint32_t send_queue_depth() const
//   bool send_queue_full() const      no room for another WR
//   WrCtx* post(WrCtx::Kind, SendWr, const Sge*)
//                                     adds a WR to the batch (not yet posted);
//                                     wr_id is the returned context
//   void flush()                      posts the batch (may fault)
//   void queue_read_done(std::uint64_t id)
//                                     a read_done SEND, ahead of queued bytes
//   void fault(std::error_code, std::string reason)
//   void wait_for_recv_buffers(std::size_t n)
//                                     issue_reads() again once n receive
//                                     buffers are free (once per wait)
//   std::weak_ptr<void> keepalive() const
//                                     expires with the connection (timer)
//
// Port is a template parameter, not a virtual interface: a call through it
// is a direct, inlined call into the connection, so the split adds no
// allocation, lock, atomic or indirect call per message (the in table took
// the place of read_queue_, a deque of the same shape). A message below the
// zero-copy threshold runs none of this class but issue_reads()'s empty check,
// as before. The hooks the connection calls per READ completion and per
// delivered transfer (read_retired, front_ready, take_front, on_read_done)
// are defined here, inline; the rest are in bulk_transfers_impl.h,
// instantiated for the connection in bulk_transfers.cc. Tests instantiate
// the class with a port of their own, without a QP
// (tests/unit/rdma/transport/bulk_transfers_test.cc).
//
// Everything here runs on the connection's worker.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/base/clock.h"
#include "msgr/base/error.h"
#include "msgr/proto/frame.h"
#include "rdma/provider.h"
#include "rdma/transport/buffer_pool.h"
#include "rdma/transport/rdma_perf.h"
#include "rdma/transport/rdma_shared.h"
#include "rdma/transport/rdma_wire.h"
#include "rdma/transport/transfer.h"
#include "rdma/transport/wr_ctx.h"

namespace siphon::rdma {

template <typename Port>
class BulkTransfers {
 public:
  // `recv_cache` and `counters` are the worker's, `io` its event loop.
  BulkTransfers(RdmaShared& shared, PoolCache& recv_cache, RdmaWorkerCounters& counters,
                boost::asio::io_context& io, Port port)
      : shared_(shared), recv_cache_(recv_cache), counters_(counters), io_(io), port_(port) {}
  ~BulkTransfers() { release_buffers(); }
  BulkTransfers(const BulkTransfers&) = delete;
  BulkTransfers& operator=(const BulkTransfers&) = delete;

  // --- sending (we are read from)

  // Registers `frame`'s data segment (frame.segments[3]) for the peer to
  // READ -- copied out first if it lies in our own receive pool -- and
  // records the transfer. On success `id` and `regions` are what the
  // read_request carries; the caller queues it between the frame's bytes
  // before and after the data. An error: nothing was kept, the caller sends
  // the data by SEND instead.
  std::error_code offer(proto::Frame& frame, std::uint64_t& id, std::vector<ReadDescriptor>& regions);
  // The read_request of transfer `id` is going into the batch now: its
  // memory-window binds go in first (scoped rkeys), and the peer's read_done
  // is due within the timeout from here.
  void read_request_sent(std::uint64_t id);
  // The peer's read_done: the transfer's windows and registrations go. An
  // error (a transfer we do not have, or no longer have) with `why` filled:
  // the caller faults the connection with it.
  std::error_code on_read_done(std::uint64_t id, std::string& why) {
    if (out_.erase(id) != 0) return {};
    why = "read_done for a transfer that does not exist";
    return errc::malformed_frame;
  }

  // --- receiving (we READ)

  // A read_request: header `h`, and `received` bytes of the SEND from its
  // start at `send` (header, descriptors, their CRC -- already checked).
  // Queues the transfer behind earlier ones; the caller then calls
  // issue_reads(). An error with `why` filled: the request is malformed or
  // larger than we advertised (max_read), and the caller faults.
  std::error_code on_read_request(const SendHeader& h, const std::uint8_t* send, std::size_t received,
                                  std::string& why);
  // Reserves buffers for, and posts the READs of, the queued transfers in
  // order, as far as buffers and the send queue allow; flushes the batch.
  void issue_reads();
  // A READ of `t` left the send queue (its completion, or a later one's, was
  // seen; `ok`: with success). When it was the last, read_done is queued.
  void read_retired(InTransfer& t, bool ok) {
    --t.reads_outstanding;
    // Every READ of the transfer done: the data is in our pool, and the
    // peer's registrations can go now -- not when the frame reaches the head
    // of the stream and we are not paused. Tying read_done to delivery kept
    // the peer's data pinned while we were paused or an older transfer
    // waited for pool room, so two peers could each wait for the other's
    // read_done (issue 19).
    if (ok && t.ready() && !t.done_queued) {
      t.done_queued = true;
      port_.queue_read_done(t.id);
    }
  }
  // A READ of `t` that was in a batch whose post failed: never on the queue.
  static void read_unposted(InTransfer& t) noexcept { --t.reads_outstanding; }
  // The oldest transfer received has all its data (its turn in the stream
  // is the caller's to know: transfers arrive and leave in order).
  bool front_ready() const noexcept { return !in_.empty() && in_.front()->ready(); }
  // Its data as pool buffers, in order; the transfer is forgotten.
  BufferList take_front() {
    BufferList bytes;
    InTransfer& t = *in_.front();
    for (auto& [buf, len] : t.chunks) bytes.append(BufferPool::wrap(buf, len));
    t.chunks.clear();
    // Its read_done went when the last READ completed (read_retired()).
    in_.pop_front();
    --next_issue_;  // it was issued: ready() implies issued_all
    return bytes;
  }

  // --- lifetime

  // The connection is closing (its QP is in ERR): the timer stops, no more
  // READs are issued, and our registrations go (the peer can no longer read
  // them). Received transfers stay until destruction: their READs still
  // flush back and name them.
  void stop();
  // Reserved receive buffers back to the pool (any thread: at destruction).
  void release_buffers() noexcept;
  std::size_t out_count() const noexcept { return out_.size(); }
  std::size_t in_count() const noexcept { return in_.size(); }

  // The timeout's expiry check (called by the timer; public for tests).
  void on_timer();

 private:
  std::size_t chunks_needed(const InTransfer& t) const;
  bool reserve(InTransfer& t);
  void add_binds(OutTransfer& t);
  // ms_async_rdma_transfer_timeout: `since` = now, and the timer armed if it
  // is not.
  void started(MonoClock::time_point& since);
  void arm_timer(MonoClock::duration after);

  RdmaShared& shared_;
  PoolCache& recv_cache_;
  RdmaWorkerCounters& counters_;
  boost::asio::io_context& io_;
  Port port_;
  std::map<std::uint64_t, OutTransfer> out_;
  std::uint64_t next_id_ = 1;
  std::deque<std::unique_ptr<InTransfer>> in_;  // in arrival order
  std::size_t next_issue_ = 0;                  // in_[next_issue_..] have READs left to issue
  std::unique_ptr<boost::asio::steady_timer> timer_;
  bool timer_armed_ = false;
};

}  // namespace siphon::rdma
