// ConnectionImpl: connection setup, handshake driving, server-side session
// decisions, faults, reconnect and close (state diagram in
// connection_impl.h). The READY data path is in connection_io.cc.
#include "msgr/api/connection_impl.h"

#include <fmt/format.h>
#include <time.h>

#include "msgr/api/message_access.h"
#include "msgr/base/log.h"

namespace siphon::detail {

using session::Step;

ConnectionImpl::ConnectionImpl(std::shared_ptr<MessengerCore> core, transport::Worker& worker,
                               bool outgoing)
    : core_(std::move(core)),
      owner_(&worker),
      outgoing_(outgoing),
      backoff_(core_->options.ms_initial_backoff, core_->options.ms_max_backoff) {}

ConnectionImpl::~ConnectionImpl() = default;

ConnectionImplRef ConnectionImpl::make_outgoing(std::shared_ptr<MessengerCore> core,
                                                std::uint8_t peer_type, const EntityAddrVec& peer_addrs) {
  transport::Worker& w = core->stack->pick_worker();
  ConnectionImplRef c(new ConnectionImpl(std::move(core), w, true));
  c->policy_ = c->core_->policy_for(peer_type);
  c->lossy_.store(c->policy_.lossy);
  c->target_addrs_ = peer_addrs;
  c->key_ = AddrKey::of(peer_addrs);
  c->registered_ = true;
  c->peer_type_.store(peer_type);
  c->peer_.type = peer_type;
  c->peer_.addrs = peer_addrs;
  c->publish_peer();
  return c;
}

void ConnectionImpl::accept(std::shared_ptr<MessengerCore> core, transport::ConnectionRef conn) {
  if (core->stopping.load() || !core->started.load(std::memory_order_acquire)) {
    // Not configured yet (dispatchers and policies are read without locks
    // once started) or shutting down: the peer retries.
    SIPHON_LOG(session, 5, "refusing a connection from {}: messenger {}", conn->peer_address().to_string(),
               core->stopping.load() ? "shutting down" : "not started");
    conn->close();
    return;
  }
  // ms_max_connections counts accepted sockets (QPs) attached to a session;
  // refusing here, before any byte is read, costs a peer's flood nothing
  // but the accept.
  std::shared_ptr<void> slot = core->take_accept_slot();
  if (!slot) {
    core->counters.connections_refused.fetch_add(1, std::memory_order_relaxed);
    SIPHON_LOG(ms, 1,
               "refusing a connection from {}: ms_max_connections = {} accepted connections are open "
               "(raise ms_max_connections, or 0 for no limit)",
               conn->peer_address().to_string(), core->options.ms_max_connections);
    conn->close();
    return;
  }
  ConnectionImplRef c(new ConnectionImpl(core, conn->worker(), false));
  if (!core->add_live(c)) {
    conn->close();
    return;
  }
  c->accept_slot_ = std::move(slot);
  c->state_ = State::accepting;
  c->server_hs_.emplace(core->local_identity(), conn->peer_address(), core->services());
  c->attach(std::move(conn));
  c->arm_ready_timer();
}

void ConnectionImpl::start_connect() {
  ConnectionImplRef self(this);
  owner().post([self] { self->on_owner([self] { self->connect_attempt(); }); });
}

void ConnectionImpl::connect_attempt() {
  SIPHON_ASSERT_ON_WORKER(owner());
  if (state_ == State::closed || core_->stopping.load()) return;
  if (switch_stack_if_due()) return;
  ++attempt_;
  state_ = State::connecting;
  client_hs_.reset();
  server_hs_.reset();
  arm_ready_timer();
  const EntityAddr target = dial_target();
  SIPHON_LOG(session, 5, "connecting to {} (attempt {}, connect_seq {}{})", target.to_string(),
             attempt_, ids_.connect_seq, on_fallback_ ? ", fallback stack" : "");
  ConnectionImplRef self(this);
  const std::uint64_t gen = attempt_;
  transport::Worker* const dial_worker = &owner();
  dial_stack().connect(target.addr, *dial_worker, [self, gen, target, dial_worker](std::error_code ec,
                                                                                   transport::ConnectionRef c) {
    self->on_owner([self, gen, ec, c, target, dial_worker] {
      if (gen != self->attempt_ || self->state_ != State::connecting) {
        // A stale attempt (its ready timeout fired first). Its connection
        // lives on the worker it was dialled from, which the session may
        // have left since (a switch of stack, redial_on): close it there.
        if (c) dial_worker->post([c] { c->close(); });
        return;
      }
      if (ec || !c) {
        const std::error_code code = ec ? ec : make_error_code(errc::not_connected);
        const std::string why = fmt::format("connect to {} failed: {}", target.to_string(),
                                            ec ? ec.message() : "no connection");
        if (ec == std::errc::connection_refused || ec == make_error_code(errc::connection_refused)) {
          {
            std::lock_guard l(self->info_mtx_);  // visible to ms_handle_refused
            self->last_fault_ = FaultInfo{code, why};
          }
          self->core_->dispatch_queue.enqueue({DispatchQueue::Kind::refused, {}, self, 0});
        }
        self->fault(code, why);
        return;
      }
      self->client_hs_.emplace(self->core_->local_identity(), self->core_->policy_view(self->peer_.type),
                               target, self->peer_.type, self->ids_, self->core_->services());
      self->attach(c);
    });
  });
}

void ConnectionImpl::attach(transport::ConnectionRef conn) {
  SIPHON_ASSERT_ON_WORKER(owner());
  link_ = std::make_shared<TransportLink>(ConnectionImplRef(this));
  conn_ = std::move(conn);
  if (paused_) conn_->pause_receive(true);
  conn_->start(*link_, my_banner());
}

void ConnectionImpl::detach_transport() {
  if (link_) {
    link_->owner.reset();
    if (conn_) conn_->close();
    // The link may be on the stack of the callback that got us here: release
    // it later, on the worker.
    std::shared_ptr<TransportLink> l = std::move(link_);
    conn_.reset();
    owner().post([l] {});
  }
  link_.reset();
  conn_.reset();
  accept_slot_.reset();
}

proto::Banner ConnectionImpl::my_banner() const {
  proto::Banner mine;
  if (!core_->options.ms_msgr2_rev1) mine.supported &= ~proto::Banner::kRevision1;
  return mine;
}

void ConnectionImpl::on_established(TransportLink* link, const proto::Negotiated& n) {
  if (link != link_.get()) return;
  SIPHON_ASSERT_ON_WORKER(owner());
  frame_rev_ = n.rev;
  if (client_hs_) {
    // The banners start the transcript cephx signs (cephx.md §5).
    handle_step(client_hs_->start(my_banner(), n));
  } else if (server_hs_) {
    handle_step(server_hs_->start(my_banner(), n));
  }
}

void ConnectionImpl::on_frame(TransportLink* link, proto::Frame&& f) {
  if (link != link_.get()) return;
  SIPHON_ASSERT_ON_WORKER(owner());
  touch();
  if (state_ == State::ready) {
    receive_ready_frame(std::move(f));
  } else if (client_hs_) {
    handle_step(client_hs_->on_frame(f));
  } else if (server_hs_) {
    handle_step(server_hs_->on_frame(f));
  } else {
    core_->counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    fault(make_error_code(errc::unexpected_frame),
          fmt::format("{} frame with no handshake in progress", proto::to_string(f.tag)));
  }
}

void ConnectionImpl::on_fault(TransportLink* link, const transport::Fault& f) {
  if (link != link_.get()) return;
  SIPHON_ASSERT_ON_WORKER(owner());
  // The transport's frame decoder rejected a frame: its bytes were damaged
  // on the way (the frame is dropped whole, nothing of it is dispatched).
  if (f.code == make_error_code(errc::bad_crc))
    core_->counters.crc_errors.fetch_add(1, std::memory_order_relaxed);
  // A secure-mode frame failed its GCM tag: tampered or damaged.
  if (f.code == make_error_code(errc::decrypt_failed))
    core_->counters.decrypt_errors.fetch_add(1, std::memory_order_relaxed);
  fault(f.code, f.reason);
}

void ConnectionImpl::on_writable(TransportLink* link) {
  if (link != link_.get()) return;
  SIPHON_ASSERT_ON_WORKER(owner());
  flush();
}

void ConnectionImpl::handle_step(Step&& step) {
  SIPHON_ASSERT_ON_WORKER(owner());
  for (std::size_t i = 0; i < step.send.size(); ++i) {
    if (step.secure && i == step.plain_frames && !switch_to_secure(step.connection_secret)) return;
    send_frame(std::move(step.send[i]));
  }
  if (step.secure && step.send.size() <= step.plain_frames && !switch_to_secure(step.connection_secret)) return;
  if (!step.auth_refused.empty()) {
    core_->counters.auth_refused.fetch_add(1, std::memory_order_relaxed);
    SIPHON_LOG(session, 1, "refused the authentication of a peer from {}: {}",
               conn_ ? conn_->peer_address().to_string() : std::string("?"), step.auth_refused);
  }
  if (step.authenticated && server_hs_) {
    core_->counters.auth_accepted.fetch_add(1, std::memory_order_relaxed);
    const session::PeerInfo& who = server_hs_->peer();
    SIPHON_LOG(session, 5, "authenticated {} from {} as global_id {}: cephx, {} mode", who.auth_name.to_string(),
               conn_ ? conn_->peer_address().to_string() : std::string("?"), who.global_id,
               who.con_mode == proto::kConModeSecure ? "secure" : "crc");
  }
  if (step.learned_addr && client_hs_) core_->learned_addr(client_hs_->me().addrs);
  if (step.session_reset) {
    SIPHON_LOG(session, 1, "peer {} reset our session (full={})", peer_.addrs.to_string(),
               step.reset_full);
    ids_ = client_hs_->ids();
    if (step.reset_full) reset_session(true);
  }
  switch (step.outcome) {
    case Step::Outcome::none:
      return;
    case Step::Outcome::fault:
      if (step.error != make_error_code(errc::connection_reset))
        core_->counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
      if (step.error == make_error_code(errc::auth_failed) || step.error == make_error_code(errc::bad_signature))
        core_->counters.auth_refused.fetch_add(1, std::memory_order_relaxed);
      fault(step.error, step.reason);
      return;
    case Step::Outcome::wait:
      SIPHON_LOG(session, 5, "peer {} told us to WAIT", peer_.addrs.to_string());
      fault_wait();
      return;
    case Step::Outcome::ready:
      if (client_hs_)
        client_ready(step);
      else
        server_ready(step.reconnected, step.peer_in_seq);
      return;
    case Step::Outcome::ident_request:
      server_decide_ident();
      return;
    case Step::Outcome::reconnect_request:
      server_decide_reconnect();
      return;
  }
}

bool ConnectionImpl::switch_to_secure(const auth::Bytes& secret) {
  std::string why;
  const std::error_code ec = conn_ ? conn_->start_secure(secret, why) : make_error_code(errc::not_connected);
  if (!ec) {
    SIPHON_LOG(session, 10, "connection to {}: secure mode on", peer_.addrs.to_string());
    return true;
  }
  core_->counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
  fault(ec, "cannot switch to secure mode: " + why);
  return false;
}

void ConnectionImpl::client_ready(const Step& step) {
  const session::PeerInfo info = client_hs_->peer();
  ids_ = client_hs_->ids();
  client_hs_.reset();
  if (step.reconnected) {
    const std::size_t dropped = outq_.discard_acked(step.peer_in_seq);
    core_->counters.reconnects.fetch_add(1, std::memory_order_relaxed);
    SIPHON_LOG(session, 5, "reconnected to {}: peer has up to seq {}, {} requeued dropped, {} to resend",
               peer_.addrs.to_string(), step.peer_in_seq, dropped, outq_.pending_count());
  } else {
    peer_ = info;
    outq_.renumber();
    acked_in_seq_ = 0;
  }
  // Auth is per transport connection: a reconnect authenticated afresh.
  peer_.auth_method = info.auth_method;
  peer_.con_mode = info.con_mode;
  peer_.global_id = info.global_id;
  SIPHON_LOG(session, 5, "ready with {} as global_id {}: auth {}, {} mode, msgr2 rev{}", peer_.addrs.to_string(),
             info.global_id, info.auth_method == proto::kAuthMethodCephx ? "cephx" : "none",
             info.con_mode == proto::kConModeSecure ? "secure" : "crc", static_cast<int>(frame_rev_));
  become_ready();
  if (!step.reconnected) core_->dispatch_queue.enqueue({DispatchQueue::Kind::connect, {}, ConnectionImplRef(this), 0});
  flush();
  maybe_ack();
}

void ConnectionImpl::server_ready(bool reconnected, std::uint64_t peer_in_seq) {
  const session::SessionIds hs_ids = server_hs_->ids();
  const session::PeerInfo& who = server_hs_->peer();
  SIPHON_LOG(session, 5, "accepted {} from {} as global_id {}: auth {}, {} mode, msgr2 rev{}",
             who.auth_name.to_string(), conn_ ? conn_->peer_address().to_string() : std::string("?"),
             who.global_id, who.auth_method == proto::kAuthMethodCephx ? "cephx" : "none",
             who.con_mode == proto::kConModeSecure ? "secure" : "crc", static_cast<int>(frame_rev_));
  if (reconnected) {
    ids_.connect_seq = hs_ids.connect_seq;
    ids_.peer_global_seq = hs_ids.peer_global_seq;
    peer_.auth_method = who.auth_method;
    peer_.con_mode = who.con_mode;
    peer_.auth_name = who.auth_name;
    peer_.global_id = who.global_id;
    const std::size_t dropped = outq_.discard_acked(peer_in_seq);
    core_->counters.reconnects.fetch_add(1, std::memory_order_relaxed);
    SIPHON_LOG(session, 5, "peer {} reconnected: it has up to seq {}, {} dropped, {} to resend",
               peer_.addrs.to_string(), peer_in_seq, dropped, outq_.pending_count());
  } else {
    ids_ = hs_ids;
    peer_ = server_hs_->peer();
    target_addrs_ = peer_.addrs;
    outq_.renumber();
    acked_in_seq_ = 0;
  }
  server_hs_.reset();
  become_ready();
  if (!reconnected) core_->dispatch_queue.enqueue({DispatchQueue::Kind::accept, {}, ConnectionImplRef(this), 0});
  flush();
  maybe_ack();
}

void ConnectionImpl::become_ready() {
  state_ = State::ready;
  once_ready_ = true;
  backoff_.reset();
  if (!on_fallback_) {
    primary_failing_since_ = {};
    moving_back_ = false;
  }
  if (timer_) timer_->cancel();
  publish_peer();
  connected_.store(true, std::memory_order_release);
  arm_idle_timer();
  if (pending_keepalive_) {
    pending_keepalive_ = false;
    send_frame(session::encode(session::Keepalive2{session::stamp_now()}));
  }
}

// --- server-side decisions -------------------------------------------------

session::ExistingSession ConnectionImpl::snapshot() const {
  session::ExistingSession s;
  s.closed = state_ == State::closed;
  s.replacing = replacing_;
  s.lossy = policy_.lossy;
  s.server_policy = policy_.server;
  s.resetcheck = policy_.resetcheck;
  s.ready_or_standby = state_ == State::ready || state_ == State::standby;
  s.client_cookie = ids_.client_cookie;
  s.server_cookie = ids_.server_cookie;
  s.peer_global_seq = ids_.peer_global_seq;
  s.connect_seq = ids_.connect_seq;
  if (!target_addrs_.empty()) s.peer_addr = target_addrs_.front();
  return s;
}

namespace {
EntityAddr first_addr(const EntityAddrVec& v) { return v.empty() ? EntityAddr{} : v.front(); }
}  // namespace

void ConnectionImpl::server_decide_ident() {
  const session::ClientIdent ci = server_hs_->client_ident();
  peer_ = server_hs_->peer();
  policy_ = core_->policy_for(peer_.type);
  lossy_.store(policy_.lossy);
  peer_type_.store(peer_.type);
  target_addrs_ = ci.addrs;
  ConnectionImplRef self(this);
  if (policy_.lossy && !policy_.register_lossy_clients) {  // stateless server: no table
    handle_step(server_hs_->accept_new_session(core_->next_global_seq(0), core_->random_u64()));
    return;
  }
  key_ = AddrKey::of(ci.addrs);
  ConnectionImplRef existing = core_->register_session(key_, self);
  if (existing == self) {
    registered_ = true;
    handle_step(server_hs_->accept_new_session(core_->next_global_seq(0), core_->random_u64()));
    return;
  }
  const EntityAddr me = first_addr(core_->my_addrs());
  existing->on_owner([existing, self, ci, me] {
    const session::ExistingSession snap = existing->snapshot();
    const session::IdentVerdict v =
        session::decide_client_ident(&snap, ci.global_seq, ci.cookie, first_addr(ci.addrs), me);
    SIPHON_LOG(session, 5, "CLIENT_IDENT from {} meets an existing session: {} ({})",
               ci.addrs.to_string(), session::to_string(v.kind), v.rule);
    using K = session::IdentVerdict::Kind;
    switch (v.kind) {
      case K::new_session:
      case K::replace_lossy:
        if (v.kind == K::replace_lossy) existing->enter_closed(true);
        self->on_owner([self] {
          if (self->state_ == State::closed || !self->server_hs_) return;
          self->core_->replace_session(self->key_, self);
          self->registered_ = true;
          self->handle_step(self->server_hs_->accept_new_session(self->core_->next_global_seq(0),
                                                                 self->core_->random_u64()));
        });
        return;
      case K::stale:
        self->on_owner([self] {
          if (self->server_hs_) self->handle_step(self->server_hs_->refuse("stale connection"));
        });
        return;
      case K::wait:
        if (existing->state_ == State::ready) existing->send_frame(session::encode(session::Keepalive2{session::stamp_now()}));
        self->on_owner([self] {
          if (self->server_hs_ && self->server_hs_->state() == session::ServerHandshake::State::decide)
            self->handle_step(self->server_hs_->reply_wait());
        });
        return;
      case K::reuse:
      case K::reuse_after_reset:
        existing->adopt(self, false, 0, v.kind == K::reuse_after_reset && existing->policy_.resetcheck);
        return;
    }
  });
}

void ConnectionImpl::server_decide_reconnect() {
  const session::SessionReconnect r = server_hs_->reconnect();
  peer_ = server_hs_->peer();
  ConnectionImplRef self(this);
  const AddrKey k = AddrKey::of(r.addrs);
  ConnectionImplRef existing = core_->lookup(k);
  if (!existing || existing == self) {
    SIPHON_LOG(session, 5, "SESSION_RECONNECT from {}: no session: reset", r.addrs.to_string());
    handle_step(server_hs_->reply_reset(true));
    return;
  }
  const EntityAddr me = first_addr(core_->my_addrs());
  existing->on_owner([existing, self, r, me] {
    const session::ExistingSession snap = existing->snapshot();
    const session::ReconnectVerdict v = session::decide_reconnect(&snap, r, me);
    SIPHON_LOG(session, 5, "SESSION_RECONNECT from {} (cs {}, gs {}, msg_seq {}): {} ({})",
               r.addrs.to_string(), r.connect_seq, r.global_seq, r.msg_seq,
               session::to_string(v.kind), v.rule);
    using K = session::ReconnectVerdict::Kind;
    if (v.kind == K::accept) {
      existing->adopt(self, true, r.msg_seq, false);
      return;
    }
    if (v.kind == K::reset && v.full && snap.client_cookie != r.client_cookie && !snap.closed)
      existing->reset_session(true);  // the peer restarted: its old session is gone
    self->on_owner([self, v] {
      if (!self->server_hs_ || self->server_hs_->state() != session::ServerHandshake::State::decide) return;
      switch (v.kind) {
        case K::reset: self->handle_step(self->server_hs_->reply_reset(v.full)); break;
        case K::retry: self->handle_step(self->server_hs_->reply_retry(v.value)); break;
        case K::retry_global: self->handle_step(self->server_hs_->reply_retry_global(v.value)); break;
        case K::wait: self->handle_step(self->server_hs_->reply_wait()); break;
        case K::accept: break;
      }
    });
  });
}

// Runs on this (the existing) session's worker: hands the session over to
// `from`'s socket, on `from`'s worker.
void ConnectionImpl::adopt(ConnectionImplRef from, bool reconnect, std::uint64_t msg_seq, bool reset_first) {
  if (state_ == State::closed) {
    from->on_owner([from] {
      if (from->server_hs_) from->handle_step(from->server_hs_->refuse("session closed during takeover"));
    });
    return;
  }
  if (reset_first) reset_session(true);
  replacing_ = true;
  ++attempt_;
  detach_transport();
  cancel_timers();
  client_hs_.reset();
  server_hs_.reset();
  connected_.store(false, std::memory_order_release);
  if (!lossy_) outq_.requeue_sent();
  state_ = State::accepting;
  transport::Worker* w = &from->owner();
  if (w != &owner()) core_->counters.session_migrations.fetch_add(1, std::memory_order_relaxed);
  owner_.store(w, std::memory_order_release);
  ConnectionImplRef self(this);
  w->post([self, from, reconnect, msg_seq] { self->complete_adopt(from, reconnect, msg_seq); });
}

void ConnectionImpl::complete_adopt(ConnectionImplRef from, bool reconnect, std::uint64_t msg_seq) {
  (void)msg_seq;
  replacing_ = false;
  if (state_ == State::closed) {
    if (from->server_hs_) from->handle_step(from->server_hs_->refuse("session closed during takeover"));
    return;
  }
  if (from->state_ == State::closed || !from->conn_ || !from->server_hs_ ||
      from->server_hs_->state() != session::ServerHandshake::State::decide) {
    // The new socket died meanwhile: wait for the peer's next attempt, or
    // dial it ourselves if our policy says so.
    state_ = State::standby;
    if (!lossy_ && can_dial() && (outq_.has_pending() || !policy_.standby))
      schedule_reconnect(session::ReconnectBackoff::Cause::attempt_failed);
    return;
  }
  link_ = std::move(from->link_);
  link_->owner = ConnectionImplRef(this);
  conn_ = std::move(from->conn_);
  accept_slot_ = std::move(from->accept_slot_);
  server_hs_ = std::move(from->server_hs_);
  from->server_hs_.reset();
  from->state_ = State::closed;
  from->closed_flag_.store(true);
  from->cancel_timers();
  core_->remove_live(from.get());
  if (paused_) conn_->pause_receive(true);
  ++attempt_;
  const Step st = reconnect ? server_hs_->accept_reconnect(ids_.in_seq)
                            : server_hs_->accept_new_session(core_->next_global_seq(0), core_->random_u64());
  handle_step(Step(st));
}

// --- faults, reconnect, close ------------------------------------------------

void ConnectionImpl::fault(std::error_code ec, std::string_view why) {
  if (state_ == State::closed) return;
  ConnectionImplRef self(this);
  const State was = state_;
  core_->counters.faults.fetch_add(1, std::memory_order_relaxed);
  SIPHON_LOG(session, 1, "{} faulted in state {}: {} ({})", describe(), to_string(was), why,
             ec.message());
  {
    std::lock_guard l(info_mtx_);
    last_fault_ = FaultInfo{ec, std::string(why)};
  }
  detach_transport();
  if (timer_) timer_->cancel();
  if (idle_timer_) idle_timer_->cancel();
  connected_.store(false, std::memory_order_release);
  client_hs_.reset();
  note_fault_for_failover();
  if (was == State::accepting && !once_ready_ && !replacing_) {
    // An accepted socket that never became a session: just forget it.
    server_hs_.reset();
    enter_closed(false);
    return;
  }
  server_hs_.reset();
  if (lossy_) {
    enter_closed(true);
    return;
  }
  outq_.requeue_sent();
  if (can_dial() && (outq_.has_pending() || !policy_.standby || (outgoing_ && !once_ready_))) {
    schedule_reconnect(was == State::connecting ? session::ReconnectBackoff::Cause::attempt_failed
                                                : session::ReconnectBackoff::Cause::fault_when_ready);
  } else {
    state_ = State::standby;
  }
}

void ConnectionImpl::fault_wait() {
  ConnectionImplRef self(this);
  detach_transport();
  if (timer_) timer_->cancel();
  client_hs_.reset();
  connected_.store(false, std::memory_order_release);
  if (lossy_) {
    enter_closed(true);
    return;
  }
  schedule_reconnect(session::ReconnectBackoff::Cause::peer_said_wait);
}

bool ConnectionImpl::can_dial() const noexcept {
  if (policy_.server || target_addrs_.empty()) return false;
  const EntityAddr& a = target_addrs_.front();
  return a.addr.port() != 0 && (outgoing_ || a.type == AddrType::msgr2);
}

void ConnectionImpl::schedule_reconnect(session::ReconnectBackoff::Cause cause) {
  if (ids_.server_cookie != 0) ++ids_.connect_seq;  // before every reconnect of a session
  const std::chrono::nanoseconds delay = backoff_.next(cause);
  state_ = State::backoff;
  ++attempt_;
  ConnectionImplRef self(this);
  if (delay.count() == 0) {
    owner().post([self] { self->on_owner([self] { if (self->state_ == State::backoff) self->connect_attempt(); }); });
    return;
  }
  SIPHON_LOG(session, 5, "reconnecting to {} in {} ms", target_addrs_.to_string(),
             std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
  ensure_timers();
  const std::uint64_t gen = attempt_;
  timer_->expires_after(delay);
  timer_->async_wait([self, gen](const boost::system::error_code& ec) {
    if (ec) return;
    self->on_owner([self, gen] {
      if (gen == self->attempt_ && self->state_ == State::backoff) self->connect_attempt();
    });
  });
}

void ConnectionImpl::close_internal(bool notify_reset, std::string_view why) {
  ConnectionImplRef self(this);
  std::string w(why);
  // Closed from this moment, whatever thread we are on (the teardown itself
  // runs on the owner): send_message fails, and a connect_to right after a
  // mark_down makes a new session instead of returning this one, whose
  // queue is about to be dropped.
  closed_flag_.store(true, std::memory_order_release);
  on_owner([self, notify_reset, w] {
    if (self->state_ != State::closed) SIPHON_LOG(session, 5, "closing connection: {}", w);
    self->enter_closed(notify_reset);
  });
}

void ConnectionImpl::mark_down() { close_internal(false, "marked down"); }

void ConnectionImpl::enter_closed(bool notify_reset) {
  if (state_ == State::closed) return;
  ConnectionImplRef self(this);
  state_ = State::closed;
  closed_flag_.store(true, std::memory_order_release);
  connected_.store(false, std::memory_order_release);
  ++attempt_;
  detach_transport();
  cancel_timers();
  client_hs_.reset();
  server_hs_.reset();
  outq_.clear();
  forget_unsent();
  {
    std::lock_guard l(inbox_mtx_);
    std::uint64_t n = 0;
    for (const auto& [m, bytes] : inbox_) n += bytes;
    inbox_.clear();
    send_queued_.fetch_sub(n, std::memory_order_acq_rel);
  }
  if (registered_) core_->unregister_session(key_, this);
  registered_ = false;
  if (notify_reset && !core_->stopping.load())
    core_->dispatch_queue.enqueue({DispatchQueue::Kind::reset, {}, self, 0});
  core_->remove_live(this);
}

void ConnectionImpl::reset_session(bool notify_remote) {
  outq_.clear();
  forget_unsent();
  ids_.client_cookie = 0;
  ids_.server_cookie = 0;
  ids_.connect_seq = 0;
  ids_.in_seq = 0;
  acked_in_seq_ = 0;
  core_->counters.sessions_reset.fetch_add(1, std::memory_order_relaxed);
  if (notify_remote && !core_->stopping.load())
    core_->dispatch_queue.enqueue({DispatchQueue::Kind::remote_reset, {}, ConnectionImplRef(this), 0});
}

// --- timers -------------------------------------------------------------------

void ConnectionImpl::ensure_timers() {
  if (!timer_) timer_ = std::make_unique<boost::asio::steady_timer>(owner().io());
  if (!idle_timer_) idle_timer_ = std::make_unique<boost::asio::steady_timer>(owner().io());
}

void ConnectionImpl::cancel_timers() {
  timer_.reset();  // destroying a timer cancels its wait
  idle_timer_.reset();
  probe_timer_.reset();
  ++probe_gen_;
}

void ConnectionImpl::arm_ready_timer() {
  ensure_timers();
  ConnectionImplRef self(this);
  const std::uint64_t gen = attempt_;
  timer_->expires_after(core_->options.ms_connection_ready_timeout);
  timer_->async_wait([self, gen](const boost::system::error_code& ec) {
    if (ec) return;
    self->on_owner([self, gen] {
      if (gen != self->attempt_) return;
      if (self->state_ == State::connecting || self->state_ == State::accepting)
        self->fault(make_error_code(errc::timed_out), "ms_connection_ready_timeout expired before READY");
    });
  });
}

void ConnectionImpl::arm_idle_timer() {
  ensure_timers();
  const auto& o = core_->options;
  auto tick = o.ms_connection_idle_timeout;
  if (o.ms_keepalive_interval.count() > 0) tick = std::min(tick, o.ms_keepalive_interval);
  idle_seen_ = activity_;
  idle_for_ = std::chrono::nanoseconds{0};
  ConnectionImplRef self(this);
  const std::uint64_t gen = attempt_;
  idle_timer_->expires_after(tick);
  idle_timer_->async_wait([self, gen, tick](const boost::system::error_code& ec) {
    if (ec) return;
    self->on_owner([self, gen, tick] { self->on_idle_tick(gen, tick); });
  });
}

void ConnectionImpl::on_idle_tick(std::uint64_t gen, std::chrono::nanoseconds tick) {
  if (gen != attempt_ || state_ != State::ready || !idle_timer_) return;
  const auto& o = core_->options;
  if (activity_ != idle_seen_) {
    idle_seen_ = activity_;
    idle_for_ = std::chrono::nanoseconds{0};
  } else {
    idle_for_ += tick;
  }
  if (idle_for_ >= o.ms_connection_idle_timeout) {
    core_->counters.idle_timeouts.fetch_add(1);
    fault(make_error_code(errc::timed_out), "ms_connection_idle_timeout: no traffic");
    return;
  }
  if (o.ms_keepalive_interval.count() > 0 && idle_for_ >= o.ms_keepalive_interval)
    send_frame(session::encode(session::Keepalive2{session::stamp_now()}));
  ConnectionImplRef self(this);
  idle_timer_->expires_after(tick);
  idle_timer_->async_wait([self, gen, tick](const boost::system::error_code& ec) {
    if (ec) return;
    self->on_owner([self, gen, tick] { self->on_idle_tick(gen, tick); });
  });
}

// --- peer info (read from any thread) ---------------------------------------

std::string_view ConnectionImpl::to_string(State s) noexcept {
  switch (s) {
    case State::idle: return "idle";
    case State::connecting: return "connecting";
    case State::accepting: return "accepting";
    case State::ready: return "ready";
    case State::backoff: return "backoff";
    case State::standby: return "standby";
    case State::closed: return "closed";
  }
  return "?";
}

std::string ConnectionImpl::describe() const {
  if (!target_addrs_.empty())
    return fmt::format("{} connection with {}", outgoing_ ? "outgoing" : "incoming", target_addrs_.to_string());
  if (conn_) return fmt::format("incoming connection from {}", conn_->peer_address().to_string());
  return "incoming connection";
}

void ConnectionImpl::publish_peer() {
  std::lock_guard l(info_mtx_);
  peer_addrs_info_ = peer_.addrs.empty() ? target_addrs_ : peer_.addrs;
  peer_name_info_ = {peer_.type, peer_.gid};
  global_id_info_ = peer_.global_id;
  peer_type_.store(peer_.type, std::memory_order_release);
  features_.store(peer_.features, std::memory_order_release);
  auth_info_ = {peer_.auth_method, peer_.con_mode, peer_.auth_name.to_string(), peer_.global_id, peer_.caps};
}

Connection::AuthInfo ConnectionImpl::auth_info() const {
  std::lock_guard l(info_mtx_);
  return auth_info_;
}

EntityAddrVec ConnectionImpl::get_peer_addrs() const {
  std::lock_guard l(info_mtx_);
  return peer_addrs_info_;
}

Connection::FaultInfo ConnectionImpl::last_fault() const {
  std::lock_guard l(info_mtx_);
  return last_fault_;
}

entity_name_t ConnectionImpl::get_peer_name() const {
  std::lock_guard l(info_mtx_);
  return peer_name_info_;
}

std::uint64_t ConnectionImpl::get_global_id() const {
  std::lock_guard l(info_mtx_);
  return global_id_info_;
}

}  // namespace siphon::detail

// --- introspection (messenger dump) -------------------------------------------------

namespace siphon::detail {

namespace {
// A coarse clock (a few ms of resolution, no syscall): stamped on every
// frame, so it must cost next to nothing.
std::int64_t coarse_now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

void ConnectionImpl::touch() noexcept {
  ++activity_;
  last_activity_ns_ = coarse_now_ns();
}

ConnectionInfo ConnectionImpl::basic_info() const {
  ConnectionInfo i;
  i.peer_addrs = get_peer_addrs().to_string();
  const entity_name_t n = get_peer_name();
  i.peer_entity = n.num < 0 ? "unknown" : n.to_string();
  i.state = "unknown";
  i.outgoing = outgoing_;
  i.lossy = is_lossy();
  i.worker = owner().index();
  i.queued_bytes = send_queued_.load(std::memory_order_relaxed);
  i.undispatched_bytes = undispatched_.load(std::memory_order_relaxed);
  const FaultInfo f = last_fault();
  if (f.code) i.last_fault = f.reason.empty() ? f.code.message() : f.reason;
  return i;
}

void ConnectionImpl::post_info(std::function<void(ConnectionInfo)> done) {
  on_owner([this, done = std::move(done)] {
    ConnectionInfo i = basic_info();
    i.state = std::string(to_string(state_));
    i.out_seq = outq_.out_seq();
    // Messages still kept for replay are the unacknowledged ones: the peer
    // has everything before the oldest of them.
    i.out_acked = outq_.sent().empty() ? i.out_seq : outq_.sent().front()->header().seq - 1;
    i.in_seq = ids_.in_seq;
    i.in_acked = acked_in_seq_;
    i.queued_messages = outq_.pending_count();
    i.unacked_messages = outq_.sent_count();
    if (last_activity_ns_ != 0) i.last_activity_ms_ago = (coarse_now_ns() - last_activity_ns_) / 1'000'000;
    if (conn_) i.transport = conn_->info();
    done(std::move(i));
  });
}

}  // namespace siphon::detail
