// RdmaConnection: one RC queue pair carrying a msgr2 connection (internal).
#pragma once

#include <boost/asio/steady_timer.hpp>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "msgr/base/clock.h"
#include "msgr/proto/frame.h"
#include "msgr/transport/frame_stream.h"
#include "msgr/transport/transport.h"
#include "rdma/provider.h"
#include "rdma/transport/bulk_transfers.h"
#include "rdma/transport/credits.h"
#include "rdma/transport/rdma_shared.h"
#include "rdma/transport/rdma_worker.h"
#include "rdma/transport/rdma_wire.h"
#include "rdma/transport/wr_ctx.h"

namespace siphon::rdma {

class RdmaConnection final : public transport::Connection {
 public:
  RdmaConnection(RdmaShared& shared, RdmaWorker& worker, std::unique_ptr<CmId> id, bool client,
                 NetAddress peer);
  ~RdmaConnection() override;

  // transport::Connection
  void start(transport::ConnectionHandler& handler, const proto::Banner& mine) override;
  std::error_code send(proto::Frame&& frame) override;
  std::size_t queued_bytes() const noexcept override {
    SIPHON_ASSERT_ON_WORKER(worker_);
    return queued_bytes_ + stream_.early_bytes();
  }
  void pause_receive(bool paused) override;
  void close() override;
  std::error_code start_secure(std::span<const std::uint8_t> connection_secret, std::string& why) override;
  transport::Worker& worker() noexcept override;
  const NetAddress& peer_address() const noexcept override { return peer_; }
  // The QP, credits and transfers for `messenger dump` (on the worker).
  transport::TransportInfo info() const override;
  const NetAddress& local_address() const noexcept override { return local_; }
  bool is_client() const noexcept override { return client_; }

  // --- setup, on the worker (rdma_connection.cc)
  CmId* cm_id() const noexcept { return id_.get(); }
  // Client: address resolved -> resolve route; route resolved -> QP + connect.
  void on_cm_event(CmEvent& ev);
  // Server side of a connect request: creates the QP and accepts, or rejects.
  void accept_request(const ConnectInfo& peer_info, transport::AcceptHandler on_accept);
  void set_connect_handler(transport::ConnectHandler done) { connect_done_ = std::move(done); }
  void begin_connect();
  // Stack shutdown: a connect still in progress fails with shutting_down
  // (its handler runs), anything else closes as close() does.
  void shutdown();
  // The device went away (RdmaWorker::detach_device): faults the connection
  // (or fails its setup) and destroys its QP and id now, without waiting
  // for flushes; it leaves the worker.
  void device_removed();

  // --- data path, on the worker (rdma_datapath.cc)
  void on_completion(const Wc& wc);
  std::uint32_t qp_num() const noexcept { return qp_ ? qp_->qp_num() : 0; }
  bool drained() const noexcept;

 private:
  // The connection's life, on its worker (rdma_connection.cc has the CM
  // events in detail):
  //
  //   client: resolving --ROUTE_RESOLVED, QP created--> connecting --+
  //   server: accepting (QP created, accept sent) -------------------+
  //                                                                  |
  //                         ESTABLISHED: connect/accept handler runs v
  //   established --start()--> running (banner exchange, then frames; receives
  //        |                      |      completed before start() are held)
  //        +----------------------+-- close() / fault / peer DISCONNECTED /
  //        |                            setup failure from any earlier state
  //        v
  //   closing: QP in ERR, queues dropped, every posted WR flushes back
  //        |   (the drain marker retires unsignaled ones)
  //        v  drained()
  //   closed: off the worker; the last reference destroys QP and id
  //
  // A fault is closing entered with the handler told (once); close() is
  // closing entered without (user_closed_ drops an on_fault already posted).
  // A fault before start() (receives are checked at arrival, started or
  // not; the peer may disconnect) is kept in early_fault_ and reported by
  // start(), from the event loop.
  // Orthogonal to the state: paused_ (pause_receive), over_high_water_ and
  // stalled_ (send side), and the flags that record a resource held or a
  // callback pending (cq_reserved_, srq_reserved_, counted_active_,
  // kick_posted_, retry_pending_, drain_marker_posted_; the transfer
  // timer's is bulk_'s).
  enum class State { resolving, connecting, accepting, established, running, closing, closed };
  // Frames may be sent: the QP is up and the connection not closing.
  bool open() const noexcept { return state_ == State::established || state_ == State::running; }

