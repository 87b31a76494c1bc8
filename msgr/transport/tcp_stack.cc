// TcpStack setup: workers, listeners (bind, port range, accept onto the
// least-loaded worker), connect, and an orderly stop.
#include "msgr/transport/tcp_stack.h"

#include <pthread.h>

#include <cassert>
#include <cstring>
#include <random>

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "msgr/transport/tcp_connection.h"

namespace siphon::transport {

namespace {

using tcp = boost::asio::ip::tcp;

// Fewest open connections; ties broken round robin so bursts spread out.
std::shared_ptr<TcpWorker> pick_least_loaded(const std::vector<std::shared_ptr<TcpWorker>>& ws,
                                             std::atomic<std::size_t>& rr) noexcept {
  const std::size_t n = ws.size();
  const std::size_t start = rr.fetch_add(1, std::memory_order_relaxed) % n;
  std::size_t best = start;
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t i = (start + k) % n;
    if (ws[i]->load() < ws[best]->load()) best = i;
  }
  return ws[best];
}

tcp::endpoint to_endpoint(const NetAddress& a) {
  tcp::endpoint ep;
  std::memcpy(ep.data(), a.sockaddr_ptr(), a.sockaddr_len());
  ep.resize(a.sockaddr_len());
  return ep;
}

}  // namespace

// ---------------------------------------------------------------------------
// TcpWorker

TcpWorker::TcpWorker(std::size_t index, std::chrono::microseconds busy_poll)
    : guard_(boost::asio::make_work_guard(io_)), index_(index), busy_poll_(busy_poll) {}

TcpWorker::~TcpWorker() {
  if (!thread_.joinable()) return;
  guard_.reset();
  io_.stop();
  if (thread_.get_id() == std::this_thread::get_id())
    thread_.detach();  // cannot join ourselves; run() returns right after
  else
    thread_.join();
}

void TcpWorker::post(std::function<void()> fn) { boost::asio::post(io_, std::move(fn)); }

void TcpWorker::start_thread() {
  thread_ = std::thread([this] {
    const std::string name = fmt::format("siphon-tcp-{}", index_);
    ::pthread_setname_np(::pthread_self(), name.c_str());
    for (;;) {
      try {
        run_loop();
        return;
      } catch (const std::exception& e) {
        // A callback threw. The worker keeps serving its other connections.
        SIPHON_LOG(transport, 0, "worker {}: a handler threw: {}", index_, e.what());
      } catch (...) {
        SIPHON_LOG(transport, 0, "worker {}: a handler threw a non-exception", index_);
      }
    }
  });
}

// ms_tcp_busy_poll_us: after each handler, keep polling (epoll_wait with a
// zero timeout, then whatever became ready) until busy_poll_ passes with
// nothing to do, then sleep in run_one() as io_.run() would. Ends as run()
// does: when the io_context is stopped or runs out of work.
void TcpWorker::run_loop() {
  if (busy_poll_.count() <= 0) {
    io_.run();
    return;
  }
  using Clock = std::chrono::steady_clock;
  while (io_.run_one() > 0) {
    auto until = Clock::now() + busy_poll_;
    while (!io_.stopped()) {
      const auto now = Clock::now();
      if (io_.poll() > 0) {
        until = Clock::now() + busy_poll_;
      } else if (now >= until) {
        break;
      }
    }
    if (io_.stopped()) return;
  }
}

void TcpWorker::release_and_join() {
  guard_.reset();
  if (thread_.joinable()) thread_.join();
}

void TcpWorker::add(std::shared_ptr<TcpConnection> conn) {
  assert(in_worker_thread());
  TcpConnection* key = conn.get();
  conns_.emplace(key, std::move(conn));
  perf().inc(l_msgr_created_connections);
  perf().set(l_msgr_active_connections, conns_.size());
}

void TcpWorker::remove(TcpConnection* conn) noexcept {
  const auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  // The caller holds its own reference: the connection outlives this call.
  conns_.erase(it);
  perf().set(l_msgr_active_connections, conns_.size());
}

