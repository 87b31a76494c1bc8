// RdmaWorker: one thread, one io_context, one completion queue.
//
// Polling (docs/architecture.md §2): after completions, keep polling (as a
// posted handler, so other work on the worker interleaves) until the CQ has
// been empty for the polling time (ms_async_rdma_polling_us, or the auto
// policy of plan_polling(): 0 = no spinning); then arm the CQ, poll once more
// to close the race with a completion that arrived before arming, and wait
// for the channel fd through Asio.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/transport/rdma_worker.h"

#include "rdma/transport/rdma_connection.h"

namespace siphon::rdma {
namespace {
// Completions processed between two pushes of a driven provider (poll_batch).
constexpr std::size_t kPushEvery = 4;
}  // namespace

RdmaWorker::RdmaWorker(RdmaShared& shared, std::size_t index) : shared_(shared), index_(index) {
  create_cq();
  // When a connection anywhere waits for a buffer, the parked ones in this
  // worker's caches go back to the pool, flushed here on the owner's thread
  // (PoolCache). The caches die after the thread is joined, so a queued
  // flush never outlives its cache.
  const auto flush_here = [this](PoolCache& c) { boost::asio::post(io_, [&c] { c.return_all(); }); };
  send_cache_ = std::make_unique<PoolCache>(*shared_.send_pool, flush_here);
  recv_cache_ = std::make_unique<PoolCache>(*shared_.recv_pool, flush_here);
  if (shared_.srq_depth > 0) create_srq();
}

// The worker's CQ, sized for its share of max_connections unless cq_depth
// is set; never above what the device allows (read back, not assumed).
void RdmaWorker::create_cq() {
  const DeviceAttr& a = shared_.attr;
  const std::uint64_t want = shared_.cq_depth_wanted();
  std::uint32_t depth = static_cast<std::uint32_t>(std::min<std::uint64_t>(want, UINT32_MAX));
  if (a.max_cqe != 0 && depth > a.max_cqe) {
    depth = a.max_cqe;
    // Said when the stack starts, not again when a removed device is reopened.
    if (!shared_.device_reopened())
      SIPHON_LOG(rdma, 1,
               "worker {}: {} completion queue entries wanted ({}), the device allows {} (max_cqe): "
                 "this worker takes at most {} connections; add workers (ms_async_op_threads) or lower "
                 "ms_async_rdma_send_queue_depth for more",
                 index_, want,
                 shared_.opts.cq_depth != 0 ? "ms_async_rdma_cq_depth" : "for ms_async_rdma_max_connections",
                 a.max_cqe, shared_.connections_per_cq(depth));
  }
  std::error_code ec;
  cq_ = shared_.device->create_cq(depth, ec);
  if (!cq_)
    throw SetupError(ec, fmt::format("{}: cannot create a {}-entry completion queue", a.name, depth),
                     "lower ms_async_rdma_cq_depth (or ms_async_rdma_max_connections, which sizes it)");
  cq_capacity_ = cq_->capacity();
  // The SRQ's receives complete on this CQ too: reserved once, up front.
  cq_reserved_.store(shared_.srq_entries());
  const int fd = ::dup(cq_->channel_fd());
  if (fd < 0) {
    const std::error_code dec(errno, std::generic_category());
    cq_.reset();
    throw SetupError(dec, fmt::format("worker {}: cannot duplicate its completion channel descriptor", index_),
                     "raise the process's open-file limit (ulimit -n)");
  }
  cq_fd_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd);
  if (const int pfd = cq_->progress_fd(); pfd >= 0) {
    const int d = ::dup(pfd);
    if (d < 0) {
      const std::error_code dec(errno, std::generic_category());
      cq_fd_.reset();
      cq_.reset();
      throw SetupError(dec, fmt::format("worker {}: cannot duplicate its provider's progress descriptor", index_),
                       "raise the process's open-file limit (ulimit -n)");
    }
    progress_fd_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, d);
  }
}

