// The messenger's core behaviours across two processes: this process runs the
// client messenger (and gtest); a child process, this same binary started
// with --peer-server, runs the server messenger and is driven over a control
// pipe. Built three ways like messenger_test.cc: TCP, the RDMA stack on the
// software fabric (each process has its own soft adapter; they meet over its
// TCP wire) and, in the rxe guest, the verbs provider on rxe0.
//
// Control protocol (one line each way): the child prints "ready <addr>" once
// it listens, then answers each command on stdin with one line:
//   counters -> "counters <zero_copy_transfers> <rdma_reads> <rnr_events> <received>"
//   markdown -> "ok" after mark_down_all()
//   quit     -> "ok", then it shuts down and exits 0 (EOF does the same)
// The server echoes every kTypeTest message back on its connection with the
// same tid, front and data.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>

#include "msgr_test_util.h"

extern char** environ;

namespace siphon::test {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kTypeTest = 0x7101;

#ifdef SIPHON_TEST_RDMA
struct RdmaSnapshot {
  std::uint64_t zero_copy = 0, reads = 0, rnr = 0;
};
RdmaSnapshot rdma_snapshot(const transport::Stack& s) {
  const auto* r = dynamic_cast<const rdma::RdmaStack*>(&s);
  if (r == nullptr) return {};
  return {r->counters().zero_copy_transfers.load(), r->counters().rdma_reads.load(),
          r->counters().rnr_events.load()};
}
#endif

// ------------------------------------------------------------------ child

class EchoServer : public Dispatcher {
 public:
  bool ms_dispatch(MessageRef m) override {
    if (m->get_type() != kTypeTest) return false;
    received.fetch_add(1);
    MessageRef r = make_message<Message>(kTypeTest);
    r->set_tid(m->get_tid());
    r->front() = m->front();
    r->set_data(std::move(m->data()));
    m->get_connection()->send_message(r);
    return true;
  }
  bool ms_handle_reset(ConnectionRef) override { return true; }
  std::atomic<std::uint64_t> received{0};
};

// argv: --peer-server <stateful|stateless> <nonce> <port>
int peer_server_main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s --peer-server <stateful|stateless> <nonce> <port>\n", argv[0]);
    return 2;
  }
  const bool stateful = std::strcmp(argv[2], "stateful") == 0;
  const auto nonce = static_cast<std::uint32_t>(std::stoul(argv[3]));
  const int port = std::stoi(argv[4]);
  MessengerOptions o = test_options();
  auto stack = make_test_stack(test_stack_options(2));
  EchoServer echo;
  auto server = Messenger::create(stack, {entity_type::osd, 0}, o, nonce);
  server->set_policy(entity_type::client, stateful ? Policy::stateful_server() : Policy::stateless_server());
  server->add_dispatcher_tail(&echo);
  EntityAddrVec bind = loopback_any_port();
  if (port != 0) {
    EntityAddr a = bind.front();
    a.addr.set_port(static_cast<std::uint16_t>(port));
    bind = EntityAddrVec(a);
  }
  if (auto ec = server->bind(bind)) {
    std::printf("error bind: %s\n", ec.message().c_str());
    std::fflush(stdout);
    return 1;
  }
  server->start();
  std::printf("ready %s\n", server->get_myaddrs().front().to_string().c_str());
  std::fflush(stdout);
  std::string cmd;
  while (std::getline(std::cin, cmd)) {
    if (cmd == "counters") {
#ifdef SIPHON_TEST_RDMA
      const RdmaSnapshot s = rdma_snapshot(*stack);
#else
      const struct { std::uint64_t zero_copy = 0, reads = 0, rnr = 0; } s;
#endif
      std::printf("counters %llu %llu %llu %llu\n", static_cast<unsigned long long>(s.zero_copy),
                  static_cast<unsigned long long>(s.reads), static_cast<unsigned long long>(s.rnr),
                  static_cast<unsigned long long>(echo.received.load()));
    } else if (cmd == "markdown") {
      server->mark_down_all();
      std::printf("ok\n");
    } else if (cmd == "quit") {
      std::printf("ok\n");
      std::fflush(stdout);
      break;
    } else {
      std::printf("error unknown command '%s'\n", cmd.c_str());
    }
    std::fflush(stdout);
  }
  server->shutdown();
  server->wait();
  return 0;
}

// ----------------------------------------------------------------- parent

