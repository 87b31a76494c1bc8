// Internals of the TCP stack: the worker and the connection.
//
// Connection states (all transitions on the connection's worker):
//
//   connecting --connect ok--> idle --start()--> banner --banners compatible--> established
//        |                       |                  |                                |
//        +--error: done(ec)      +------------------+---- close() / fault ---------> closed
//
// In `banner`, both sides send their banner at once and read the peer's
// 10-byte prefix, then its payload. In `established`, frames flow: send()
// encodes into the send queue, one gathered sendmsg() takes everything
// queued (waiting for the socket only when it is full); reads go into refcounted segments fed to the FrameDecoder, whose
// frames are delivered until pause_receive(true). Frames sent before
// `established` wait unencoded (the revision is not known yet).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "msgr/transport/fault_injection.h"
#include "msgr/transport/frame_stream.h"
#include "msgr/transport/options.h"
#include "msgr/transport/transport.h"

namespace siphon::transport {

// State every worker and connection of one stack shares (read-only except
// the atomics).
struct TcpShared {
  explicit TcpShared(TcpOptions o, std::uint64_t s)
      : opts(std::move(o)), seed(s), live_injection(std::make_shared<LiveInjection>(opts.common.inject)) {
    register_live_injection(live_injection);  // `config set ms_inject_*` reaches it
  }
  const TcpOptions opts;  // opts.common.inject: as started; live_injection: as now
  const std::uint64_t seed;  // fault-injection seed
  const std::shared_ptr<LiveInjection> live_injection;
  InjectionCounters counters;
  std::atomic<std::uint64_t> next_serial{0};
  std::atomic<std::size_t> round_robin{0};  // tie-breaker when picking workers
  std::atomic<bool> stopping{false};

  // ms_bind_before_connect: the addresses (port 0) outgoing sockets bind to,
  // the first non-wildcard listener of each family.
  void note_listener(const NetAddress& bound);
  std::optional<NetAddress> connect_bind_address(int family) const;

 private:
  mutable std::mutex bind_mu_;
  std::optional<NetAddress> bind_v4_;
  std::optional<NetAddress> bind_v6_;
};

class TcpConnection;

class TcpWorker final : public Worker {
 public:
  explicit TcpWorker(std::size_t index, std::chrono::microseconds busy_poll = {});
  ~TcpWorker() override;
  boost::asio::io_context& io() noexcept override { return io_; }
  std::size_t index() const noexcept override { return index_; }
  bool in_worker_thread() const noexcept override {
    return exec_.running_in_this_thread();
  }
  void post(std::function<void()> fn) override;

  // Setup, from the stack.
  void start_thread();
  // The thread's loop: io_.run(), or with busy_poll_ the bounded spin.
  void run_loop();
  void release_and_join();  // lets run() return once idle, then joins

  // Open connections of this worker (worker thread only).
  void add(std::shared_ptr<TcpConnection> conn);
  void remove(TcpConnection* conn) noexcept;
  void close_all();
  // Connections created on this worker and not closed yet: counted from
  // construction (before they are registered), so that accepts in quick
  // succession see each other. Read from any thread by pick_worker().
  std::size_t load() const noexcept { return load_.load(std::memory_order_relaxed); }
  // Bytes of sent buffers its connections hold for MSG_ZEROCOPY completions
  // (closed connections still waiting for theirs included; worker thread
  // only). Kept in the msgr_tcp_zerocopy_held_bytes gauge too.
  std::uint64_t zerocopy_held_bytes() const noexcept { return zc_held_bytes_; }
  void zerocopy_hold(std::uint64_t add, std::uint64_t drop) noexcept;
  void add_load() noexcept { load_.fetch_add(1, std::memory_order_relaxed); }
  void drop_load() noexcept { load_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  // Declared first: destroyed last, after anything bound to it.
  boost::asio::io_context io_;
  boost::asio::io_context::executor_type exec_{io_.get_executor()};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::size_t index_;
  const std::chrono::microseconds busy_poll_;  // ms_tcp_busy_poll_us
  std::thread thread_;
  std::unordered_map<TcpConnection*, std::shared_ptr<TcpConnection>> conns_;
  std::atomic<std::size_t> load_{0};
  std::uint64_t zc_held_bytes_ = 0;
};

// Per-connection counters (worker thread only; tests and debugging).
struct TcpConnectionStats {
  std::uint64_t frames_sent = 0;      // frames handed to send()
  std::uint64_t frames_received = 0;  // frames delivered to on_frame()
  std::uint64_t bytes_sent = 0;       // wire bytes written (banner included)
  std::uint64_t bytes_received = 0;   // wire bytes read (banner included)
  std::uint64_t write_batches = 0;    // gathered writes issued
  std::uint64_t read_ops = 0;         // reads completed
  // MSG_ZEROCOPY (siphon_ms_tcp_zerocopy_threshold).
  std::uint64_t zc_sends = 0;         // sendmsg() calls made with MSG_ZEROCOPY that sent bytes
  std::uint64_t zc_completed = 0;     // of them, covered by a completion notification
  std::uint64_t zc_copied = 0;        // of those, reported copied by the kernel
  std::uint64_t zc_fallbacks = 0;     // batches that qualified but were copied (ENOBUFS)
  std::uint64_t zc_held_frames = 0;   // encoded frames held now for a completion
  std::uint64_t zc_held_bytes = 0;    // their bytes
  std::uint64_t zc_released_frames = 0;  // frames released after their completion
  bool zc_on = false;                 // zero-copy used for qualifying batches now
};

class TcpConnection final : public Connection {
 public:
  using tcp = boost::asio::ip::tcp;

