// Internals of the RDMA stack shared by rdma_stack.cc, rdma_worker.cc,
// rdma_connection.cc and rdma_datapath.cc. Not part of the public interface.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "msgr/base/clock.h"
#include "msgr/proto/frame.h"
#include "msgr/transport/transport.h"
#include "rdma/provider.h"
#include "rdma/transport/buffer_pool.h"
#include "rdma/transport/counters.h"
#include "rdma/transport/credits.h"
#include "rdma/transport/options.h"
#include "rdma/transport/wire.h"

namespace siphon::rdma {

class RdmaConnection;
class RdmaWorker;
struct InTransfer;

// Work-request contexts: wr_id is a pointer to one of these, owned by the
// connection, valid until its completion has been seen.
struct WrCtx {
  enum class Kind : std::uint8_t { recv, send, read, drain, bind } kind;
  PoolBuffer* buf = nullptr;
  std::uint32_t len = 0;
  struct InTransfer* transfer = nullptr;  // read: the transfer it fills
};

// Registers pool slabs and transfer regions on the stack's PD.
class PdRegistrar final : public Registrar {
 public:
  PdRegistrar(ProtectionDomain& pd, std::uint32_t access) noexcept : pd_(pd), access_(access) {}
  std::error_code register_region(void* addr, std::size_t len, RegionKeys& keys) override;
  void deregister_region(const RegionKeys& keys) noexcept override;
  // Regions registered and not yet deregistered.
  std::size_t region_count() const;

 private:
  ProtectionDomain& pd_;
  std::uint32_t access_;
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, std::unique_ptr<MemoryRegion>> mrs_;
  std::uint64_t next_id_ = 1;
};

struct RdmaShared : std::enable_shared_from_this<RdmaShared> {
  RdmaOptions opts;
  Provider& provider;
  RdmaCounters counters;  // the control path's (any thread, fetch_add); the data path uses its worker's
  std::unique_ptr<Device> device;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<PdRegistrar> registrar;
  std::unique_ptr<BufferPool> send_pool;
  std::unique_ptr<BufferPool> recv_pool;
  std::unique_ptr<EventChannel> channel;
  std::vector<std::shared_ptr<RdmaWorker>> workers;

  // CmId -> connection, for routing CM events (served on worker 0) to the
  // connection's worker. Guarded by mu.
  std::mutex mu;
  std::unordered_map<CmId*, std::weak_ptr<RdmaConnection>> by_id;
  struct Listener {
    std::unique_ptr<CmId> id;
    transport::AcceptHandler on_accept;
  };
  std::vector<std::unique_ptr<Listener>> listeners;
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> stopping{false};
  std::atomic<bool> started{false};
  std::atomic<std::size_t> round_robin{0};
  std::atomic<bool> qos_noted{false};  // a QoS field the provider could not apply was logged
  // Zero-copy rkeys are type-2 memory windows bound to the connection's QP
  // (DeviceAttr::mw_type2); false: the MR's own rkey, valid on every QP of
  // the PD (logged at stack start).
  bool scoped_rkeys = false;
  // Receives of each worker's SRQ (ms_async_rdma_receive_queue_len capped by
  // the device), 0 without SRQ. Set before the workers are created.
  std::uint32_t srq_depth = 0;
  // Polling time in effect (plan_polling), and whether this stack's workers
  // count in spinning_workers(). Set before the workers start.
  std::chrono::microseconds polling{0};
  bool counted_spinning = false;

