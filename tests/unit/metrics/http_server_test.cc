// The /metrics HTTP server (msgr/metrics/http_server.h): the protocol it
// answers, and its bounds against hostile clients -- checked by behaviour
// (a concurrent scrape completes while the hostile client is still
// connected), never by a timing threshold.
#include "msgr/metrics/http_server.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <thread>
#include <vector>

#include "http_client.h"

namespace siphon::metrics {
namespace {

using test::body_of;
using test::connect_to;
using test::read_all;
using test::request;
using test::send_all;

constexpr std::string_view kGet = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

std::unique_ptr<MetricsServer> start(MetricsServer::Body body, ServerLimits limits = {}) {
  std::string why;
  auto s = MetricsServer::start(Endpoint{"127.0.0.1", 0}, std::move(body), limits, why);
  EXPECT_TRUE(s) << why;
  return s;
}

// True while the peer has not closed: nothing to read yet (or data, not EOF).
bool still_open(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) == 0) return true;
  char c;
  return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

TEST(MetricsHttp, GetServesTheBodyInTheTextFormat) {
  auto s = start([] { return std::string("a_metric 1\n"); });
  const std::string r = request(s->port(), kGet);
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Content-Length: 11\r\n"), std::string::npos) << r;
  EXPECT_EQ(body_of(r), "a_metric 1\n");
  // HEAD: the same head, no body. A query string is ignored. HTTP/1.0 works.
  const std::string h = request(s->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(h.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << h;
  EXPECT_NE(h.find("Content-Length: 11\r\n"), std::string::npos);
  EXPECT_EQ(body_of(h), "");
  EXPECT_EQ(body_of(request(s->port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n")), "a_metric 1\n");
  EXPECT_EQ(s->stats().served, 3u);
}

TEST(MetricsHttp, OtherPathsMethodsAndMalformedRequests) {
  auto s = start([] { return std::string("a 1\n"); });
  EXPECT_EQ(request(s->port(), "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_EQ(request(s->port(), "GET /metricsx HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404 ", 0), 0u);
  const std::string post = request(s->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.1 405 ", 0), 0u) << post;
  EXPECT_NE(post.find("Allow: GET, HEAD\r\n"), std::string::npos);
  EXPECT_EQ(request(s->port(), "garbage\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(request(s->port(), "GET /metrics SPDY/3\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(request(s->port(), std::string("GET /metrics HTTP/1.1\0\r\n\r\n", 26)).rfind("HTTP/1.1 400 ", 0), 0u);
  // The body function was never called for any of them.
  EXPECT_EQ(s->stats().served, 0u);
  EXPECT_EQ(s->stats().rejected, 6u);
}

TEST(MetricsHttp, AHeadWithoutEndOverTheLimitIs431AndClosed) {
  ServerLimits l;
  l.max_request_bytes = 4096;
  auto s = start([] { return std::string("a 1\n"); }, l);
  const int fd = connect_to(s->port());
  ASSERT_GE(fd, 0);
  // 1 MiB without a terminator: the server answers and closes long before
  // the end; the send fails once it has closed (which is the point).
  const std::string junk(1 << 20, 'a');
  send_all(fd, "GET /metrics HTTP/1.1\r\nX: ");
  send_all(fd, junk);
  const std::string r = read_all(fd);
  ::close(fd);
  EXPECT_EQ(r.rfind("HTTP/1.1 431 ", 0), 0u) << r.substr(0, 200);
  // The server still serves.
  EXPECT_EQ(body_of(request(s->port(), kGet)), "a 1\n");
}

TEST(MetricsHttp, SilentAndHalfRequestClientsDoNotDelayAScrape) {
  auto s = start([] { return std::string("a 1\n"); });
  const int silent = connect_to(s->port());
  const int half = connect_to(s->port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(half, 0);
  send_all(half, "GET /metr");
  // The scrape completes while both are connected (the default request
  // timeout is 10 s, so neither has been closed yet).
  EXPECT_EQ(body_of(request(s->port(), kGet)), "a 1\n");
  EXPECT_TRUE(still_open(silent));
  EXPECT_TRUE(still_open(half));
  ::close(silent);
  ::close(half);
}

TEST(MetricsHttp, AClientThatNeverReadsItsResponseDoesNotBlockAnother) {
  const std::string big(16 << 20, 'x');  // far more than the socket buffers hold
  auto s = start([&] { return big; });
  const int stuck = connect_to(s->port(), 4096);
  ASSERT_GE(stuck, 0);
  send_all(stuck, kGet);  // and never read
  // Wait until the server has begun answering it (its body was produced).
  for (int i = 0; i < 3000 && s->stats().served == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(s->stats().served, 1u);
  const std::string r = request(s->port(), kGet);
  EXPECT_EQ(body_of(r).size(), big.size());
  EXPECT_TRUE(still_open(stuck));  // still waiting on its response
  ::close(stuck);
}

TEST(MetricsHttp, AnIncompleteRequestIsAnsweredWith408WhenItsTimeIsUp) {
  ServerLimits l;
  l.request_timeout = std::chrono::milliseconds(200);
  auto s = start([] { return std::string("a 1\n"); }, l);
  const int fd = connect_to(s->port());
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /metrics HTTP/1.1\r\n");
  const std::string r = read_all(fd);  // returns when the server gives up on it
  ::close(fd);
  EXPECT_EQ(r.rfind("HTTP/1.1 408 ", 0), 0u) << r;
  // One that sends nothing is simply closed.
  const int silent = connect_to(s->port());
  EXPECT_EQ(read_all(silent), "");
  ::close(silent);
  EXPECT_EQ(s->stats().timed_out, 2u);
}

TEST(MetricsHttp, ManyConcurrentScrapersAllGetTheirAnswer) {
  auto s = start([] { return std::string(100000, 'm') + "\n"; });
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 32; ++i)
    ts.emplace_back([&] {
      if (body_of(request(s->port(), kGet)).size() == 100001) ++ok;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 32);
}

TEST(MetricsHttp, ConnectionsOverTheLimitGet503) {
  ServerLimits l;
  l.max_connections = 2;
  auto s = start([] { return std::string("a 1\n"); }, l);
  const int a = connect_to(s->port());
  const int b = connect_to(s->port());
  // Both idle connections are accepted before the third arrives: wait for it.
  for (int i = 0; i < 3000 && s->stats().accepted < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::string r = request(s->port(), kGet);
  EXPECT_EQ(r.rfind("HTTP/1.1 503 ", 0), 0u) << r;
  ::close(a);
  ::close(b);
  // Once they are gone, scrapes are served again.
  std::string again;
  for (int i = 0; i < 3000; ++i) {
    again = request(s->port(), kGet);
    if (again.rfind("HTTP/1.1 200 ", 0) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(body_of(again), "a 1\n");
}

TEST(MetricsHttp, APortInUseIsAClearErrorAndStopClosesIdleClients) {
  auto s = start([] { return std::string("a 1\n"); });
  std::string why;
  auto second = MetricsServer::start(Endpoint{"127.0.0.1", s->port()}, [] { return std::string(); }, {}, why);
  EXPECT_FALSE(second);
  EXPECT_NE(why.find("127.0.0.1:" + std::to_string(s->port())), std::string::npos) << why;
  EXPECT_NE(why.find("siphon_metrics_endpoint"), std::string::npos) << why;
  EXPECT_NE(why.find("choose another port"), std::string::npos) << why;
  const int idle = connect_to(s->port());
  ASSERT_GE(idle, 0);
  for (int i = 0; i < 3000 && s->stats().accepted < 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s->stop();  // returns although a client is connected, and closes it
  EXPECT_EQ(read_all(idle), "");
  ::close(idle);
  // A bad address is refused with its cause, too.
  EXPECT_FALSE(MetricsServer::start(Endpoint{"192.0.2.1", 0}, [] { return std::string(); }, {}, why));
  EXPECT_NE(why.find("not on this host"), std::string::npos) << why;
}

TEST(MetricsEndpoint, ParsesIpAndPortAndExplainsBadValues) {
  std::string why;
  auto e = parse_endpoint("127.0.0.1:9926", why);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->ip, "127.0.0.1");
  EXPECT_EQ(e->port, 9926);
  e = parse_endpoint("[::1]:9926", why);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->ip, "::1");
  EXPECT_EQ(e->to_string(), "[::1]:9926");
  EXPECT_TRUE(parse_endpoint("0.0.0.0:0", why));
  for (const char* bad : {"localhost:9926", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:-1",
                          "127.0.0.1:80x", "::1:9926", "[::1]9926", "[::1", ":9926", "1.2.3:4"}) {
    why.clear();
    EXPECT_FALSE(parse_endpoint(bad, why)) << bad;
    EXPECT_NE(why.find("expected IP:PORT"), std::string::npos) << bad << ": " << why;
  }
  parse_endpoint("localhost:9926", why);
  EXPECT_NE(why.find("not an IP address"), std::string::npos) << why;
}

}  // namespace
}  // namespace siphon::metrics
