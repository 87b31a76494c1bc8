#include "msgr/api/messenger_core.h"

#include "msgr/api/connection_impl.h"
#include "msgr/base/log.h"

namespace siphon::detail {

AddrKey AddrKey::of(const EntityAddr& a) {
  AddrKey k;
  k.type = static_cast<std::uint32_t>(a.type);
  k.nonce = a.nonce;
  if (!a.addr.is_unspecified())
    k.sockaddr.assign(reinterpret_cast<const char*>(a.addr.sockaddr_ptr()), a.addr.sockaddr_len());
  return k;
}

AddrKey AddrKey::of(const EntityAddrVec& v) { return v.empty() ? AddrKey{} : of(v.front()); }

MessengerCore::MessengerCore(std::shared_ptr<transport::Stack> s, entity_name_t n, MessengerOptions o,
                             std::uint32_t nc)
    : stack(std::move(s)),
      name(n),
      options(std::move(o)),
      nonce(nc),
      perf(make_messenger_logger(n.to_string())),
      dispatch_queue(&dispatchers, [this](Connection* con, std::uint64_t bytes) {
        const std::uint64_t left = dispatch_bytes.fetch_sub(bytes, std::memory_order_acq_rel) - bytes;
        set_gauge(*perf, l_siphon_msgr_undispatched_bytes, left);
        // Every message queued with bytes comes from a ConnectionImpl.
        if (con != nullptr) static_cast<ConnectionImpl*>(con)->release_undispatched(bytes);
        if (has_waiters.load(std::memory_order_acquire)) wake_waiters();
      }),
      rng_(std::random_device{}()) {}

MessengerCore::~MessengerCore() = default;

Policy MessengerCore::policy_for(std::uint8_t peer_type) const {
  const auto it = policies.find(peer_type);
  return it != policies.end() ? it->second : default_policy;
}

session::PolicyView MessengerCore::policy_view(std::uint8_t peer_type) const {
  const Policy p = policy_for(peer_type);
  return {p.lossy, p.server, p.resetcheck, p.features_supported, p.features_required};
}

session::LocalIdentity MessengerCore::local_identity() const {
  session::LocalIdentity me;
  me.entity_type = name.type;
  me.gid = name.num;
  me.addrs = my_addrs();
  me.nonce = nonce;
  me.auth_name = auth_name;
  me.auth = client_auth;
  me.server_auth = server_auth;
  return me;
}

session::HandshakeServices MessengerCore::services() {
  session::HandshakeServices s;
  // The handshakes run on workers while the core lives: capture weakly so a
  // handshake never extends the core's life.
  std::weak_ptr<MessengerCore> w = weak_from_this();
  s.next_global_seq = [w](std::uint64_t at_least) -> std::uint64_t {
    auto c = w.lock();
    return c ? c->next_global_seq(at_least) : at_least + 1;
  };
  s.random_cookie = [w]() -> std::uint64_t {
    auto c = w.lock();
    return c ? c->random_u64() : 1;
  };
  s.policy_for = [w](std::uint8_t t) -> session::PolicyView {
    auto c = w.lock();
    return c ? c->policy_view(t) : session::PolicyView{};
  };
  s.new_global_id = [w]() -> std::uint64_t {
    auto c = w.lock();
    return c ? c->global_id_.fetch_add(1) + 4096 : 4096;
  };
  return s;
}

EntityAddrVec MessengerCore::my_addrs() const {
  std::lock_guard l(ident_mtx_);
  return my_addrs_;
}

void MessengerCore::set_my_addrs(const EntityAddrVec& v) {
  std::lock_guard l(ident_mtx_);
  my_addrs_ = v;
}

void MessengerCore::learned_addr(const EntityAddrVec& v) {
  std::lock_guard l(ident_mtx_);
  if (my_addrs_.empty()) my_addrs_ = v;
}

std::uint64_t MessengerCore::next_global_seq(std::uint64_t at_least) {
  std::uint64_t cur = global_seq_.load();
  for (;;) {
    const std::uint64_t next = std::max(cur, at_least) + 1;
    if (global_seq_.compare_exchange_weak(cur, next)) return next;
  }
}

std::uint64_t MessengerCore::random_u64() {
  std::lock_guard l(rng_mtx_);
  std::uint64_t v = 0;
  while (v == 0) v = rng_();
  return v;
}

ConnectionImplRef MessengerCore::lookup(const AddrKey& k) {
  std::lock_guard l(table_mtx_);
  const auto it = sessions_.find(k);
  return it == sessions_.end() ? ConnectionImplRef() : it->second;
}

ConnectionImplRef MessengerCore::register_session(const AddrKey& k, const ConnectionImplRef& c) {
  std::lock_guard l(table_mtx_);
  auto [it, inserted] = sessions_.try_emplace(k, c);
  if (!inserted && it->second->closed()) it->second = c;
  return it->second;
}

void MessengerCore::replace_session(const AddrKey& k, const ConnectionImplRef& c) {
  std::lock_guard l(table_mtx_);
  sessions_[k] = c;
}

void MessengerCore::unregister_session(const AddrKey& k, const ConnectionImpl* c) {
  std::lock_guard l(table_mtx_);
  const auto it = sessions_.find(k);
  if (it != sessions_.end() && it->second.get() == c) sessions_.erase(it);
}

bool MessengerCore::add_live(const ConnectionImplRef& c) {
  std::lock_guard l(table_mtx_);
  // shutdown() sets `stopping` before it takes this lock to list the live
  // connections: a connection added after that list was made sees it here.
  if (stopping.load()) return false;
  live_.insert(c);
  set_gauge(*perf, l_siphon_msgr_connections, live_.size());
  return true;
}

void MessengerCore::remove_live(const ConnectionImpl* c) {
  {
    std::lock_guard l(table_mtx_);
    for (auto it = live_.begin(); it != live_.end(); ++it)
      if (it->get() == c) {
        live_.erase(it);
        break;
      }
    set_gauge(*perf, l_siphon_msgr_connections, live_.size());
  }
  table_cv_.notify_all();
}

std::vector<ConnectionImplRef> MessengerCore::live_connections() {
  std::lock_guard l(table_mtx_);
  return {live_.begin(), live_.end()};
}

std::size_t MessengerCore::live_count() {
  std::lock_guard l(table_mtx_);
  return live_.size();
}

void MessengerCore::wait_all_closed() {
  std::unique_lock l(table_mtx_);
  table_cv_.wait(l, [this] { return live_.empty(); });
  sessions_.clear();
}

std::uint64_t MessengerCore::add_waiter(const ConnectionImplRef& c, std::uint64_t ticket) {
  std::lock_guard l(waiters_mtx_);
  if (ticket == 0) ticket = next_ticket_++;
  waiters_[ticket] = c;
  has_waiters.store(true, std::memory_order_release);
  return ticket;
}

void MessengerCore::wake_waiters() {
  std::map<std::uint64_t, ConnectionImplRef> w;
  {
    std::lock_guard l(waiters_mtx_);
    w.swap(waiters_);
    has_waiters.store(false, std::memory_order_release);
  }
  for (auto& [ticket, c] : w) c->try_resume();  // oldest first
}

std::shared_ptr<void> MessengerCore::take_accept_slot() {
  const std::uint64_t max = options.ms_max_connections;
  const std::uint64_t now = accepted_open.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (max != 0 && now > max) {
    accepted_open.fetch_sub(1, std::memory_order_acq_rel);
    return nullptr;
  }
  // The slot is returned when the session lets go of the socket; the core
  // outlives its connections (they hold it by shared_ptr).
  return std::shared_ptr<void>(this, [](MessengerCore* c) { c->accepted_open.fetch_sub(1, std::memory_order_acq_rel); });
}

namespace {
struct Budget {
  std::weak_ptr<MessengerCore> core;
  std::shared_ptr<Throttle> msgs;
  std::shared_ptr<Throttle> bytes;
  std::uint64_t n = 0;
  ~Budget() {
    if (msgs) msgs->put(1);
    if (bytes) bytes->put(n);
    if (auto c = core.lock(); c && c->has_waiters.load(std::memory_order_acquire)) c->wake_waiters();
  }
};
}  // namespace

std::shared_ptr<void> MessengerCore::take_budget(const std::shared_ptr<MessengerCore>& core,
                                                 const Policy& p, std::uint64_t bytes, bool& over) {
  over = false;
  if (!p.throttler_messages && !p.throttler_bytes) return {};
  auto b = std::make_shared<Budget>();
  b->core = core;
  b->n = bytes;
  // The message is already in hand: take the budget regardless, and report
  // when that overfills it so the connection stops reading.
  if (p.throttler_messages) {
    if (!p.throttler_messages->take(1)) over = true;
    b->msgs = p.throttler_messages;
  }
  if (p.throttler_bytes) {
    if (!p.throttler_bytes->take(bytes)) over = true;
    b->bytes = p.throttler_bytes;
  }
  return b;
}

}  // namespace siphon::detail
