// ConnectionImpl: the driver of one session. It binds the pure handshake
// state machines (msgr/session) and the READY data path to a
// transport::Connection on a worker, and owns the session's queues.
//
//                      connect_to()                   accepted socket
//                           │                               │
//                           v                               v
//        ┌────────────> connecting ──handshake ready──> ready <──── accepting
//        │ backoff         │ fault                        │ fault          │ decision: reuse
//        │ timer           v                              v                │ (this socket moves
//     backoff <─── lossless, client side ◄────────────── fault             │  into the existing
//        │                                                │                │  session, which
//        │         lossless, we cannot or need not dial   v                │  migrates to this
//        │                                             standby ─peer reconnects─┘ worker)
//        │                                                │ lossy / mark_down / shutdown
//        └─────────────────────────────────────────────> closed (terminal)
//
// Threads: every member below "worker state" is touched only on the owning
// worker (owner()). The owner changes only when an accepted connection hands
// its socket to an existing session on another worker; work that lands on
// the old worker is re-posted to the new one. send_message() from any thread
// appends to `inbox_` under `inbox_mtx_` and posts one drain per batch; on
// the owning worker itself, with nothing waiting before it and the session
// READY, it drains at once (no post: an echo from ms_fast_dispatch goes out
// before the worker returns to its event loop).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "msgr/api/connection.h"
#include "msgr/api/messenger_core.h"
#include "msgr/session/handshake.h"
#include "msgr/session/backoff.h"
#include "msgr/session/decide.h"
#include "msgr/session/send_queue.h"

namespace siphon::detail {

struct MessageSeqTraits {
  static std::uint64_t seq(const MessageRef& m) noexcept { return m->header().seq; }
  static void set_seq(MessageRef& m, std::uint64_t s) noexcept { m->header().seq = s; }
};

class TransportLink;  // transport::ConnectionHandler forwarding to the current owner

class ConnectionImpl final : public Connection {
 public:
  enum class State { idle, connecting, accepting, ready, backoff, standby, closed };

  // An outgoing session to `peer_addrs` (not started).
  static ConnectionImplRef make_outgoing(std::shared_ptr<MessengerCore> core, std::uint8_t peer_type,
                                         const EntityAddrVec& peer_addrs);
  // An accepted transport connection (started on its worker).
  static void accept(std::shared_ptr<MessengerCore> core, transport::ConnectionRef conn);

  ~ConnectionImpl() override;

  // --- siphon::Connection ---
  std::error_code send_message(MessageRef m) override;
  void send_keepalive() override;
  void mark_down() override;
  bool is_connected() const override { return connected_.load(std::memory_order_acquire); }
  bool is_lossy() const override { return lossy_.load(std::memory_order_acquire); }
  EntityAddrVec get_peer_addrs() const override;
  std::uint8_t get_peer_type() const override { return peer_type_.load(std::memory_order_acquire); }
  entity_name_t get_peer_name() const override;
  std::uint64_t get_global_id() const override;
  std::uint64_t get_features() const override { return features_.load(std::memory_order_acquire); }
  AuthInfo auth_info() const override;
  std::uint64_t last_keepalive_ack_ns() const override { return keepalive_ack_ns_.load(); }
  FaultInfo last_fault() const override;

  // --- used by the messenger ---
  void start_connect();             // posts the first attempt
  void try_resume();                // a throttle has room again (any thread)
  void close_internal(bool notify_reset, std::string_view why);  // from any thread
  bool closed() const noexcept { return closed_flag_.load(std::memory_order_acquire); }
  // The dispatch thread has delivered `bytes` of this connection's messages
  // (ms_max_undispatched_bytes_per_connection; dispatch thread).
  void release_undispatched(std::uint64_t bytes);
  std::uint64_t undispatched_bytes() const noexcept { return undispatched_.load(std::memory_order_acquire); }
  transport::Worker& owner() const noexcept { return *owner_.load(std::memory_order_acquire); }

  // A snapshot for `messenger dump`: `done` runs on the owner worker with
  // the worker state copied there. basic_info() reads only what any thread may.
  void post_info(std::function<void(ConnectionInfo)> done);
  ConnectionInfo basic_info() const;

  // --- transport events (on the owner, via TransportLink) ---
  void on_established(TransportLink* link, const proto::Negotiated& n);
  void on_frame(TransportLink* link, proto::Frame&& f);
  void on_fault(TransportLink* link, const transport::Fault& fault);
  void on_writable(TransportLink* link);
  // Secure mode on the transport (cephx agreed on it); false after faulting.
  bool switch_to_secure(const auth::Bytes& connection_secret);