  // setup and teardown
  std::error_code create_qp();
  std::error_code apply_qos();
  ConnectInfo my_info() const noexcept;
  void established(const ConnectInfo& peer);
  void fail_setup(std::error_code ec, std::string reason);
  // `clean`: the peer closed the connection (logged as a close, not a fault).
  void fault(std::error_code ec, std::string reason, bool clean = false);
  void begin_drain();
  void post_drain_marker();
  void finish_if_drained();
  // Closed: the QP, the id and the buffers of its work requests go now, on
  // the worker, not with the last reference (a session may hold that long
  // after; a device that goes away must not wait for it).
  void release_device_objects() noexcept;

  // data path
  std::error_code post_initial_receives();
  void repost(WrCtx* ctx, bool data_class);
  void on_recv(const Wc& wc, WrCtx* ctx);
  void on_send_queue_completion(const Wc& wc, WrCtx* ctx);
  void pump();
  void add_send(SendHeader& h, PoolBuffer* buf, std::uint32_t payload);
  void flush_batch();
  void drain_inbound();
  void feed(BufferList&& bytes);
  void deliver_frames();
  void process_recv(const Wc& wc, WrCtx* ctx, const SendHeader& h);
  void maybe_writable();
  // Callbacks never run inside a call into the connection (start, send,
  // pause_receive, close; docs/transport.md §1): what such a call makes due
  // (held receives, frames, on_writable) runs from one posted kick().
  void post_kick();
  void kick();
  // Counts the calls into the connection on the stack (callbacks may call
  // back in); while non-zero, callbacks are posted, not called.
  struct CallScope {
    explicit CallScope(RdmaConnection& c) noexcept : c_(c) { ++c_.in_call_; }
    ~CallScope() { --c_.in_call_; }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;
    RdmaConnection& c_;
  };
  // The drain marker could not be posted: retried on the next send-queue
  // completion (on_completion), and by a 1 ms timer as a backstop (teardown
  // only, rare: nothing on the data path polls).
  void schedule_retry();
  // A pool had no buffer: retry bulk_.issue_reads() and pump() when one comes
  // back (BufferPool::notify_on_release), not on a timer. One wait per pool.
  void wait_for_buffers(BufferPool& pool, bool RdmaConnection::*pending, std::size_t want = 1);
  // A MESSAGE's data offered for the peer to READ (bulk_.offer()): the
  // frame's bytes before the data, the read_request, the bytes after it.
  std::error_code queue_bulk(proto::Frame& frame, BufferList&& wire, std::size_t data_off);
  WrCtx* new_ctx(WrCtx::Kind kind);
  void free_ctx(WrCtx* ctx) noexcept;
  // A receive whose bytes are done with: back to the SRQ, or to the pool.
  void drop_recv(WrCtx* ctx) noexcept;
  void release_srq_reservation() noexcept;

  // What the zero-copy transfers (bulk_) may do to the connection: post to
  // its send queue, queue a read_done, fault it, wait for receive buffers.
  // One reference; every function inline (below the class), so a call
  // through the port is a direct call into the connection, as before the
  // split. A nested class: it reaches the connection's private parts, and
  // nothing else can.
  struct BulkPort {
    RdmaConnection& c;
    bool open() const noexcept { return c.open(); }
    std::uint32_t qp_num() const noexcept { return c.qp_num(); }
    std::uint32_t send_queue_depth() const noexcept { return c.sq_depth_; }
    bool send_queue_full() const noexcept { return c.sq_fifo_.size() >= c.sq_depth_; }
    WrCtx* post(WrCtx::Kind kind, SendWr wr, const Sge* sge);
    void flush() { c.flush_batch(); }
    void queue_read_done(std::uint64_t id);
    void fault(std::error_code ec, std::string reason) { c.fault(ec, std::move(reason)); }
    void wait_for_recv_buffers(std::size_t n);
    std::weak_ptr<void> keepalive() const { return c.weak_from_this(); }
  };

