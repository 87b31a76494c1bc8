// The Messenger implementation: configuration, bind/accept, connect_to,
// shutdown. Sessions are driven by ConnectionImpl.
#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <utility>

#include "msgr/api/connection_impl.h"
#include "msgr/api/messenger_core.h"
#include "msgr/base/log.h"

namespace siphon {
namespace detail {
namespace {

class MessengerImpl final : public Messenger {
 public:
  MessengerImpl(std::shared_ptr<transport::Stack> stack, entity_name_t name, MessengerOptions options,
                std::uint32_t nonce)
      : core_(std::make_shared<MessengerCore>(std::move(stack), name, std::move(options), nonce)) {
    core_->auth_name.type = name.type;
    core_->auth_name.id = name.type == entity_type::client || name.num < 0 ? "admin" : std::to_string(name.num);
  }

  ~MessengerImpl() override {
    shutdown();
    wait();
    if (registered_) perf::process_collection().remove(core_->perf.get());
  }

  void set_default_policy(const Policy& p) override { core_->default_policy = p; }
  void set_policy(std::uint8_t peer_type, const Policy& p) override { core_->policies[peer_type] = p; }
  Policy get_policy(std::uint8_t peer_type) const override { return core_->policy_for(peer_type); }
  void set_message_registry(std::shared_ptr<const MessageRegistry> r) override { core_->registry = std::move(r); }
  void set_auth_name(const EntityName& n) override { core_->auth_name = n; }
  void set_client_auth(const ClientAuth& a) override { core_->client_auth = a; }
  void set_server_auth(const ServerAuth& a) override { core_->server_auth = a; }
  void add_dispatcher_head(Dispatcher* d) override {
    auto& ds = core_->dispatchers;
    ds.push_back(d);
    std::rotate(ds.rbegin(), ds.rbegin() + 1, ds.rend());
  }
  void add_dispatcher_tail(Dispatcher* d) override { core_->dispatchers.push_back(d); }
  // The fallback is started and listened on with the primary (bind(),
  // start()); one set afterwards would be a stack nobody started, dialled
  // by failover and stopped at shutdown. So it is refused then, and says so.
  void set_fallback_stack(std::shared_ptr<transport::Stack> s) override {
    std::lock_guard l(stack_mtx_);
    if (stack_started_) {
      SIPHON_LOG(ms, 0,
                 "set_fallback_stack({}) after bind() or start() is ignored: the fallback stack is started and "
                 "listened on with the primary; call set_fallback_stack() before bind() and start()",
                 s ? s->type() : std::string_view("null"));
      return;
    }
    core_->fallback = std::move(s);
  }

  std::error_code bind(const EntityAddrVec& addrs) override {
    start_stack();
    EntityAddrVec bound_addrs = core_->my_addrs();
    // The fallback stack's addresses stay last: a peer dials the first
    // address over its primary stack and the last one over its fallback
    // (docs/rdma-transport.md, Failover), and a Ceph peer dials the first.
    std::vector<EntityAddr> fallback_addrs(bound_addrs.addrs.end() - static_cast<std::ptrdiff_t>(fallback_bound_),
                                           bound_addrs.addrs.end());
    bound_addrs.addrs.resize(bound_addrs.addrs.size() - fallback_bound_);
    for (const EntityAddr& a : addrs.addrs) {
      EntityAddr mine;
      if (const std::error_code ec = listen_on(*core_->stack, a.addr, mine)) return ec;
      bound_addrs.addrs.push_back(mine);
      if (core_->fallback) {
        // Same IP, a free port: the primary may hold this one (the soft
        // fabric's rdma_cm listens on the same TCP port as its address).
        NetAddress any = a.addr;
        any.set_port(0);
        EntityAddr fb;
        if (const std::error_code ec = listen_on(*core_->fallback, any, fb)) return ec;
        fallback_addrs.push_back(fb);
        ++fallback_bound_;
      }
    }
    bound_addrs.addrs.insert(bound_addrs.addrs.end(), fallback_addrs.begin(), fallback_addrs.end());
    core_->set_my_addrs(bound_addrs);
    return {};
  }

  void start() override {
    start_stack();
    core_->any_fast_dispatch = !core_->dispatchers.empty();
    core_->dispatch_queue.start();
    started_ = true;
    if (!std::exchange(registered_, true)) perf::process_collection().add(core_->perf, core_->options.role);
    core_->started.store(true, std::memory_order_release);
  }

  void shutdown() override {
    {
      std::lock_guard l(wait_mtx_);
      if (core_->stopping.exchange(true)) return;
    }
    wait_cv_.notify_all();
    for (auto& c : core_->live_connections()) c->close_internal(false, "messenger shutdown");
  }

  void wait() override {
    if (waited_) return;
    if (!core_->stopping.load()) {
      // wait() without shutdown(): block until someone shuts us down.
      std::unique_lock l(wait_mtx_);
      wait_cv_.wait(l, [this] { return core_->stopping.load(); });
    }
    if (stack_started_) core_->wait_all_closed();
    core_->dispatch_queue.stop();
    // A stack shared with other messengers keeps running for them.
    if (stack_started_ && core_->stack->remove_user()) core_->stack->stop();
    if (stack_started_ && core_->fallback && core_->fallback->remove_user()) core_->fallback->stop();
    waited_ = true;
  }