  RdmaShared(Provider& p, RdmaOptions o) : opts(std::move(o)), provider(p) {}
  RdmaWorker& least_loaded() noexcept;
  // Derived per-connection receive geometry.
  std::uint32_t window() const noexcept { return opts.credits; }
  std::uint32_t recvs_per_qp() const noexcept { return opts.credits + kUpdateSlots; }
  // Send queue depth asked of each QP (the device may round it up).
  std::uint32_t sq_depth() const noexcept {
    const std::uint32_t cap = device->attr().max_qp_wr;
    return cap != 0 ? std::min(opts.send_queue_depth, cap) : opts.send_queue_depth;
  }
  // Receives per worker SRQ (0 without SRQ).
  std::uint32_t srq_entries() const noexcept { return srq_depth; }
  // CQ entries one connection reserves on its worker: its send queue, and
  // its receive queue unless receives come from the worker's SRQ.
  std::uint32_t cq_entries_per_qp() const noexcept {
    return sq_depth() + (opts.support_srq ? 0 : recvs_per_qp());
  }
  // What each worker's CQ should hold: opts.cq_depth, or (0) enough for
  // ceil(max_connections / workers) connections plus the SRQ.
  std::uint64_t cq_depth_wanted() const noexcept {
    if (opts.cq_depth != 0) return opts.cq_depth;
    const std::uint64_t nw = std::max<std::uint64_t>(opts.common.async_op_threads, 1);
    const std::uint64_t conns = std::max<std::uint64_t>((opts.max_connections + nw - 1) / nw, 1);
    return conns * cq_entries_per_qp() + srq_entries();
  }
  // Connections a CQ of `depth` entries takes.
  std::uint64_t connections_per_cq(std::uint64_t depth) const noexcept {
    return depth > srq_entries() ? (depth - srq_entries()) / cq_entries_per_qp() : 0;
  }
  // The largest zero-copy transfer we pull (advertised as max_read): half
  // the receive pool, so a transfer's all-or-nothing buffer reservation can
  // always succeed once other transfers are delivered and released.
  // In SRQ mode the receives the workers' SRQs keep posted are not part of
  // that half: it is half of what remains.
  std::uint32_t max_read() const noexcept {
    const std::uint64_t srq_held = static_cast<std::uint64_t>(srq_depth) * workers.size();
    const std::uint64_t rest = opts.receive_buffers > srq_held ? opts.receive_buffers - srq_held : 0;
    const std::uint64_t half = (rest / 2) * opts.buffer_size;
    return static_cast<std::uint32_t>(
        std::min<std::uint64_t>({half, opts.common.frame_limits.max_segment, UINT32_MAX}));
  }
};

class RdmaWorker final : public transport::Worker, public std::enable_shared_from_this<RdmaWorker> {
 public:
  RdmaWorker(RdmaShared& shared, std::size_t index);
  ~RdmaWorker() override;

  boost::asio::io_context& io() noexcept override { return io_; }
  std::size_t index() const noexcept override { return index_; }
  // Asio knows which thread runs the io_context (as in TcpWorker): no
  // thread id written by the new thread and read unsynchronised by others.
  bool in_worker_thread() const noexcept override { return exec_.running_in_this_thread(); }
  void post(std::function<void()> fn) override;

  void start();
  void stop_and_join();

  CompletionQueue& cq() noexcept { return *cq_; }
  PoolCache& send_cache() noexcept { return *send_cache_; }
  PoolCache& recv_cache() noexcept { return *recv_cache_; }
  // This worker's counters: written only on its thread (Counter::add),
  // read by RdmaStack::counters() from anywhere.
  RdmaCounters& counters() noexcept { return counters_; }
  const RdmaCounters& counters() const noexcept { return counters_; }
  // Connections on this worker, only on the worker. The worker owns a
  // connection from the moment its setup starts here (adopt) until its
  // teardown has drained (remove): while a client resolves and connects,
  // nothing else holds it -- the CM routing table (RdmaShared::by_id) only
  // has a weak reference.
  void adopt(const std::shared_ptr<RdmaConnection>& c);
  // Routes completions of the connection's QP to it (once the QP exists).
  void add_qp(const std::shared_ptr<RdmaConnection>& c);
  void remove(RdmaConnection* c);
  std::size_t load() const noexcept { return load_.load(std::memory_order_relaxed); }
  // load() plus connections picked for this worker and not adopted yet.
  std::size_t weight() const noexcept { return load() + picked_.load(std::memory_order_relaxed); }
  void note_picked() noexcept { picked_.fetch_add(1, std::memory_order_relaxed); }
  // Reserves CQ entries for a QP; false when the CQ cannot take it.
  bool reserve_cq(std::uint32_t entries) noexcept;
  void release_cq(std::uint32_t entries) noexcept;
  std::uint32_t cq_capacity() const noexcept { return cq_capacity_; }
  std::uint32_t cq_reserved() const noexcept { return cq_reserved_.load(std::memory_order_relaxed); }
  // Closes every connection (stack shutdown); on the worker.
  void close_all();

