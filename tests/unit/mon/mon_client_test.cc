// MonClient's error classification without a real mon: a fake server that
// answers like a cephx-only Pacific mon (AUTH_BAD_METHOD allowing cephx) or
// like a msgr1 daemon; a refused port; v1-only and missing addresses. Every
// case must end connect() with a clear, typed error, the permanent ones at
// once rather than at the timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "fake_mon.h"
#include "msgr/mon/mon_client.h"
#include "msgr/proto/control.h"
#include "msgr/proto/frame.h"
#include "msgr/transport/tcp_stack.h"

namespace siphon::mon {
namespace {

using namespace std::chrono_literals;

// One listening socket on 127.0.0.1; `serve` runs for each accepted client
// until the server is destroyed.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int fd)> serve) : serve_(std::move(serve)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    EXPECT_EQ(::listen(fd_, 8), 0);
    thread_ = std::thread([this] {
      while (!stop_) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) break;
        if (!stop_) serve_(c);
        ::close(c);
      }
    });
  }
  ~FakeServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::uint16_t port() const { return port_; }

 private:
  std::function<void(int)> serve_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void drain(int fd, std::chrono::milliseconds for_how_long) {
  timeval tv{0, 100000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const auto end = std::chrono::steady_clock::now() + for_how_long;
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) return;
  }
}

MonClientOptions options_for(std::uint16_t port) {
  MonClientOptions o;
  o.mon_addrs = *proto::parse_mon_host("v2:127.0.0.1:" + std::to_string(port));
  return o;
}

// The stack a MonClient runs on: the client takes it from its caller (in a
// program, compat::create_tcp_stack).
std::shared_ptr<transport::Stack> tcp_stack() {
  transport::TcpOptions t;
  t.common.async_op_threads = 1;
  return transport::make_tcp_stack(t);
}

TEST(MonClientErrors, ACephxOnlyMonIsReportedAtOnce) {
  FakeServer server([](int fd) {
    write_all(fd, proto::encode_banner(proto::Banner{}));
    proto::Hello h;
    h.entity_type = proto::kEntityTypeMon;
    h.peer_addr = *EntityAddr::parse("v2:127.0.0.1:40000/0");
    write_all(fd, proto::encode_frame(h.frame(), proto::FrameRev::rev1));
    drain(fd, 300ms);  // the client's banner, HELLO and AUTH_REQUEST
    proto::AuthBadMethod bad;
    bad.method = proto::kAuthMethodNone;
    bad.result = -95;
    bad.allowed_methods = {proto::kAuthMethodCephx};
    bad.allowed_modes = {proto::kConModeSecure, proto::kConModeCrc};
    write_all(fd, proto::encode_frame(bad.frame(), proto::FrameRev::rev1));
    drain(fd, 2000ms);
  });
  MonClient mc(tcp_stack(), options_for(server.port()));
  const auto t0 = std::chrono::steady_clock::now();
  const MonError e = mc.connect(20s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << "a permanent error waited for the timeout";
  ASSERT_TRUE(e);
  EXPECT_EQ(e.kind, MonError::Kind::cephx_required) << e.message;
  // No key configured (MonClientOptions::auth defaults to auth none): the
  // message says cephx needs one.
  EXPECT_NE(e.message.find("it allows methods [cephx]"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("cephx needs a key for client.admin"), std::string::npos) << e.message;
  // Commands fail with the same error instead of hanging.
  const CommandResult r = mc.command({R"({"prefix": "status"})"}, {}, 20s);
  EXPECT_EQ(r.error.kind, MonError::Kind::cephx_required);
}

TEST(MonClientErrors, AMsgr1PeerIsReportedAtOnce) {
  FakeServer server([](int fd) {
    // A msgr1 daemon's banner, then its (legacy) address.
    write_all(fd, BufferList::copy_of(std::string("ceph v027") + std::string(136, '\0')));
    drain(fd, 2000ms);
  });
  MonClient mc(tcp_stack(), options_for(server.port()));
  const MonError e = mc.connect(20s);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.kind, MonError::Kind::msgr1_only) << e.message;
  EXPECT_NE(e.message.find("msgr1"), std::string::npos);
}

TEST(MonClientErrors, RefusedAndSilentPeersTimeOutWithTheReason) {
  std::uint16_t port;
  { FakeServer s([](int) {}); port = s.port(); }  // now closed: refused
  MonClient refused(tcp_stack(), options_for(port));
  MonError e = refused.connect(1s);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.kind, MonError::Kind::refused) << e.message;
  EXPECT_NE(e.message.find("connection refused"), std::string::npos) << e.message;

  // A peer that accepts and never speaks: the connect timeout ends it.
  FakeServer silent([](int fd) { drain(fd, 3000ms); });
  MonClient mc(tcp_stack(), options_for(silent.port()));
  const auto t0 = std::chrono::steady_clock::now();
  e = mc.connect(1s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.kind, MonError::Kind::timed_out) << e.message;
}

