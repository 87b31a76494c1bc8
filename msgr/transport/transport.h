// The transport interface (docs/architecture.md §3): stacks move whole msgr2
// frames, not bytes. The session layer above is identical on every stack.
//
//   Stack       one per messenger; owns `ms_async_op_threads` Workers, listens,
//               connects. Implementations: TcpStack (async+posix, here) and
//               RdmaStack (async+rdma, rdma/transport).
//   Worker      one thread running one boost::asio::io_context. A Connection
//               lives on one worker for its whole life and is touched only there.
//   Connection  after start(): exchanges msgr2 banners, then carries frames
//               both ways until close() or an error.
//
// Threading: every Connection method and every ConnectionHandler callback
// runs on the connection's worker. Stack::listen/connect may be called from
// any thread; their handlers run on the chosen worker.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include <boost/asio/io_context.hpp>

#include "msgr/base/address.h"
#include "msgr/proto/frame.h"
#include "msgr/transport/info.h"
#include "msgr/transport/worker_perf.h"

// SIPHON_ASSERT_ON_WORKER(worker): debug builds abort when the caller is not
// on `worker`'s thread (docs/transport.md §1: every Connection method and
// every handler callback runs on the connection's worker). It guards our own
// programming errors, never peer, configuration or environment input;
// compiled out with NDEBUG.
#ifdef NDEBUG
#define SIPHON_ASSERT_ON_WORKER(worker) ((void)0)
#else
#define SIPHON_ASSERT_ON_WORKER(worker) \
  assert((worker).in_worker_thread() && "must run on the connection's worker")
#endif

namespace siphon::transport {

class Worker {
 public:
  virtual ~Worker() = default;
  virtual boost::asio::io_context& io() noexcept = 0;
  virtual std::size_t index() const noexcept = 0;
  // True when called on this worker's thread.
  virtual bool in_worker_thread() const noexcept = 0;
  // Runs `fn` on the worker (soon, never inline).
  virtual void post(std::function<void()> fn) = 0;

  // This worker's `AsyncMessenger::Worker-<n>` logger (worker_perf.h):
  // updated only on this worker's thread, by the stack (bytes, connections,
  // receive time) and by the session above it (messages, send time, queue
  // and ack latency, fast dispatch time).
  WorkerPerf& perf() noexcept { return perf_; }

 private:
  WorkerPerf perf_;
};

// Why a connection ended, for logs and the session layer's fault handling.
struct Fault {
  std::error_code code;
  std::string reason;  // one line naming the cause, e.g. "bad preamble crc"
};

class ConnectionHandler {
 public:
  virtual ~ConnectionHandler() = default;
  // Banners exchanged and compatible: frames of `n.rev` may flow.
  virtual void on_established(const proto::Negotiated& n) = 0;
  // One complete, CRC-checked frame from the peer.
  virtual void on_frame(proto::Frame&& frame) = 0;
  // The connection is dead (peer closed, I/O error, malformed input, timeout,
  // injected fault). Called at most once, never after close().
  virtual void on_fault(const Fault& fault) = 0;
  // The send queue fell below its low-water mark after send() reported
  // backpressure (queued_bytes() over the high-water mark).
  virtual void on_writable() {}
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // A snapshot for operators (on the connection's worker). The default
  // fills the addresses and queued_bytes(); stacks add their own.
  virtual TransportInfo info() const {
    TransportInfo i;
    i.local_address = local_address().to_string();
    i.peer_address = peer_address().to_string();
    i.queued_bytes = queued_bytes();
    return i;
  }

  virtual ~Connection() = default;
  // Starts the banner exchange; `handler` must outlive the connection or the
  // call to close(), whichever comes first.
  virtual void start(ConnectionHandler& handler, const proto::Banner& mine) = 0;
  // Queues a frame. Returns an error if the connection is closed or faulted;
  // frames queued before a fault may or may not have reached the peer (the
  // session layer's seq/ack decides what to replay).
  virtual std::error_code send(proto::Frame&& frame) = 0;
  // Bytes queued and not yet handed to the network; the messenger's throttle
  // sees this as backpressure.
  virtual std::size_t queued_bytes() const noexcept = 0;
  // Stops (true) or resumes (false) delivering frames, for the dispatch
  // throttle: TCP stops reading, RDMA stops returning credits.
  virtual void pause_receive(bool paused) = 0;
  // Closes at once; no handler callbacks after it returns. Idempotent.
  virtual void close() = 0;
  // Secure mode (cephx.md §6): every frame sent after this call, and every
  // frame received after the last one already delivered, is AES-GCM
  // encrypted with keys cut from `connection_secret` (the connecting side
  // sends with nonce B). The session layer calls it between frames, on the
  // worker, once cephx agreed on secure mode. An error (with `why`) when
  // this connection cannot (not established, a short secret). msgr2 rev1
  // and rev0 alike: the frame layout follows the revision.
  virtual std::error_code start_secure(std::span<const std::uint8_t> connection_secret, std::string& why) = 0;

  virtual Worker& worker() noexcept = 0;
  virtual const NetAddress& peer_address() const noexcept = 0;
  virtual const NetAddress& local_address() const noexcept = 0;
  virtual bool is_client() const noexcept = 0;  // true on the connecting side
};

using ConnectionRef = std::shared_ptr<Connection>;
// Called on the new connection's worker.
using AcceptHandler = std::function<void(ConnectionRef)>;
using ConnectHandler = std::function<void(std::error_code, ConnectionRef)>;

// A stack's send-queue water marks (ms_send_queue_high_water / _low_water):
// past `high_water` queued bytes a connection reports backpressure, and calls
// on_writable() once it is back at `low_water`. The stack's own options are
// the one source of these values, so the session above asks the stack rather
// than keeping a copy that could disagree with the stack it runs on.
struct SendQueueMarks {
  std::size_t high_water = 0;
  std::size_t low_water = 0;
};

class Stack {
 public:
  virtual ~Stack() = default;
  virtual std::string_view type() const noexcept = 0;  // "async+posix", "async+rdma"
  virtual std::size_t worker_count() const noexcept = 0;
  virtual Worker& worker(std::size_t i) noexcept = 0;
  // Picks the worker for a new connection (least loaded).
  virtual Worker& pick_worker() noexcept = 0;
  // The water marks every connection of this stack applies to queued_bytes().
  virtual SendQueueMarks send_queue_marks() const noexcept = 0;

  // Starts the worker threads. Throws SetupError on failure.
  virtual void start() = 0;
  // Closes every listener and connection and joins the workers. Idempotent.
  virtual void stop() = 0;

  // Listens on `addr` (port 0 = a free port in [ms_bind_port_min, max]).
  // Returns the address actually bound or an error; accepted connections are
  // handed to `on_accept` on their worker.
  virtual std::error_code listen(const NetAddress& addr, AcceptHandler on_accept,
                                 NetAddress& bound) = 0;
  // Connects to `peer` from `worker`; `done` runs on that worker.
  virtual void connect(const NetAddress& peer, Worker& worker, ConnectHandler done) = 0;

  // Several messengers may share one stack (a daemon's public and cluster
  // messengers, say). Each one that starts the stack registers as a user;
  // remove_user() is true for the last one, which then stops the stack.
  void add_user() noexcept { users_.fetch_add(1, std::memory_order_relaxed); }
  bool remove_user() noexcept { return users_.fetch_sub(1, std::memory_order_acq_rel) == 1; }

 private:
  std::atomic<int> users_{0};
};

}  // namespace siphon::transport