// Driven provider progress. The provider (the soft fabric's driven engine)
// does its work on this thread: when the CQ is polled, when its progress fd
// is readable, when it kicks us after a post, and before we sleep.
void RdmaWorker::sync_progress() {
  if (!progress_fd_ || !cq_ || std::this_thread::get_id() != thread_.get_id()) return;
  const bool want = !owned_.empty() && !stopped_ && !device_detached_;
  if (want == progress_attached_) return;
  if (!want) return detach_progress();
  progress_attached_ = true;
  // The wait first (Asio's registration is edge-triggered: an edge with no
  // wait queued is lost), then a round for what was pending before it (a
  // command queued for the engine thread as we attached), then a poll for
  // what that round completed on our CQ (posted: we may be inside a
  // connection's call).
  wait_progress();
  cq_->attach_progress(true, &RdmaWorker::kick_progress, this);
  cq_->progress(true, false);
  kick_progress(this);
}

void RdmaWorker::detach_progress() noexcept {
  if (!progress_attached_) return;
  progress_attached_ = false;
  cq_->attach_progress(false, nullptr, nullptr);
}

void RdmaWorker::wait_progress() {
  if (progress_wait_pending_ || !progress_attached_) return;
  progress_wait_pending_ = true;
  progress_fd_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                           [this](const boost::system::error_code& e) {
                             progress_wait_pending_ = false;
                             if (e || stopped_ || device_detached_ || !progress_attached_) return;
                             cq_->progress(true, false);
                             // Queued after the round: Asio's wait re-registers the fd
                             // (EPOLL_CTL_MOD), which reports a readiness it still has, so no
                             // edge is lost; queued before, the readiness the round was about
                             // to take came back at once, one wasted wake-up per round.
                             wait_progress();
                             start_polling();  // what it completed on our CQ raised no event
                           });
}

// The provider queued work (a post from a handler) that only a driver pushes.
void RdmaWorker::kick_progress(void* worker) {
  auto* w = static_cast<RdmaWorker*>(worker);
  if (w->polling_ || w->kick_posted_) return;  // the poll loop drives at its next poll, or before it sleeps
  w->kick_posted_ = true;
  boost::asio::post(w->io_, [w] {
    w->kick_posted_ = false;
    if (!w->stopped_ && !w->device_detached_) w->start_polling();
  });
}

// SRQ mode: the worker's shared receive queue, filled with its whole depth
// of receive buffers now (pinned memory does not grow with connections).
void RdmaWorker::create_srq() {
  const std::uint32_t depth = shared_.srq_depth;
  std::error_code ec;
  srq_ = shared_.pd->create_srq(SrqInit{depth, 1}, ec);
  if (!srq_)
    throw SetupError(ec ? ec : make_error_code(errc::resource_exhausted),
                     fmt::format("{}: cannot create a {}-entry shared receive queue", shared_.attr.name, depth),
                     "lower ms_async_rdma_receive_queue_len or set ms_async_rdma_support_srq = false");
  srq_ctx_ = std::make_unique<WrCtx[]>(depth);
  srq_ctx_n_ = depth;
  for (std::uint32_t i = 0; i < depth; ++i) {
    PoolBuffer* buf = shared_.recv_pool->get();
    if (buf == nullptr)
      throw SetupError(shared_.recv_pool->last_error() ? shared_.recv_pool->last_error()
                                                       : make_error_code(errc::resource_exhausted),
                       fmt::format("worker {}: cannot fill its shared receive queue ({} of {} receive buffers)",
                                   index_, i, depth),
                       "raise ms_async_rdma_receive_buffers or lower ms_async_rdma_receive_queue_len");
    WrCtx& ctx = srq_ctx_[i];
    ctx.kind = WrCtx::Kind::recv;
    ctx.buf = buf;
    const Sge sge{reinterpret_cast<std::uint64_t>(buf->data()), static_cast<std::uint32_t>(buf->capacity()),
                  buf->keys().lkey};
    const RecvWr wr{reinterpret_cast<std::uint64_t>(&ctx), &sge, 1};
    std::size_t bad = 0;
    if (const auto pec = srq_->post_recv({&wr, 1}, &bad))
      throw SetupError(pec, fmt::format("worker {}: posting to its shared receive queue failed", index_),
                       "lower ms_async_rdma_receive_queue_len or set ms_async_rdma_support_srq = false");
    srq_posted_.fetch_add(1, std::memory_order_relaxed);
  }
}

