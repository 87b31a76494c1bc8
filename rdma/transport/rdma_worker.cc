// RdmaWorker: one thread, one io_context, one completion queue.
//
// Polling (docs/architecture.md §2): after completions, keep polling (as a
// posted handler, so other work on the worker interleaves) until the CQ has
// been empty for ms_async_rdma_polling_us; then arm the CQ, poll once more
// to close the race with a completion that arrived before arming, and wait
// for the channel fd through Asio.
#include <unistd.h>

#include <fmt/format.h>

#include <array>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "rdma/transport/rdma_internal.h"

namespace siphon::rdma {

RdmaWorker::RdmaWorker(RdmaShared& shared, std::size_t index) : shared_(shared), index_(index) {
  const DeviceAttr& a = shared_.device->attr();
  std::uint32_t depth = shared_.opts.cq_depth;
  if (a.max_cqe != 0) depth = std::min(depth, a.max_cqe);
  std::error_code ec;
  cq_ = shared_.device->create_cq(depth, ec);
  if (!cq_)
    throw SetupError(ec, fmt::format("{}: cannot create a {}-entry completion queue", a.name, depth),
                     "lower ms_async_rdma_cq_depth");
  cq_capacity_ = cq_->capacity();
  cq_fd_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, ::dup(cq_->channel_fd()));
  send_cache_ = std::make_unique<PoolCache>(*shared_.send_pool);
  recv_cache_ = std::make_unique<PoolCache>(*shared_.recv_pool);
}

RdmaWorker::~RdmaWorker() {
  stop_and_join();
  conns_.clear();
  cq_fd_.reset();
  cm_fd_.reset();
  // Caches go back to their pools before the pools go away.
  send_cache_.reset();
  recv_cache_.reset();
}

void RdmaWorker::start() {
  guard_.emplace(io_.get_executor());
  thread_ = std::thread([this] {
    thread_id_ = std::this_thread::get_id();
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
    if (cq_fd_) cq_fd_->cancel();
    if (cm_fd_) cm_fd_->cancel();
    guard_.reset();
    io_.stop();
  });
  thread_.join();
  if (load_.load() > 0)
    SIPHON_LOG(rdma, 1, "worker {}: {} connections still draining at shutdown", index_, load_.load());
}

void RdmaWorker::add(const std::shared_ptr<RdmaConnection>& c) {
  conns_[c->qp_num()] = c;
  load_.fetch_add(1, std::memory_order_relaxed);
}

void RdmaWorker::remove(std::uint32_t qp_num) {
  if (conns_.erase(qp_num) > 0) load_.fetch_sub(1, std::memory_order_relaxed);
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
  for (auto& [qpn, c] : conns_) all.push_back(c);
  for (auto& c : all) c->close();
}

void RdmaWorker::wait_cq() {
  if (stopped_) return;
  if (const auto ec = cq_->arm()) {
    SIPHON_LOG(rdma, 0, "worker {}: arming the completion queue failed: {}", index_, ec.message());
  }
  // A completion that arrived before arming raises no event: poll once more.
  poll_loop();
  if (polling_ || stopped_) return;
  cq_fd_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& e) {
                       if (e || self->stopped_) return;
                       self->cq_->consume_events();
                       self->idle_since_ = MonoClock::now();
                       self->polling_ = true;
                       self->poll_loop();
                     });
}

void RdmaWorker::poll_loop() {
  std::array<Wc, 32> wcs;
  const std::size_t n = cq_->poll(wcs);
  for (std::size_t i = 0; i < n; ++i) {
    auto it = conns_.find(wcs[i].qp_num);
    if (it == conns_.end()) continue;  // its connection is gone (torn down)
    std::shared_ptr<RdmaConnection> c = it->second;
    c->on_completion(wcs[i]);
  }
  const auto now = MonoClock::now();
  if (!polling_) {  // the single re-poll of wait_cq()
    if (n == 0) return;
    polling_ = true;
  }
  if (n > 0) idle_since_ = now;
  if (n == 0 && now - idle_since_ >= shared_.opts.polling) {
    polling_ = false;
    wait_cq();
    return;
  }
  boost::asio::post(io_, [self = shared_from_this()] {
    if (!self->stopped_) self->poll_loop();
  });
}

}  // namespace siphon::rdma
