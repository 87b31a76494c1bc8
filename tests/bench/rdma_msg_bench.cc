// Per-message cost of the RDMA stack (issue 14 item 8; numbers in
// docs/performance.md, "Per-message cost of the RDMA stack"): two RdmaStacks
// in one process on the software fabric, one connection, one direction. Each
// iteration queues a batch of msgr2 MESSAGE frames (a 41-byte header and a
// data segment of the given size, below the zero-copy threshold) on the
// client's worker and waits until the server's handler has them all, so the
// figure is the whole path: encode, copy into send buffers, SENDs, the
// fabric, completions, credits, receive re-posts, decoding, delivery.
//
// The soft fabric's engine threads and TCP wire are in the figure too; what
// the benchmark compares is the same path before and after a change, on the
// same machine, in the same run as TransportBaseline (the same workload over
// async+posix's TcpStack).
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>

#include "msgr/base/log.h"
#include "msgr/transport/tcp_stack.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/transport/rdma_stack.h"

namespace {

using namespace siphon;
using namespace std::chrono_literals;

constexpr std::size_t kBatch = 64;

// Counts delivered frames; wakes the benchmark thread when a target is met.
struct Sink : transport::ConnectionHandler {
  std::mutex mu;
  std::condition_variable cv;
  bool established = false;
  bool faulted = false;
  std::uint64_t frames = 0;
  std::uint64_t target = ~std::uint64_t{0};
  void on_established(const proto::Negotiated&) override {
    std::lock_guard lk(mu);
    established = true;
    cv.notify_all();
  }
  void on_frame(proto::Frame&&) override {
    std::lock_guard lk(mu);
    if (++frames >= target) cv.notify_all();
  }
  void on_fault(const transport::Fault&) override {
    std::lock_guard lk(mu);
    faulted = true;
    cv.notify_all();
  }
  // False on a fault or after 30 s without progress (a stuck stack).
  bool wait_for(std::uint64_t n) {
    std::unique_lock lk(mu);
    target = n;
    return cv.wait_for(lk, 30s, [&] { return frames >= n || faulted; }) && !faulted;
  }
  bool wait_established() {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, 20s, [&] { return established || faulted; }) && established;
  }
};

struct Setup {
  std::unique_ptr<rdma::Provider> provider;
  std::unique_ptr<transport::Stack> server, client;
  transport::ConnectionRef sconn, cconn;
  Sink sh, ch;
  std::string error;

  // rdma: two RdmaStacks on one soft provider; else two TcpStacks.
  explicit Setup(bool rdma) {
    // The close at the end of each case is a fault to the peer: not news.
    log::set_level(log::Subsys::transport, 0);
    log::set_level(log::Subsys::rdma, 0);
    if (rdma) {
      provider = rdma::soft::make_provider();
      rdma::RdmaOptions o;
      o.device_name = "soft0";
      o.common.async_op_threads = 1;
      server = std::make_unique<rdma::RdmaStack>(*provider, o);
      client = std::make_unique<rdma::RdmaStack>(*provider, o);
    } else {
      transport::TcpOptions o;
      o.common.async_op_threads = 1;
      server = std::make_unique<transport::TcpStack>(o);
      client = std::make_unique<transport::TcpStack>(o);
    }
    server->start();
    client->start();
    std::promise<transport::ConnectionRef> accepted;
    NetAddress bound;
    if (const auto ec = server->listen(*NetAddress::parse("127.0.0.1:0"),
                                       [&](transport::ConnectionRef c) { accepted.set_value(std::move(c)); }, bound)) {
      error = "listen: " + ec.message();
      return;
    }
    std::promise<transport::ConnectionRef> connected;
    client->connect(bound, client->pick_worker(), [&](std::error_code ec, transport::ConnectionRef c) {
      connected.set_value(ec ? nullptr : std::move(c));
    });
    auto cf = connected.get_future();
    auto af = accepted.get_future();
    if (cf.wait_for(20s) != std::future_status::ready || af.wait_for(20s) != std::future_status::ready) {
      error = "connect timed out";
      return;
    }
    cconn = cf.get();
    sconn = af.get();
    if (!cconn || !sconn) {
      error = "connect failed";
      return;
    }
    sconn->worker().post([this] { sconn->start(sh, proto::Banner{}); });
    cconn->worker().post([this] { cconn->start(ch, proto::Banner{}); });
    if (!ch.wait_established() || !sh.wait_established()) error = "banner exchange failed";
  }
  ~Setup() {
    for (const auto& c : {cconn, sconn}) {
      if (!c) continue;
      std::promise<void> done;
      c->worker().post([&] {
        c->close();
        done.set_value();
      });
      done.get_future().wait();
    }
    cconn.reset();
    sconn.reset();
    client->stop();
    server->stop();
  }
};

void run(benchmark::State& state, bool rdma) {
  const auto size = static_cast<std::size_t>(state.range(0));
  Setup s(rdma);
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
  const BufferList header = BufferList::copy_of(std::string(41, 'h'));
  const BufferList data = BufferList::copy_of(std::string(size, 'd'));
  std::uint64_t sent = 0;
  for (auto _ : state) {
    s.cconn->worker().post([&] {
      for (std::size_t i = 0; i < kBatch; ++i) {
        proto::Frame f;
        f.tag = proto::Tag::message;
        f.segments[0] = header;
        f.segments[3] = data;
        (void)s.cconn->send(std::move(f));
      }
    });
    sent += kBatch;
    if (!s.sh.wait_for(sent)) {
      state.SkipWithError("the server did not receive the batch (fault or stall)");
      return;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(sent));
  state.SetBytesProcessed(static_cast<std::int64_t>(sent * size));
}

void RdmaStackOneWay(benchmark::State& state) { run(state, true); }
void TransportBaseline(benchmark::State& state) { run(state, false); }

// 64 B and 4 KiB of data per message; both below the zero-copy threshold.
BENCHMARK(RdmaStackOneWay)->Arg(64)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(TransportBaseline)->Arg(64)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
