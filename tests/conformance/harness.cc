#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>

#include "rdma/soft/soft_provider.h"
#ifdef SIPHON_HAVE_VERBS
#include "rdma/verbs/verbs_provider.h"
#endif

namespace siphon::rdma::conformance {

Config& config() {
  static Config c;
  return c;
}

bool parse_flags(int& argc, char** argv) {
  Config& c = config();
  auto env = [](const char* n, std::string& out) {
    if (const char* v = std::getenv(n); v != nullptr && *v != '\0') out = v;
  };
  env("SIPHON_PROVIDER", c.provider);
  env("SIPHON_DEVICE", c.device);
  env("SIPHON_LOCAL_ADDR", c.local_addr);
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) c.self_exe.assign(self, static_cast<std::size_t>(n));
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto take = [&](const char* name, std::string& dst) {
      const std::string p = std::string("--") + name + "=";
      if (a.rfind(p, 0) != 0) return false;
      dst = a.substr(p.size());
      return true;
    };
    std::string fd;
    if (take("provider", c.provider) || take("device", c.device) || take("local-addr", c.local_addr) ||
        take("peer", c.peer) || take("peer-addr", c.peer_addr) || take("peer-netns", c.peer_netns) ||
        take("peer-role", c.peer_role))
      continue;
    if (take("oob-fd", fd)) {
      c.oob_fd = std::atoi(fd.c_str());
      continue;
    }
    argv[out++] = argv[i];
  }
  argc = out;
  if (c.peer != "thread" && c.peer != "shared" && c.peer != "process" && c.peer != "netns") {
    std::fprintf(stderr, "--peer must be thread, shared, process or netns\n");
    return false;
  }
  if (c.peer == "netns" && c.peer_netns.empty()) {
    std::fprintf(stderr, "--peer=netns needs --peer-netns=NAME\n");
    return false;
  }
  return true;
}

std::unique_ptr<Provider> make_provider(std::string& why) {
  const Config& c = config();
  if (c.provider == "soft") return soft::make_provider();
  if (c.provider == "verbs") {
#ifdef SIPHON_HAVE_VERBS
    std::unique_ptr<Provider> p;
    try {
      p = verbs::make_provider();
    } catch (const std::exception& e) {
      why = std::string("provider 'verbs' is unavailable: ") + e.what();
      return nullptr;
    }
    if (!p || p->list_devices().empty()) {
      why = "provider 'verbs' has no RDMA device on this host (no NIC, no rxe): run the suite "
            "on a host with one, or use --provider=soft";
      return nullptr;
    }
    return p;
#else
    why = "this build has no verbs provider (CMake target siphon_rdma_verbs absent)";
    return nullptr;
#endif
  }
  why = "unknown provider '" + c.provider + "' (use soft or verbs)";
  return nullptr;
}

Gid gid_of(const NetAddress& a) {
  Gid g{};
  if (a.is_ipv4()) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr());
    g[10] = g[11] = 0xff;
    std::memcpy(&g[12], &in->sin_addr, 4);
  } else if (a.is_ipv6()) {
    std::memcpy(g.data(), &reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr())->sin6_addr, 16);
  }
  return g;
}

