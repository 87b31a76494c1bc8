// Malformed input from a raw socket: each case closes that connection with a
// logged reason, while a well-behaved connection on the same messenger keeps
// working. Cases: bad banner, bad CRC, oversized lengths, unknown tag, frame
// in the wrong state, undecodable payload, truncated stream, silence (ready
// timeout).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "msgr/proto/control.h"
#include "msgr/proto/frame.h"
#include "msgr/proto/message_header.h"
#include "msgr_test_util.h"

namespace siphon::test {
namespace {

using namespace std::chrono_literals;
constexpr std::uint16_t kType = 0x7200;

// A blocking TCP client socket with a receive timeout.
class RawSocket {
 public:
  explicit RawSocket(const NetAddress& to) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{20, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    connected_ = ::connect(fd_, to.sockaddr_ptr(), to.sockaddr_len()) == 0;
  }
  ~RawSocket() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const BufferList& bl) {
    std::string s = bl.to_string();
    send(s);
  }
  void send(const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the peer may already have closed
      off += static_cast<std::size_t>(n);
    }
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Reads until the peer closes (true) or the timeout (false).
  bool closed_by_peer() {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string wire(const proto::Frame& f) { return proto::encode_frame(f, proto::FrameRev::rev1).to_string(); }
std::string banner() { return proto::encode_banner(proto::Banner{}).to_string(); }

struct Malformed : ::testing::Test {
  MessengerOptions opts = test_options();
  std::unique_ptr<Messenger> server, client;
  RecordingDispatcher sd, cd;
  ConnectionRef good;
  std::uint64_t delivered = 0;

  void SetUp() override {
    opts.ms_connection_ready_timeout = 2s;
    server = make_messenger({entity_type::osd, 0}, opts);
    client = make_messenger({entity_type::client, 1}, opts);
    server->set_policy(entity_type::client, Policy::stateful_server());
    client->set_policy(entity_type::osd, Policy::lossless_client());
    ASSERT_NO_FATAL_FAILURE(start_pair(*server, sd, *client, cd));
    good = client->connect_to(entity_type::osd, server->get_myaddrs());
    good_connection_works();
  }
  void TearDown() override {
    client->shutdown();
    server->shutdown();
    client->wait();
    server->wait();
  }
  void good_connection_works() {
    good->send_message(make_message<Message>(kType));
    ++delivered;
    ASSERT_TRUE(sd.w.wait_for([&] { return sd.messages == delivered; }));
  }
  NetAddress addr() const { return server->get_myaddrs().front().addr; }
  // Sends `bytes`, expects the server to close, the reason to be logged and
  // the good connection to keep working (and never to have faulted).
  void expect_closed(const std::string& bytes, const std::string& reason, bool half_close = false) {
    LogCapture logs;
    const auto faults_before = server->stats().faults;
    {
      RawSocket s(addr());
      ASSERT_TRUE(s.connected());
      s.send(bytes);
      if (half_close) s.shutdown_write();
      EXPECT_TRUE(s.closed_by_peer()) << "server kept the connection open: " << reason;
    }
    EXPECT_TRUE(eventually([&] { return logs.contains(reason); }, 10s))
        << "no log line with '" << reason << "'";
    EXPECT_TRUE(eventually([&] { return server->stats().faults > faults_before; }, 10s));
    good_connection_works();
    EXPECT_TRUE(good->is_connected());
    EXPECT_EQ(cd.resets + cd.remote_resets, 0);
  }
};

TEST_F(Malformed, BadBanner) { expect_closed("GET / HTTP/1.1\r\nHost: x\r\n\r\n", "not a msgr2 banner"); }

TEST_F(Malformed, Msgr1Banner) { expect_closed("ceph v027" + std::string(200, 'x'), "msgr1"); }

TEST_F(Malformed, BadPreambleCrc) {
  std::string f = wire(proto::Hello{proto::kEntityTypeClient, EntityAddr()}.frame());
  f[28] = static_cast<char>(f[28] ^ 0x5a);
  expect_closed(banner() + f, "bad preamble crc");
}

TEST_F(Malformed, BadSegmentCrc) {
  std::string f = wire(proto::Hello{proto::kEntityTypeClient, EntityAddr()}.frame());
  f[40] = static_cast<char>(f[40] ^ 0x01);  // a payload byte: the segment crc no longer matches
  expect_closed(banner() + f, "crc");
}

TEST_F(Malformed, OversizedLength) {
  proto::Frame big = proto::Frame::control(proto::Tag::hello, BufferList::copy_of(std::string(16, 'a')));
  std::string f = wire(big);
  // Claim a 1 GiB segment 0 and fix the preamble crc so only the length is wrong.
  const std::uint32_t len = 1u << 30;
  std::memcpy(f.data() + 2, &len, 4);
  const std::uint32_t crc = BufferList::copy_of(f.data(), 28).crc32c(0);
  std::memcpy(f.data() + 28, &crc, 4);
  expect_closed(banner() + f.substr(0, 32), "over the limit");
}

TEST_F(Malformed, UnknownTag) {
  proto::Frame odd = proto::Frame::control(static_cast<proto::Tag>(99), BufferList::copy_of("x"));
  expect_closed(banner() + wire(odd), "unknown frame tag");
}

TEST_F(Malformed, FrameInTheWrongState) {
  proto::Frame m;
  m.tag = proto::Tag::message;
  m.segments[0] = proto::MessageHeader2::make(kType, 1, 0).encode();
  expect_closed(banner() + wire(m), "unexpected MESSAGE frame");
}

TEST_F(Malformed, UndecodablePayload) {
  proto::Frame hello = proto::Frame::control(proto::Tag::hello, BufferList::copy_of("\x08\x01\x01\x01", 4));
  expect_closed(banner() + wire(hello), "faulted");
}

TEST_F(Malformed, TruncatedStream) {
  const std::string f = wire(proto::Hello{proto::kEntityTypeClient, EntityAddr()}.frame());
  expect_closed(banner() + f.substr(0, f.size() / 2), "faulted", /*half_close=*/true);
}

TEST_F(Malformed, SilentPeerHitsTheReadyTimeout) { expect_closed(banner(), "ms_connection_ready_timeout"); }

}  // namespace
}  // namespace siphon::test