// The child process and its control pipe.
class Peer {
 public:
  Peer(const char* policy, std::uint32_t nonce, int port = 0) {
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from[1], 1);
    const std::string nonce_s = std::to_string(nonce), port_s = std::to_string(port);
    std::string exe = "/proc/self/exe";
    char* args[] = {exe.data(), const_cast<char*>("--peer-server"), const_cast<char*>(policy),
                    const_cast<char*>(nonce_s.c_str()), const_cast<char*>(port_s.c_str()), nullptr};
    const int rc = ::posix_spawn(&pid_, "/proc/self/exe", &fa, nullptr, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(to[0]);
    ::close(from[1]);
    if (rc != 0) throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
    in_ = ::fdopen(from[0], "r");
    out_ = ::fdopen(to[1], "w");
    const std::string hello = read_line();
    std::optional<EntityAddr> a;
    if (hello.rfind("ready ", 0) == 0) a = EntityAddr::parse(hello.substr(6), AddrType::msgr2);
    if (!a) {
      cleanup();  // no destructor runs after a throwing constructor
      throw std::runtime_error("peer did not start: '" + hello + "'");
    }
    addrs_ = EntityAddrVec(*a);
  }
  ~Peer() { cleanup(); }
  void cleanup() {
    if (pid_ > 0) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    if (in_) std::fclose(in_);
    if (out_) std::fclose(out_);
    in_ = out_ = nullptr;
  }
  const EntityAddrVec& addrs() const { return addrs_; }
  pid_t pid() const { return pid_; }

  std::string command(const std::string& c) {
    std::fprintf(out_, "%s\n", c.c_str());
    std::fflush(out_);
    return read_line();
  }
  // Asks the child to quit; returns its exit status (-1: killed, timeout).
  int quit() {
    const std::string r = command("quit");
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return r == "ok" && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void kill_hard() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  struct Counters {
    std::uint64_t zero_copy = 0, reads = 0, rnr = 0, received = 0;
  };
  Counters counters() {
    const std::string r = command("counters");
    unsigned long long a = 0, b = 0, d = 0, e = 0;
    if (std::sscanf(r.c_str(), "counters %llu %llu %llu %llu", &a, &b, &d, &e) != 4)
      throw std::runtime_error("bad counters line: " + r);
    return {a, b, d, e};
  }

 private:
  std::string read_line() {
    char buf[512];
    if (std::fgets(buf, sizeof(buf), in_) == nullptr) return "<eof>";
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
  EntityAddrVec addrs_;
};

// Payload of message `i`: `size` bytes derived from i.
BufferList payload(std::uint32_t i, std::size_t size) {
  BufferList bl;
  std::byte* p = bl.append_uninitialized(size);
  std::uint32_t x = i * 2654435761u + 1;
  for (std::size_t k = 0; k < size; ++k) {
    x = x * 1103515245u + 12345u;
    p[k] = static_cast<std::byte>(x >> 24);
  }
  return bl;
}

// Records the echoes: tids in arrival order and whether each payload matched.
class EchoClient : public RecordingDispatcher {
 public:
  bool ms_dispatch(MessageRef m) override {
    {
      std::lock_guard l(w.mu);
      tids.push_back(static_cast<std::uint32_t>(m->get_tid()));
      const std::size_t size = sizes.count(m->get_tid()) ? sizes.at(m->get_tid()) : 0;
      if (m->data().length() != size || !(m->data() == payload(static_cast<std::uint32_t>(m->get_tid()), size)))
        ++damaged;
      ++messages;
    }
    w.notify();
    return true;
  }
  std::map<std::uint64_t, std::size_t> sizes;  // under w.mu
  std::vector<std::uint32_t> tids;             // under w.mu
  int damaged = 0;                             // under w.mu
};

struct CrossProcess : ::testing::Test {
  MessengerOptions opts = test_options();
  EchoClient cd;
  std::shared_ptr<transport::Stack> stack;
  std::unique_ptr<Messenger> client;

  void start_client(const Policy& p) {
    stack = make_test_stack(test_stack_options(2));
    client = Messenger::create(stack, {entity_type::client, 4100}, opts);
    client->set_policy(entity_type::osd, p);
    client->add_dispatcher_tail(&cd);
    client->start();
  }
  void TearDown() override {
    if (client) {
      client->shutdown();
      client->wait();
    }
  }
  void send(const ConnectionRef& con, std::uint32_t tid, std::size_t size) {
    {
      std::lock_guard l(cd.w.mu);
      cd.sizes[tid] = size;
    }
    MessageRef m = make_message<Message>(kTypeTest);
    m->set_tid(tid);
    m->front().append("x-process");
    m->set_data(payload(tid, size));
    ASSERT_FALSE(con->send_message(m));
  }
  void expect_in_order(std::uint32_t first, std::uint32_t last) {
    std::lock_guard l(cd.w.mu);
    std::vector<std::uint32_t> want;
    for (std::uint32_t t = first; t <= last; ++t) want.push_back(t);
    EXPECT_EQ(cd.tids, want);
    EXPECT_EQ(cd.damaged, 0);
  }
};

// Sizes across the inline, SEND and zero-copy (RDMA READ, >= 64 KiB) paths.
constexpr std::size_t kSizes[] = {1, 100, 4096, 16 * 1024 + 3, 60 * 1024, 64 * 1024, 200 * 1024, 1024 * 1024};

TEST_F(CrossProcess, EchoKeepsOrderAndBytesAcrossEverySizeClass) {
  Peer peer("stateful", 0x5e1f01);
  start_client(Policy::lossless_client());
  ConnectionRef con = client->connect_to(entity_type::osd, peer.addrs());
  constexpr std::uint32_t kN = 64;
  for (std::uint32_t i = 1; i <= kN; ++i) send(con, i, kSizes[i % std::size(kSizes)]);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.messages >= kN; }, 120s)) << cd.messages << " of " << kN;
  expect_in_order(1, kN);
  const Peer::Counters pc = peer.counters();
  EXPECT_EQ(pc.received, kN);
