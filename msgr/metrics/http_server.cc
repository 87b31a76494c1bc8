// The /metrics server (http_server.h). Everything runs on the server's one
// io_context thread; each connection is a chain of asynchronous reads, one
// asynchronous write and a deadline timer, so no client waits for another.
#include "msgr/metrics/http_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <list>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>

namespace siphon::metrics {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::string Endpoint::to_string() const {
  return ip.find(':') != std::string::npos ? fmt::format("[{}]:{}", ip, port) : fmt::format("{}:{}", ip, port);
}

std::optional<Endpoint> parse_endpoint(std::string_view text, std::string& why) {
  const auto bad = [&](std::string_view what) {
    why = fmt::format("'{}': {}; expected IP:PORT, e.g. 127.0.0.1:9926, 0.0.0.0:9926 or [::1]:9926", text, what);
    return std::nullopt;
  };
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad("an IPv6 address needs the form [ADDRESS]:PORT");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad("an IPv6 address must be in brackets");
  }
  unsigned p = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p > 65535)
    return bad("the port is not a number from 0 to 65535");
  boost::system::error_code aec;
  const auto addr = asio::ip::make_address(std::string(host), aec);
  if (aec) return bad(fmt::format("'{}' is not an IP address (host names are not resolved)", host));
  return Endpoint{addr.to_string(), static_cast<std::uint16_t>(p)};
}

struct MetricsServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  Body body;
  ServerLimits limits;
  std::thread thread;
  std::uint16_t port = 0;
  mutable std::mutex stats_mu;
  ServerStats stats;
  std::size_t open = 0;  // server thread only
  bool stopped = false;  // server thread only
  struct Conn;
  std::list<std::weak_ptr<Conn>> conns;  // server thread only

  void count(std::uint64_t ServerStats::*field) {
    std::lock_guard lk(stats_mu);
    ++(stats.*field);
  }
  void accept();
};

struct MetricsServer::Impl::Conn : std::enable_shared_from_this<Conn> {
  static constexpr std::chrono::milliseconds kLinger{2000};
  // reading: the request head is arriving; writing: the response is being
  // sent (input is read and dropped meanwhile); lingering: our side is shut
  // and input is dropped until the client closes or the time is up.
  enum class Phase { reading, writing, lingering };

  Impl& srv;
  tcp::socket sock;
  asio::steady_timer timer;
  Phase phase = Phase::reading;
  std::string in;
  std::string out;
  std::array<char, 2048> chunk{};
  bool read_pending = false;
  bool input_closed = false;
  bool done = false;
  std::list<std::weak_ptr<Conn>>::iterator self_it;

  Conn(Impl& s, tcp::socket so) : srv(s), sock(std::move(so)), timer(s.io) {}

  void start(bool busy) {
    if (busy) {
      srv.count(&ServerStats::refused_busy);
      reply(503, "Service Unavailable", "too many open connections to the metrics endpoint\n", false);
      return;
    }
    arm(srv.limits.request_timeout);
    read();
  }

  // The deadline of the current phase: a request head not complete in time
  // gets a 408 (or a plain close when nothing arrived); a response not taken
  // in time, or a linger that ran out, is a close.
  void arm(std::chrono::milliseconds d) {
    timer.expires_after(d);
    timer.async_wait([self = shared_from_this(), phase = phase](boost::system::error_code ec) {
      if (ec || self->done || phase != self->phase) return;
      if (phase == Phase::lingering) return self->close();
      self->srv.count(&ServerStats::timed_out);
      if (phase == Phase::reading && !self->in.empty())
        return self->reply(408, "Request Timeout", "the request did not arrive in time\n", false);
      self->close();
    });
  }

  void read() {
    read_pending = true;
    sock.async_read_some(asio::buffer(chunk), [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
      self->read_pending = false;
      if (self->done) return;
      if (ec) {
        self->input_closed = true;
        // While writing, a client that shut its sending side still gets
        // its response; otherwise there is nobody left to answer.
        if (self->phase != Phase::writing) self->close();
        return;
      }
      if (self->phase != Phase::reading) return self->read();  // dropped
      self->in.append(self->chunk.data(), n);
      self->on_input();
    });
  }

  void on_input() {
    const auto crlf = in.find("\r\n\r\n");
    const auto lf = in.find("\n\n");
    const std::size_t head = std::min(crlf, lf);
    const bool complete = head != std::string::npos;
    if ((complete ? head : in.size()) > srv.limits.max_request_bytes) {
      srv.count(&ServerStats::rejected);
      return reply(431, "Request Header Fields Too Large",
                   fmt::format("the request head is over {} bytes\n", srv.limits.max_request_bytes), false);
    }
    if (!complete) return read();
    handle(in.substr(0, head));
  }