  // --- SRQ mode (ms_async_rdma_support_srq): one shared receive queue per
  // worker, filled once with srq_depth receive buffers from the receive pool.
  // A connection reserves its credits plus update slots in it when its QP is
  // created and releases them when it is closed, so the receives its peer can
  // consume are always posted (no RNR). Receive contexts are the worker's:
  // a receive completion goes to the connection with that QP number, which
  // hands the context back through srq_repost() once its bytes are copied
  // out; a completion for a connection that is gone is re-posted at once.
  SharedReceiveQueue* srq() noexcept { return srq_.get(); }
  // Reserves `n` receives of the SRQ; false when they are not available.
  bool reserve_srq(std::uint32_t n) noexcept;
  void release_srq(std::uint32_t n) noexcept;
  std::uint32_t srq_posted() const noexcept { return srq_posted_.load(std::memory_order_relaxed); }
  std::uint32_t srq_reserved() const noexcept { return srq_reserved_.load(std::memory_order_relaxed); }
  // Puts a receive context of this worker's SRQ back on it (on the worker).
  void srq_repost(WrCtx* ctx) noexcept;
  // Starts serving the CM event channel (worker 0 only).
  void serve_cm();

 private:
  void create_srq();
  void poll_loop();
  std::size_t poll_batch();
  void start_polling();
  void wait_cq();
  std::size_t drain_cm();
  void wait_cm();
  void on_cm_readable();

