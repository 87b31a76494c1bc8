// AdminSocket's private state, shared by admin_socket.cc (commands) and
// admin_server.cc (the socket).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "msgr/admin/admin_socket.h"

namespace siphon::admin {

struct Command {
  Signature sig;
  std::string help;
  Handler handler;
};

class Client;

struct AdminSocket::Impl {
  explicit Impl(Options o) : opts(o) {}

  const Options opts;
  std::mutex cmd_mu;
  std::map<std::string, Command, std::less<>> commands;

  // The request path (any thread).
  std::string execute(std::string_view request);
  nlohmann::ordered_json descriptions();
  nlohmann::ordered_json help();
  Reply run_as(const std::string& prefix, const Request& r);

  // The server (admin_server.cc). `io` runs the acceptor and every client on
  // the I/O thread; `cmd_io` runs the commands on the command thread.
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  boost::asio::io_context io, cmd_io;
  std::optional<Guard> io_guard, cmd_guard;
  std::thread io_thread, cmd_thread;
  std::unique_ptr<boost::asio::local::stream_protocol::acceptor> acceptor;
  std::set<std::shared_ptr<Client>> clients;  // I/O thread only
  std::string path;
  std::mutex life_mu;  // start/stop
  bool running = false;

  void accept_next();
  void finished(const std::shared_ptr<Client>& c);

  std::atomic<std::uint64_t> served{0}, dropped_oversize{0}, dropped_timeout{0}, refused_busy{0};
};

}  // namespace siphon::admin
