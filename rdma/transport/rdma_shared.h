// State shared by the workers and connections of one RDMA stack (internal).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "msgr/transport/transport.h"
#include "rdma/provider.h"
#include "rdma/transport/buffer_pool.h"
#include "rdma/transport/counters.h"
#include "rdma/transport/credits.h"
#include "rdma/transport/options.h"
#include "rdma/transport/pd_registrar.h"
#include "rdma/transport/rdma_perf.h"

namespace siphon::rdma {

class RdmaConnection;
class RdmaWorker;

struct RdmaShared : std::enable_shared_from_this<RdmaShared> {
  RdmaOptions opts;
  Provider& provider;
  RdmaStackCounters counters;  // the control path's (any thread, fetch_add); the data path uses its worker's
  // The device's name and attributes, read once when the stack opens it and
  // kept while it is gone (a reopened device is the same one by name).
  std::string device_name;
  DeviceAttr attr;
  // The device, its PD and (below) the pools' registrations and the workers'
  // CQs and SRQs exist while device_state is open; they are released when
  // the device goes away and made again when it comes back (device_life.cc).
  std::unique_ptr<Device> device;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<PdRegistrar> registrar;
  std::unique_ptr<BufferPool> send_pool;
  std::unique_ptr<BufferPool> recv_pool;
  std::unique_ptr<EventChannel> channel;
  std::vector<std::shared_ptr<RdmaWorker>> workers;

  // Sets the Siphon::RDMAStack gauges (pinned bytes, pool use, SRQ) from the
  // pools and workers: at stack start, when a connection is established or
  // destroyed, and when RdmaStack::counters() is read (rdma_stack.cc).
  void refresh_gauges() noexcept;

  // CmId -> connection, for routing CM events (served on worker 0) to the
  // connection's worker. Guarded by mu.
  std::mutex mu;
  std::unordered_map<CmId*, std::weak_ptr<RdmaConnection>> by_id;
  struct Listener {
    std::unique_ptr<CmId> id;
    transport::AcceptHandler on_accept;
    NetAddress bound;
  };
  std::vector<std::unique_ptr<Listener>> listeners;
  // Listeners closed when the device went away, bound again when it is back
  // (those whose bind failed stay here and are retried at each check).
  struct ListenSpec {
    NetAddress addr;
    transport::AcceptHandler on_accept;
  };
  std::vector<ListenSpec> relisten;

  // --- The device's life (rdma_device_life.cc; docs/rdma-transport.md,
  // Device removal):
  //
  //   open --DEVICE_REMOVAL on any id, or not listed at a check--> releasing
  //   releasing: listeners closed; each worker faults its connections,
  //              destroys their QPs and ids, then its SRQ and CQ; then worker
  //              0 deregisters the pools (memory kept), drops the PD and
  //              closes the device --> released
  //   released --listed again at a check: device, PD, pools, every worker's
  //              CQ and SRQ, listeners--> open (a failed step: released)
  //
  // All of it runs on worker 0, each worker's part posted to it. Connects
  // and accepts are refused unless the state is open.
  enum class DeviceState : int { open, releasing, released, reopening };
  std::atomic<DeviceState> device_state{DeviceState::open};
  bool device_open() const noexcept { return device_state.load(std::memory_order_acquire) == DeviceState::open; }
  // Any thread: the device went away (`why` names how it was seen).
  void device_gone(std::string why);
  // Worker 0, at stack start: the periodic check (device_check_interval).
  void start_device_checks();
  // A worker's part of a release or reopen is done (on that worker).
  void worker_detached();
  void worker_attached(bool ok, std::string why);
  // The provider lists the device now (any thread; a device list walk).
  bool device_listed();
  // The device has been released at least once (what is made again on a
  // reopen need not be announced twice).
  bool device_reopened() const noexcept { return counters.device_removals.load() != 0; }
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
  bool yield_idle = false;  // PollingPlan::yield_idle

  RdmaShared(Provider& p, RdmaOptions o) : opts(std::move(o)), provider(p) {}

 private:
  // Worker 0 only.
  void begin_release(const std::string& why);
  void finish_release();
  void on_check();
  void arm_check();
  void try_reopen();
  void finish_reopen();
  void relisten_pending();
  std::size_t workers_pending_ = 0;
  bool reopen_failed_ = false;
  std::string reopen_why_;
  std::uint64_t reopen_attempts_ = 0;  // failed attempts since the removal (logged 1st, 2nd, 4th...)

 public:
  RdmaWorker& least_loaded() noexcept;
  // Derived per-connection receive geometry.
  std::uint32_t window() const noexcept { return opts.credits; }
  std::uint32_t recvs_per_qp() const noexcept { return opts.credits + kUpdateSlots; }
  // Send queue depth asked of each QP (the device may round it up).
  std::uint32_t sq_depth() const noexcept {
    const std::uint32_t cap = attr.max_qp_wr;
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

}  // namespace siphon::rdma