void TcpWorker::close_all() {
  assert(in_worker_thread());
  auto conns = std::move(conns_);
  conns_.clear();
  perf().set(l_msgr_active_connections, 0);
  for (auto& entry : conns) entry.second->close();
}

// ---------------------------------------------------------------------------
// TcpListener

class TcpListener : public std::enable_shared_from_this<TcpListener> {
 public:
  TcpListener(std::shared_ptr<TcpWorker> home, std::vector<std::shared_ptr<TcpWorker>> workers,
              std::shared_ptr<TcpShared> shared, tcp::acceptor acceptor, NetAddress bound,
              AcceptHandler on_accept)
      : home_(std::move(home)),
        workers_(std::move(workers)),
        shared_(std::move(shared)),
        acceptor_(std::move(acceptor)),
        bound_(std::move(bound)),
        retry_(home_->io()),
        on_accept_(std::make_shared<const AcceptHandler>(std::move(on_accept))) {}

  TcpWorker& home() noexcept { return *home_; }

  // Arms the next accept, onto the worker that is least loaded now.
  void accept_next() {
    if (closed_) return;
    pending_worker_ = pick_least_loaded(workers_, shared_->round_robin);
    pending_.emplace(pending_worker_->io());
    acceptor_.async_accept(*pending_, [self = shared_from_this()](const boost::system::error_code& ec) {
      self->on_accepted(ec);
    });
  }

  // On the home worker.
  void close() {
    closed_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    try {
      retry_.cancel();
    } catch (...) {
    }
  }

 private:
  void on_accepted(const boost::system::error_code& ec) {
    if (closed_ || ec == boost::asio::error::operation_aborted) return;
    if (ec) {
      pending_.reset();
      if (ec == boost::asio::error::connection_aborted) {  // the peer gave up: not a failure (as in Ceph)
        accept_next();
        return;
      }
      // Typically out of descriptors or memory. Ceph aborts the daemon after
      // ms_max_accept_failures in a row; Siphon closes only this listener.
      const int max = shared_->opts.max_accept_failures;
      if (++failures_ > max) {
        SIPHON_LOG(transport, 0,
                   "listener on {}: accept failed {} times in a row (ms_max_accept_failures = {}), the last "
                   "with: {}; closing this listener (connections already accepted go on){}",
                   bound_.to_string(), failures_, max, ec.message(),
                   ec == boost::asio::error::no_descriptors || ec.value() == ENFILE
                       ? ". Raise the open-file limit (ulimit -n, LimitNOFILE) or lower ms_max_connections"
                       : "");
        close();
        return;
      }
      // Back off instead of spinning.
      SIPHON_LOG(transport, 1, "listener on {}: accept failed ({} of {} tolerated): {}; retrying in 100 ms",
                 bound_.to_string(), failures_, max, ec.message());
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([self = shared_from_this()](const boost::system::error_code& rec) {
        if (!rec) self->accept_next();
      });
      return;
    }
    failures_ = 0;
    std::shared_ptr<TcpWorker> target = std::move(pending_worker_);
    auto conn = std::make_shared<TcpConnection>(target, shared_, std::move(*pending_),
                                                /*client=*/false);
    pending_.reset();
    conn->accepted();  // the socket is not in use on its worker yet
    target->post([conn, target, on_accept = on_accept_, shared = shared_] {
      if (shared->stopping.load()) {
        conn->close();
        return;
      }
      target->add(conn);
      (*on_accept)(conn);
    });
    accept_next();
  }

  std::shared_ptr<TcpWorker> home_;  // first: its io_context outlives the acceptor
  std::vector<std::shared_ptr<TcpWorker>> workers_;
  std::shared_ptr<TcpShared> shared_;
  tcp::acceptor acceptor_;
  const NetAddress bound_;
  boost::asio::steady_timer retry_;
  std::shared_ptr<const AcceptHandler> on_accept_;
  std::optional<tcp::socket> pending_;
  std::shared_ptr<TcpWorker> pending_worker_;
  int failures_ = 0;  // consecutive accept failures
  bool closed_ = false;
};

// ---------------------------------------------------------------------------
// TcpStack