bool open_side(Side& s, Provider* shared, const std::string& addr) {
  std::string why;
  if (shared != nullptr) {
    s.prov = shared;
  } else {
    s.provider = make_provider(why);
    if (!s.provider) {
      s.skip_reason = why;
      return false;
    }
    s.prov = s.provider.get();
  }
  const auto names = s.prov->list_devices();
  if (names.empty()) {
    s.skip_reason = "provider '" + std::string(s.prov->name()) + "' lists no device";
    return false;
  }
  const std::string dev = config().device.empty() ? names.front() : config().device;
  std::error_code ec;
  s.device = s.prov->open_device(dev, ec);
  if (!s.device) {
    ADD_FAILURE() << "open_device(" << dev << "): " << ec.message();
    return false;
  }
  s.pd = s.device->alloc_pd(ec);
  if (!s.pd) {
    ADD_FAILURE() << "alloc_pd: " << ec.message();
    return false;
  }
  std::vector<GidEntry> gids;
  if ((ec = s.device->query_gids(1, gids))) {
    ADD_FAILURE() << "query_gids: " << ec.message();
    return false;
  }
  const GidEntry* pick = nullptr;
  if (!addr.empty()) {
    auto a = NetAddress::parse(addr);
    if (!a) {
      ADD_FAILURE() << "bad address " << addr;
      return false;
    }
    s.addr = *a;
    const Gid g = gid_of(*a);
    for (const auto& e : gids)
      if (e.gid == g) pick = &e;
    if (pick == nullptr) {
      ADD_FAILURE() << addr << " is not in the GID table of " << dev;
      return false;
    }
  } else {
    const Gid lo = gid_of(*NetAddress::parse("127.0.0.1"));
    for (const auto& e : gids)
      if (e.gid == lo) pick = &e;
    for (const auto& e : gids)
      if (pick == nullptr && e.type == GidType::roce_v2 && e.gid[10] == 0xff && e.gid[11] == 0xff)
        pick = &e;
    if (pick == nullptr) {
      s.skip_reason = "device " + dev + " has no IPv4 RoCE v2 GID; pass --local-addr";
      return false;
    }
    sockaddr_in in{};
    in.sin_family = AF_INET;
    std::memcpy(&in.sin_addr, &pick->gid[12], 4);
    s.addr = NetAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&in), sizeof in);
  }
  s.gid = pick->gid;
  s.gid_index = static_cast<std::uint8_t>(pick->index);
  return true;
}

// ------------------------------------------------------------- Oob

Oob::~Oob() { close(); }

void Oob::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Oob::send_bytes(const void* p, std::size_t n) {
  if (fd_ < 0) return false;
  const std::uint32_t len = static_cast<std::uint32_t>(n);
  const auto* lp = reinterpret_cast<const std::uint8_t*>(&len);
  std::vector<std::uint8_t> b(lp, lp + sizeof len);
  const auto* pp = static_cast<const std::uint8_t*>(p);
  if (n != 0) b.insert(b.end(), pp, pp + n);
  std::size_t off = 0;
  while (off < b.size()) {
    const ssize_t w = ::send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return false;
    }
    off += static_cast<std::size_t>(w);
  }
  return true;
}