  void handle(const std::string& head) {
    const std::string line = head.substr(0, head.find_first_of("\r\n"));
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
    if (sp2 == std::string::npos || line.compare(sp2 + 1, 7, "HTTP/1.") != 0 || line.size() != sp2 + 9) {
      srv.count(&ServerStats::rejected);
      return reply(400, "Bad Request", "malformed request line\n", false);
    }
    const std::string method = line.substr(0, sp1);
    std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    target = target.substr(0, target.find('?'));
    const bool head_only = method == "HEAD";
    if (method != "GET" && !head_only) {
      srv.count(&ServerStats::rejected);
      return reply(405, "Method Not Allowed", "only GET and HEAD\n", false, "Allow: GET, HEAD\r\n");
    }
    if (target != "/metrics") {
      srv.count(&ServerStats::rejected);
      return reply(404, "Not Found", "not found: the metrics are at /metrics\n", head_only);
    }
    std::string text;
    try {
      text = srv.body();
    } catch (const std::exception& e) {
      srv.count(&ServerStats::rejected);
      return reply(500, "Internal Server Error", fmt::format("collecting the metrics failed: {}\n", e.what()),
                   head_only);
    }
    srv.count(&ServerStats::served);
    reply(200, "OK", text, head_only, {}, "text/plain; version=0.0.4; charset=utf-8");
  }

  void reply(int code, std::string_view reason, std::string_view content, bool head_only,
             std::string_view extra = {}, std::string_view type = "text/plain; charset=utf-8") {
    out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
                      code, reason, type, content.size(), extra);
    if (!head_only) out += content;
    phase = Phase::writing;
    arm(srv.limits.response_timeout);
    if (!read_pending && !input_closed) read();  // keep taking (and dropping) input
    asio::async_write(sock, asio::buffer(out), [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
      if (self->done) return;
      if (ec || self->input_closed) return self->close();
      self->linger();
    });
  }

  // A lingering close: closing a socket with unread input makes the kernel
  // send a reset, which can destroy the response before the client has read
  // it (a 431 to a client still sending). So: end our side, then drop input
  // until the client closes or the linger time is up.
  void linger() {
    boost::system::error_code ignored;
    sock.shutdown(tcp::socket::shutdown_send, ignored);
    phase = Phase::lingering;
    arm(kLinger);
    if (!read_pending) read();
  }

  void close() {
    if (done) return;
    done = true;
    timer.cancel();
    boost::system::error_code ignored;
    sock.shutdown(tcp::socket::shutdown_both, ignored);
    sock.close(ignored);
    --srv.open;
    srv.conns.erase(self_it);
  }
};

void MetricsServer::Impl::accept() {
  acceptor.async_accept([this](boost::system::error_code ec, tcp::socket s) {
    if (stopped) return;
    if (!ec) {
      count(&ServerStats::accepted);
      const bool busy = open >= limits.max_connections;
      auto c = std::make_shared<Conn>(*this, std::move(s));
      ++open;
      c->self_it = conns.insert(conns.end(), c);
      c->start(busy);
    }
    // An accept error (EMFILE, a peer resetting before accept) must not end
    // the endpoint: try again.
    accept();
  });
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<MetricsServer> MetricsServer::start(const Endpoint& ep, Body body, const ServerLimits& limits,
                                                    std::string& why) {
  auto impl = std::make_unique<Impl>();
  impl->body = std::move(body);
  impl->limits = limits;
  boost::system::error_code ec;
  const tcp::endpoint at(asio::ip::make_address(ep.ip, ec), ep.port);
  if (!ec) impl->acceptor.open(at.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(at, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    const std::string fix = ec == asio::error::address_in_use
                                ? "another process listens there: choose another port or stop that process"
                            : ec.value() == EADDRNOTAVAIL
                                ? "the address is not on this host: use one of its addresses, or 0.0.0.0"
                            : ec == asio::error::access_denied ? "ports below 1024 need privileges: use a higher port"
                                                               : "check the address";
    why = fmt::format("siphon_metrics_endpoint {}: cannot listen: {} ({})", ep.to_string(), ec.message(), fix);
    return nullptr;
  }
  impl->port = impl->acceptor.local_endpoint().port();
  impl->accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::~MetricsServer() { stop(); }

std::uint16_t MetricsServer::port() const noexcept { return impl_->port; }

ServerStats MetricsServer::stats() const {
  std::lock_guard lk(impl_->stats_mu);
  return impl_->stats;
}

void MetricsServer::stop() {
  if (!impl_->thread.joinable()) return;
  asio::post(impl_->io, [i = impl_.get()] {
    i->stopped = true;
    boost::system::error_code ignored;
    i->acceptor.close(ignored);
    // close() erases from the list: copy first.
    std::vector<std::shared_ptr<Impl::Conn>> live;
    for (auto& w : i->conns)
      if (auto c = w.lock()) live.push_back(std::move(c));
    for (auto& c : live) c->close();
  });
  impl_->thread.join();
}

}  // namespace siphon::metrics