void RdmaWorker::drop_srq() noexcept {
  srq_.reset();
  for (std::uint32_t i = 0; i < srq_ctx_n_; ++i)
    if (srq_ctx_[i].buf != nullptr) shared_.recv_pool->put(srq_ctx_[i].buf);
  srq_ctx_.reset();
  srq_ctx_n_ = 0;
  srq_posted_.store(0, std::memory_order_relaxed);
}

bool RdmaWorker::reserve_srq(std::uint32_t n) noexcept {
  std::uint32_t cur = srq_reserved_.load();
  do {
    if (cur + n > srq_posted_.load()) return false;
  } while (!srq_reserved_.compare_exchange_weak(cur, cur + n));
  return true;
}

void RdmaWorker::release_srq(std::uint32_t n) noexcept { srq_reserved_.fetch_sub(n); }

void RdmaWorker::srq_repost(WrCtx* ctx) noexcept {
  // After the worker stopped the buffer stays with its context; the
  // destructor returns it to the pool once the SRQ is gone.
  if (stopped_ || !srq_) return;
  const Sge sge{reinterpret_cast<std::uint64_t>(ctx->buf->data()), static_cast<std::uint32_t>(ctx->buf->capacity()),
                ctx->buf->keys().lkey};
  const RecvWr wr{reinterpret_cast<std::uint64_t>(ctx), &sge, 1};
  std::size_t bad = 0;
  if (const auto ec = srq_->post_recv({&wr, 1}, &bad)) {
    // The SRQ now holds one receive less than it did: admit accordingly.
    srq_posted_.fetch_sub(1, std::memory_order_relaxed);
    SIPHON_LOG(rdma, 0, "worker {}: re-posting a receive to the shared receive queue failed: {} ({} posted, {} reserved)",
               index_, ec.message(), srq_posted(), srq_reserved());
  }
}

RdmaWorker::~RdmaWorker() {
  stop_and_join();
  conns_.clear();
  owned_.clear();
  cq_fd_.reset();
  progress_fd_.reset();
  cm_fd_.reset();
  device_timer_.reset();
  // The SRQ goes after its QPs; then its buffers can go back to the pool.
  drop_srq();
  // Caches go back to their pools before the pools go away.
  send_cache_.reset();
  recv_cache_.reset();
}

void RdmaWorker::start() {
  if (thread_.joinable()) return;  // already running
  guard_.emplace(io_.get_executor());
  thread_ = std::thread([this] {
    const std::string name = fmt::format("siphon-rdma-{}", index_);
    ::pthread_setname_np(::pthread_self(), name.c_str());
    boost::asio::post(io_, [this] { wait_cq(); });
    io_.run();
  });
}

void RdmaWorker::post(std::function<void()> fn) { boost::asio::post(io_, std::move(fn)); }

