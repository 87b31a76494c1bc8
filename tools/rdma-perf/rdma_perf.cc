// siphon-rdma-perf: perftest-style latency and bandwidth over rdma/provider.h
// (soft or verbs). Connections are made with the provider's CM; the client
// sends the test parameters in the REQ private data and the server answers
// with its buffer (address, rkey) in the REP.
//
//   siphon-rdma-perf TEST [--provider soft|verbs] [--device NAME] [--size N]
//                    [--iters N] [--depth N] [--spin-us N]
//                    (--loopback | --server [--bind IP] [--port P] | --client IP [--port P])
//   TEST: send_lat | send_bw | write_bw | read_bw | all
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rdma/provider.h"
#include "rdma/soft/soft_provider.h"
#ifdef SIPHON_HAVE_VERBS
#include "rdma/verbs/verbs_provider.h"
#endif

namespace siphon::rdma::perf {
namespace {

using Clock = std::chrono::steady_clock;

enum class Test : std::uint8_t { send_lat, send_bw, write_bw, read_bw };
const char* name(Test t) {
  switch (t) {
    case Test::send_lat: return "send_lat";
    case Test::send_bw: return "send_bw";
    case Test::write_bw: return "write_bw";
    case Test::read_bw: return "read_bw";
  }
  return "?";
}

struct Options {
  std::vector<Test> tests;
  std::string provider = "soft";
  std::string device;
  std::uint32_t size = 64;
  std::uint32_t iters = 10000;
  std::uint32_t depth = 64;
  std::uint32_t spin_us = 0;
  bool loopback = false, server = false;
  std::string peer, bind = "0.0.0.0";
  std::uint16_t port = 18515;
};

struct Params {  // REQ private data
  std::uint8_t test;
  std::uint8_t pad[3];
  std::uint32_t size, iters, depth;
};
struct Region {  // REP private data
  std::uint64_t addr;
  std::uint32_t rkey, len;
};

// Every failure (a bad argument, a missing device, a peer that misbehaves,
// a completion error) is thrown as this and reported by main with exit 1;
// nothing here aborts or exits from inside a thread.
struct PerfError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void die(const std::string& what) { throw PerfError(what); }

// What a server accepts from a client's REQ: bounds that keep a hostile or
// confused client from making it allocate without limit.
constexpr std::uint32_t kMaxSize = 64u << 20;
constexpr std::uint32_t kMaxDepth = 4096;
constexpr std::uint64_t kMaxBuffer = 256ull << 20;  // size * depth * 2
constexpr auto kTimeout = std::chrono::seconds(20);

std::unique_ptr<Provider> open_provider(const Options& o) {
  if (o.provider == "soft") {
    soft::SoftOptions so;
    so.engine_spin_us = o.spin_us;
    return soft::make_provider(so);
  }
#ifdef SIPHON_HAVE_VERBS
  if (o.provider == "verbs") return verbs::make_provider();
#endif
  die("unknown or unavailable provider '" + o.provider + "'");
}

bool next_event(EventChannel& ch, CmEvent& ev, CmEventType want) {
  const auto end = Clock::now() + kTimeout;
  while (Clock::now() < end) {
    if (ch.get_event(ev)) {
      if (ev.type != want) {
        std::fprintf(stderr, "siphon-rdma-perf: expected %s, got %s (%s)\n",
                     std::string(to_string(want)).c_str(), std::string(to_string(ev.type)).c_str(),
                     ev.status.message().c_str());
        return false;
      }
      return true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::fprintf(stderr, "siphon-rdma-perf: timed out waiting for %s\n",
               std::string(to_string(want)).c_str());
  return false;
}

// One side of one connection: its CM id, PD, CQ, QP and buffer.
struct Conn {
  std::unique_ptr<CmId> id;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<std::uint8_t> buf;
  std::unique_ptr<MemoryRegion> mr;

  void setup(std::uint32_t depth, std::size_t bytes) {
    std::error_code ec;
    Device* dev = id->device();
    if (dev == nullptr) die("CM id has no device");
    pd = dev->alloc_pd(ec);
    cq = dev->create_cq(4 * depth + 64, ec);
    if (!pd || !cq) die("alloc_pd/create_cq: " + ec.message());
    QpInit init;
    init.send_cq = init.recv_cq = cq.get();
    init.caps.max_send_wr = depth + 8;
    init.caps.max_recv_wr = 2 * depth + 8;
    init.caps.max_send_sge = init.caps.max_recv_sge = 1;
    qp = id->create_qp(*pd, init, ec);
    if (!qp) die("create_qp: " + ec.message());
    buf.assign(std::max<std::size_t>(bytes, 64), 0x5a);
    mr = pd->reg_mr(buf.data(), buf.size(), kLocalWrite | kRemoteWrite | kRemoteRead, ec);
    if (!mr) die("reg_mr: " + ec.message());
  }
  Sge sge(std::size_t off, std::uint32_t len) const {
    return {reinterpret_cast<std::uint64_t>(buf.data()) + off, len, mr->lkey()};
  }
  void post_recv(std::uint64_t id_, std::size_t off, std::uint32_t len) {
    Sge s = sge(off, len);
    RecvWr r{id_, &s, 1};
    if (qp->post_recv({&r, 1}, nullptr)) die("post_recv failed");
  }
  // Polls until one completion arrives (or kTimeout passes: a peer that
  // went away). An empty poll yields the CPU: on a host with few cores the
  // fabric's engine threads need it.
  Wc wait() {
    Wc wc;
    const auto end = Clock::now() + kTimeout;
    for (std::uint32_t spins = 0;; ++spins) {
      if (cq->poll({&wc, 1}) == 1) {
        if (wc.status != WcStatus::success)
          die("completion error: " + std::string(to_string(wc.status)));
        return wc;
      }
      if ((spins & 1023) == 0 && Clock::now() > end) die("no completion within 20 s: the peer went away");
      std::this_thread::yield();
    }
  }
};

ConnParam conn_param(const void* pd, std::size_t len) {
  ConnParam cp;
  const auto* p = static_cast<const std::uint8_t*>(pd);
  cp.private_data.assign(p, p + len);
  cp.initiator_depth = cp.responder_resources = 16;
  cp.rnr_retry_count = 7;
  return cp;
}

// ---------------------------------------------------------------- server

// The reason a client's parameters are refused, or empty.
std::string check_params(const Params& p, std::size_t got) {
  if (got < sizeof p) return "short REQ private data";
  if (p.test > static_cast<std::uint8_t>(Test::read_bw)) return "unknown test";
  if (p.size == 0 || p.size > kMaxSize) return "size out of range";
  if (p.depth == 0 || p.depth > kMaxDepth) return "depth out of range";
  if (p.iters == 0) return "no iterations";
  if (static_cast<std::uint64_t>(p.size) * p.depth * 2 > kMaxBuffer) return "size x depth too large";
  return {};
}

// Serves one client's test. Returns when that client is done, or when
// `stop` is set while waiting for one.
void serve_one(EventChannel& ch, const std::atomic<bool>& stop) {
  CmEvent ev;
  while (!stop.load()) {
    if (!ch.get_event(ev)) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    if (ev.type != CmEventType::connect_request || !ev.new_id) continue;
    Params p{};
    std::memcpy(&p, ev.private_data.data(), std::min(sizeof p, ev.private_data.size()));
    if (const std::string why = check_params(p, ev.private_data.size()); !why.empty()) {
      std::fprintf(stderr, "siphon-rdma-perf: refusing a client: %s\n", why.c_str());
      ev.new_id->reject({});
      continue;
    }
    Conn c;
    c.id = std::move(ev.new_id);
    const std::size_t bytes = static_cast<std::size_t>(p.size) * std::max(p.depth, 1u) * 2;
    c.setup(p.depth, bytes);
    const auto t = static_cast<Test>(p.test);
    if (t == Test::send_lat) c.post_recv(0, 0, p.size);
    if (t == Test::send_bw)
      for (std::uint32_t i = 0; i < 2 * p.depth; ++i) c.post_recv(i, (i % p.depth) * p.size, p.size);
    if (t == Test::write_bw || t == Test::read_bw) c.post_recv(0, 0, 64);  // the "done" message
    const Region r{reinterpret_cast<std::uint64_t>(c.buf.data()), c.mr->rkey(),
                   static_cast<std::uint32_t>(c.buf.size())};
    if (c.id->accept(conn_param(&r, sizeof r))) die("accept failed");
    if (!next_event(ch, ev, CmEventType::established)) continue;
    Sge s = c.sge(p.depth * p.size, p.size);
    SendWr w;
    w.flags = kSignaled;
    w.sg_list = &s;
    w.num_sge = 1;
    switch (t) {
      case Test::send_lat:
        for (std::uint32_t i = 0; i < p.iters; ++i) {
          Wc wc = c.wait();
          while (wc.opcode != WcOpcode::recv) wc = c.wait();
          c.post_recv(0, 0, p.size);
          w.wr_id = i;
          if (c.qp->post_send({&w, 1}, nullptr)) die("post_send failed");
        }
        break;
      case Test::send_bw:
        for (std::uint32_t got = 0; got < p.iters;) {
          const Wc wc = c.wait();
          if (wc.opcode != WcOpcode::recv) continue;
          ++got;
          c.post_recv(wc.wr_id, (wc.wr_id % p.depth) * p.size, p.size);
        }
        break;
      case Test::write_bw:
      case Test::read_bw:
        c.wait();
        break;
    }
    // Let the client see its last completions, then wait for its disconnect.
    next_event(ch, ev, CmEventType::disconnected);
    return;
  }
}

// ---------------------------------------------------------------- client

struct Result {
  double avg_us = 0, p50_us = 0, p99_us = 0, mbps = 0, mmsgs = 0;
};

Result run_client(Provider& prov, const Options& o, Test t, const NetAddress& dst) {
  std::error_code ec;
  auto ch = prov.create_event_channel(ec);
  if (!ch) die("create_event_channel: " + ec.message());
  Conn c;
  c.id = ch->create_id(ec);
  if (!c.id) die("create_id: " + ec.message());
  CmEvent ev;
  if (c.id->resolve_addr(nullptr, dst, 2000) || !next_event(*ch, ev, CmEventType::addr_resolved))
    die("resolve_addr " + dst.to_string());
  if (c.id->resolve_route(2000) || !next_event(*ch, ev, CmEventType::route_resolved))
    die("resolve_route");
  c.setup(o.depth, static_cast<std::size_t>(o.size) * o.depth * 2);
  const Params p{static_cast<std::uint8_t>(t), {}, o.size, o.iters, o.depth};
  if (t == Test::send_lat) c.post_recv(0, 0, o.size);
  if (c.id->connect(conn_param(&p, sizeof p))) die("connect failed");
  if (!next_event(*ch, ev, CmEventType::established)) die("not established");
  Region r{};
  if (ev.private_data.size() < sizeof r) die("the server's REP carries no buffer description");
  std::memcpy(&r, ev.private_data.data(), sizeof r);
  if ((t == Test::write_bw || t == Test::read_bw) &&
      r.len < static_cast<std::uint64_t>(o.size) * o.depth)
    die("the server's buffer is smaller than size x depth");

  Result res;
  Sge s = c.sge(0, o.size);
  SendWr w;
  w.flags = kSignaled;
  w.sg_list = &s;
  w.num_sge = 1;
  if (t == Test::send_lat) {
    std::vector<double> rtt(o.iters);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // server's RTU handling
    for (std::uint32_t i = 0; i < o.iters; ++i) {
      const auto t0 = Clock::now();
      w.wr_id = i;
      if (c.qp->post_send({&w, 1}, nullptr)) die("post_send failed");
      for (int got = 0; got < 2;) {
        const Wc wc = c.wait();
        ++got;
        if (wc.opcode == WcOpcode::recv) c.post_recv(0, 0, o.size);
      }
      rtt[i] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2;
    }
    std::sort(rtt.begin(), rtt.end());
    double sum = 0;
    for (double v : rtt) sum += v;
    res.avg_us = sum / o.iters;
    res.p50_us = rtt[o.iters / 2];
    res.p99_us = rtt[std::min<std::size_t>(o.iters - 1, o.iters * 99 / 100)];
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (t == Test::write_bw) w.opcode = Opcode::rdma_write;
    if (t == Test::read_bw) w.opcode = Opcode::rdma_read;
    std::uint32_t posted = 0, done = 0;
    // The window is refilled with one post of many WRs (the seam's batch).
    std::vector<SendWr> batch(o.depth, w);
    std::vector<Sge> sges(o.depth);
    const auto t0 = Clock::now();
    while (done < o.iters) {
      std::uint32_t n = 0;
      while (posted + n < o.iters && posted + n - done < o.depth) {
        const std::uint32_t k = posted + n;
        sges[n] = c.sge((k % o.depth) * o.size, o.size);
        batch[n].sg_list = &sges[n];
        batch[n].wr_id = k;
        batch[n].remote_addr = r.addr + (k % o.depth) * static_cast<std::uint64_t>(o.size);
        batch[n].rkey = r.rkey;
        ++n;
      }
      if (n != 0 && c.qp->post_send({batch.data(), n}, nullptr)) die("post_send failed");
      posted += n;
      Wc wc[64];
      const std::size_t got = c.cq->poll(wc);
      for (std::size_t i = 0; i < got; ++i)
        if (wc[i].status != WcStatus::success)
          die("completion error: " + std::string(to_string(wc[i].status)));
      done += static_cast<std::uint32_t>(got);
      if (got == 0) std::this_thread::yield();
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    res.mbps = static_cast<double>(o.size) * o.iters / secs / 1e6;
    res.mmsgs = o.iters / secs / 1e6;
    if (t != Test::send_bw) {  // tell the server we are done
      SendWr fin;
      Sge fs = c.sge(0, 1);
      fin.flags = kSignaled;
      fin.sg_list = &fs;
      fin.num_sge = 1;
      if (c.qp->post_send({&fin, 1}, nullptr)) die("post_send failed");
      c.wait();
    }
  }
  c.id->disconnect();
  next_event(*ch, ev, CmEventType::disconnected);
  return res;
}

void print(const Options& o, Test t, const Result& r) {
  if (t == Test::send_lat)
    std::printf("%-9s %8u %8u %9.2f %9.2f %9.2f %10s %9s\n", name(t), o.size, o.iters, r.avg_us,
                r.p50_us, r.p99_us, "-", "-");
  else
    std::printf("%-9s %8u %8u %9s %9s %9s %10.1f %9.3f\n", name(t), o.size, o.iters, "-", "-", "-",
                r.mbps, r.mmsgs);
  std::fflush(stdout);
}

NetAddress local_ipv4(Provider& prov, const Options& o) {
  // The loopback address when the device has it (soft), else its first IPv4 GID.
  std::error_code ec;
  const auto names = prov.list_devices();
  if (names.empty())
    die("the " + o.provider + " provider finds no RDMA device; use --provider soft (the software fabric), "
        "or load a driver (e.g. modprobe rdma_rxe and rdma link add)");
  auto dev = prov.open_device(o.device.empty() ? names.front() : o.device, ec);
  if (!dev) die("open_device: " + ec.message());
  std::vector<GidEntry> gids;
  dev->query_gids(1, gids);
  // IPv4-mapped (::ffff:a.b.c.d): ten zero bytes first. Testing only bytes
  // 10 and 11 also took an EUI-64 link-local GID whose MAC had 0xff as its
  // third byte (fe80::xxxx:xxff:fexx:xxxx), 1 guest in 256 with a random MAC.
  auto v4 = [](const GidEntry& g) {
    for (int i = 0; i < 10; ++i)
      if (g.gid[i] != 0) return false;
    return g.gid[10] == 0xff && g.gid[11] == 0xff;
  };
  const GidEntry* pick = nullptr;
  for (const auto& g : gids)
    if (v4(g) && g.gid[12] == 127) pick = &g;
  for (const auto& g : gids)
    if (pick == nullptr && v4(g)) pick = &g;
  if (pick == nullptr) die("device has no IPv4 GID");
  return NetAddress::ipv4(static_cast<std::uint32_t>(pick->gid[12]) << 24 | pick->gid[13] << 16 |
                              pick->gid[14] << 8 | pick->gid[15],
                          0);
}

int run(const Options& o) {
  if (!o.loopback && !o.server && o.peer.empty()) die("give --loopback, --server or --client IP");
  if (o.server) {
    auto prov = open_provider(o);
    std::error_code ec;
    auto ch = prov->create_event_channel(ec);
    if (!ch) die("create_event_channel: " + ec.message());
    auto lid = ch->create_id(ec);
    if (!lid) die("create_id: " + ec.message());
    auto at = NetAddress::parse(o.bind);
    if (!at) die("bad --bind '" + o.bind + "' (an IPv4 or IPv6 address)");
    at->set_port(o.port);
    if (lid->bind(*at) || lid->listen(16)) die("cannot listen on " + at->to_string());
    std::printf("listening on %s\n", lid->local_address().to_string().c_str());
    std::fflush(stdout);
    const std::atomic<bool> stop{false};
    for (;;) {
      // One client's failure is reported and the server goes on serving.
      try {
        serve_one(*ch, stop);
      } catch (const PerfError& e) {
        std::fprintf(stderr, "siphon-rdma-perf: client failed: %s\n", e.what());
      }
    }
  }
  std::printf("provider %s, depth %u\n%-9s %8s %8s %9s %9s %9s %10s %9s\n", o.provider.c_str(),
              o.depth, "test", "bytes", "iters", "avg_us", "p50_us", "p99_us", "MB/s", "Mmsg/s");
  if (o.loopback) {
    // Two adapters (providers) in one process: server in a thread, client here.
    for (Test t : o.tests) {
      auto sprov = open_provider(o);
      auto cprov = open_provider(o);
      std::error_code ec;
      NetAddress at = local_ipv4(*sprov, o);
      auto ch = sprov->create_event_channel(ec);
      if (!ch) die("create_event_channel: " + ec.message());
      auto lid = ch->create_id(ec);
      if (!lid) die("create_id: " + ec.message());
      if (lid->bind(at) || lid->listen(4)) die("cannot listen on " + at.to_string());
      const NetAddress dst = lid->local_address();
      std::atomic<bool> stop{false};
      std::exception_ptr server_error;
      std::thread srv([&] {
        try {
          serve_one(*ch, stop);
        } catch (...) {
          server_error = std::current_exception();
        }
      });
      Result r;
      try {
        r = run_client(*cprov, o, t, dst);
      } catch (...) {
        stop = true;
        srv.join();
        throw;
      }
      srv.join();
      if (server_error) std::rethrow_exception(server_error);
      print(o, t, r);
    }
    return 0;
  }
  auto prov = open_provider(o);
  auto dst = NetAddress::parse(o.peer);
  if (!dst) die("bad --client address");
  dst->set_port(o.port);
  for (Test t : o.tests) print(o, t, run_client(*prov, o, t, *dst));
  return 0;
}

}  // namespace
}  // namespace siphon::rdma::perf

int main(int argc, char** argv) {
  using namespace siphon::rdma::perf;
  Options o;
  try {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value for " + a);
      return argv[++i];
    };
    // A whole decimal number within [lo, hi], or a usage error naming the flag.
    auto num = [&](std::uint64_t lo, std::uint64_t hi) -> std::uint64_t {
      const std::string v = val();
      std::uint64_t n = 0;
      const auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (err != std::errc() || end != v.data() + v.size() || n < lo || n > hi)
        die(a + " '" + v + "': expected a whole number from " + std::to_string(lo) + " to " +
            std::to_string(hi));
      return n;
    };
    if (a == "send_lat") o.tests.push_back(Test::send_lat);
    else if (a == "send_bw") o.tests.push_back(Test::send_bw);
    else if (a == "write_bw") o.tests.push_back(Test::write_bw);
    else if (a == "read_bw") o.tests.push_back(Test::read_bw);
    else if (a == "all") o.tests = {Test::send_lat, Test::send_bw, Test::write_bw, Test::read_bw};
    else if (a == "--provider") o.provider = val();
    else if (a == "--device") o.device = val();
    else if (a == "--size") o.size = static_cast<std::uint32_t>(num(1, kMaxSize));
    else if (a == "--iters") o.iters = static_cast<std::uint32_t>(num(1, 1'000'000'000));
    else if (a == "--depth") o.depth = static_cast<std::uint32_t>(num(1, kMaxDepth));
    else if (a == "--spin-us") o.spin_us = static_cast<std::uint32_t>(num(0, 1'000'000));
    else if (a == "--port") o.port = static_cast<std::uint16_t>(num(1, 65535));
    else if (a == "--bind") o.bind = val();
    else if (a == "--loopback") o.loopback = true;
    else if (a == "--server") o.server = true;
    else if (a == "--client") o.peer = val();
    else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: siphon-rdma-perf send_lat|send_bw|write_bw|read_bw|all [--provider soft|verbs]\n"
          "       [--device NAME] [--size N] [--iters N] [--depth N] [--spin-us N]\n"
          "       (--loopback | --server [--bind IP] [--port P] | --client IP [--port P])\n");
      return 0;
    } else
      die("unknown argument '" + a + "' (try --help)");
  }
  if (o.tests.empty()) die("name a test: send_lat, send_bw, write_bw, read_bw or all");
  if (static_cast<std::uint64_t>(o.size) * o.depth * 2 > kMaxBuffer)
    die("--size x --depth x 2 must stay within " + std::to_string(kMaxBuffer >> 20) + " MiB");
  return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "siphon-rdma-perf: %s\n", e.what());
    return 1;
  }
}