TcpStack::TcpStack(TcpOptions opts) {
  if (opts.common.async_op_threads == 0)
    throw SetupError(errc::config_error, "ms_async_op_threads is 0",
                     "set ms_async_op_threads to 1 or more");
  if (opts.bind_port_min > opts.bind_port_max)
    throw SetupError(errc::config_error,
                     fmt::format("ms_bind_port_min {} is above ms_bind_port_max {}",
                                 opts.bind_port_min, opts.bind_port_max),
                     "make ms_bind_port_min <= ms_bind_port_max");
  if (opts.common.send_queue_low_water > opts.common.send_queue_high_water)
    throw SetupError(errc::config_error, "send-queue low water mark above the high water mark",
                     "make ms_send_queue_low_water <= ms_send_queue_high_water");
  if (opts.tcp_read_chunk == 0)
    throw SetupError(errc::config_error, "ms_tcp_read_chunk is 0", "set it to 4096 or more");
  if (opts.busy_poll.count() < 0)
    throw SetupError(errc::config_error, "ms_tcp_busy_poll_us is negative", "set it to 0 (off) or more");
  std::uint64_t seed = opts.common.inject.seed;
  if (seed == 0) seed = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  const std::size_t n = opts.common.async_op_threads;
  shared_ = std::make_shared<TcpShared>(std::move(opts), seed);
  workers_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) workers_.push_back(std::make_shared<TcpWorker>(i, shared_->opts.busy_poll));
}

TcpStack::~TcpStack() {
  stop();
  unregister_live_injection(shared_->live_injection.get());  // `config set` no longer reaches it
}

Worker& TcpStack::worker(std::size_t i) noexcept { return *workers_[i]; }

Worker& TcpStack::pick_worker() noexcept { return *pick_least_loaded(workers_, shared_->round_robin); }

const TcpOptions& TcpStack::options() const noexcept { return shared_->opts; }

SendQueueMarks TcpStack::send_queue_marks() const noexcept {
  return {shared_->opts.common.send_queue_high_water, shared_->opts.common.send_queue_low_water};
}

std::shared_ptr<Stack> make_tcp_stack(TcpOptions options) { return std::make_shared<TcpStack>(std::move(options)); }

const InjectionCounters& TcpStack::injection_counters() const noexcept { return shared_->counters; }

void TcpStack::start() {
  std::lock_guard lock(mu_);
  if (state_ != State::created) return;
  for (auto& w : workers_) w->start_thread();
  state_ = State::running;
}

void TcpStack::stop() {
  std::unique_lock lock(mu_);
  if (state_ == State::stopped) return;
  for (auto& w : workers_) {
    assert(!w->in_worker_thread() && "TcpStack::stop() called from a worker thread");
    (void)w;
  }
  // Work queued before start() (listens, connects) still has to drain.
  if (state_ == State::created)
    for (auto& w : workers_) w->start_thread();
  state_ = State::stopped;
  shared_->stopping.store(true);
  auto listeners = std::move(listeners_);
  listeners_.clear();
  lock.unlock();

  for (auto& l : listeners) l->home().post([l] { l->close(); });
  for (auto& w : workers_) w->post([w = w.get()] { w->close_all(); });
  // With the work guards gone, run() returns once the cancelled operations
  // have completed: no handler is left holding a connection.
  for (auto& w : workers_) w->release_and_join();
  SIPHON_LOG(transport, 5, "tcp stack stopped");
}