void RdmaWorker::stop_and_join() {
  if (!thread_.joinable()) return;
  // Close every connection on the worker and give their drains a moment:
  // teardown waits for flushed completions before destroying QPs.
  boost::asio::post(io_, [this] { close_all(); });
  const auto deadline = MonoClock::now() + std::chrono::seconds(2);
  while (MonoClock::now() < deadline && load_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  boost::asio::post(io_, [this] {
    stopped_ = true;
    detach_progress();
    if (progress_fd_) progress_fd_->cancel();
    if (cq_fd_) cq_fd_->cancel();
    if (cq_rescue_) cq_rescue_->cancel();
    if (cm_fd_) cm_fd_->cancel();
    if (device_timer_) device_timer_->cancel();
    guard_.reset();
    io_.stop();
  });
  thread_.join();
  // Run what is still queued (cancelled waits, posted closes) while every
  // member is alive, then drop the connections: QPs go before the CQ.
  io_.restart();
  io_.poll();
  if (!owned_.empty())
    SIPHON_LOG(rdma, 1, "worker {}: {} connections still draining at shutdown; destroying them", index_,
               owned_.size());
  conns_.clear();
  owned_.clear();
  load_.store(0);
  perf().set(transport::l_msgr_active_connections, 0);
}

void RdmaWorker::adopt(const std::shared_ptr<RdmaConnection>& c) {
  if (!owned_.emplace(c.get(), c).second) return;
  load_.fetch_add(1, std::memory_order_relaxed);
  perf().inc(transport::l_msgr_created_connections);
  perf().set(transport::l_msgr_active_connections, owned_.size());
  // One pick turned into a connection (a pick that never does is forgotten
  // here too, when the next connection arrives).
  std::size_t p = picked_.load(std::memory_order_relaxed);
  while (p != 0 && !picked_.compare_exchange_weak(p, p - 1, std::memory_order_relaxed)) {
  }
  // A worker asleep with no connection has no rescue poll armed: this one's
  // completions (its first receives, the banner) need it too.
  boost::asio::post(io_, [this] {
    if (!polling_) arm_cq_rescue();
  });
  sync_progress();
}

void RdmaWorker::add_qp(const std::shared_ptr<RdmaConnection>& c) {
  adopt(c);
  conns_[c->qp_num()] = c;
}

void RdmaWorker::remove(RdmaConnection* c) {
  if (const std::uint32_t qpn = c->qp_num(); qpn != 0) {
    auto it = conns_.find(qpn);
    if (it != conns_.end() && it->second.get() == c) conns_.erase(it);
  }
  if (owned_.erase(c) > 0) load_.fetch_sub(1, std::memory_order_relaxed);
  perf().set(transport::l_msgr_active_connections, owned_.size());
  sync_progress();
}

bool RdmaWorker::reserve_cq(std::uint32_t entries) noexcept {
  std::uint32_t cur = cq_reserved_.load();
  do {
    if (cur + entries > cq_capacity_) return false;
  } while (!cq_reserved_.compare_exchange_weak(cur, cur + entries));
  return true;
}

void RdmaWorker::release_cq(std::uint32_t entries) noexcept { cq_reserved_.fetch_sub(entries); }

void RdmaWorker::close_all() {
  std::vector<std::shared_ptr<RdmaConnection>> all;
  for (auto& [ptr, c] : owned_) all.push_back(c);
  for (auto& c : all) c->shutdown();
}

// Asio registers descriptors edge-triggered: a readiness edge that happens
// while no wait is queued is lost. So the wait is always queued *before* the
// CQ is armed (or the CM channel drained), and the state is checked again
// after that; an event can then only arrive while a wait is pending.
void RdmaWorker::wait_cq() {
  if (stopped_ || device_detached_) return;
  judge_cq_rescue();
  if (!cq_wait_pending_) {
    cq_wait_pending_ = true;
    cq_fd_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                       [this](const boost::system::error_code& e) {
                         cq_wait_pending_ = false;
                         if (e || stopped_ || device_detached_) return;
                         counters_.cq_events.add(1);
                         if (cq_->consume_events() != 0) cq_rescued_ = 0;  // a late event, not a lost one
                         start_polling();
                       });
  }
  if (const auto ec = cq_->arm())
    SIPHON_LOG(rdma, 0, "worker {}: arming the completion queue failed: {}", index_, ec.message());
  // Completions that arrived before arming raise no event: poll once more.
  if (poll_batch() > 0) return start_polling();
  // A driven provider arms what it polled, and may complete more for us.
  if (progress_attached_) {
    const bool more = cq_->progress(false, true);
    if (poll_batch() > 0 || more) return start_polling();
  }
  arm_cq_rescue();
}

// The rescue poll. An armed CQ must raise an event for its next completion;
// if the device or driver loses that notification, a worker that sleeps
// until the next event never wakes: its connections' completions (a peer's
// SENDs, our READs) sit in the CQ, the peers wait for credits or read_done,
// and only ms_async_rdma_transfer_timeout ends it, with a fault. The
// two-host rxe tier saw exactly that (docs/testing-rxe.md). So while the
// worker sleeps with connections to serve, it looks at its CQ every
// kCqRescueInterval; completions found there with no event in the channel
// are served at once, and counted (cq_events_missed) and logged as a lost
// notification only if their event never came (judge_cq_rescue).
// An idle worker with connections wakes 10 times a second for it; one with
// none never.
namespace {
constexpr std::chrono::milliseconds kCqRescueInterval{100};
}

