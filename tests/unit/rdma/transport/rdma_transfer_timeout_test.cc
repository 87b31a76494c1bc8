// ms_async_rdma_transfer_timeout: a zero-copy transfer that does not finish
// in time faults its connection, with a reason naming the option, on either
// side of it:
//   - the peer never reads: our read_request gets no read_done (a raw RC
//     peer that takes the read_request and does nothing);
//   - the peer never answers our RDMA READ: the server's fabric holds each
//     of its work requests for 10 minutes (the software fabric's delay
//     fault) and its ACK timeout is the longest there is, so neither the
//     READ of the raw peer's region nor a transport retry can complete or
//     fail before the transfer timeout, however loaded the machine.
// Nothing here asserts a duration: only that the fault comes, and why.
#include <gtest/gtest.h>

#include <cstring>

#include "raw_rc_peer.h"
#include "rdma/transport/credits.h"
#include "rdma/transport/rdma_wire.h"
#include "stack_test_util.h"

namespace siphon::rdma {
namespace {

using namespace test;
using siphon::test::RawRcPeer;

constexpr std::uint32_t kRecvSize = 4096;
constexpr std::uint32_t kCredits = 8;
constexpr std::size_t kData = 128 * 1024;  // above the 64 KiB threshold: zero-copy

// Page 0..31: the region a read_request of ours advertises; then the send
// buffer; then the receive buffers.
constexpr std::size_t kSendOff = kData;
constexpr std::size_t kRecvOff = kSendOff + kRecvSize;

class Peer : public RawRcPeer {
 public:
  explicit Peer(Provider& prov)
      : RawRcPeer(prov, {kRecvOff + std::size_t{kRecvSize} * (kCredits + kUpdateSlots), kRecvOff, kRecvSize,
                         kCredits, kUpdateSlots, /*max_read=*/1u << 20}) {}

  ::testing::AssertionResult send(const SendHeader& h, std::span<const std::uint8_t> payload = {}) {
    return send_at(kSendOff, h, payload);
  }
  ::testing::AssertionResult send_banner() { return send_banner_at(kSendOff); }
};

RdmaOptions timeout_options(std::uint8_t ack_timeout) {
  RdmaOptions o = small_options();
  o.ack_timeout = ack_timeout;
  o.common.async_op_threads = 1;
  o.transfer_timeout = std::chrono::milliseconds(300);
  return o;
}

// A server stack on `provider`, a raw peer connected to it, the accepted
// connection started and past the banner exchange.
struct ServerAndRawPeer {
  std::unique_ptr<Provider> provider;
  std::unique_ptr<Provider> peer_provider = soft::make_provider();
  std::unique_ptr<RdmaStack> server;
  AcceptQueue accepted;
  NetAddress bound;
  std::unique_ptr<Peer> peer;
  transport::ConnectionRef conn;
  Collector handler;

  explicit ServerAndRawPeer(const soft::SoftOptions& so = {}, std::uint8_t ack_timeout = RdmaOptions{}.ack_timeout)
      : provider(soft::make_provider(so)) {
    debug_logging();
    server = std::make_unique<RdmaStack>(*provider, timeout_options(ack_timeout));
    server->start();
    EXPECT_FALSE(server->listen(*NetAddress::parse("127.0.0.1:0"), accepted.handler(), bound));
    peer = std::make_unique<Peer>(*peer_provider);
  }
  ::testing::AssertionResult open() {
    if (auto r = peer->connect(bound); !r) return r;
    conn = accepted.pop();
    if (!conn) return ::testing::AssertionFailure() << "no connection accepted";
    conn->worker().post([this] { conn->start(handler, proto::Banner{}); });
    return peer->send_banner();
  }
  ~ServerAndRawPeer() {
    close_sync(conn);
    conn.reset();
    peer.reset();
    server->stop();
  }
};

void expect_timeout_fault(Collector& h, const char* what) {
  ASSERT_TRUE(h.wait([&] { return h.fault.has_value(); })) << "no fault: the stalled transfer went unnoticed";
  const auto f = h.get_fault();
  EXPECT_EQ(f->code, make_error_code(errc::timed_out)) << f->code.message() << ": " << f->reason;
  EXPECT_NE(f->reason.find("ms_async_rdma_transfer_timeout"), std::string::npos) << f->reason;
  EXPECT_NE(f->reason.find(what), std::string::npos) << f->reason;
}

std::uint64_t timeouts(const RdmaStack& s) { return s.counters().snapshot().at("transfer_timeouts"); }

TEST(RdmaTransferTimeout, APeerThatNeverReadsFaultsTheSender) {
  ServerAndRawPeer s;
  ASSERT_TRUE(s.open());
  ASSERT_TRUE(s.handler.wait([&] { return s.handler.established || s.handler.fault.has_value(); }));
  ASSERT_TRUE(s.handler.established);
  // A MESSAGE with 128 KiB of data: the server offers it by read_request,
  // which the raw peer receives and ignores.
  ASSERT_FALSE(on_worker(*s.conn, [&] { return s.conn->send(message(1, 100, kData)); }));
  ASSERT_NO_FATAL_FAILURE(expect_timeout_fault(s.handler, "no read_done from the peer"));
  EXPECT_GE(s.server->counters().snapshot().at("zero_copy_transfers"), 1u);
  EXPECT_EQ(timeouts(*s.server), 1u);
}

TEST(RdmaTransferTimeout, AReadThatNeverCompletesFaultsTheReceiver) {
  // Every work request of the server waits 10 minutes before the fabric
  // transmits it: its RDMA READ of the peer's region does not complete.
  soft::SoftOptions so;
  so.faults.delay.probability = 1.0;
  so.faults.delay_us = 600'000'000;
  ServerAndRawPeer s(so, /*ack_timeout=*/31);  // 4.096 us x 2^31: no retry timeout either
  ASSERT_TRUE(s.open());
  ReadDescriptor d{s.peer->addr(0), s.peer->rkey(), static_cast<std::uint32_t>(kData)};
  std::uint8_t desc[ReadDescriptor::kSize + ReadDescriptor::kCrcSize];
  d.encode(desc);
  ReadDescriptor::seal(desc, 1);  // wire v2: the descriptors carry their CRC
  SendHeader h;
  h.type = SendType::read_request;
  h.length = static_cast<std::uint32_t>(kData);
  h.id = 1;
  ASSERT_TRUE(s.peer->send(h, desc));
  ASSERT_NO_FATAL_FAILURE(expect_timeout_fault(s.handler, "RDMA READ from the peer not complete"));
  EXPECT_GE(s.server->counters().snapshot().at("rdma_reads"), 1u);
  EXPECT_EQ(timeouts(*s.server), 1u);
}

}  // namespace
}  // namespace siphon::rdma