TEST(MonClientErrors, AddressesThatCannotWork) {
  MonClientOptions v1;
  v1.mon_addrs = *proto::parse_mon_host("v1:127.0.0.1:6789, 10.1.2.3:6789");
  MonClient a(tcp_stack(), v1);
  MonError e = a.connect(10s);
  EXPECT_EQ(e.kind, MonError::Kind::no_msgr2_addr) << e.message;
  EXPECT_NE(e.message.find("msgr1 (v1) only"), std::string::npos) << e.message;
  MonClient b(tcp_stack(), MonClientOptions{});
  e = b.connect(10s);
  EXPECT_TRUE(e);
  EXPECT_NE(e.message.find("no monitor address"), std::string::npos) << e.message;
}

TEST(MonClientErrors, AStackIsRequired) {
  EXPECT_THROW(MonClient(nullptr, options_for(3300)), std::invalid_argument);
}

}  // namespace
}  // namespace siphon::mon

namespace siphon::mon {
namespace {

// A monitor played by a Siphon messenger (entity type mon, nonce 0): it
// answers subscriptions with a MonMap, preceded by a message of a type
// nobody knows, and version queries with epoch 42. With `break_monmap` its
// first MonMap is malformed.
struct FakeMon : Dispatcher {
  explicit FakeMon(bool break_monmap) : broken_left(break_monmap ? 1 : 0) {
    msgr = test::start_fake_mon(tcp_stack(), this,
                                EntityAddrVec(EntityAddr(AddrType::msgr2, *NetAddress::parse("127.0.0.1:0"))));
  }
  ~FakeMon() override {
    msgr->shutdown();
    msgr->wait();
  }
  bool ms_dispatch(MessageRef m) override {
    const ConnectionRef& con = m->get_connection();
    if (m->get_type() == MMonSubscribe::kType) {
      auto junk = make_message<Message>(0x7777);
      junk->front().append("not for you");
      con->send_message(junk);
      auto mm = make_message<MMonMap>();
      if (broken_left > 0) {
        --broken_left;
        mm->monmap_bl = BufferList::copy_of(std::string("\x09\x06\xff\xff\xff\x7f", 6));
      }
      mm->monmap.fsid = *proto::Uuid::parse("01234567-89ab-cdef-0123-456789abcdef");
      mm->monmap.epoch = 1;
      con->send_message(mm);
      return true;
    }
    if (m->get_type() == MMonGetVersion::kType) {
      auto r = make_message<MMonGetVersionReply>();
      r->handle = static_cast<const MMonGetVersion&>(*m).handle;
      r->version = 42;
      r->oldest_version = 1;
      con->send_message(r);
      return true;
    }
    return false;
  }
  std::unique_ptr<Messenger> msgr;
  std::atomic<int> broken_left;
};

TEST(MonClientFakeMon, UnknownMessagesAreDroppedAndBadOnesOnlyFaultTheSession) {
  FakeMon fake(/*break_monmap=*/true);
  MonClientOptions o;
  o.mon_addrs = {fake.msgr->get_myaddrs()};
  MonClient mc(tcp_stack(), o);
  // The first session dies on the malformed MonMap (the messenger faults
  // that connection); the client reconnects and the second one works.
  const MonError e = mc.connect(20s);
  ASSERT_FALSE(e) << e.message;
  EXPECT_GE(mc.session_resets(), 1u);
  const VersionResult v = mc.get_version("osdmap", 20s);
  ASSERT_FALSE(v.error) << v.error.message;
  EXPECT_EQ(v.version, 42u);
  ASSERT_TRUE(mc.monmap().has_value());
  EXPECT_EQ(mc.monmap()->fsid.to_string(), "01234567-89ab-cdef-0123-456789abcdef");
  EXPECT_TRUE(mc.is_connected());
}

}  // namespace
}  // namespace siphon::mon