  TcpConnection(std::shared_ptr<TcpWorker> worker, std::shared_ptr<TcpShared> shared,
                tcp::socket socket, bool client);
  ~TcpConnection() override;

  // Connection (every method on the connection's worker).
  void start(ConnectionHandler& handler, const proto::Banner& mine) override;
  std::error_code send(proto::Frame&& frame) override;
  std::size_t queued_bytes() const noexcept override {
    assert_on_worker();
    return queued_bytes_ + stream_.early_bytes();
  }
  void pause_receive(bool paused) override;
  void close() override;
  std::error_code start_secure(std::span<const std::uint8_t> connection_secret, std::string& why) override;
  Worker& worker() noexcept override { return *worker_; }
  const NetAddress& peer_address() const noexcept override { return peer_; }
  const NetAddress& local_address() const noexcept override { return local_; }
  bool is_client() const noexcept override { return client_; }

  // Setup, from the stack.
  // Connects to `peer`; `done` runs on the worker with this connection or an error.
  void connect_to(const NetAddress& peer, ConnectHandler done);
  // An accepted socket: records the addresses.
  void accepted();

  const TcpConnectionStats& stats() const noexcept { return stats_; }
  // The socket's descriptor (for inspection, e.g. of socket options).
  int native_handle() noexcept;
  std::uint64_t serial() const noexcept { return serial_; }

 private:
  enum class State { connecting, idle, banner, established, closed };

  std::shared_ptr<TcpConnection> self() {
    return std::static_pointer_cast<TcpConnection>(shared_from_this());
  }
  void assert_on_worker() const noexcept;
  void learn_addresses();

  // Setup and banner (tcp_connection.cc).
  void read_banner();
  void on_banner_bytes(const boost::system::error_code& ec, std::size_t n);
  void establish(const proto::Negotiated& n);
  void io_fault(const boost::system::error_code& ec, std::string_view op);
  void fault(std::error_code code, std::string_view reason);
  void shutdown() noexcept;

  // Data path (tcp_connection_datapath.cc).
  void enqueue(BufferList&& wire, bool zerocopy = false);
  void schedule_flush();
  void write_from_send();
  void start_write();
  void begin_batch();  // the queue becomes the batch being written
  // Writes what is left of the batch until it is done or the socket is
  // full (then waits for it to drain); never calls the handler.
  void write_batch();
  void on_socket_writable(const boost::system::error_code& ec);
  void on_write_error(const boost::system::error_code& ec);
  // The batch is written: drops it, starts the next, may call on_writable().
  void on_write_done();
  // Calls on_writable() once the queue is back to the low-water mark after
  // a send() crossed the high-water mark (event loop only).
  void maybe_writable();
  // Shared by every read completion: false when the read is stale (the
  // connection left `expected`), failed, or picked for an injected failure.
  bool read_completed(State expected, const boost::system::error_code& ec, std::size_t n,
                      std::string_view op);
  void start_read();
  bool set_rcvlowat(std::size_t want, std::size_t room);
  void on_read(const boost::system::error_code& ec, std::size_t n);
  void deliver_frames();
  void on_delay_done(const boost::system::error_code& ec);

  // MSG_ZEROCOPY (tcp_zerocopy.cc).
  // SO_ZEROCOPY on the socket when the option asks for it (setup).
  void setup_zerocopy();
  // The batch is done with (written, failed or cancelled): its buffers go
  // to the hold of its zero-copy sends, if it made any, otherwise freed.
  void retire_batch();
  // A zero-copy sendmsg() of the current batch sent `n` bytes.
  void zc_sent(std::size_t n);
  // ENOBUFS on a zero-copy send: the rest of the batch is copied.
  void zc_fallback();
  // Reads every notification queued on the socket's error queue and
  // releases the holds they complete; then waits for more while any are
  // outstanding.
  void zc_drain();
  void zc_arm();
  void zc_complete(std::uint32_t lo, std::uint32_t hi, bool copied);
  void zc_progress();
  bool zc_outstanding() const noexcept { return zc_head_ < zc_holds_.size() || zc_batch_open_; }
  // shutdown() with zero-copy sends outstanding: the socket is shut down but
  // kept open until their notifications arrive (bounded; then aborted).
  void zc_linger();
  void zc_linger_expired(const boost::system::error_code& ec);
  void zc_finish_close() noexcept;
  void zc_abort_socket() noexcept;
  void zc_release_all() noexcept;
  void zc_destroy() noexcept;
  struct ZcHold;
  void zc_release(ZcHold& h) noexcept;

