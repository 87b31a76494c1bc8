#include "rdma/transport/rdma_stack.h"

#include <sched.h>

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/transport/pinned.h"
#include "rdma/transport/rdma_connection.h"
#include "rdma/transport/rdma_shared.h"
#include "rdma/transport/rdma_worker.h"

namespace siphon::rdma {

std::map<std::string, std::uint64_t> RdmaCounters::snapshot() const {
  std::map<std::string, std::uint64_t> m;
#define SIPHON_COUNTER(n) m[#n] = n.load();
  SIPHON_RDMA_COUNTERS(SIPHON_COUNTER)
#undef SIPHON_COUNTER
  return m;
}

RdmaCounters& RdmaCounters::operator+=(const RdmaCounters& o) noexcept {
#define SIPHON_COUNTER(n) n.add(o.n.load());
  SIPHON_RDMA_COUNTERS(SIPHON_COUNTER)
#undef SIPHON_COUNTER
  return *this;
}

void RdmaShared::refresh_gauges() noexcept {
  // Not while the stack goes away: the workers and their connections are
  // being destroyed.
  if (stopping.load(std::memory_order_relaxed)) return;
  std::uint64_t posted = 0, reserved = 0;
  for (const auto& w : workers) {
    posted += w->srq_posted();
    reserved += w->srq_reserved();
  }
  counters.set_gauges(send_pool->registered_bytes() + recv_pool->registered_bytes(), send_pool->buffers_total(),
                      send_pool->buffers_in_use(), recv_pool->buffers_total(), recv_pool->buffers_in_use(), posted,
                      reserved);
}

namespace {

// Workers of this process's RDMA stacks that spin (auto or explicit).
std::atomic<std::size_t> g_spinning{0};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

}  // namespace

constexpr std::chrono::microseconds kCephPolling{1000};

PollingPlan plan_polling(std::optional<std::chrono::microseconds> requested, std::size_t workers,
                         std::size_t other_spinners, std::size_t cpus, bool completions_from_process_thread,
                         bool progress_by_pollers) {
  PollingPlan p;
  p.yield_idle = progress_by_pollers;
  const std::size_t spinners = other_spinners + workers;
  if (requested) {
    p.spin = *requested;
    if (p.spin.count() == 0) return p;
    if (completions_from_process_thread) {
      p.oversubscribed = true;
      p.reason = fmt::format("ms_async_rdma_polling_us = {}: {} workers spin on completion queues that a thread of "
                             "this process (the software fabric's engine) fills, taking the CPU it needs; "
                             "leave the option unset (auto) or set 0",
                             p.spin.count(), workers);
    } else if (spinners > cpus) {
      p.oversubscribed = true;
      p.reason = fmt::format("ms_async_rdma_polling_us = {}: {} spinning RDMA workers in this process ({} of this "
                             "stack) on {} usable CPUs starve the threads that consume their work; leave the option "
                             "unset (auto), set 0 or lower ms_async_op_threads",
                             p.spin.count(), spinners, workers, cpus);
    }
    return p;
  }
  if (progress_by_pollers) {
    // Only workers with connections are woken to spin, for a bounded time
    // after their last completion, and each idle turn of the spin yields
    // the CPU (PollingPlan::yield_idle): a spinner that did not took it from
    // the threads it hands work to and from the worker holding the engine's
    // drive lock (2 vCPUs, 64-byte echoes over 2 connections: 70-82k msgs/s
    // spinning, 122-141k not spinning, 202-263k spinning and yielding;
    // docs/performance.md, "Progress domains").
    p.spin = kDrivenPolling;
    p.reason = fmt::format("auto: the provider's work runs on the workers (the software fabric's driven engine); "
                           "spinning {} us, about the cost of a sleep and a wake-up, yielding the CPU on every "
                           "empty poll",
                           p.spin.count());
  } else if (completions_from_process_thread) {
    p.reason = "auto: completions come from a thread of this process (the software fabric's engine); not spinning";
  } else if (spinners + 1 > cpus) {
    p.reason = fmt::format("auto: {} spinning RDMA workers in this process ({} of this stack) and one CPU for the "
                           "rest do not fit in {} usable CPUs; not spinning",
                           spinners, workers, cpus);
  } else {
    p.spin = kCephPolling;
    p.reason = fmt::format("auto: {} spinning RDMA workers in this process fit in {} usable CPUs; spinning {} us",
                           spinners, cpus, p.spin.count());
  }
  return p;
}

std::size_t usable_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<std::size_t>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::size_t spinning_workers() noexcept { return g_spinning.load(std::memory_order_relaxed); }

namespace {

void check_range(std::string_view option, std::uint64_t v, Range r) {
  if (r.contains(v)) return;
  throw SetupError(errc::config_error, fmt::format("{} = {}", option, v),
                   r.max == kNoMax ? fmt::format("use a value of at least {}", r.min)
                                   : fmt::format("use a value in [{}, {}]", r.min, r.max));
}

// The ranges of options.h and the rules between options, for callers that
// build RdmaOptions themselves; compat/ refuses the same values in ceph.conf
// (options.def ranges, Config::check_cross rules).
void check_options(const RdmaOptions& o) {
  if (o.common.async_op_threads == 0)
    throw SetupError(errc::config_error, "ms_async_op_threads = 0", "use at least 1 worker thread");
  check_range("ms_async_rdma_port_num", o.port_num, ranges::port_num);
  if (o.roce_ver < 0 || !ranges::roce_ver.contains(static_cast<std::uint64_t>(o.roce_ver)))
    throw SetupError(errc::config_error, fmt::format("ms_async_rdma_roce_ver = {}", o.roce_ver),
                     "Siphon supports RoCE v2 only (ms_async_rdma_roce_ver = 1)");
  check_range("ms_async_rdma_sl", o.sl, ranges::sl);
  check_range("ms_async_rdma_dscp", o.dscp, ranges::dscp);
  check_range("ms_async_rdma_buffer_size", o.buffer_size, ranges::buffer_size);
  check_range("ms_async_rdma_send_buffers", o.send_buffers, ranges::send_buffers);
  check_range("ms_async_rdma_receive_buffers", o.receive_buffers, ranges::receive_buffers);
  check_range("ms_async_rdma_receive_queue_len", o.receive_queue_len, ranges::receive_queue_len);
  check_range("ms_async_rdma_credits", o.credits, ranges::credits);
  check_range("ms_async_rdma_send_queue_depth", o.send_queue_depth, ranges::send_queue_depth);
  check_range("ms_async_rdma_cq_depth", o.cq_depth, ranges::cq_depth);
  check_range("ms_async_rdma_rnr_retry", o.rnr_retry, ranges::rnr_retry);
  check_range("ms_async_rdma_retry_count", o.retry_count, ranges::retry_count);
  check_range("ms_async_rdma_timeout", o.ack_timeout, ranges::ack_timeout);
  check_range("ms_async_rdma_cm_timeout", static_cast<std::uint64_t>(std::max<std::int64_t>(o.cm_timeout.count(), 0)),
              ranges::cm_timeout_ms);
  check_range("ms_async_rdma_max_connections", o.max_connections, ranges::max_connections);
  const std::uint64_t per_qp = std::uint64_t{o.credits} + kUpdateSlots;
  if (o.receive_buffers < per_qp)
    throw SetupError(errc::config_error,
                     fmt::format("ms_async_rdma_receive_buffers = {} cannot hold one connection's {} credits + {} "
                                 "update slots", o.receive_buffers, o.credits, kUpdateSlots),
                     fmt::format("raise ms_async_rdma_receive_buffers to at least {} or lower ms_async_rdma_credits",
                                 per_qp));
  if (o.support_srq) {
    // The device may cap the SRQ below receive_queue_len (checked again
    // against the capped depth when the device is open).
    if (o.receive_queue_len < per_qp)
      throw SetupError(errc::config_error,
                       fmt::format("ms_async_rdma_receive_queue_len = {} cannot back even one connection's {} "
                                   "credits + {} update slots", o.receive_queue_len, o.credits, kUpdateSlots),
                       "raise ms_async_rdma_receive_queue_len or lower ms_async_rdma_credits");
    const std::uint64_t nw = o.common.async_op_threads;
    if (o.receive_queue_len * nw >= o.receive_buffers)
      throw SetupError(errc::config_error,
                       fmt::format("ms_async_rdma_receive_buffers = {} cannot fill {} workers' SRQs of {} receives "
                                   "and leave room for RDMA READ targets", o.receive_buffers, nw, o.receive_queue_len),
                       fmt::format("raise ms_async_rdma_receive_buffers above {} (twice that leaves half for "
                                   "zero-copy reads) or lower ms_async_rdma_receive_queue_len",
                                   o.receive_queue_len * nw));
  }
}

}  // namespace

RdmaStack::RdmaStack(Provider& provider, RdmaOptions options)
    : shared_(std::make_shared<RdmaShared>(provider, std::move(options))) {
  RdmaShared& s = *shared_;
  const RdmaOptions& o = s.opts;
  check_options(o);

  const std::vector<std::string> found = provider.list_devices();
  if (found.empty() && o.device_name.empty())
    throw SetupError(errc::no_device, fmt::format("no RDMA device found by the {} provider", provider.name()),
                     "set ms_async_rdma_device_name = soft0 to use the software fabric, or load a driver "
                     "(for Soft-RoCE: rdma link add rxe0 type rxe netdev <if>)");
  // choose_device: the same rule the verbs provider and siphon-doctor apply.
  // A named device that is not listed is still opened, so the provider
  // gives its own answer (and the error below lists what is present).
  const std::string name = choose_device(o.device_name, found).value_or(o.device_name);
  std::error_code ec;
  s.device = provider.open_device(name, ec);
  if (!s.device) {
    throw SetupError(ec ? ec : make_error_code(errc::device_not_found),
                     fmt::format("RDMA device '{}' not found by the {} provider (devices present: {})", name,
                                 provider.name(), join(found)),
                     found.empty() ? "set ms_async_rdma_device_name = soft0 to use the software fabric"
                                   : "set ms_async_rdma_device_name to one of the devices present");
  }
  s.device_name = s.device->attr().name.empty() ? name : s.device->attr().name;
  s.attr = s.device->attr();
  PortAttr port;
  if (const auto pec = s.device->query_port(o.port_num, port))
    throw SetupError(pec, fmt::format("{}: port {} cannot be queried", name, o.port_num),
                     "set ms_async_rdma_port_num to a port of the device (1-based)");
  if (port.state != PortState::active)
    throw SetupError(errc::not_connected, fmt::format("{}: port {} is not ACTIVE", name, o.port_num),
                     "bring the link up or choose another port with ms_async_rdma_port_num");
  s.pd = s.device->alloc_pd(ec);
  if (!s.pd) throw SetupError(ec, fmt::format("{}: cannot allocate a protection domain", name), "");
  s.registrar = std::make_unique<PdRegistrar>(*s.pd, kLocalWrite);
  s.scoped_rkeys = s.attr.mw_type2;
  if (!s.scoped_rkeys)
    SIPHON_LOG(rdma, 0, "{}: no type-2 memory windows: zero-copy rkeys are not connection-scoped on this device "
               "(an rkey advertised to one connection's peer is valid on every connection of this stack until "
               "its transfer ends; docs/security.md §3)", name);
  // Send slabs of 4 MiB. Receive slabs of one connection's receive set
  // (credits + update slots), so pinned receive memory follows the number of
  // connections exactly (docs/rdma-transport.md, Memory); with hugepages a
  // slab is rounded to whole 2 MiB pages, so it takes as many sets as fit.
  // pool_geometry() (pinned.h) is also what siphon-doctor's memlock check uses.
  const PoolGeometry geometry = pool_geometry(o);
  s.send_pool = std::make_unique<BufferPool>(
      PoolConfig{"rdma-send", o.buffer_size, o.send_buffers, geometry.send_per_slab, 16, o.enable_hugepage},
      *s.registrar);
  s.recv_pool = std::make_unique<BufferPool>(
      PoolConfig{"rdma-recv", o.buffer_size, o.receive_buffers, geometry.recv_per_slab, 16, o.enable_hugepage},
      *s.registrar);
  // The send pool's first slab now, not on the data path: a connection's
  // first SENDs never wait for the grower thread (buffer_pool.h). On
  // failure (logged) the pool grows on demand as before.
  (void)s.send_pool->prefill_slab();
  if (o.support_srq) {
    // One SRQ per worker, ms_async_rdma_receive_queue_len deep (capped by the
    // device), filled from the receive pool when the worker is created.
    const DeviceAttr& a = s.attr;
    if (a.max_srq == 0 || a.max_srq_wr == 0)
      throw SetupError(errc::not_supported, fmt::format("{} has no shared receive queues (max_srq = 0)", name),
                       "set ms_async_rdma_support_srq = false");
    const std::size_t depth = std::min<std::size_t>(o.receive_queue_len, a.max_srq_wr);
    if (depth < o.receive_queue_len)
      SIPHON_LOG(rdma, 1, "{}: ms_async_rdma_receive_queue_len = {} is above the device's max_srq_wr; using {}", name,
                 o.receive_queue_len, depth);
    if (depth < s.recvs_per_qp())
      throw SetupError(errc::config_error,
                       fmt::format("ms_async_rdma_receive_queue_len = {} (SRQ depth {}) cannot back even one "
                                   "connection's {} credits + {} update slots", o.receive_queue_len, depth,
                                   o.credits, kUpdateSlots),
                       "raise ms_async_rdma_receive_queue_len or lower ms_async_rdma_credits");
    const std::size_t nw = o.common.async_op_threads;
    if (depth * nw >= o.receive_buffers)
      throw SetupError(errc::config_error,
                       fmt::format("ms_async_rdma_receive_buffers = {} cannot fill {} workers' SRQs of {} receives "
                                   "and leave room for RDMA READ targets", o.receive_buffers, nw, depth),
                       fmt::format("raise ms_async_rdma_receive_buffers above {} (twice that leaves half for "
                                   "zero-copy reads) or lower ms_async_rdma_receive_queue_len", depth * nw));
    s.srq_depth = static_cast<std::uint32_t>(depth);
  }
  s.channel = provider.create_event_channel(ec);
  if (!s.channel)
    throw SetupError(ec, fmt::format("the {} provider cannot create a connection-manager event channel", provider.name()),
                     provider.name() == "verbs" ? "load rdma_ucm (modprobe rdma_ucm) so /dev/infiniband/rdma_cm exists"
                                                : "");
  for (std::size_t i = 0; i < o.common.async_op_threads; ++i)
    s.workers.push_back(std::make_shared<RdmaWorker>(s, i));
  // Last: nothing below throws, so a stack counted as spinning is always
  // uncounted by its destructor.
  const PollingPlan plan = plan_polling(o.polling, s.workers.size(), spinning_workers(), usable_cpus(),
                                        provider.completions_from_process_thread(), provider.progress_by_pollers());
  s.polling = plan.spin;
  s.yield_idle = plan.yield_idle;
  if (plan.spin.count() > 0) {
    g_spinning.fetch_add(s.workers.size(), std::memory_order_relaxed);
    s.counted_spinning = true;
  }
  if (plan.oversubscribed) SIPHON_LOG(rdma, 0, "{}", plan.reason);
  SIPHON_LOG(rdma, 1, "async+rdma on {} ({} provider) port {}: {} workers, {} credits x {} B per connection{}; "
             "polling {} us{}",
             name, provider.name(), o.port_num, s.workers.size(), o.credits, o.buffer_size,
             s.srq_depth != 0 ? fmt::format(", one {}-receive SRQ per worker", s.srq_depth) : "",
             plan.spin.count(), o.polling ? "" : fmt::format(" ({})", plan.reason));
}

RdmaStack::~RdmaStack() {
  stop();
  if (shared_->counted_spinning) {
    g_spinning.fetch_sub(shared_->workers.size(), std::memory_order_relaxed);
    shared_->counted_spinning = false;
  }
}

std::chrono::microseconds RdmaStack::polling() const noexcept { return shared_->polling; }

std::size_t RdmaStack::worker_count() const noexcept { return shared_->workers.size(); }
transport::Worker& RdmaStack::worker(std::size_t i) noexcept { return *shared_->workers[i]; }

// A pick counts against its worker at once (picked_), until the connection
// is adopted there: connections requested in a burst spread over the
// workers instead of all landing on the one that looked idle (each
// worker's CQ is sized for its share of max_connections).
RdmaWorker& RdmaShared::least_loaded() noexcept {
  std::size_t best = round_robin.fetch_add(1) % workers.size();
  for (std::size_t i = 0; i < workers.size(); ++i)
    if (workers[i]->weight() < workers[best]->weight()) best = i;
  workers[best]->note_picked();
  return *workers[best];
}

transport::Worker& RdmaStack::pick_worker() noexcept { return shared_->least_loaded(); }

void RdmaStack::start() {
  // Idempotent: several messengers may share one stack and each starts it.
  if (shared_->started.exchange(true)) return;
  for (auto& w : shared_->workers) w->start();
  shared_->refresh_gauges();
  shared_->workers.front()->post([w = shared_->workers.front().get(), s = shared_.get()] {
    w->serve_cm();
    s->start_device_checks();
  });
}

void RdmaStack::stop() {
  RdmaShared& s = *shared_;
  if (s.stopping.exchange(true)) return;
  {
    std::lock_guard lk(s.mu);
    s.listeners.clear();
  }
  for (auto& w : s.workers) w->stop_and_join();
}

const RdmaOptions& RdmaStack::options() const noexcept { return shared_->opts; }
RdmaCounters RdmaStack::counters() const {
  // The control path's logger plus every worker's own (rdma_perf.h).
  shared_->refresh_gauges();
  RdmaCounters sum;
  shared_->counters.add_to(sum);
  for (const auto& w : shared_->workers) w->counters().add_to(sum);
  return sum;
}
const DeviceAttr& RdmaStack::device_attr() const noexcept { return shared_->attr; }
std::size_t RdmaStack::registered_bytes() const noexcept {
  return shared_->send_pool->registered_bytes() + shared_->recv_pool->registered_bytes();
}
std::size_t RdmaStack::srq_count() const noexcept {
  std::size_t n = 0;
  for (auto& w : shared_->workers) n += w->srq() != nullptr ? 1 : 0;
  return n;
}
std::size_t RdmaStack::srq_posted() const noexcept {
  std::size_t n = 0;
  for (auto& w : shared_->workers) n += w->srq_posted();
  return n;
}
std::size_t RdmaStack::srq_reserved() const noexcept {
  std::size_t n = 0;
  for (auto& w : shared_->workers) n += w->srq_reserved();
  return n;
}
std::size_t RdmaStack::buffers_in_use() const noexcept {
  return shared_->send_pool->buffers_in_use() + shared_->recv_pool->buffers_in_use();
}
std::size_t RdmaStack::connection_count() const noexcept { return shared_->connections.load(); }
std::size_t RdmaStack::memory_regions() const { return shared_->registrar->region_count(); }

std::error_code RdmaStack::listen(const NetAddress& addr, transport::AcceptHandler on_accept,
                                  NetAddress& bound) {
  RdmaShared& s = *shared_;
  if (!s.device_open()) {
    SIPHON_LOG(rdma, 1, "not listening on {}: the RDMA device {} was removed (the stack reopens it when it is "
               "listed again)", addr.to_string(), s.device_name);
    return make_error_code(errc::device_not_found);
  }
  std::error_code ec;
  auto l = std::make_unique<RdmaShared::Listener>();
  l->id = s.channel->create_id(ec);
  if (!l->id) return ec;
  if ((ec = l->id->bind(addr))) return ec;
  if ((ec = l->id->listen(512))) return ec;
  bound = l->id->local_address();
  l->bound = bound;
  l->on_accept = std::move(on_accept);
  l->id->context = l.get();
  std::lock_guard lk(s.mu);
  s.listeners.push_back(std::move(l));
  SIPHON_LOG(rdma, 5, "listening on {}", bound.to_string());
  return {};
}

void RdmaStack::connect(const NetAddress& peer, transport::Worker& w, transport::ConnectHandler done) {
  RdmaShared& s = *shared_;
  auto& worker = static_cast<RdmaWorker&>(w);
  // The limit holds for both directions (the accepting side rejects beyond
  // it in RdmaWorker): a dial beyond it fails at once, before any QP, CQ
  // entry or receive buffer is taken. Like the accept check it is a bound
  // read without a lock, so dials racing on several threads may pass it
  // together by at most their number.
  if (const std::size_t open = s.connections.load(); open >= s.opts.max_connections) {
    SIPHON_LOG(rdma, 1,
               "not dialling {}: {} connections are open on this stack, ms_async_rdma_max_connections = {}; "
               "raise ms_async_rdma_max_connections or close connections",
               peer.to_string(), open, s.opts.max_connections);
    worker.post([done = std::move(done)] { done(make_error_code(errc::too_many_connections), nullptr); });
    return;
  }
  if (!s.device_open()) {
    SIPHON_LOG(rdma, 5, "not dialling {}: the RDMA device {} was removed (the stack reopens it when it is "
               "listed again)", peer.to_string(), s.device_name);
    worker.post([done = std::move(done)] { done(make_error_code(errc::device_not_found), nullptr); });
    return;
  }
  std::error_code ec;
  std::unique_ptr<CmId> id = s.channel->create_id(ec);
  if (!id) {
    worker.post([done = std::move(done), ec] { done(ec, nullptr); });
    return;
  }
  auto conn = std::make_shared<RdmaConnection>(s, worker, std::move(id), true, peer);
  conn->set_connect_handler(std::move(done));
  {
    std::lock_guard lk(s.mu);
    s.by_id[conn->cm_id()] = conn;
  }
  worker.post([conn] { conn->begin_connect(); });
}

}  // namespace siphon::rdma
