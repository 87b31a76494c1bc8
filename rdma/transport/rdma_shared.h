// State shared by the workers and connections of one RDMA stack (internal).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
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
  };
  std::vector<std::unique_ptr<Listener>> listeners;
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

  RdmaShared(Provider& p, RdmaOptions o) : opts(std::move(o)), provider(p) {}
  RdmaWorker& least_loaded() noexcept;
  // Derived per-connection receive geometry.
  std::uint32_t window() const noexcept { return opts.credits; }
  std::uint32_t recvs_per_qp() const noexcept { return opts.credits + kUpdateSlots; }
  // Send queue depth asked of each QP (the device may round it up).
  std::uint32_t sq_depth() const noexcept {
    const std::uint32_t cap = device->attr().max_qp_wr;
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