  ConnectionRef connect_to(std::uint8_t peer_type, const EntityAddrVec& addrs) override {
    start_stack();
    const AddrKey key = AddrKey::of(addrs);
    if (auto existing = core_->lookup(key); existing && !existing->closed()) return existing;
    ConnectionImplRef c = ConnectionImpl::make_outgoing(core_, peer_type, addrs);
    if (core_->stopping.load() || !core_->started.load(std::memory_order_acquire) || addrs.empty()) {
      SIPHON_LOG(ms, 1, "connect_to {}: {}", addrs.to_string(),
                 addrs.empty() ? "no address" : core_->stopping.load() ? "messenger shut down" : "call start() first");
      c->close_internal(false, "not connectable");
      return c;
    }
    ConnectionImplRef holder = core_->register_session(key, c);
    if (holder != c) return holder;
    if (!core_->add_live(c)) {
      core_->unregister_session(key, c.get());
      c->close_internal(false, "messenger shut down");
      return c;
    }
    c->start_connect();
    return c;
  }

  void mark_down_all() override {
    for (auto& c : core_->live_connections()) c->close_internal(false, "mark_down_all");
  }

  void mark_down_addrs(const EntityAddrVec& addrs) override {
    if (auto c = core_->lookup(AddrKey::of(addrs))) c->close_internal(false, "mark_down_addrs");
  }

  entity_name_t get_myname() const override { return core_->name; }
  EntityAddrVec get_myaddrs() const override { return core_->my_addrs(); }
  std::uint32_t get_nonce() const override { return core_->nonce; }
  const MessengerOptions& options() const override { return core_->options; }

  MessengerStats stats() const override {
    const Counters& c = core_->counters;
    MessengerStats s;
    s.messages_sent = c.messages_sent.load();
    s.messages_received = c.messages_received.load();
    s.messages_replayed = c.messages_replayed.load();
    s.duplicates_dropped = c.duplicates_dropped.load();
    s.faults = c.faults.load();
    s.reconnects = c.reconnects.load();
    s.sessions_reset = c.sessions_reset.load();
    s.protocol_errors = c.protocol_errors.load();
    s.crc_errors = c.crc_errors.load();
    s.session_migrations = c.session_migrations.load();
    s.connections_refused = c.connections_refused.load();
    s.send_queue_full = c.send_queue_full.load();
    s.auth_refused = c.auth_refused.load();
    s.auth_accepted = c.auth_accepted.load();
    s.decrypt_errors = c.decrypt_errors.load();
    s.fallback_switches = c.fallback_switches.load();
    s.primary_switches = c.primary_switches.load();
    s.idle_timeouts = c.idle_timeouts.load();
    s.connections = core_->live_count();
    s.undispatched_bytes = core_->dispatch_bytes.load(std::memory_order_acquire);
    return s;
  }

  MessengerInfo introspect(std::chrono::milliseconds timeout) const override {
    MessengerInfo mi;
    mi.entity = core_->name.to_string();
    mi.addrs = core_->my_addrs().to_string();
    mi.stack = std::string(core_->stack->type());
    mi.workers = core_->stack->worker_count();
    const std::vector<ConnectionImplRef> conns = core_->live_connections();
    // Each connection answers on its own worker; the answers meet here.
    struct Gather {
      std::mutex mu;
      std::condition_variable cv;
      std::size_t pending = 0;
      std::vector<std::optional<ConnectionInfo>> out;
    };
    auto g = std::make_shared<Gather>();
    g->out.resize(conns.size());
    g->pending = conns.size();
    for (std::size_t i = 0; i < conns.size(); ++i) {
      conns[i]->post_info([g, i](ConnectionInfo info) {
        std::lock_guard l(g->mu);
        g->out[i] = std::move(info);
        if (--g->pending == 0) g->cv.notify_all();
      });
    }
    std::unique_lock l(g->mu);
    g->cv.wait_for(l, timeout, [&] { return g->pending == 0; });
    for (std::size_t i = 0; i < conns.size(); ++i)
      mi.connections.push_back(g->out[i] ? *g->out[i] : conns[i]->basic_info());
    return mi;
  }

 private:
  void start_stack() {
    std::lock_guard l(stack_mtx_);
    if (stack_started_) return;
    core_->stack->start();
    core_->stack->add_user();
    if (core_->fallback) {
      core_->fallback->start();
      core_->fallback->add_user();
    }
    stack_started_ = true;
  }

  std::error_code listen_on(transport::Stack& stack, const NetAddress& at, EntityAddr& mine) {
    NetAddress bound;
    std::weak_ptr<MessengerCore> w = core_;
    const std::error_code ec = stack.listen(
        at,
        [w](transport::ConnectionRef c) {
          if (auto core = w.lock())
            ConnectionImpl::accept(std::move(core), std::move(c));
          else
            c->close();
        },
        bound);
    if (ec) {
      SIPHON_LOG(ms, 0, "bind to {} ({}) failed: {}", at.to_string(), stack.type(), ec.message());
      return ec;
    }
    mine.type = AddrType::msgr2;
    mine.nonce = core_->nonce;
    mine.addr = bound;
    SIPHON_LOG(ms, 5, "bound to {} ({})", mine.to_string(), stack.type());
    return {};
  }

  std::shared_ptr<MessengerCore> core_;
  std::mutex stack_mtx_;
  bool stack_started_ = false;
  std::size_t fallback_bound_ = 0;  // fallback addresses at the end of our addresses
  bool started_ = false;
  bool registered_ = false;  // core_->perf is in the process collection
  bool waited_ = false;
  std::mutex wait_mtx_;
  std::condition_variable wait_cv_;
};

}  // namespace
}  // namespace detail

std::unique_ptr<Messenger> Messenger::create(std::shared_ptr<transport::Stack> stack, entity_name_t name,
                                             MessengerOptions options, std::optional<std::uint32_t> nonce) {
  std::uint32_t n = 0;
  if (nonce) {
    n = *nonce;
  } else {
    std::random_device rd;
    while (n == 0) n = rd();
  }
  return std::make_unique<detail::MessengerImpl>(std::move(stack), name, std::move(options), n);
}

}  // namespace siphon
