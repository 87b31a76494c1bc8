// ConnectionImpl: RDMA -> TCP failover inside one lossless session
// (docs/rdma-transport.md, Failover). With a fallback stack
// (Messenger::set_fallback_stack), the side that dials a session picks the
// stack of each attempt:
//
//            fault on the primary: the failure window starts (once)
//   primary ──────────────────────────────────────────────┐
//      ^   an attempt starts with the window older than   │
//      │   siphon_ms_fallback_after, and the peer has a   │
//      │   fallback address: switch (logged, counted)     v
//      │                                               fallback ── every siphon_ms_fallback_retry_interval:
//      │  a probe connected over the primary:            │       a transport connect over the primary
//      └── switch back (logged, counted); if that        │       (closed at once); failure: try later
//          attempt fails, the next one returns to the    │
//          fallback at once                              │
//
// A switch moves the session to a worker of the other stack (as a session
// adopted by a peer's new socket does) and dials from there; the session
// itself -- cookies, sequence numbers, the queue of unacknowledged
// messages -- does not change, so the peer sees SESSION_RECONNECT and the
// usual replay, and the application sees neither a reset nor a gap.
#include <fmt/format.h>

#include "msgr/api/connection_impl.h"
#include "msgr/base/log.h"

namespace siphon::detail {

namespace {
double secs(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

transport::Stack& ConnectionImpl::dial_stack() const noexcept {
  return on_fallback_ && core_->fallback ? *core_->fallback : *core_->stack;
}

EntityAddr ConnectionImpl::dial_target() const {
  if (on_fallback_)
    if (auto f = fallback_addr()) return *f;
  return target_addrs_.empty() ? EntityAddr{} : target_addrs_.front();
}

std::optional<EntityAddr> ConnectionImpl::fallback_addr() const {
  // A Siphon peer with a fallback stack lists those addresses last (after
  // every primary one); the first address is the one the primary dials.
  for (const EntityAddrVec* v : {&target_addrs_, &peer_.addrs}) {
    if (v->addrs.size() < 2) continue;
    const EntityAddr& last = v->addrs.back();
    if (last.type == AddrType::msgr2 && last.addr.port() != 0 && !(last.addr == v->addrs.front().addr))
      return last;
  }
  return std::nullopt;
}

void ConnectionImpl::note_fault_for_failover() {
  if (!core_->fallback || lossy_ || on_fallback_) return;
  if (moving_back_) {
    // The probe connected, the session's own attempt did not: the path is
    // not usable yet. Back to the fallback at the next attempt.
    moving_back_ = false;
    fail_over_now_ = true;
  }
  if (primary_failing_since_ == std::chrono::steady_clock::time_point{})
    primary_failing_since_ = std::chrono::steady_clock::now();
}

bool ConnectionImpl::switch_stack_if_due() {
  if (!core_->fallback || lossy_) return false;
  if (on_fallback_) {
    arm_probe();
    return false;
  }
  if (primary_failing_since_ == std::chrono::steady_clock::time_point{}) return false;
  const auto failing = std::chrono::steady_clock::now() - primary_failing_since_;
  if (!fail_over_now_ && failing < core_->options.siphon_ms_fallback_after) return false;
  const std::optional<EntityAddr> fb = fallback_addr();
  if (!fb) return false;  // a peer with one address (a Ceph peer): keep dialling the primary
  std::string last;
  {
    std::lock_guard l(info_mtx_);
    last = last_fault_.reason.empty() ? last_fault_.code.message() : last_fault_.reason;
  }
  SIPHON_LOG(session, 0,
             "session with {} switches from {} to {} at {}: {} (primary failing for {:.1f} s, "
             "siphon_ms_fallback_after = {:.1f} s; last fault: {})",
             target_addrs_.to_string(), core_->stack->type(), core_->fallback->type(), fb->to_string(),
             fail_over_now_ ? "moving back failed" : "the primary path is unusable", secs(failing),
             secs(core_->options.siphon_ms_fallback_after), last);
  core_->counters.fallback_switches.fetch_add(1, std::memory_order_relaxed);
  on_fallback_ = true;
  fail_over_now_ = false;
  primary_failing_since_ = {};
  redial_on(core_->fallback->pick_worker());
  return true;
}

void ConnectionImpl::redial_on(transport::Worker& w) {
  // Nothing of the old attempt survives: its transport is gone and its
  // timers belong to the old worker's event loop.
  detach_transport();
  client_hs_.reset();
  connected_.store(false, std::memory_order_release);
  cancel_timers();
  state_ = State::backoff;
  const std::uint64_t gen = ++attempt_;
  owner_.store(&w, std::memory_order_release);
  ConnectionImplRef self(this);
  w.post([self, gen] {
    self->on_owner([self, gen] {
      if (gen == self->attempt_ && self->state_ == State::backoff) self->connect_attempt();
    });
  });
}

void ConnectionImpl::arm_probe() {
  if (probe_timer_ || state_ == State::closed) return;
  probe_timer_ = std::make_unique<boost::asio::steady_timer>(owner().io());
  const std::uint64_t gen = ++probe_gen_;
  ConnectionImplRef self(this);
  probe_timer_->expires_after(core_->options.siphon_ms_fallback_retry_interval);
  probe_timer_->async_wait([self, gen](const boost::system::error_code& ec) {
    if (ec) return;
    self->on_owner([self, gen] { self->on_probe_tick(gen); });
  });
}

void ConnectionImpl::on_probe_tick(std::uint64_t gen) {
  if (gen != probe_gen_ || !on_fallback_ || state_ == State::closed || target_addrs_.empty()) return;
  probe_timer_.reset();
  // A transport connection over the primary, closed as soon as it is up:
  // it proves the path (an RDMA stack reports success once its QP is
  // connected) without touching the session, which keeps running here.
  const EntityAddr primary = target_addrs_.front();
  ConnectionImplRef self(this);
  const std::uint64_t pgen = ++probe_gen_;
  transport::Worker& pw = core_->stack->pick_worker();
  SIPHON_LOG(session, 10, "probing {} over {}", primary.to_string(), core_->stack->type());
  core_->stack->connect(primary.addr, pw, [self, pgen, primary](std::error_code ec, transport::ConnectionRef c) {
    if (c) c->close();
    const std::string why = ec ? ec.message() : std::string();
    self->on_owner([self, pgen, ok = !ec && c != nullptr, why, primary] {
      if (pgen != self->probe_gen_ || !self->on_fallback_ || self->state_ == State::closed) return;
      if (!ok) {
        SIPHON_LOG(session, 10, "probe of {} failed: {}", primary.to_string(), why);
        self->arm_probe();
        return;
      }
      self->move_back(fmt::format("a probe connected to {} over {}", primary.to_string(),
                                  self->core_->stack->type()));
    });
  });
}

void ConnectionImpl::move_back(std::string_view why) {
  SIPHON_LOG(session, 0, "session with {} switches from {} back to {}: {}", target_addrs_.to_string(),
             core_->fallback->type(), core_->stack->type(), why);
  core_->counters.primary_switches.fetch_add(1, std::memory_order_relaxed);
  on_fallback_ = false;
  moving_back_ = true;
  primary_failing_since_ = {};
  if (state_ == State::standby || state_ == State::idle) {
    // Nothing to send: the next attempt, whenever it comes, uses the primary.
    cancel_timers();
    return;
  }
  // Ready, connecting or backing off over the fallback: end that transport
  // and reconnect over the primary now. What the peer had not acknowledged
  // is replayed there (SESSION_RECONNECT).
  if (!lossy_) outq_.requeue_sent();
  if (ids_.server_cookie != 0) ++ids_.connect_seq;  // before every reconnect of a session
  redial_on(core_->stack->pick_worker());
}

}  // namespace siphon::detail
