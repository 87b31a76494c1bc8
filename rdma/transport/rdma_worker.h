// RdmaWorker: one thread of the RDMA stack, its completion queue, SRQ and
// connections (internal).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>

#include "msgr/base/clock.h"
#include "msgr/transport/transport.h"
#include "rdma/provider.h"
#include "rdma/transport/buffer_pool.h"
#include "rdma/transport/rdma_shared.h"
#include "rdma/transport/wr_ctx.h"

namespace siphon::rdma {

class RdmaConnection;

class RdmaWorker final : public transport::Worker, public std::enable_shared_from_this<RdmaWorker> {
 public:
  RdmaWorker(RdmaShared& shared, std::size_t index);
  ~RdmaWorker() override;

  boost::asio::io_context& io() noexcept override { return io_; }
  std::size_t index() const noexcept override { return index_; }
  // Asio knows which thread runs the io_context (as in TcpWorker): no
  // thread id written by the new thread and read unsynchronised by others.
  bool in_worker_thread() const noexcept override { return exec_.running_in_this_thread(); }
  void post(std::function<void()> fn) override;

  void start();
  void stop_and_join();

  CompletionQueue& cq() noexcept { return *cq_; }
  PoolCache& send_cache() noexcept { return *send_cache_; }
  PoolCache& recv_cache() noexcept { return *recv_cache_; }
  // This worker's counters (its Siphon::RDMAWorker-<n> logger, rdma_perf.h):
  // written only on its thread, read by RdmaStack::counters() from anywhere.
  RdmaWorkerCounters& counters() noexcept { return counters_; }
  const RdmaWorkerCounters& counters() const noexcept { return counters_; }
  // Connections on this worker, only on the worker. The worker owns a
  // connection from the moment its setup starts here (adopt) until its
  // teardown has drained (remove): while a client resolves and connects,
  // nothing else holds it -- the CM routing table (RdmaShared::by_id) only
  // has a weak reference.
  void adopt(const std::shared_ptr<RdmaConnection>& c);
  // Routes completions of the connection's QP to it (once the QP exists).
  void add_qp(const std::shared_ptr<RdmaConnection>& c);
  void remove(RdmaConnection* c);
  std::size_t load() const noexcept { return load_.load(std::memory_order_relaxed); }
  // load() plus connections picked for this worker and not adopted yet.
  std::size_t weight() const noexcept { return load() + picked_.load(std::memory_order_relaxed); }
  void note_picked() noexcept { picked_.fetch_add(1, std::memory_order_relaxed); }
  // Reserves CQ entries for a QP; false when the CQ cannot take it.
  bool reserve_cq(std::uint32_t entries) noexcept;
  void release_cq(std::uint32_t entries) noexcept;
  std::uint32_t cq_capacity() const noexcept { return cq_capacity_; }
  std::uint32_t cq_reserved() const noexcept { return cq_reserved_.load(std::memory_order_relaxed); }
  // Closes every connection (stack shutdown); on the worker.
  void close_all();

  // --- SRQ mode (ms_async_rdma_support_srq): one shared receive queue per
  // worker, filled once with srq_depth receive buffers from the receive pool.
  // A connection reserves its credits plus update slots in it when its QP is
  // created and releases them when it is closed, so the receives its peer can
  // consume are always posted (no RNR). Receive contexts are the worker's:
  // a receive completion goes to the connection with that QP number, which
  // hands the context back through srq_repost() once its bytes are copied
  // out; a completion for a connection that is gone is re-posted at once.
  SharedReceiveQueue* srq() noexcept { return srq_.get(); }
  // Reserves `n` receives of the SRQ; false when they are not available.
  bool reserve_srq(std::uint32_t n) noexcept;
  void release_srq(std::uint32_t n) noexcept;
  std::uint32_t srq_posted() const noexcept { return srq_posted_.load(std::memory_order_relaxed); }
  std::uint32_t srq_reserved() const noexcept { return srq_reserved_.load(std::memory_order_relaxed); }
  // Puts a receive context of this worker's SRQ back on it (on the worker).
  void srq_repost(WrCtx* ctx) noexcept;
  // Starts serving the CM event channel (worker 0 only).
  void serve_cm();