  // A ConnectionRef may outlive the stack: these keep the PD, pools, CQ and
  // device alive until the last connection is gone. (The cycle through the
  // workers' connection maps is broken by RdmaStack::stop().)
  std::shared_ptr<RdmaShared> keep_shared_;
  std::shared_ptr<RdmaWorker> keep_worker_;
  RdmaShared& shared_;
  RdmaWorker& worker_;
  std::unique_ptr<CmId> id_;
  std::unique_ptr<QueuePair> qp_;
  // The QP's path (peer QPN, GIDs, path MTU) read once when the connection
  // is established, for info(): a dump then makes no system call.
  std::optional<QpPath> path_;
  bool client_;
  NetAddress peer_, local_;
  State state_;
  // The msgr2 byte stream (shared with the TCP stack): our banner, the
  // peer's, the frame decoder fed with stream bytes and pulled bulk data in
  // order, and the frames sent before the banners decided the revision
  // (counted in queued_bytes(); they go out first, in order, in feed()).
  transport::FrameStream stream_;
  transport::ConnectHandler connect_done_;
  transport::AcceptHandler accept_done_;
  transport::ConnectionHandler* handler_ = nullptr;
  bool cq_reserved_ = false;
  std::uint32_t cq_entries_ = 0;
  std::string setup_why_;  // why create_qp failed, when it can say more than the error code
  std::uint32_t sq_depth_ = 0;
  std::uint32_t max_inline_ = 0;

  // flow control
  std::optional<CreditState> credits_;
  ConnectInfo peer_info_{};
  MonoClock::time_point stalled_since_{};
  bool stalled_ = false;

  // outbound
  struct OutItem {
    enum class Kind : std::uint8_t { stream, read_request, read_done } kind = Kind::stream;
    BufferList bytes;          // stream
    std::uint64_t id = 0;      // read_request / read_done
    std::vector<ReadDescriptor> regions;  // read_request
    std::uint64_t length = 0;  // read_request
    static OutItem stream(BufferList b) {
      OutItem i;
      i.kind = Kind::stream;
      i.bytes = std::move(b);
      return i;
    }
    static OutItem control(Kind k, std::uint64_t id) {
      OutItem i;
      i.kind = k;
      i.id = id;
      return i;
    }
  };
  std::deque<OutItem> outq_;
  std::size_t queued_bytes_ = 0;
  bool over_high_water_ = false;
  std::deque<WrCtx*> sq_fifo_;  // WRs on the send queue, in posting order
  std::uint32_t unsignaled_ = 0;

  // inbound
  std::uint32_t posted_recvs_ = 0;
  struct Held {
    Wc wc;
    WrCtx* ctx;
    SendHeader h;  // decoded and checked at arrival
  };
  std::deque<Held> held_;  // completions held while paused
  struct InItem {
    BufferList bytes;
    bool transfer = false;  // bulk bytes pulled by READ: bulk_'s oldest transfer
  };
  std::deque<InItem> inq_;
  bool paused_ = false;
  // Zero-copy transfers in both directions (bulk_transfers.h).
  BulkTransfers<BulkPort> bulk_;

  std::unique_ptr<boost::asio::steady_timer> retry_timer_;
  bool retry_pending_ = false;
  bool send_buffer_wait_ = false, recv_buffer_wait_ = false;  // wait_for_buffers() pending
  std::vector<SendWr> batch_;  // reused: the data path does not allocate per post
  std::vector<Sge> sges_;
  std::vector<std::unique_ptr<WrCtx>> ctx_storage_;
  std::vector<WrCtx*> ctx_free_;
  bool user_closed_ = false;  // close() was called: a posted on_fault is dropped
  std::optional<transport::Fault> early_fault_;  // faulted before start(): start() reports it
  int in_call_ = 0;           // CallScope depth
  // drain_inbound() is handing frames to the handler: a send() from inside
  // only queues, and the pump after the loop coalesces what the handler sent
  // (one SEND and one credit for a burst of replies, not one each).
  bool delivering_ = false;
  bool kick_posted_ = false;
  bool srq_reserved_ = false;  // holds recvs_per_qp() receives of the worker's SRQ
  bool counted_active_ = false;
  bool drain_marker_posted_ = false;
};

inline WrCtx* RdmaConnection::BulkPort::post(WrCtx::Kind kind, SendWr wr, const Sge* sge) {
  WrCtx* ctx = c.new_ctx(kind);
  wr.wr_id = reinterpret_cast<std::uint64_t>(ctx);
  if (sge != nullptr) c.sges_.push_back(*sge);
  c.batch_.push_back(wr);
  c.sq_fifo_.push_back(ctx);
  return ctx;
}

inline void RdmaConnection::BulkPort::queue_read_done(std::uint64_t id) {
  c.outq_.push_front(OutItem::control(OutItem::Kind::read_done, id));
}

inline void RdmaConnection::BulkPort::wait_for_recv_buffers(std::size_t n) {
  c.wait_for_buffers(*c.shared_.recv_pool, &RdmaConnection::recv_buffer_wait_, n);
}

}  // namespace siphon::rdma
