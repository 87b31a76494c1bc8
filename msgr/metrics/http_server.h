// The /metrics HTTP/1.1 server (docs/observability.md, "Prometheus"): one
// Boost.Asio thread of its own, every socket asynchronous, so a client that
// sends nothing, sends too much or never reads its response holds only its
// own connection -- never another scraper's -- and is closed when its time
// is up. One request per connection (`Connection: close`).
//
//   GET|HEAD /metrics  -> 200, text/plain; version=0.0.4; charset=utf-8
//   other paths        -> 404;  other methods -> 405 (Allow: GET, HEAD)
//   malformed request  -> 400;  request head over the limit -> 431
//   no complete request within request_timeout -> 408 (or a plain close when nothing arrived)
//   more than max_connections open -> the new connection gets 503 and is closed
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace siphon::metrics {

// `IP:PORT` (IPv4 "127.0.0.1:9926", IPv6 "[::1]:9926"); port 0 = any free port.
struct Endpoint {
  std::string ip;
  std::uint16_t port = 0;
  std::string to_string() const;
};
// nullopt and `why` (naming the problem and the expected form) on a bad value.
std::optional<Endpoint> parse_endpoint(std::string_view text, std::string& why);

struct ServerLimits {
  std::size_t max_request_bytes = 8192;               // request line and headers
  std::chrono::milliseconds request_timeout{10000};   // to receive the whole request head
  std::chrono::milliseconds response_timeout{30000};  // for the client to take the whole response
  std::size_t max_connections = 64;                   // open at once
};

struct ServerStats {
  std::uint64_t accepted = 0, served = 0, rejected = 0, timed_out = 0, refused_busy = 0;
};

class MetricsServer {
 public:
  using Body = std::function<std::string()>;  // called on the server's thread for each scrape

  // Listens and starts the thread; nullptr and `why` (the endpoint, the
  // cause and the fix) when the address cannot be bound.
  static std::unique_ptr<MetricsServer> start(const Endpoint& ep, Body body, const ServerLimits& limits,
                                              std::string& why);
  ~MetricsServer();  // stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  std::uint16_t port() const noexcept;  // the bound port (useful with port 0)
  ServerStats stats() const;
  void stop();

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace siphon::metrics