  // Declared first so that the io_context outlives the socket and timer.
  std::shared_ptr<TcpWorker> worker_;
  std::shared_ptr<TcpShared> shared_;
  tcp::socket socket_;
  boost::asio::steady_timer delay_timer_;
  const bool client_;
  const std::uint64_t serial_;
  State state_;
  ConnectionHandler* handler_ = nullptr;
  NetAddress peer_;
  NetAddress local_;
  FaultInjector injector_;
  TcpConnectionStats stats_;

  // Banner exchange.
  // The byte stream: the peer's banner, then frames; frames sent before the
  // banners decided the revision (FrameStream, shared with the RDMA stack).
  FrameStream stream_;
  std::vector<std::byte> banner_rx_;  // the banner bytes being read

  // Receive side.
  BufferPtr rx_hold_;         // our reference to the segment reads go into
  std::size_t rx_used_ = 0;   // bytes of it already read
  bool reading_ = false;
  bool paused_ = false;
  int rcvlowat_ = 1;          // the socket's SO_RCVLOWAT as last set (1: the kernel's default)
  bool rcvlowat_refused_ = false;  // setsockopt(SO_RCVLOWAT) failed once: not tried again
  bool resume_scheduled_ = false;
  bool delaying_ = false;                 // an injected delay is running
  std::optional<proto::Frame> held_;      // the frame it holds back

  // Send side.
  std::vector<BufferList> tx_queue_;      // encoded, waiting for the next batch
  std::vector<BufferList> tx_inflight_;   // the batch being written
  std::vector<iovec> iov_;                // the batch's pieces
  std::size_t iov_pos_ = 0;               // first piece not completely written
  std::size_t batch_written_ = 0;         // bytes of the batch written so far
  std::size_t queued_bytes_ = 0;          // tx_queue_ + tx_inflight_
  std::size_t inflight_bytes_ = 0;
  bool writing_ = false;
  bool flush_scheduled_ = false;
  bool in_send_ = false;                  // write_from_send() is running
  bool backpressure_ = false;

  // MSG_ZEROCOPY. Each successful zero-copy sendmsg() gets the socket's next
  // id (a u32 counter in the kernel); a hold keeps the buffers of one batch
  // until notifications covered all of its ids.
  struct ZcHold {
    std::uint32_t first = 0;  // id of its first zero-copy sendmsg()
    std::uint32_t count = 0;  // its zero-copy sendmsg() calls
    std::uint32_t done = 0;   // of them, completed
    bool sealed = false;      // the batch is retired (bufs filled, count final)
    std::uint64_t bytes = 0;
    std::vector<BufferList> bufs;
  };
  std::size_t zc_threshold_ = 0;           // 0: off on this connection
  std::uint32_t zc_next_id_ = 0;           // the id the next zero-copy send gets
  std::vector<ZcHold> zc_holds_;           // oldest first, from zc_head_
  std::size_t zc_head_ = 0;
  std::vector<std::vector<BufferList>> zc_spare_;  // emptied vectors, reused
  std::size_t tx_queue_zc_ = 0;            // frames in tx_queue_ that qualify
  bool batch_zc_ = false;                  // the batch is sent with MSG_ZEROCOPY
  bool zc_batch_open_ = false;             // the batch's hold is the last one, unsealed
  bool zc_waiting_ = false;                // an error-queue wait is armed
  bool zc_lingering_ = false;              // closed, waiting for notifications
  bool zc_aborted_ = false;                // lingered too long: reset
  std::uint32_t zc_window_done_ = 0;       // completions in the current window
  std::uint32_t zc_window_copied_ = 0;     // of them copied
  std::uint32_t zc_enobufs_run_ = 0;       // consecutive ENOBUFS fallbacks
  boost::asio::steady_timer zc_timer_;
};

// Tests: makes every later setsockopt(SO_ZEROCOPY) of the TCP stack fail with
// `err` (0: the real call again), as on a kernel without it.
void tcp_zerocopy_force_refusal_for_test(int err) noexcept;

// Maps an Asio/system error to the project's error codes.
std::error_code map_asio_error(const boost::system::error_code& ec) noexcept;

}  // namespace siphon::transport