void RdmaWorker::arm_cq_rescue() {
  if (cq_rescue_armed_ || stopped_ || device_detached_ || owned_.empty()) return;
  if (!cq_rescue_) cq_rescue_ = std::make_unique<boost::asio::steady_timer>(io_);
  cq_rescue_armed_ = true;
  cq_rescue_->expires_after(kCqRescueInterval);
  cq_rescue_->async_wait([this](const boost::system::error_code& e) {
    cq_rescue_armed_ = false;
    if (!e && !stopped_) on_cq_rescue();
  });
}

void RdmaWorker::on_cq_rescue() {
  if (polling_ || device_detached_) return;  // awake: wait_cq() re-arms the rescue when it sleeps again
  // An event already in the channel (its wait's handler not run yet) is not
  // a lost one: taking it here is harmless, the handler then finds none.
  const std::size_t events = cq_->consume_events();
  const std::size_t n = poll_batch();
  if (n == 0) return arm_cq_rescue();
  // A driven provider raises no event for what its attached thread completes
  // on its own CQ; it kicks that thread to poll instead. A rescue that runs
  // before the kick's poll (both ready in the same turn of the loop: the
  // rescue timer and the idle timer that closed a connection fall due
  // together) found owed completions, not a lost notification.
  if (events == 0 && !kick_posted_) cq_rescued_ = n;  // judged when the CQ is armed again
  start_polling();
}

// Completions found by the rescue with no event are not yet proof of a lost
// notification: the provider makes a completion visible first and writes
// its event after (the soft fabric: the ring's tail, then the eventfd), so a
// rescue that runs between the two finds the completion with no event, and
// the event follows a moment later. That event belongs to the arm the rescue
// found, so it can only arrive before the worker arms the CQ again: any
// event consumed until then (by the wait's handler or here) was late, not
// lost. Judged here, just before the next arm; what is still unexplained is
// a lost notification: counted, and logged the 1st, 2nd, 4th, 8th... time
// (a device that keeps losing them is named without flooding the log; the
// counter has every one).
void RdmaWorker::judge_cq_rescue() {
  if (cq_rescued_ == 0) return;
  if (cq_->consume_events() != 0) cq_rescued_ = 0;
  if (cq_rescued_ == 0) return;
  const std::size_t n = std::exchange(cq_rescued_, 0);
  counters_.cq_events_missed.add(1);
  const std::uint64_t k = counters_.cq_events_missed.load();
  if ((k & (k - 1)) == 0)
    SIPHON_LOG(rdma, 1,
               "worker {}: {} completions were waiting in the armed completion queue and their completion event "
               "never came: a lost notification ({} on this worker so far, perf counter cq_events_missed); "
               "the rescue poll served them",
               index_, n, k);
}

void RdmaWorker::start_polling() {
  if (polling_) return;
  polling_ = true;
  idle_since_ = MonoClock::now();
  poll_loop();
}

std::size_t RdmaWorker::poll_batch() {
  std::array<Wc, 32> wcs;
  const std::size_t n = cq_->poll(wcs);
  counters_.cq_polls.add(1);
  if (n == 0) {
    counters_.cq_polls_empty.add(1);
    return 0;
  }
  counters_.cq_completions.add(n);
  // Completion processing: received frames (fast dispatch included) and
  // send completions.
  const transport::WorkerPerf::Section timed(perf(), transport::l_msgr_running_recv_time);
  for (std::size_t i = 0; i < n; ++i) {
    auto it = conns_.find(wcs[i].qp_num);
    if (it == conns_.end()) {  // its connection is gone (torn down)
      // (By address: the opcode of an error completion is undefined.)
      if (is_srq_ctx(wcs[i].wr_id)) srq_repost(reinterpret_cast<WrCtx*>(wcs[i].wr_id));  // the buffer stays in the SRQ
      continue;
    }
    // One reference for the call (on_completion may remove the connection
    // from conns_, dropping the map's): the only refcount round trip per
    // completion; on_completion takes none of its own.
    const std::shared_ptr<RdmaConnection> c = it->second;
    c->on_completion(wcs[i]);
    // A provider driven by its pollers moves what the handlers posted only
    // when it is driven: push the replies of these completions out now, not
    // after the rest of the batch (up to 32 completions of several frames
    // each), so the peer works on them meanwhile.
    if (progress_attached_ && (i + 1) % kPushEvery == 0 && i + 1 < n) cq_->progress(false, false);
  }
  return n;
}

