// The RDMA stack's device going away and coming back (rdma_shared.h has the
// states; docs/rdma-transport.md, "Device removal").
//
// A device can go away under a running stack: `rdma link delete`, a PCI
// hot-unplug, a driver reset. The kernel then tells every rdma_cm id on it
// (DEVICE_REMOVAL) and, for a device without disassociate_ucontext (rxe),
// waits until every process has destroyed every object it made on it. So the
// stack lets go of all of it -- QPs, ids, SRQs, CQs, MRs, PD, the device --
// while the workers, their threads and the sessions on them stay, and it
// keeps checking whether the device is listed again; when it is, the stack
// makes it all again and listens where it listened before. Sessions see
// their connections fault and reconnect as after any fault (or fail over to
// a fallback stack, connection_failover.cc), with nothing lost.
//
// Pool memory is not freed, only deregistered: received data held by the
// application still points into it. Registered again, every buffer takes
// its slab's new keys.
#include <fmt/format.h>

#include <algorithm>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/transport/rdma_connection.h"
#include "rdma/transport/rdma_shared.h"
#include "rdma/transport/rdma_worker.h"

namespace siphon::rdma {

void RdmaShared::device_gone(std::string why) {
  if (stopping.load() || workers.empty()) return;
  workers.front()->post([self = this, why = std::move(why)] { self->begin_release(why); });
}

void RdmaShared::start_device_checks() { arm_check(); }

void RdmaShared::arm_check() {
  if (stopping.load() || opts.device_check_interval.count() <= 0) return;
  workers.front()->run_after(opts.device_check_interval, [self = this] { self->on_check(); });
}

bool RdmaShared::device_listed() {
  const std::vector<std::string> found = provider.list_devices();
  return std::find(found.begin(), found.end(), device_name) != found.end();
}

void RdmaShared::on_check() {
  if (stopping.load()) return;
  switch (device_state.load()) {
    case DeviceState::open:
      if (!device_listed())
        return begin_release(fmt::format("no longer listed by the {} provider", provider.name()));
      relisten_pending();
      break;
    case DeviceState::released:
      return try_reopen();  // arms the next check itself
    case DeviceState::releasing:
    case DeviceState::reopening:
      break;
  }
  arm_check();
}

void RdmaShared::begin_release(const std::string& why) {
  if (stopping.load() || device_state.load() != DeviceState::open) return;
  device_state.store(DeviceState::releasing, std::memory_order_release);
  counters.device_removals.fetch_add(1);
  reopen_attempts_ = 0;
  SIPHON_LOG(rdma, 0,
             "RDMA device {} went away ({}): releasing it -- its connections fault and reconnect (lossless "
             "sessions replay), listeners close; {}",
             device_name, why,
             opts.device_check_interval.count() > 0
                 ? fmt::format("reopened when it is listed again (checked every {} ms, "
                               "ms_async_rdma_device_check_interval)",
                               opts.device_check_interval.count())
                 : std::string("not reopened (ms_async_rdma_device_check_interval = 0)"));
  {
    // Listeners go now (their ids are on the device); where they listened is
    // kept for the reopen.
    std::lock_guard lk(mu);
    for (auto& l : listeners) relisten.push_back(ListenSpec{l->bound, l->on_accept});
    listeners.clear();
  }
  workers_pending_ = workers.size();
  for (auto& w : workers) w->post([w = w.get()] { w->detach_device(); });
}

void RdmaShared::worker_detached() {
  workers.front()->post([self = this] {
    if (self->workers_pending_ > 0 && --self->workers_pending_ == 0) self->finish_release();
  });
}

void RdmaShared::finish_release() {
  if (stopping.load()) return;
  // No QP, SRQ or CQ is left; the pools' registrations, the PD and the
  // device go last, in that order.
  send_pool->deregister_all();
  recv_pool->deregister_all();
  registrar->set_pd(nullptr);
  pd.reset();
  device.reset();
  provider.release_removed_devices();
  device_state.store(DeviceState::released, std::memory_order_release);
  refresh_gauges();
  SIPHON_LOG(rdma, 1, "RDMA device {} released: no queue pair, completion queue, memory region or protection "
             "domain of this stack is left on it", device_name);
  if (reopen_failed_) {
    reopen_failed_ = false;
    SIPHON_LOG(rdma, 1, "RDMA device {}: reopening failed ({}); trying again at the next check", device_name,
               reopen_why_);
  }
  arm_check();
}

void RdmaShared::try_reopen() {
  const auto fail = [this](const std::string& what) {
    ++reopen_attempts_;
    if ((reopen_attempts_ & (reopen_attempts_ - 1)) == 0)
      SIPHON_LOG(rdma, 1, "RDMA device {} is listed again but cannot be reopened yet ({}; attempt {}); retrying "
                 "every {} ms", device_name, what, reopen_attempts_, opts.device_check_interval.count());
    arm_check();
  };
  // The provider's own hold on the dead device may only now be releasable
  // (librdmacm syncs only while some device is listed, §13).
  provider.release_removed_devices();
  if (!device_listed()) return arm_check();
  std::error_code ec;
  std::unique_ptr<Device> dev = provider.open_device(device_name, ec);
  if (!dev) return fail(fmt::format("open: {}", ec.message()));
  PortAttr port;
  if (const auto pec = dev->query_port(opts.port_num, port)) return fail(fmt::format("port: {}", pec.message()));
  if (port.state != PortState::active) return fail(fmt::format("port {} is not ACTIVE", opts.port_num));
  std::unique_ptr<ProtectionDomain> npd = dev->alloc_pd(ec);
  if (!npd) return fail(fmt::format("protection domain: {}", ec.message()));
  registrar->set_pd(npd.get());
  if (const auto rec = send_pool->reregister_all()) {
    registrar->set_pd(nullptr);
    return fail(fmt::format("registering the send pool: {}", rec.message()));
  }
  if (const auto rec = recv_pool->reregister_all()) {
    send_pool->deregister_all();
    registrar->set_pd(nullptr);
    return fail(fmt::format("registering the receive pool: {}", rec.message()));
  }
  device = std::move(dev);
  pd = std::move(npd);
  device_state.store(DeviceState::reopening, std::memory_order_release);
  workers_pending_ = workers.size();
  reopen_failed_ = false;
  reopen_why_.clear();
  for (auto& w : workers)
    w->post([w = w.get(), self = this] {
      std::string why;
      const bool ok = w->attach_device(why);
      self->worker_attached(ok, std::move(why));
    });
}

void RdmaShared::worker_attached(bool ok, std::string why) {
  workers.front()->post([self = this, ok, why = std::move(why)] {
    if (!ok && !self->reopen_failed_) {
      self->reopen_failed_ = true;
      self->reopen_why_ = why;
    }
    if (self->workers_pending_ == 0 || --self->workers_pending_ != 0) return;
    if (self->stopping.load()) return;
    if (!self->reopen_failed_) return self->finish_reopen();
    // A worker could not make its CQ or SRQ: let go of it all again (the
    // workers that did detach theirs) and retry at the next check.
    self->workers_pending_ = self->workers.size();
    for (auto& w : self->workers) w->post([w = w.get()] { w->detach_device(); });
  });
}

void RdmaShared::finish_reopen() {
  device_state.store(DeviceState::open, std::memory_order_release);
  counters.device_reopens.fetch_add(1);
  std::size_t wanted = 0;
  {
    std::lock_guard lk(mu);
    wanted = relisten.size();
  }
  relisten_pending();
  std::size_t left = 0;
  {
    std::lock_guard lk(mu);
    left = relisten.size();
  }
  refresh_gauges();
  SIPHON_LOG(rdma, 0, "RDMA device {} is back: reopened, {} of {} listeners bound again{}", device_name,
             wanted - left, wanted, left != 0 ? " (the rest are retried at each check)" : "");
  arm_check();
}

// Listeners to bind again (worker 0, device open): those that fail stay for
// the next check (the device's address may come back after the device).
void RdmaShared::relisten_pending() {
  std::vector<ListenSpec> todo;
  {
    std::lock_guard lk(mu);
    todo.swap(relisten);
  }
  std::vector<ListenSpec> failed;
  for (auto& spec : todo) {
    std::error_code ec;
    auto l = std::make_unique<Listener>();
    l->id = channel->create_id(ec);
    if (l->id && !(ec = l->id->bind(spec.addr)) && !(ec = l->id->listen(512))) {
      l->bound = l->id->local_address();
      l->on_accept = spec.on_accept;
      l->id->context = l.get();
      SIPHON_LOG(rdma, 1, "listening on {} again", l->bound.to_string());
      std::lock_guard lk(mu);
      listeners.push_back(std::move(l));
      continue;
    }
    SIPHON_LOG(rdma, 5, "listening on {} again failed: {}; retried at the next check", spec.addr.to_string(),
               ec.message());
    failed.push_back(std::move(spec));
  }
  std::lock_guard lk(mu);
  for (auto& f : failed) relisten.push_back(std::move(f));
}

}  // namespace siphon::rdma