std::error_code TcpStack::listen(const NetAddress& addr_in, AcceptHandler on_accept,
                                 NetAddress& bound) {
  if (shared_->stopping.load()) return errc::shutting_down;
  const TcpOptions& o = shared_->opts;
  NetAddress addr = addr_in;
  if (addr.is_unspecified()) {
    if (!o.bind_ipv4 && !o.bind_ipv6) {
      SIPHON_LOG(transport, 1, "listen: ms_bind_ipv4 and ms_bind_ipv6 are both false");
      return errc::invalid_argument;
    }
    // Both families allowed: ms_bind_prefer_ipv4 chooses (Ceph prefers IPv6).
    const bool v6 = o.bind_ipv6 && (!o.bind_ipv4 || !o.bind_prefer_ipv4);
    addr = *NetAddress::parse(v6 ? "::" : "0.0.0.0");
  }
  if (!addr.is_ipv4() && !addr.is_ipv6()) return errc::address_invalid;

  std::shared_ptr<TcpWorker> home = pick_least_loaded(workers_, shared_->round_robin);
  tcp::acceptor acceptor(home->io());
  tcp::endpoint ep = to_endpoint(addr);
  boost::system::error_code ec;
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && addr.is_ipv6()) acceptor.set_option(boost::asio::ip::v6_only(true), ec);
  if (!ec && o.tcp_rcvbuf > 0)  // inherited by accepted sockets
    acceptor.set_option(
        boost::asio::socket_base::receive_buffer_size(static_cast<int>(o.tcp_rcvbuf)), ec);
  if (ec) {
    SIPHON_LOG(transport, 1, "listen on {}: cannot create the socket: {}", addr.to_string(),
               ec.message());
    return map_asio_error(ec);
  }

  const std::uint16_t first = addr.port() != 0 ? addr.port() : o.bind_port_min;
  const std::uint16_t last = addr.port() != 0 ? addr.port() : o.bind_port_max;
  bool done = false;
  for (int attempt = 0; !done; ++attempt) {
    for (std::uint32_t port = first; port <= last; ++port) {
      ep.port(static_cast<std::uint16_t>(port));
      acceptor.bind(ep, ec);
      if (!ec) {
        done = true;
        break;
      }
      if (ec != boost::asio::error::address_in_use) {
        SIPHON_LOG(transport, 1, "listen: cannot bind to {}: {}", addr.to_string(), ec.message());
        return map_asio_error(ec);
      }
    }
    if (done) break;
    if (attempt >= o.bind_retry_count || shared_->stopping.load()) {
      SIPHON_LOG(transport, 1, "listen: cannot bind to {} on any port in [{}, {}]: {}",
                 addr.to_string(), first, last, ec.message());
      return errc::address_in_use;
    }
    SIPHON_LOG(transport, 1, "listen: no free port for {} in [{}, {}], retrying in {} ms",
               addr.to_string(), first, last, o.bind_retry_delay.count());
    std::this_thread::sleep_for(o.bind_retry_delay);
  }
  acceptor.listen(o.tcp_listen_backlog, ec);
  if (ec) {
    SIPHON_LOG(transport, 1, "listen on {}: {}", addr.to_string(), ec.message());
    return map_asio_error(ec);
  }
  const tcp::endpoint local = acceptor.local_endpoint(ec);
  if (ec) return map_asio_error(ec);
  bound = NetAddress::from_sockaddr(local.data(), static_cast<socklen_t>(local.size()));

  auto listener = std::make_shared<TcpListener>(home, workers_, shared_, std::move(acceptor), bound,
                                                std::move(on_accept));
  shared_->note_listener(bound);
  {
    std::lock_guard lock(mu_);
    if (state_ == State::stopped) return errc::shutting_down;  // the acceptor closes with it
    listeners_.push_back(listener);
    listener->accept_next();
  }
  SIPHON_LOG(transport, 5, "listening on {}", bound.to_string());
  return {};
}

void TcpStack::connect(const NetAddress& peer, Worker& worker, ConnectHandler done) {
  std::shared_ptr<TcpWorker> w;
  for (auto& candidate : workers_)
    if (candidate.get() == &worker) w = candidate;
  if (!w) {
    worker.post([done = std::move(done)] { done(errc::invalid_argument, nullptr); });
    return;
  }
  if (shared_->stopping.load()) {
    done(errc::shutting_down, nullptr);  // the workers are gone: answer right here
    return;
  }
  w->post([w, shared = shared_, peer, done = std::move(done)]() mutable {
    if (shared->stopping.load()) return done(errc::shutting_down, nullptr);
    if ((!peer.is_ipv4() && !peer.is_ipv6()) || peer.port() == 0)
      return done(errc::address_invalid, nullptr);
    auto conn = std::make_shared<TcpConnection>(w, shared, tcp::socket(w->io()), /*client=*/true);
    w->add(conn);
    conn->connect_to(peer, std::move(done));
  });
}

}  // namespace siphon::transport
