// The TCP stack (ms_type async+posix) over Boost.Asio.
//
//   TcpStack      owns `ms_async_op_threads` TcpWorkers (one thread and one
//                 io_context each), the listeners, and the connections while
//                 they are open. Setup calls (start, stop, listen, connect)
//                 may come from any thread except a worker's.
//   TcpWorker     a thread running io_context::run(); keeps a registry of its
//                 open connections so stop() can close them.
//   TcpConnection one socket on one worker: banner exchange, then frames
//                 (tcp_connection.h).
//
// Lifetime: connections are shared_ptrs; every pending Asio operation holds
// one, and the worker's registry holds one until close() or a fault. stop()
// closes listeners and connections, lets every cancelled operation finish,
// and joins the threads. A ConnectionRef may outlive the stack (its
// io_context stays alive with it), but no callback runs after stop().
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "msgr/transport/fault_injection.h"
#include "msgr/transport/options.h"
#include "msgr/transport/transport.h"

namespace siphon::transport {

class TcpWorker;
class TcpListener;
struct TcpShared;

class TcpStack final : public Stack {
 public:
  /// Creates the workers (threads start in start()). Throws SetupError when
  /// the options are inconsistent (no threads, port range upside down, low
  /// water above high water).
  explicit TcpStack(TcpOptions opts);
  /// Stops the stack (see stop()).
  ~TcpStack() override;
  TcpStack(const TcpStack&) = delete;
  TcpStack& operator=(const TcpStack&) = delete;

  std::string_view type() const noexcept override { return "async+posix"; }
  std::size_t worker_count() const noexcept override { return workers_.size(); }
  Worker& worker(std::size_t i) noexcept override;
  /// The worker with the fewest open connections (ties: round robin).
  Worker& pick_worker() noexcept override;
  /// options().common's send_queue_high_water / send_queue_low_water.
  SendQueueMarks send_queue_marks() const noexcept override;

  void start() override;
  /// Closes listeners and connections (no callbacks), lets cancelled
  /// operations complete, joins the workers. Idempotent; a stopped stack
  /// cannot be started again. Must not be called from a worker thread.
  void stop() override;

  /// Binds and listens (SO_REUSEADDR; IPV6_V6ONLY for IPv6). Port 0 = the
  /// first free port in [bind_port_min, bind_port_max]; an unspecified
  /// address = the wildcard of the family chosen by bind_ipv4/bind_ipv6.
  /// May block for bind_retry_count x bind_retry_delay when no port is free.
  std::error_code listen(const NetAddress& addr, AcceptHandler on_accept,
                         NetAddress& bound) override;
  /// Non-blocking connect from `worker`; `done` runs there with the
  /// connection, or with an error (errc::connection_refused, timed_out, ...)
  /// and a null connection.
  void connect(const NetAddress& peer, Worker& worker, ConnectHandler done) override;

  const TcpOptions& options() const noexcept;
  const InjectionCounters& injection_counters() const noexcept;

 private:
  enum class State { created, running, stopped };
  std::shared_ptr<TcpShared> shared_;
  std::vector<std::shared_ptr<TcpWorker>> workers_;
  std::atomic<std::size_t> round_robin_{0};
  std::mutex mu_;  // guards state_ and listeners_
  State state_ = State::created;
  std::vector<std::shared_ptr<TcpListener>> listeners_;
};

// A TCP stack (async+posix, not started) with `options`, for code that
// wants TCP by construction: tests and examples. Programs that read a
// configuration get their stacks from compat/ (compat::create_stack), which
// chooses the stack ms_type names and fills its options.
std::shared_ptr<Stack> make_tcp_stack(TcpOptions options = {});

}  // namespace siphon::transport