  // --- The device went away and came back (RdmaShared's device life), on
  // the worker. detach_device(): every connection faults (its session hears
  // of it) and its QP and id are destroyed now, without waiting for flushes;
  // then the SRQ (its buffers back to the pool) and the CQ; the worker stops
  // polling. attach_device(): a new CQ (and SRQ), polling as before; false
  // with `why` when the device refused them (nothing is left half-made).
  void detach_device();
  bool attach_device(std::string& why);
  // Worker 0: runs `fn` on the worker after `after` (the device check);
  // replaces a timer still pending. Cancelled when the worker stops.
  void run_after(std::chrono::milliseconds after, std::function<void()> fn);

 private:
  void create_cq();
  void create_srq();
  void drop_srq() noexcept;
  void poll_loop();
  std::size_t poll_batch();
  void start_polling();
  void wait_cq();
  void arm_cq_rescue();
  void on_cq_rescue();
  void judge_cq_rescue();
  std::size_t drain_cm();
  void wait_cm();
  void on_cm_readable();
  // Driven provider progress (CompletionQueue::attach_progress): attached
  // while the worker serves connections, so that an idle worker is not woken
  // by another's traffic.
  void sync_progress();
  void wait_progress();
  void detach_progress() noexcept;
  static void kick_progress(void* worker);

  RdmaShared& shared_;
  std::size_t index_;
  boost::asio::io_context io_;
  boost::asio::io_context::executor_type exec_{io_.get_executor()};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::thread thread_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> cq_fd_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> cm_fd_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> progress_fd_;  // -1 from the provider: none
  bool progress_attached_ = false;
  bool progress_wait_pending_ = false;
  bool kick_posted_ = false;
  std::unique_ptr<PoolCache> send_cache_, recv_cache_;
  RdmaWorkerCounters counters_{perf().id()};  // its logger's memory is its own (no line shared)
  std::unordered_map<RdmaConnection*, std::shared_ptr<RdmaConnection>> owned_;
  std::unordered_map<std::uint32_t, std::shared_ptr<RdmaConnection>> conns_;  // by QP number
  std::atomic<std::size_t> load_{0};
  std::atomic<std::size_t> picked_{0};  // picks not yet adopted (saturating)
  std::atomic<std::uint32_t> cq_reserved_{0};
  std::uint32_t cq_capacity_ = 0;
  std::unique_ptr<SharedReceiveQueue> srq_;
  std::unique_ptr<WrCtx[]> srq_ctx_;  // each owns its buffer until the worker goes
  std::uint32_t srq_ctx_n_ = 0;
  bool is_srq_ctx(std::uint64_t wr_id) const noexcept {
    const auto base = reinterpret_cast<std::uint64_t>(srq_ctx_.get());
    return srq_ctx_n_ != 0 && wr_id >= base && wr_id < base + srq_ctx_n_ * sizeof(WrCtx);
  }
  std::atomic<std::uint32_t> srq_posted_{0}, srq_reserved_{0};
  bool polling_ = false;
  bool cq_wait_pending_ = false;
  // The rescue poll (wait_cq): armed while the worker sleeps on its CQ with
  // connections to serve.
  std::unique_ptr<boost::asio::steady_timer> cq_rescue_;
  bool cq_rescue_armed_ = false;
  // Completions a rescue served while the channel held no event for them;
  // judged lost or late when the CQ is armed again (judge_cq_rescue).
  std::size_t cq_rescued_ = 0;
  bool cm_wait_pending_ = false;
  bool stopped_ = false;
  bool device_detached_ = false;
  std::unique_ptr<boost::asio::steady_timer> device_timer_;  // worker 0: the device check
  MonoClock::time_point idle_since_{};
};

}  // namespace siphon::rdma