void RdmaWorker::poll_loop() {
  if (stopped_) return;
  if (device_detached_) {  // the CQ is gone (detach_device); attach_device starts over
    polling_ = false;
    return;
  }
  const std::size_t n = poll_batch();
  const auto now = MonoClock::now();
  if (n > 0) idle_since_ = now;
  if (n == 0 && now - idle_since_ >= shared_.polling) {
    polling_ = false;
    wait_cq();
    return;
  }
  // An empty poll while spinning: let a thread that waits for this CPU run
  // first (returns at once when none does).
  if (n == 0 && shared_.yield_idle) ::sched_yield();
  // The worker outlives its io_context's handlers (the thread is joined and
  // the queue drained before it is destroyed), so `this` is safe here.
  boost::asio::post(io_, [this] { poll_loop(); });
}

// --- The device went away / came back (rdma_device_life.cc drives it)

void RdmaWorker::detach_device() {
  if (stopped_ || device_detached_) return shared_.worker_detached();
  device_detached_ = true;
  // Connections first: their QPs go before the CQ and SRQ they use. Each
  // faults (or fails its setup) and leaves the worker.
  std::vector<std::shared_ptr<RdmaConnection>> all;
  all.reserve(owned_.size());
  for (auto& [ptr, c] : owned_) all.push_back(c);
  for (auto& c : all) c->device_removed();
  conns_.clear();
  owned_.clear();
  load_.store(0, std::memory_order_relaxed);
  perf().set(transport::l_msgr_active_connections, 0);
  // Then what polls: the wait (its handler runs aborted), the rescue timer.
  if (cq_rescue_) cq_rescue_->cancel();
  detach_progress();
  progress_fd_.reset();
  cq_fd_.reset();  // closes our duplicate; a pending wait completes aborted
  polling_ = false;
  cq_rescued_ = 0;
  drop_srq();
  srq_reserved_.store(0, std::memory_order_relaxed);
  cq_.reset();
  cq_capacity_ = 0;
  cq_reserved_.store(0, std::memory_order_relaxed);
  // Parked buffers back to the shared list (the pool outlives the device).
  send_cache_->return_all();
  recv_cache_->return_all();
  shared_.worker_detached();
}

bool RdmaWorker::attach_device(std::string& why) {
  if (stopped_) {
    why = "the stack is stopping";
    return false;
  }
  if (!device_detached_) return true;
  try {
    create_cq();
    if (shared_.srq_depth > 0) create_srq();
  } catch (const SetupError& e) {
    why = e.what();
    drop_srq();
    cq_fd_.reset();
    cq_.reset();
    cq_capacity_ = 0;
    cq_reserved_.store(0, std::memory_order_relaxed);
    return false;
  }
  device_detached_ = false;
  wait_cq();
  return true;
}

void RdmaWorker::run_after(std::chrono::milliseconds after, std::function<void()> fn) {
  if (stopped_) return;
  if (!device_timer_) device_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
  device_timer_->expires_after(after);  // cancels a pending wait
  device_timer_->async_wait([this, fn = std::move(fn)](const boost::system::error_code& e) {
    if (!e && !stopped_) fn();
  });
}

// --- CM events, served on worker 0

void RdmaWorker::serve_cm() {
  cm_fd_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, ::dup(shared_.channel->fd()));
  wait_cm();
}

