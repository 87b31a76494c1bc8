// The admin socket: Ceph's framing and error replies byte for byte
// (../shared/reference/observability.md §1), the command registry, and
// hostile clients -- a silent one and one that sends 1 MiB without a
// terminator -- that must not hold up anyone else (checked by behaviour: a
// command completes while they are still connected).
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "msgr/admin/admin_socket.h"
#include "msgr/admin/commands.h"
#include "msgr/admin/protocol.h"
#include "msgr/perf/perf_counters.h"
#include "msgr_test_util.h"

namespace siphon::admin {
namespace {

class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/siphon-asok-test.XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

// A raw client: connect, send bytes, read what comes back.
int connect_to(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.c_str(), path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{30, 0};  // a hang fails the test instead of blocking it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Everything until EOF.
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

struct Exchange {
  bool framed = false;  // 4-byte length matching the payload, then EOF
  std::string payload;
};

Exchange request(const std::string& path, std::string_view bytes) {
  Exchange e;
  const int fd = connect_to(path);
  if (fd < 0) return e;
  send_all(fd, bytes);
  const std::string all = read_all(fd);
  ::close(fd);
  if (all.size() < 4) return e;
  const auto* p = reinterpret_cast<const unsigned char*>(all.data());
  const std::uint32_t len = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
  e.payload = all.substr(4);
  e.framed = len == e.payload.size();
  return e;
}

class AdminSocketTest : public ::testing::Test {
 protected:
  void start(AdminSocket::Options o = {}) {
    sock = std::make_unique<AdminSocket>(o);
    register_standard_commands(*sock, {"osd.7", nullptr});
    sock->register_command("perf dump name=logger,type=CephString,req=false", "dump perfcounters value",
                           [this](const Request& r) {
                             ++perf_dumps;
                             return Reply::json_text(r.has("logger") ? "{\"" + r.str("logger") + "\": {}}"
                                                                     : "{\n    \"x\": 0.000000000\n}\n");
                           });
    sock->register_command("boom", "throws", [](const Request&) -> Reply { throw std::runtime_error("kaput"); });
    sock->register_command("pick name=mode,type=CephChoices,strings=fast|slow name=n,type=CephInt,req=false",
                           "choices", [](const Request& r) { return Reply::json({{"mode", r.str("mode")}}); });
    std::string error;
    ASSERT_TRUE(sock->start(dir.path + "/t.asok", error)) << error;
  }
  std::string path() const { return dir.path + "/t.asok"; }

  TempDir dir;
  std::unique_ptr<AdminSocket> sock;
  std::atomic<int> perf_dumps{0};
};

// ctest runs this binary once per stack (SIPHON_TEST_STACK): a run that lost
// the variable fails here rather than testing TCP twice.
TEST(StackUnderTest, IsTheOneThisRunAskedFor) { EXPECT_TRUE(test::is_the_stack_under_test(*test::make_test_stack())); }

TEST_F(AdminSocketTest, VersionIsFramedAndTheServerCloses) {
  start();
  for (const char* term : {"\0", "\n", "\r\n"}) {
    const std::string req = std::string("{\"prefix\": \"version\"}") + (term[0] == 0 ? std::string(1, '\0') : term);
    const Exchange e = request(path(), req);
    ASSERT_TRUE(e.framed) << "terminator " << int(term[0]);
    const auto j = nlohmann::json::parse(e.payload);
    EXPECT_EQ(j.at("release"), "siphon");
    EXPECT_EQ(e.payload.back(), '\n');  // json-pretty ends with a newline
  }
  const Exchange compact = request(path(), std::string("{\"prefix\":\"version\",\"format\":\"json\"}\0", 37));
  ASSERT_TRUE(compact.framed);
  EXPECT_EQ(compact.payload.find('\n'), std::string::npos);
  EXPECT_EQ(compact.payload.find(' '), std::string::npos);
}

TEST_F(AdminSocketTest, ErrorsAreCephsText) {
  start();
  const auto payload = [&](std::string_view r) { return request(path(), std::string(r) + '\0').payload; };
  EXPECT_EQ(payload(R"({"prefix": "no_such_command"})"),
            "ERROR: (22) Invalid argument\nunknown command prefix no_such_command\n");
  EXPECT_EQ(payload(R"({"prefix": "perf frobnicate"})"),
            "ERROR: (22) Invalid argument\nunknown command prefix perf frobnicate\n");
  EXPECT_EQ(payload("version"), "ERROR: (22) Invalid argument\ninvalid json\n");
  EXPECT_EQ(payload(R"({"prefix": "version")"), "ERROR: (22) Invalid argument\ninvalid json\n");
  EXPECT_EQ(payload(R"(["version"])"), "ERROR: (22) Invalid argument\ninvalid json\n");
  EXPECT_EQ(payload(R"({"prefix": "pick"})"), "ERROR: (22) Invalid argument\ninvalid command json\n");
  EXPECT_EQ(payload(R"({"prefix": "pick", "mode": "medium"})"), "ERROR: (22) Invalid argument\ninvalid command json\n");
  EXPECT_EQ(payload(R"({"prefix": "pick", "mode": "fast", "n": "x", "junk": 1})").substr(0, 1), "{");
  // A handler that throws is the command's error, and the socket lives on.
  EXPECT_EQ(payload(R"({"prefix": "boom"})"), "ERROR: (5) Input/output error\nboom failed: kaput\n");
  // Bytes that are not UTF-8 are not JSON.
  EXPECT_EQ(payload("{\"prefix\": \"\xff\xfe\"}"), "ERROR: (22) Invalid argument\ninvalid json\n");
  EXPECT_TRUE(request(path(), std::string("{\"prefix\": \"version\"}\0", 22)).framed);
}

TEST_F(AdminSocketTest, LegacyCodesAndHiddenCommands) {
  start();
  EXPECT_EQ(request(path(), std::string(4, '\0')).payload, "2");  // 1 byte: ceph-exporter's ping
  EXPECT_EQ(request(path(), std::string("{\"prefix\":\"0\"}\0", 15)).payload, "2");
  EXPECT_EQ(request(path(), std::string("\0\0\0\1", 4)).payload, "{\n    \"x\": 0.000000000\n}\n");
  EXPECT_EQ(perf_dumps.load(), 1);
  EXPECT_EQ(request(path(), std::string("\0\0\0\x07", 4)).payload,
            "ERROR: (22) Invalid argument\nunknown command prefix foo\n");
  const auto help = nlohmann::json::parse(request(path(), std::string("{\"prefix\":\"help\"}\0", 18)).payload);
  EXPECT_TRUE(help.contains("perf dump"));
  EXPECT_FALSE(help.contains("0"));
  EXPECT_FALSE(help.contains("perfcounters_dump"));
}

TEST_F(AdminSocketTest, CommandDescriptionsAreSortedWithStringFields) {
  start();
  const auto j =
      nlohmann::json::parse(request(path(), std::string("{\"prefix\": \"get_command_descriptions\"}\0", 39)).payload);
  ASSERT_TRUE(j.contains("cmd000"));
  EXPECT_EQ(j["cmd000"]["sig"], nlohmann::json::array({"0"}));
  std::string last;
  bool saw_pick = false;
  for (const auto& [key, cmd] : j.items()) {
    std::string prefix;
    for (const auto& w : cmd["sig"])
      if (w.is_string()) prefix += (prefix.empty() ? "" : " ") + w.get<std::string>();
    EXPECT_LT(last, prefix);
    last = prefix;
    if (prefix == "pick") {
      saw_pick = true;
      EXPECT_EQ(cmd["sig"][1], nlohmann::json({{"name", "mode"}, {"type", "CephChoices"}, {"strings", "fast|slow"}}));
      EXPECT_EQ(cmd["sig"][2], nlohmann::json({{"name", "n"}, {"type", "CephInt"}, {"req", "false"}}));
    }
  }
  EXPECT_TRUE(saw_pick);
}

TEST_F(AdminSocketTest, SocketIsOwnerOnlyAndRemovedAtStop) {
  start();
  struct stat st {};
  ASSERT_EQ(::stat(path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  sock->stop();
  EXPECT_FALSE(std::filesystem::exists(path()));
}

// The hostile clients of the issue: one connects and sends nothing, one sends
// 1 MiB without a terminator; a perf dump sent meanwhile completes while the
// silent client is still connected (the deadline is far away: 60 s).
TEST_F(AdminSocketTest, StuckClientsDoNotHoldUpOthers) {
  AdminSocket::Options o;
  o.request_timeout = std::chrono::seconds(60);
  start(o);
  const int silent = connect_to(path());
  ASSERT_GE(silent, 0);
  const int flooder = connect_to(path());
  ASSERT_GE(flooder, 0);
  std::atomic<bool> flood_done{false};
  std::thread flood([&] {
    send_all(flooder, std::string(1 << 20, 'x'));  // ends when the server drops it
    flood_done = true;
  });
  const Exchange e = request(path(), std::string("{\"prefix\": \"perf dump\"}\0", 24));
  EXPECT_TRUE(e.framed);
  EXPECT_EQ(e.payload, "{\n    \"x\": 0.000000000\n}\n");
  // The silent client is still connected: nothing to read, no EOF.
  pollfd p{silent, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  // The flooder was dropped at the size bound with an error, not served.
  flood.join();
  EXPECT_TRUE(flood_done);
  const std::string flood_reply = read_all(flooder);
  if (flood_reply.size() > 4) {
    EXPECT_NE(flood_reply.find("request longer than 65536 bytes"), std::string::npos);
  }
  EXPECT_EQ(sock->stats().dropped_oversize, 1u);
  ::close(flooder);
  ::close(silent);
}

TEST_F(AdminSocketTest, SilentClientIsDroppedAtTheDeadline) {
  AdminSocket::Options o;
  o.request_timeout = std::chrono::milliseconds(200);
  start(o);
  const int fd = connect_to(path());
  ASSERT_GE(fd, 0);
  send_all(fd, "{\"prefix\": ");  // and nothing more
  EXPECT_EQ(read_all(fd), "");    // EOF, no reply (within SO_RCVTIMEO's 30 s)
  ::close(fd);
  EXPECT_EQ(sock->stats().dropped_timeout, 1u);
  EXPECT_TRUE(request(path(), std::string("{\"prefix\": \"version\"}\0", 22)).framed);
}

TEST_F(AdminSocketTest, TooManyClientsAreRefusedAndOthersServedAfter) {
  AdminSocket::Options o;
  o.max_clients = 2;
  o.request_timeout = std::chrono::seconds(60);
  start(o);
  const int a = connect_to(path()), b = connect_to(path());
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_EQ(request(path(), std::string("{\"prefix\": \"version\"}\0", 22)).payload, "");  // closed at once
  ::close(a);
  ::close(b);
  ASSERT_TRUE(test::eventually([&] { return request(path(), std::string("{\"prefix\": \"version\"}\0", 22)).framed; }));
}

TEST(AdminSocketStart, StaleSocketIsReplacedLiveOneIsNot) {
  TempDir dir;
  const std::string path = dir.path + "/s.asok";
  {
    // A socket file nobody listens on (a daemon that died).
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    ::close(fd);
  }
  AdminSocket a;
  std::string error;
  ASSERT_TRUE(a.start(path, error)) << error;
  AdminSocket b;
  EXPECT_FALSE(b.start(path, error));
  EXPECT_NE(error.find("another process is serving"), std::string::npos) << error;
  EXPECT_TRUE(request(path, std::string("{\"prefix\": \"help\"}\0", 19)).framed);  // a still serves
}

TEST(AdminSocketStart, MissingOrUnusableDirectoryIsExplained) {
  AdminSocket a;
  std::string error;
  EXPECT_FALSE(a.start("/nonexistent-siphon-dir/x.asok", error));
  EXPECT_NE(error.find("/nonexistent-siphon-dir does not exist"), std::string::npos) << error;
  EXPECT_NE(error.find("admin_socket"), std::string::npos) << error;
  TempDir dir;
  const std::string file = dir.path + "/plain";
  { std::FILE* f = std::fopen(file.c_str(), "w"); std::fclose(f); }
  EXPECT_FALSE(a.start(file, error));
  EXPECT_NE(error.find("not a socket"), std::string::npos) << error;
  EXPECT_TRUE(std::filesystem::exists(file));  // never removed
  EXPECT_FALSE(a.start(dir.path + "/" + std::string(200, 'a'), error));
  EXPECT_NE(error.find("at most 107"), std::string::npos) << error;
}

TEST(AdminProtocol, SignatureParsingAndCompactJson) {
  Signature s;
  std::string error;
  ASSERT_TRUE(Signature::parse("config set name=var,type=CephString name=val,type=CephString,n=N", s, error));
  EXPECT_EQ(s.prefix, "config set");
  ASSERT_EQ(s.args.size(), 2u);
  EXPECT_TRUE(s.args[1].many);
  EXPECT_TRUE(validate(s, nlohmann::json::parse(R"({"prefix":"config set","var":"debug_ms","val":["0/5"]})")));
  EXPECT_FALSE(validate(s, nlohmann::json::parse(R"({"prefix":"config set","var":"debug_ms"})")));
  EXPECT_FALSE(Signature::parse("name=x,type=CephString", s, error));
  EXPECT_FALSE(Signature::parse("a name=x", s, error));
  EXPECT_EQ(compact_json("{\n    \"a b\": [1, 2],\n    \"t\": 0.000000000\n}\n"), "{\"a b\":[1,2],\"t\":0.000000000}");
}

// The perf commands over a real collection, through the socket's request path.
TEST(PerfCommands, DumpSchemaResetAndFilters) {
  perf::Collection col;
  enum { l_first = 100, l_msgs, l_conns, l_last };
  perf::LoggerBuilder b("AsyncMessenger::Worker-0", l_first + 1, l_last);
  b.add_u64_counter(l_msgs, "msgr_recv_messages", "Network received messages");
  b.add_u64(l_conns, "msgr_active_connections", "Active connection number");
  auto logger = b.create();
  col.add(logger);
  logger->inc(l_msgs, 5);
  logger->inc(l_conns, 2);
  AdminSocket sock;
  register_perf_commands(sock, &col);
  const auto dump = nlohmann::json::parse(sock.execute(R"({"prefix": "perf dump"})"));
  EXPECT_EQ(dump["AsyncMessenger::Worker-0"]["msgr_recv_messages"], 5);
  const auto one = nlohmann::json::parse(sock.execute(
      R"({"prefix": "perf dump", "logger": "AsyncMessenger::Worker-0", "counter": "msgr_active_connections"})"));
  EXPECT_EQ(one, nlohmann::json::parse(R"({"AsyncMessenger::Worker-0": {"msgr_active_connections": 2}})"));
  EXPECT_EQ(nlohmann::json::parse(sock.execute(R"({"prefix": "perf dump", "logger": "nosuch"})")),
            nlohmann::json::object());
  const auto schema = nlohmann::json::parse(sock.execute(R"({"prefix": "perf schema"})"));
  EXPECT_EQ(schema["AsyncMessenger::Worker-0"]["msgr_recv_messages"]["type"], 10);
  // The legacy code 1 and the hidden alias are perf dump.
  EXPECT_EQ(nlohmann::json::parse(sock.execute(std::string("\0\0\0\1", 4))), dump);
  EXPECT_EQ(nlohmann::json::parse(sock.execute(R"({"prefix": "perfcounters_dump"})")), dump);
  // Compact: no whitespace at all.
  const std::string compact = sock.execute(R"({"prefix": "perf dump", "format": "json"})");
  EXPECT_EQ(compact.find_first_of(" \n"), std::string::npos) << compact;
  EXPECT_EQ(nlohmann::json::parse(sock.execute(R"({"prefix": "perf reset", "var": "nosuch"})")),
            nlohmann::json::parse(R"({"error": "Not find: nosuch"})"));
  EXPECT_EQ(nlohmann::json::parse(sock.execute(R"({"prefix": "perf reset", "var": "all"})")),
            nlohmann::json::parse(R"({"success": "perf reset all"})"));
  const auto after = nlohmann::json::parse(sock.execute(R"({"prefix": "perf dump"})"));
  EXPECT_EQ(after["AsyncMessenger::Worker-0"]["msgr_recv_messages"], 0);
  EXPECT_EQ(after["AsyncMessenger::Worker-0"]["msgr_active_connections"], 2);  // a gauge survives
  EXPECT_TRUE(nlohmann::json::parse(sock.execute(R"({"prefix": "counter dump"})")).contains("AsyncMessenger::Worker-0"));
  EXPECT_TRUE(nlohmann::json::parse(sock.execute(R"({"prefix": "counter schema"})")).is_object());
  EXPECT_TRUE(nlohmann::json::parse(sock.execute(R"({"prefix": "perf histogram dump"})")).is_object());
  EXPECT_TRUE(nlohmann::json::parse(sock.execute(R"({"prefix": "perf histogram schema"})")).is_object());
  col.remove(logger.get());
}

// messenger dump over two real messengers: the connection is seen on both
// sides, READY, with the session's sequence numbers.
TEST(MessengerDump, ShowsConnectionsWithSessionState) {
  auto server = test::make_messenger(entity_name_t{entity_type::osd, 0}, test::test_options());
  auto client = test::make_messenger(entity_name_t{entity_type::client, 4100}, test::test_options());
  test::RecordingDispatcher sd, cd;
  test::start_pair(*server, sd, *client, cd);
  auto conn = client->connect_to(entity_type::osd, server->get_myaddrs());
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(conn->send_message(make_message<Message>(0x7001)));
  ASSERT_TRUE(test::eventually([&] {
    std::lock_guard l(sd.w.mu);
    return sd.messages == 3;
  }));
  auto set = std::make_shared<MessengerSet>();
  set->add("public", server.get());
  set->add("client", client.get());
  AdminSocket sock;
  register_standard_commands(sock, {"osd.0", set});
  const auto j = nlohmann::json::parse(sock.execute(R"({"prefix": "messenger dump"})"));
  ASSERT_EQ(j["messengers"].size(), 2u);
  const auto& srv = j["messengers"][0];
  EXPECT_EQ(srv["name"], "public");
  if (test::test_stack() != test::TestStack::posix) {
    EXPECT_EQ(srv["stack"], "async+rdma");
    // The RDMA transport's part: the queue pair and both credit windows.
    for (const auto& side : {srv["connections"][0], j["messengers"][1]["connections"][0]}) {
      ASSERT_TRUE(side.contains("rdma")) << side.dump();
      const auto& r = side["rdma"];
      EXPECT_GT(r["local_qpn"].get<std::uint32_t>(), 0u);
      EXPECT_EQ(r["peer_window"], 8);  // test_stack_options: 8 credits each way
      EXPECT_EQ(r["my_window"], 8);
      EXPECT_LE(r["send_credits"].get<std::uint32_t>(), 8u);
      // The path the provider connected with: MTU and both GIDs in
      // ibv_devinfo's form ("0000:0000:0000:0000:0000:ffff:7f00:0001").
      EXPECT_GT(r["path_mtu"].get<std::uint32_t>(), 0u);
      EXPECT_EQ(r["local_gid"].get<std::string>().size(), 39u) << r.dump();
      EXPECT_EQ(r["remote_gid"].get<std::string>().size(), 39u) << r.dump();
    }
    // One connection seen from both ends: each side's remote QPN and GID are
    // the other's local ones, and both use the same path MTU.
    const auto& sr = srv["connections"][0]["rdma"];
    const auto& cr = j["messengers"][1]["connections"][0]["rdma"];
    EXPECT_EQ(cr["remote_qpn"], sr["local_qpn"]);
    EXPECT_EQ(sr["remote_qpn"], cr["local_qpn"]);
    EXPECT_NE(sr["local_qpn"], cr["local_qpn"]);
    EXPECT_EQ(cr["remote_gid"], sr["local_gid"]);
    EXPECT_EQ(sr["remote_gid"], cr["local_gid"]);
    EXPECT_EQ(sr["path_mtu"], cr["path_mtu"]);
  } else {
    EXPECT_EQ(srv["stack"], "async+posix");
    EXPECT_FALSE(srv["connections"][0].contains("rdma"));
  }
  ASSERT_EQ(srv["connections"].size(), 1u);
  EXPECT_EQ(srv["connections"][0]["state"], "ready");
  EXPECT_EQ(srv["connections"][0]["in_seq"], 3);
  EXPECT_EQ(srv["connections"][0]["peer_entity"], "client.4100");
  EXPECT_EQ(srv["connections"][0]["direction"], "incoming");
  const auto& cli = j["messengers"][1]["connections"][0];
  EXPECT_EQ(cli["out_seq"], 3);
  EXPECT_EQ(cli["direction"], "outgoing");
  EXPECT_GE(cli["last_activity_ms_ago"].get<int>(), 0);
  const auto one = nlohmann::json::parse(sock.execute(R"({"prefix": "messenger dump", "msgr": "client"})"));
  EXPECT_EQ(one["name"], "client");
  EXPECT_EQ(sock.execute(R"({"prefix": "messenger dump", "msgr": "nope"})"),
            "ERROR: (2) No such file or directory\nno messenger named 'nope' (messengers: public, client)\n");
  const auto status = nlohmann::json::parse(sock.execute(R"({"prefix": "status"})"));
  EXPECT_EQ(status["entity"], "osd.0");
  EXPECT_EQ(status["messengers"][0]["connections_by_state"]["ready"], 1);
  client->shutdown();
  server->shutdown();
  client->wait();
  server->wait();
}

}  // namespace
}  // namespace siphon::admin