 private:
  friend class MessengerCore;
  ConnectionImpl(std::shared_ptr<MessengerCore> core, transport::Worker& worker, bool outgoing);

  // Runs `fn` on the owner worker: inline if already there, else posted.
  template <typename F>
  void on_owner(F&& fn);
  bool in_owner() const noexcept { return owner().in_worker_thread(); }

  // --- setup (connection_impl.cc) ---
  void connect_attempt();
  void attach(transport::ConnectionRef conn);
  // The banner we send (msgr2.1 unless ms_msgr2_rev1 is off).
  proto::Banner my_banner() const;
  void detach_transport();
  void handle_step(session::Step&& step);
  void client_ready(const session::Step& step);
  void server_decide_ident();
  void server_decide_reconnect();
  void adopt(ConnectionImplRef from, bool reconnect, std::uint64_t msg_seq, bool reset_first);
  void complete_adopt(ConnectionImplRef from, bool reconnect, std::uint64_t msg_seq);
  session::ExistingSession snapshot() const;
  void server_ready(bool reconnected, std::uint64_t peer_in_seq);
  void become_ready();
  void fault(std::error_code ec, std::string_view why);
  void fault_wait();
  bool can_dial() const noexcept;
  void schedule_reconnect(session::ReconnectBackoff::Cause cause);
  void enter_closed(bool notify_reset);
  void reset_session(bool notify_remote);
  void ensure_timers();
  void arm_ready_timer();
  void arm_idle_timer();
  void on_idle_tick(std::uint64_t gen, std::chrono::nanoseconds tick);
  void cancel_timers();
  void publish_peer();
  std::string describe() const;
  static std::string_view to_string(State s) noexcept;
  void pause_for_budget();
  bool over_budget() const;

  // --- RDMA -> TCP failover (connection_failover.cc; docs/rdma-transport.md) ---
  // The stack and address the next attempt dials.
  transport::Stack& dial_stack() const noexcept;
  EntityAddr dial_target() const;
  // The peer's fallback address: the last of its addresses when it has more
  // than one (ours first, then what its SERVER_IDENT advertised); nullopt
  // when it has none (a Ceph peer, a Siphon peer without a fallback stack).
  std::optional<EntityAddr> fallback_addr() const;
  // A fault while on the primary stack starts (or continues) the failure window.
  void note_fault_for_failover();
  // At the start of an attempt: true when the session moves to the other
  // stack instead (the attempt runs there, on a worker of that stack).
  bool switch_stack_if_due();
  // Moves the session to `w` (another stack's worker) and dials from there.
  void redial_on(transport::Worker& w);
  void arm_probe();
  void on_probe_tick(std::uint64_t gen);
  void move_back(std::string_view why);

  // --- READY data path (connection_io.cc) ---
  void drain_inbox();
  // send_message() on the owning worker may drain at once (see above).
  bool can_drain_inline() const noexcept;
  void flush();
  std::size_t transport_high_water() const;
  void send_frame(proto::Frame&& f);
  void receive_ready_frame(proto::Frame&& f);
  void receive_message(proto::Frame&& f);
  void maybe_ack();
  void send_ack_now();
  // ms_max_queued_send_bytes_per_connection accounting: messages that left
  // the queue unsent (closed, reset) give their bytes back.
  void forget_unsent();

  const std::shared_ptr<MessengerCore> core_;
  std::atomic<transport::Worker*> owner_;
  const bool outgoing_;   // we dialled (else accepted)
  std::atomic<bool> lossy_{false};  // fixed once the policy is known

  // Readable from any thread.
  std::atomic<bool> connected_{false};
  std::atomic<bool> closed_flag_{false};
  std::atomic<std::uint8_t> peer_type_{0};
  std::atomic<std::uint64_t> features_{0};
  AuthInfo auth_info_;  // guarded by info_mtx_
  std::atomic<std::uint64_t> keepalive_ack_ns_{0};
  mutable std::mutex info_mtx_;
  EntityAddrVec peer_addrs_info_;
  entity_name_t peer_name_info_{};
  std::uint64_t global_id_info_ = 0;
  FaultInfo last_fault_;