#ifdef SIPHON_TEST_RDMA
  // Large data went both ways by RDMA READ (each side advertised, the other
  // pulled), with no RNR on either side.
  const RdmaSnapshot mine = rdma_snapshot(*stack);
  EXPECT_GT(mine.zero_copy, 0u);
  EXPECT_GT(mine.reads, 0u);
  EXPECT_GT(pc.zero_copy, 0u);
  EXPECT_GT(pc.reads, 0u);
  EXPECT_EQ(mine.rnr, 0u);
  EXPECT_EQ(pc.rnr, 0u);
#endif
  EXPECT_EQ(peer.quit(), 0);
}

// A fault in the middle of traffic: the server process freezes (SIGSTOP), the
// client's idle timeout faults the connection, and messages sent meanwhile
// wait in the lossless session. When the server runs again the session
// reconnects (SESSION_RECONNECT, not a reset) and every message arrives
// once, in order.
TEST_F(CrossProcess, LosslessSessionReplaysAcrossAPeerStall) {
  Peer peer("stateful", 0x5e1f02);
  opts.ms_connection_idle_timeout = 1s;
  start_client(Policy::lossless_client());
  ConnectionRef con = client->connect_to(entity_type::osd, peer.addrs());
  constexpr std::uint32_t kBefore = 20, kN = 60;
  for (std::uint32_t i = 1; i <= kBefore; ++i) send(con, i, kSizes[i % std::size(kSizes)]);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.messages >= kBefore; }, 120s));
  ASSERT_EQ(::kill(peer.pid(), SIGSTOP), 0);
  for (std::uint32_t i = kBefore + 1; i <= kN; ++i) send(con, i, kSizes[i % std::size(kSizes)]);
  ASSERT_TRUE(eventually([&] { return client->stats().faults >= 1; }, 60s)) << "no fault while the peer was frozen";
  ASSERT_EQ(::kill(peer.pid(), SIGCONT), 0);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.messages >= kN; }, 120s)) << cd.messages << " of " << kN;
  expect_in_order(1, kN);
  EXPECT_GE(client->stats().reconnects, 1u);
  EXPECT_EQ(client->stats().sessions_reset, 0u);
  EXPECT_EQ(cd.resets + cd.remote_resets, 0);
  EXPECT_EQ(peer.counters().received, kN);  // the server dispatched each one once
  EXPECT_EQ(peer.quit(), 0);
}

TEST_F(CrossProcess, LossySessionReportsResetWhenThePeerMarksItDown) {
  Peer peer("stateless", 0x5e1f03);
  start_client(Policy::lossy_client());
  ConnectionRef con = client->connect_to(entity_type::osd, peer.addrs());
  send(con, 1, 100);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.messages == 1; }, 60s));
  ASSERT_EQ(peer.command("markdown"), "ok");
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.resets == 1; }, 60s));
  EXPECT_FALSE(con->is_connected());
  EXPECT_EQ(cd.remote_resets, 0);
  // A new session works.
  ConnectionRef again = client->connect_to(entity_type::osd, peer.addrs());
  send(again, 2, 70 * 1024);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.messages == 2; }, 60s));
  EXPECT_EQ(peer.quit(), 0);
}

// The server process dies and a new one takes its address and nonce: the
// lossless client reconnects, is told SESSION_RESET and reports a remote
// reset; the same Connection then carries traffic to the new process.
TEST_F(CrossProcess, PeerProcessRestartIsSeenAsRemoteReset) {
  auto peer = std::make_unique<Peer>("stateful", 0x5e1f04);
  const int port = peer->addrs().front().addr.port();
  start_client(Policy::lossless_client());
  ConnectionRef con = client->connect_to(entity_type::osd, peer->addrs());
  send(con, 1, 100);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.messages == 1; }, 60s));
  peer->kill_hard();
  peer.reset();
  // The old process is gone; its port is free again.
  std::unique_ptr<Peer> again;
  ASSERT_TRUE(eventually([&] {
    try {
      again = std::make_unique<Peer>("stateful", 0x5e1f04, port);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }, 60s)) << "could not restart the server on port " << port;
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.remote_resets == 1; }, 120s));
  send(con, 2, 100 * 1024);
  ASSERT_TRUE(cd.w.wait_for([&] { return cd.messages == 2; }, 60s));
  EXPECT_EQ(again->counters().received, 1u);
  EXPECT_EQ(again->quit(), 0);
}

}  // namespace
}  // namespace siphon::test

int main(int argc, char** argv) {
  // A peer that died must fail the test, not kill it with SIGPIPE on the next command.
  ::signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && std::strcmp(argv[1], "--peer-server") == 0) return siphon::test::peer_server_main(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
