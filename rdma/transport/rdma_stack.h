// The RDMA stack (ms_type = async+rdma): msgr2 frames over RC queue pairs,
// built only on rdma/provider.h, so it runs on hardware through rdma-core
// and on the software fabric alike (docs/rdma-transport.md).
//
//   RdmaStack       opens the device, owns the protection domain, the
//                   registered send and receive pools, the rdma-cm event
//                   channel (served on worker 0) and `ms_async_op_threads`
//                   RdmaWorkers.
//   RdmaWorker      one thread, one io_context, one completion queue shared
//                   by its connections; spins on the CQ for the polling
//                   time (plan_polling below), then arms it and sleeps on
//                   the channel fd through Asio.
//   RdmaConnection  one RC QP (rdma_connection.h): connection setup, credits,
//                   SEND/READ data path, teardown that drains before it
//                   destroys anything.
//
// Any failure in setup or on the data path faults that connection only; the
// session layer above reconnects and replays exactly as on TCP.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "msgr/transport/transport.h"
#include "rdma/provider.h"
#include "rdma/transport/counters.h"
#include "rdma/transport/options.h"

namespace siphon::rdma {

struct RdmaShared;
class RdmaWorker;

// How long the workers busy-poll their CQs after a completion
// (ms_async_rdma_polling_us; docs/rdma-transport.md, Polling).
struct PollingPlan {
  std::chrono::microseconds spin{0};
  // Each poll that finds the CQ empty while spinning yields the CPU
  // (sched_yield): set when the provider's work runs on the pollers, whose
  // spin would otherwise keep the threads they wait for off the CPU.
  bool yield_idle = false;
  // An explicit value that makes more threads spin than the process has
  // CPUs, or spins against the thread that produces the completions.
  bool oversubscribed = false;
  std::string reason;  // why: for the startup log line
};

// `requested` is the configured value (nullopt = auto); `workers` the
// stack's worker threads; `other_spinners` the workers of this process's
// other RDMA stacks that spin; `cpus` the CPUs the process may run on.
// Auto spins Ceph's 1000 us when completions come from an adapter and
// every spinning worker, plus one CPU for everything else, fits in `cpus`;
// otherwise it does not spin (0: sleep on the channel after each batch).
// When the provider's work runs on the pollers (`progress_by_pollers`: the
// soft fabric's driven engine), auto spins kDrivenPolling on any number of
// CPUs (about what a sleep and a wake-up cost, which each exchange pays
// twice when a worker sleeps), yielding the CPU on every empty poll
// (yield_idle; docs/performance.md, "Progress domains").
inline constexpr std::chrono::microseconds kDrivenPolling{50};
PollingPlan plan_polling(std::optional<std::chrono::microseconds> requested, std::size_t workers,
                         std::size_t other_spinners, std::size_t cpus, bool completions_from_process_thread,
                         bool progress_by_pollers = false);
// CPUs this process may run on (sched_getaffinity; at least 1).
std::size_t usable_cpus() noexcept;
// Workers of all RDMA stacks of this process that spin right now.
std::size_t spinning_workers() noexcept;

class RdmaStack final : public transport::Stack {
 public:
  // Opens `options.device_name` on `provider` (which must outlive the stack)
  // and creates the PD, pools and CQs. Throws SetupError naming the cause and
  // the remedy (no device, no such device -- listing those found, port not
  // active, resources).
  RdmaStack(Provider& provider, RdmaOptions options);
  ~RdmaStack() override;
  RdmaStack(const RdmaStack&) = delete;
  RdmaStack& operator=(const RdmaStack&) = delete;

  std::string_view type() const noexcept override { return "async+rdma"; }
  std::size_t worker_count() const noexcept override;
  transport::Worker& worker(std::size_t i) noexcept override;
  transport::Worker& pick_worker() noexcept override;
  // options().common's marks: the ones every RdmaConnection of this stack uses.
  transport::SendQueueMarks send_queue_marks() const noexcept override {
    return {options().common.send_queue_high_water, options().common.send_queue_low_water};
  }
  void start() override;
  void stop() override;
  std::error_code listen(const NetAddress& addr, transport::AcceptHandler on_accept,
                         NetAddress& bound) override;
  void connect(const NetAddress& peer, transport::Worker& worker,
               transport::ConnectHandler done) override;

  const RdmaOptions& options() const noexcept;
  // The polling time in effect (ms_async_rdma_polling_us, or auto resolved).
  std::chrono::microseconds polling() const noexcept;
  // A sum over the workers' blocks (counters.h): a value, not a reference.
  RdmaCounters counters() const;
  const DeviceAttr& device_attr() const noexcept;
  // Registered (pinned) bytes of the send and receive pools right now.
  std::size_t registered_bytes() const noexcept;
  // Buffers handed out by the pools and not yet returned.
  std::size_t buffers_in_use() const noexcept;
  // SRQ mode (ms_async_rdma_support_srq): the workers' shared receive
  // queues, the receives posted on them and those reserved by connections
  // (credits + update slots each). All 0 without SRQ.
  std::size_t srq_count() const noexcept;
  std::size_t srq_posted() const noexcept;
  std::size_t srq_reserved() const noexcept;
  // Connections open or still draining.
  std::size_t connection_count() const noexcept;
  // Memory regions of the buffer pools registered right now (a zero-copy
  // transfer's regions belong to its connection and go with it).
  std::size_t memory_regions() const;

 private:
  std::shared_ptr<RdmaShared> shared_;
};

}  // namespace siphon::rdma