  // Cross-thread inbox: messages with the bytes counted against
  // ms_max_queued_send_bytes_per_connection.
  std::mutex inbox_mtx_;
  std::vector<std::pair<MessageRef, std::uint64_t>> inbox_;
  bool drain_posted_ = false;
  bool keepalive_requested_ = false;
  // Bytes accepted by send_message() and not yet handed to the transport.
  std::atomic<std::uint64_t> send_queued_{0};
  std::atomic<bool> queue_full_logged_{false};
  // Bytes of our received messages waiting in the dispatch queue.
  std::atomic<std::uint64_t> undispatched_{0};

  // --- worker state ---
  State state_ = State::idle;
  bool flushing_ = false;  // inside flush(): a send_message() from there is posted
  Policy policy_;
  EntityAddrVec target_addrs_;   // what we dial (outgoing, or the peer's address once known)
  AddrKey key_;                  // our entry in the session table
  bool registered_ = false;
  std::shared_ptr<TransportLink> link_;
  transport::ConnectionRef conn_;
  std::optional<session::ClientHandshake> client_hs_;
  std::optional<session::ServerHandshake> server_hs_;
  session::SessionIds ids_;
  session::PeerInfo peer_;
  proto::FrameRev frame_rev_ = proto::FrameRev::rev1;  // what the banners agreed on (logged at READY)
  session::SendQueue<MessageRef, MessageSeqTraits> outq_;
  // Messages of outq_ never handed to the transport, in the order they will
  // be (first transmissions keep queue order), with their counted bytes.
  std::deque<std::pair<const Message*, std::uint64_t>> unsent_;
  // ms_max_connections: held while an accepted socket is attached.
  std::shared_ptr<void> accept_slot_;
  std::uint64_t acked_in_seq_ = 0;  // in_seq we last told the peer
  bool ack_posted_ = false;
  bool replacing_ = false;          // another connection is taking this session over
  bool once_ready_ = false;
  bool paused_ = false;
  bool pending_keepalive_ = false;  // requested before READY
  // The newest KEEPALIVE2 stamp not yet answered because the transport's
  // send queue was full (a peer that sends keepalives and never reads must
  // not grow our queue by one ack per keepalive): one ack, the latest, goes
  // out when the queue drains (flush()).
  std::optional<proto::UTime> pending_keepalive_ack_;
  // Our place in the throttle's line while paused (0: not waiting;
  // MessengerCore::add_waiter).
  std::uint64_t wait_ticket_ = 0;
  std::chrono::nanoseconds idle_for_{0};
  session::ReconnectBackoff backoff_;
  std::unique_ptr<boost::asio::steady_timer> timer_;       // ready timeout / backoff
  std::unique_ptr<boost::asio::steady_timer> idle_timer_;  // idle timeout + keepalive
  std::uint64_t activity_ = 0;       // frames in or out (idle detection)
  std::int64_t last_activity_ns_ = 0;  // coarse monotonic time of the last frame (messenger dump)
  void touch() noexcept;
  std::uint64_t idle_seen_ = 0;
  std::uint64_t attempt_ = 0;        // generation of the current attempt (timer staleness)

  // Failover state (worker state; connection_failover.cc).
  bool on_fallback_ = false;         // attempts dial the fallback stack / address
  bool fail_over_now_ = false;       // a move back failed: the next attempt returns at once
  bool moving_back_ = false;         // the attempt after a successful probe is on the primary
  std::chrono::steady_clock::time_point primary_failing_since_{};  // {}: the primary is not failing
  std::unique_ptr<boost::asio::steady_timer> probe_timer_;  // on_fallback_: probes the primary
  std::uint64_t probe_gen_ = 0;
};

}  // namespace siphon::detail

namespace siphon::detail {

class TransportLink final : public transport::ConnectionHandler {
 public:
  explicit TransportLink(ConnectionImplRef o) : owner(std::move(o)) {}
  void on_established(const proto::Negotiated& n) override {
    if (auto o = owner) o->on_established(this, n);
  }
  void on_frame(proto::Frame&& f) override {
    if (auto o = owner) o->on_frame(this, std::move(f));
  }
  void on_fault(const transport::Fault& f) override {
    if (auto o = owner) o->on_fault(this, f);
  }
  void on_writable() override {
    if (auto o = owner) o->on_writable(this);
  }
  ConnectionImplRef owner;  // on the transport connection's worker only
};

template <typename F>
void ConnectionImpl::on_owner(F&& fn) {
  if (in_owner()) {
    fn();
    return;
  }
  ConnectionImplRef self(this);
  owner().post([self, f = std::forward<F>(fn)]() mutable { self->on_owner(std::move(f)); });
}

}  // namespace siphon::detail