  RdmaShared& shared_;
  std::size_t index_;
  boost::asio::io_context io_;
  boost::asio::io_context::executor_type exec_{io_.get_executor()};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::thread thread_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> cq_fd_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> cm_fd_;
  std::unique_ptr<PoolCache> send_cache_, recv_cache_;
  RdmaCounters counters_;  // padded (counters.h): no line shared with another worker's
  std::unordered_map<RdmaConnection*, std::shared_ptr<RdmaConnection>> owned_;
  std::unordered_map<std::uint32_t, std::shared_ptr<RdmaConnection>> conns_;  // by QP number
  std::atomic<std::size_t> load_{0};
  std::atomic<std::size_t> picked_{0};  // picks not yet adopted (saturating)
  std::atomic<std::uint32_t> cq_reserved_{0};
  std::uint32_t cq_capacity_ = 0;
  std::unique_ptr<SharedReceiveQueue> srq_;
  std::unique_ptr<WrCtx[]> srq_ctx_;  // each owns its buffer until the worker goes
  std::uint32_t srq_ctx_n_ = 0;
  bool is_srq_ctx(std::uint64_t wr_id) const noexcept {
    const auto base = reinterpret_cast<std::uint64_t>(srq_ctx_.get());
    return srq_ctx_n_ != 0 && wr_id >= base && wr_id < base + srq_ctx_n_ * sizeof(WrCtx);
  }
  std::atomic<std::uint32_t> srq_posted_{0}, srq_reserved_{0};
  bool polling_ = false;
  bool cq_wait_pending_ = false;
  bool cm_wait_pending_ = false;
  bool stopped_ = false;
  MonoClock::time_point idle_since_{};
};


// A bulk transfer we are pulling from the peer with RDMA READs. Its receive
// buffers are reserved all at once before the first READ (chunks), one per
// buffer_size piece of each region, in order.
struct InTransfer {
  std::uint64_t id = 0;
  std::uint64_t length = 0;
  std::vector<ReadDescriptor> regions;
  std::size_t next_region = 0;       // first region not fully issued
  std::uint64_t next_offset = 0;     // offset inside it
  std::size_t next_chunk = 0;        // first chunk not yet read
  std::size_t reads_outstanding = 0;
  std::vector<std::pair<PoolBuffer*, std::uint32_t>> chunks;  // in order
  bool reserved = false;
  bool issued_all = false;
  // When its buffers were reserved and the first READ went out (unset
  // before): ms_async_rdma_transfer_timeout counts from here.
  MonoClock::time_point since{};
  bool ready() const noexcept { return issued_all && reads_outstanding == 0; }
};

// A bulk transfer the peer is pulling from us: the data stays referenced and
// its regions registered for remote read until the peer's read_done.
// A zero-copy send's registrations. With memory windows (scoped_rkeys) each
// region's MR grants no remote access itself and the peer gets the rkey of a
// type-2 window bound to this connection's QP; the windows are declared
// after the MRs so they are deallocated (revoked) first, as rxe requires.
struct OutTransfer {
  BufferList data;
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  // When its read_request was posted (unset before): the peer's read_done is
  // due within ms_async_rdma_transfer_timeout of it.
  MonoClock::time_point since{};
  std::vector<std::unique_ptr<MemoryWindow>> mws;  // empty without scoped_rkeys
  bool bound = false;                               // the binds were posted
};

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
    return queued_bytes_ + early_bytes_;
  }
  void pause_receive(bool paused) override;
  void close() override;
  transport::Worker& worker() noexcept override;
  const NetAddress& peer_address() const noexcept override { return peer_; }
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

  // --- data path, on the worker (rdma_datapath.cc)
  void on_completion(const Wc& wc);
  std::uint32_t qp_num() const noexcept { return qp_ ? qp_->qp_num() : 0; }
  bool drained() const noexcept;

 private:
  enum class State { resolving, connecting, accepting, established, closing, closed };

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

  // data path
  std::error_code post_initial_receives();
  void repost(WrCtx* ctx, bool data_class);
  void on_recv(const Wc& wc, WrCtx* ctx);
  void on_send_queue_completion(const Wc& wc, WrCtx* ctx);
  void pump();
  void add_send(SendHeader& h, PoolBuffer* buf, std::uint32_t payload);
  void flush_batch();
  void add_binds(std::uint64_t id);
  void issue_reads();
  bool reserve_transfer(InTransfer& t);
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
  // A pool had no buffer: retry issue_reads() and pump() when one comes
  // back (BufferPool::notify_on_release), not on a timer. One wait per pool.
  void wait_for_buffers(BufferPool& pool, bool RdmaConnection::*pending);
  std::error_code queue_bulk(proto::Frame& frame, BufferList&& wire, std::size_t data_off);
  WrCtx* new_ctx(WrCtx::Kind kind);
  void free_ctx(WrCtx* ctx) noexcept;
  // A receive whose bytes are done with: back to the SRQ, or to the pool.
  void drop_recv(WrCtx* ctx) noexcept;
  void release_srq_reservation() noexcept;
  // ms_async_rdma_transfer_timeout (rdma_connection.cc): `since` = now, and
  // the transfer timer armed if it is not. On expiry, a transfer older than
  // the timeout faults the connection; otherwise the timer re-arms for the
  // oldest transfer left (none: it stays idle).
  void transfer_started(MonoClock::time_point& since);
  void arm_transfer_timer(MonoClock::duration after);
  void on_transfer_timer();

  // A ConnectionRef may outlive the stack: these keep the PD, pools, CQ and
  // device alive until the last connection is gone. (The cycle through the
  // workers' connection maps is broken by RdmaStack::stop().)
  std::shared_ptr<RdmaShared> keep_shared_;
  std::shared_ptr<RdmaWorker> keep_worker_;
  RdmaShared& shared_;
  RdmaWorker& worker_;
  std::unique_ptr<CmId> id_;
  std::unique_ptr<QueuePair> qp_;
  bool client_;
  NetAddress peer_, local_;
  State state_;
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
  // Frames sent before the banner exchange decided the revision: unencoded,
  // they go out first, in order, once it is known (feed). early_bytes_ is
  // their rev0 length (the longer encoding), counted in queued_bytes().
  std::vector<proto::Frame> early_;
  std::size_t early_bytes_ = 0;
  bool over_high_water_ = false;
  std::deque<WrCtx*> sq_fifo_;  // WRs on the send queue, in posting order
  std::uint32_t unsignaled_ = 0;
  std::map<std::uint64_t, OutTransfer> out_transfers_;
  std::uint64_t next_transfer_id_ = 1;

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
    std::unique_ptr<InTransfer> transfer;  // set: bulk bytes pulled by READ
  };
  std::deque<InItem> inq_;
  std::deque<InTransfer*> read_queue_;  // transfers with reads left to issue
  bool paused_ = false;
  bool started_ = false;
  proto::Banner my_banner_{};
  bool banner_done_ = false;
  BufferList banner_buf_;
  std::optional<proto::FrameDecoder> decoder_;
  proto::FrameRev rev_ = proto::FrameRev::rev1;

  std::unique_ptr<boost::asio::steady_timer> retry_timer_;
  bool retry_pending_ = false;
  bool send_buffer_wait_ = false, recv_buffer_wait_ = false;  // wait_for_buffers() pending
  std::unique_ptr<boost::asio::steady_timer> transfer_timer_;
  bool transfer_timer_armed_ = false;
  std::vector<SendWr> batch_;  // reused: the data path does not allocate per post
  std::vector<Sge> sges_;
  std::vector<std::unique_ptr<WrCtx>> ctx_storage_;
  std::vector<WrCtx*> ctx_free_;
  bool faulted_ = false;
  bool user_closed_ = false;  // close() was called: a posted on_fault is dropped
  int in_call_ = 0;           // CallScope depth
  bool kick_posted_ = false;
  bool srq_reserved_ = false;  // holds recvs_per_qp() receives of the worker's SRQ
  bool counted_active_ = false;
  bool drain_marker_posted_ = false;
};

}  // namespace siphon::rdma