namespace {
bool read_full(int fd, void* p, std::size_t n, std::chrono::steady_clock::time_point deadline) {
  auto* d = static_cast<std::uint8_t*>(p);
  while (n != 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t r = ::recv(fd, d, n, 0);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    d += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}
}  // namespace

bool Oob::recv_bytes(std::vector<std::uint8_t>& out, std::chrono::milliseconds timeout) {
  if (fd_ < 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::uint32_t len = 0;
  if (!read_full(fd_, &len, sizeof len, deadline) || len > (1u << 20)) return false;
  out.resize(len);
  return read_full(fd_, out.data(), len, deadline);
}

bool Oob::sync(std::chrono::milliseconds timeout) {
  const std::uint32_t token = 0x53594e43;
  std::uint32_t got = 0;
  return send(token) && recv(got, timeout) && got == token;
}

// ------------------------------------------------------------- scenarios

namespace {

struct Scenario {
  RoleFn a, b;
};
std::map<std::string, Scenario>& scenarios() {
  static std::map<std::string, Scenario> m;
  return m;
}

class PeerTest : public ::testing::Test {
 public:
  explicit PeerTest(RoleFn b) : b_(b) {}
  void TestBody() override {
    Side s;
    s.is_a = false;
    Oob oob(config().oob_fd);
    s.oob = &oob;
    if (!open_side(s, nullptr, config().local_addr)) {
      if (!s.skip_reason.empty() && std::getenv("SIPHON_RXE_GUEST") != nullptr)
        FAIL() << "in the rxe guest nothing may skip: " << s.skip_reason;
      if (!s.skip_reason.empty()) GTEST_SKIP() << s.skip_reason;
      return;
    }
    b_(s);
  }

 private:
  RoleFn b_;
};

}  // namespace

bool register_scenario(const char* name, RoleFn a, RoleFn b) {
  scenarios()[name] = Scenario{a, b};
  return true;
}

int run_peer_role() {
  const auto it = scenarios().find(config().peer_role);
  if (it == scenarios().end()) {
    std::fprintf(stderr, "provider peer: no scenario '%s'\n", config().peer_role.c_str());
    return 2;
  }
  const RoleFn b = it->second.b;
  ::testing::RegisterTest("PeerRole", config().peer_role.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                          [b]() -> ::testing::Test* { return new PeerTest(b); });
  ::testing::GTEST_FLAG(filter) = "PeerRole.*";
  return RUN_ALL_TESTS();
}

void run_two_sided(const char* name) {
  const Config& cfg = config();
  const Scenario sc = scenarios().at(name);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Side a;
  a.is_a = true;
  Oob oob_a(sv[0]);
  a.oob = &oob_a;
  if (!open_side(a, nullptr, cfg.local_addr)) {
    ::close(sv[1]);
    if (!a.skip_reason.empty() && std::getenv("SIPHON_RXE_GUEST") != nullptr)
      FAIL() << "in the rxe guest nothing may skip: " << a.skip_reason;
    if (!a.skip_reason.empty()) GTEST_SKIP() << a.skip_reason;
    return;
  }
  const std::string peer_addr = cfg.peer_addr.empty() ? cfg.local_addr : cfg.peer_addr;
  if (cfg.peer == "thread" || cfg.peer == "shared") {
    Provider* shared = cfg.peer == "shared" ? a.prov : nullptr;
    std::thread tb([&] {
      Side b;
      b.is_a = false;
      Oob oob_b(sv[1]);
      b.oob = &oob_b;
      if (open_side(b, shared, peer_addr)) sc.b(b);
    });
    sc.a(a);
    oob_a.close();  // a side that returned early must not leave the other waiting
    tb.join();
    return;
  }
  // Another process (optionally in another network namespace).
  std::vector<std::string> args;
  if (cfg.peer == "netns") args = {"ip", "netns", "exec", cfg.peer_netns};
  args.insert(args.end(), {cfg.self_exe, "--peer-role=" + std::string(name),
                           "--oob-fd=" + std::to_string(sv[1]), "--provider=" + cfg.provider,
                           "--gtest_brief=1"});
  if (!cfg.device.empty()) args.push_back("--device=" + cfg.device);
  if (!peer_addr.empty()) args.push_back("--local-addr=" + peer_addr);
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::fcntl(sv[1], F_SETFD, 0);  // the peer inherits its end
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  sc.a(a);
  oob_a.close();
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "peer process for " << name << " timed out";
      return;
    }
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "peer process for " << name << " failed (status " << status << ")";
}

// ------------------------------------------------------------- helpers

Buffer make_buffer(ProtectionDomain& pd, std::size_t len, std::uint32_t access) {
  Buffer b;
  b.bytes.assign(len, 0);
  std::error_code ec;
  b.mr = pd.reg_mr(b.bytes.data(), len, access, ec);
  EXPECT_TRUE(b.mr) << "reg_mr: " << ec.message();
  return b;
}

Rc make_rc(Side& s, const QpCaps& caps, SharedReceiveQueue* srq, std::uint32_t cqe) {
  Rc rc;
  std::error_code ec;
  rc.scq = s.device->create_cq(cqe, ec);
  EXPECT_TRUE(rc.scq) << ec.message();
  rc.rcq = s.device->create_cq(cqe, ec);
  EXPECT_TRUE(rc.rcq) << ec.message();
  if (!rc.scq || !rc.rcq) return rc;
  QpInit init;
  init.send_cq = rc.scq.get();
  init.recv_cq = rc.rcq.get();
  init.srq = srq;
  init.caps = caps;
  rc.qp = s.pd->create_qp(init, ec);
  EXPECT_TRUE(rc.qp) << "create_qp: " << ec.message();
  return rc;
}

QpCaps make_caps(std::uint32_t wr, std::uint32_t sge, std::uint32_t inline_data) {
  QpCaps c;
  c.max_send_wr = c.max_recv_wr = wr;
  c.max_send_sge = c.max_recv_sge = sge;
  c.max_inline_data = inline_data;
  return c;
}

SendWr signaled(std::uint64_t wr_id, const Sge* sg, std::uint32_t n, Opcode op) {
  SendWr w;
  w.wr_id = wr_id;
  w.opcode = op;
  w.flags = kSignaled;
  w.sg_list = sg;
  w.num_sge = n;
  return w;
}

Endpoint endpoint_of(const Side& s, const QueuePair& qp, std::uint32_t psn) {
  Endpoint e;
  e.qpn = qp.qp_num();
  e.psn = psn;
  e.gid = s.gid;
  return e;
}

std::error_code bring_up(const Side& s, QueuePair& qp, const Endpoint& self, const Endpoint& remote,
                         const QpParams& p) {
  QpAttr a;
  a.state = QpState::init;
  a.port_num = 1;
  a.pkey_index = 0;
  a.access_flags = p.access;
  if (auto ec = qp.modify(a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags)) return ec;
  a.state = QpState::rtr;
  a.av.dgid = remote.gid;
  a.av.sgid_index = s.gid_index;
  a.av.hop_limit = 64;
  a.av.port_num = 1;
  a.path_mtu = Mtu::mtu1024;
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = p.rd_atomic;
  a.min_rnr_timer = p.min_rnr_timer;
  if (auto ec = qp.modify(a, kAttrState | kAttrPath | kAttrDestQpn | kAttrRqPsn |
                                 kAttrMaxDestRdAtomic | kAttrMinRnrTimer))
    return ec;
  a.state = QpState::rts;
  a.sq_psn = self.psn;
  a.timeout = p.timeout;
  a.retry_cnt = p.retry_cnt;
  a.rnr_retry = p.rnr_retry;
  a.max_rd_atomic = p.rd_atomic;
  return qp.modify(a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                          kAttrMaxRdAtomic);
}

QpState settled_state(const QueuePair& qp, QpState want, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  QpState st = qp.state();
  while (st != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
    st = qp.state();
  }
  return st;
}

std::vector<Wc> poll_n(CompletionQueue& cq, std::size_t n, std::chrono::milliseconds timeout) {
  std::vector<Wc> out;
  Wc batch[32];
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    const std::size_t got = cq.poll(std::span<Wc>(batch, std::min<std::size_t>(32, n - out.size())));
    out.insert(out.end(), batch, batch + got);
    if (got == 0) std::this_thread::sleep_for(50us);
  }
  return out;
}

bool fd_readable(int fd, std::chrono::milliseconds timeout) {
  pollfd pfd{fd, POLLIN, 0};
  return ::poll(&pfd, 1, static_cast<int>(timeout.count())) == 1 && (pfd.revents & POLLIN) != 0;
}

bool wait_event(EventChannel& ch, CmEvent& out, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ch.get_event(out)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    fd_readable(ch.fd(), std::min<std::chrono::milliseconds>(left, 100ms));
  }
  return true;
}

std::string describe(const Wc& wc) {
  std::ostringstream o;
  o << "wr_id=" << wc.wr_id << " status=" << to_string(wc.status)
    << " opcode=" << static_cast<int>(wc.opcode) << " len=" << wc.byte_len;
  return o.str();
}

}  // namespace siphon::rdma::conformance