// The wait is queued before the channel is drained (see wait_cq in
// rdma_worker.cc): with edge-triggered descriptors an event arriving between
// the drain and the wait would otherwise be lost.
void RdmaWorker::wait_cm() {
  if (stopped_) return;
  if (!cm_wait_pending_) {
    cm_wait_pending_ = true;
    cm_fd_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                       [this](const boost::system::error_code& e) {
                         cm_wait_pending_ = false;
                         if (!e && !stopped_) on_cm_readable();
                       });
  }
  boost::asio::post(io_, [this] {
    if (!stopped_) drain_cm();
  });
}

void RdmaWorker::on_cm_readable() {
  drain_cm();
  wait_cm();
}

// Events are taken and routed under RdmaShared::mu. An event still queued
// means its id has not been destroyed (ids purge their events as they die),
// and a connection unregisters from by_id under mu before its id dies; so
// the lookup below can neither find a stale connection nor a new one that
// reused a dead id's address.
std::size_t RdmaWorker::drain_cm() {
  std::size_t drained = 0;
  RdmaShared& s = shared_;
  for (;;) {
    auto event = std::make_shared<CmEvent>();
    std::shared_ptr<RdmaConnection> conn;
    bool listening = false;
    transport::AcceptHandler on_accept;
    {
      std::lock_guard lk(s.mu);
      if (!s.channel->get_event(*event)) break;
      if (event->type == CmEventType::connect_request) {
        for (auto& l : s.listeners)
          if (l->id.get() == event->id) {
            listening = true;
            on_accept = l->on_accept;
          }
      } else if (event->type == CmEventType::device_removal &&
                 std::any_of(s.listeners.begin(), s.listeners.end(),
                             [&](const auto& l) { return l->id.get() == event->id; })) {
        listening = true;  // a listener's: no connection to route it to
      } else if (auto it = s.by_id.find(event->id); it != s.by_id.end()) {
        conn = it->second.lock();
      }
    }
    ++drained;
    // The device under one of our ids went away: the whole stack lets go of
    // it (rdma_device_life.cc); the connection still hears of it below.
    if (event->type == CmEventType::device_removal)
      s.device_gone(listening ? "DEVICE_REMOVAL on a listener" : "DEVICE_REMOVAL on a connection");
    if (event->type == CmEventType::connect_request) {
      std::unique_ptr<CmId> nid = std::move(event->new_id);
      if (nid == nullptr) continue;
      auto reject = [&](RejectReason why, std::string_view what) {
        s.counters.connections_rejected.fetch_add(1, std::memory_order_relaxed);
        SIPHON_LOG(rdma, 1, "rejecting RDMA connection from {}: {}", nid->peer_address().to_string(), what);
        const auto info = RejectInfo{why, kWireVersion}.encode();
        (void)nid->reject(info);
      };
      ConnectInfo peer_info;
      std::string_view why;
      if (!listening || s.stopping) {
        reject(RejectReason::shutting_down, "not listening");
      } else if (!s.device_open()) {
        reject(RejectReason::shutting_down, "the RDMA device was removed");
      } else if (const auto dec = ConnectInfo::decode(event->private_data, peer_info, &why)) {
        reject(dec == errc::unsupported_protocol ? RejectReason::version_unsupported
                                                 : RejectReason::bad_parameters, why);
      } else if (s.connections.load() >= s.opts.max_connections) {
        reject(RejectReason::too_many_connections, "ms_async_rdma_max_connections reached");
      } else {
        RdmaWorker& target = s.least_loaded();
        const NetAddress peer = nid->peer_address();
        auto nconn = std::make_shared<RdmaConnection>(s, target, std::move(nid), false, peer);
        {
          std::lock_guard lk(s.mu);
          s.by_id[nconn->cm_id()] = nconn;
        }
        target.post([conn = std::move(nconn), peer_info, on_accept = std::move(on_accept)] {
          conn->accept_request(peer_info, on_accept);
        });
      }
      continue;
    }
    if (!conn) {  // the connection is gone; nothing to do
      SIPHON_LOG(rdma, 10, "cm event {} for an id with no connection", to_string(event->type));
      continue;
    }
    conn->worker().post([conn, event] { conn->on_cm_event(*event); });
  }
  return drained;
}

}  // namespace siphon::rdma
