// Issue 14: zero-copy rkeys are scoped to one connection. Two raw peers
// (built on the provider seam, tests/support/raw_rc_peer.h) connect to one
// server stack with one worker, so both connections share the worker, the
// PD, the pools and the CQ. The server sends a zero-copy MESSAGE to peer A;
// peer B, on its own connection, READs with the rkey A was given.
//
// With type-2 memory windows (the soft fabric's default, rxe, ConnectX) B's
// READ completes with a remote access error, B's connection is faulted, and
// A pulls both of its transfers intact. On a device without windows (the
// fallback, SoftOptions::memory_windows = false) the same READ succeeds: that
// is the hazard the fallback's start-up log line names, and the proof that
// the first case is not passing by accident.
//
// Inside the rxe guest (SIPHON_RXE_DEV set; ctest rxe.rdma_stack_rkey) the
// server and the raw peers use the verbs provider on rxe0 instead, and only
// the MemoryWindows case runs (the fallback is a soft-fabric option).
#include <gtest/gtest.h>

#include <cstdlib>

#include <cstring>

#include "msgr/proto/frame.h"
#include "raw_rc_peer.h"
#include "rdma/transport/credits.h"
#include "rdma/transport/rdma_wire.h"
#include "stack_test_util.h"
#ifdef SIPHON_HAVE_VERBS
#include "rdma/verbs/verbs_provider.h"
#endif

namespace siphon::rdma {
namespace {

using namespace test;
using siphon::test::RawRcPeer;

constexpr std::uint32_t kRecvSize = 16 * 1024;  // the stack's buffer_size in small_options()
constexpr std::uint32_t kCredits = 8;
constexpr std::size_t kData = 256 * 1024;       // above the 64 KiB zero-copy threshold
constexpr std::size_t kSendOff = 0;             // our SEND buffer
constexpr std::size_t kReadOff = kRecvSize;     // where READs land
constexpr std::size_t kRecvOff = kReadOff + kData;

// A raw client: SENDs from page 0, READs into [kReadOff, kReadOff + kData),
// receive slots after that. Completions it is not waiting for are kept.
class Peer : public RawRcPeer {
 public:
  explicit Peer(Provider& prov)
      : RawRcPeer(prov, {kRecvOff + std::size_t{kRecvSize} * (kCredits + kUpdateSlots), kRecvOff, kRecvSize,
                         kCredits, kUpdateSlots, static_cast<std::uint32_t>(kData)}) {}

  ::testing::AssertionResult send(const SendHeader& h, std::span<const std::uint8_t> payload = {}) {
    return send_at(kSendOff, h, payload);
  }
  ::testing::AssertionResult send_banner() { return send_banner_at(kSendOff); }

  // Waits for the server's next read_request; returns its id and regions.
  ::testing::AssertionResult next_read_request(std::uint64_t& id, std::vector<ReadDescriptor>& regions) {
    for (;;) {
      const auto wc = await([](const Wc& w) { return w.opcode == WcOpcode::recv; });
      if (!wc) return ::testing::AssertionFailure() << "no read_request";
      if (wc->status != WcStatus::success) return ::testing::AssertionFailure() << "receive: " << to_string(wc->status);
      const std::uint8_t* p = slot_data(static_cast<std::uint32_t>(wc->wr_id));
      SendHeader h;
      if (SendHeader::decode({p, wc->byte_len}, h)) return ::testing::AssertionFailure() << "undecodable SEND";
      if (h.type != SendType::read_request) continue;  // banner and frame bytes
      id = h.id;
      regions.clear();
      for (std::size_t off = SendHeader::kSize; off + ReadDescriptor::kSize <= wc->byte_len;
           off += ReadDescriptor::kSize)
        regions.push_back(ReadDescriptor::decode(p + off));
      return ::testing::AssertionSuccess();
    }
  }

  // READs `d` (at most kData bytes) into kReadOff; the completion's status.
  WcStatus read(const ReadDescriptor& d, std::uint32_t len) {
    const std::uint64_t id = next_wr_id();
    std::memset(at(kReadOff), 0, len);
    if (post_read(kReadOff, len, d.addr, d.rkey, id)) return WcStatus::general_error;
    const auto wc = await([id](const Wc& w) { return w.wr_id == id; });
    return wc ? wc->status : WcStatus::general_error;
  }
};

// The rxe device inside the guest (nullptr on the host: the soft fabric).
const char* rxe_device() { return std::getenv("SIPHON_RXE_DEV"); }

std::unique_ptr<Provider> make_provider(bool windows) {
#ifdef SIPHON_HAVE_VERBS
  if (rxe_device() != nullptr) return verbs::make_provider();
#endif
  soft::SoftOptions so;
  so.memory_windows = windows;
  return soft::make_provider(so);
}

struct Server {
  std::unique_ptr<Provider> provider;
  std::unique_ptr<RdmaStack> stack;
  AcceptQueue accepted;
  NetAddress bound;
  explicit Server(bool windows) {
    debug_logging();
    provider = make_provider(windows);
    RdmaOptions o = small_options();
    o.common.async_op_threads = 1;  // both connections on one worker
    std::string host = "127.0.0.1";
    if (rxe_device() != nullptr) {
      o.device_name = rxe_device();
      if (const char* a = std::getenv("SIPHON_RXE_ADDR")) host = a;  // rdma-cm does not work over rxe on lo
    }
    stack = std::make_unique<RdmaStack>(*provider, o);
    stack->start();
    EXPECT_FALSE(stack->listen(*NetAddress::parse(host + ":0"), accepted.handler(), bound));
  }
  ~Server() { stack->stop(); }
};

// Connects `peer`, starts the server's end with `h` and exchanges banners.
::testing::AssertionResult attach(Server& s, Peer& peer, transport::ConnectionRef& conn, Collector& h) {
  if (auto r = peer.connect(s.bound); !r) return r;
  conn = s.accepted.pop();
  if (!conn) return ::testing::AssertionFailure() << "not accepted";
  conn->worker().post([&conn, &h] { conn->start(h, proto::Banner{}); });
  if (auto r = peer.send_banner(); !r) return r;
  if (!h.wait([&] { return h.established || h.fault.has_value(); }) || !h.established)
    return ::testing::AssertionFailure() << "server end not established";
  return ::testing::AssertionSuccess();
}

bool data_is(Peer& p, std::uint32_t seed) {
  const BufferList want = pattern(kData, seed);
  return BufferList::copy_of(p.at(kReadOff), kData) == want;
}

class ScopedRkeys : public ::testing::TestWithParam<bool> {};

TEST_P(ScopedRkeys, AnRkeyOfConnectionAIsUselessOnConnectionB) {
  const bool windows = GetParam();
  if (!windows && rxe_device() != nullptr) GTEST_SKIP() << "the fallback is a soft-fabric option";
  LogCapture logs;
  Server server(windows);
  EXPECT_EQ(logs.contains("zero-copy rkeys are not connection-scoped"), !windows)
      << "one start-up line names the fallback";
  auto raw_provider = make_provider(true);
  Peer a(*raw_provider), b(*raw_provider);
  transport::ConnectionRef sa, sb;
  Collector ha, hb;
  ASSERT_TRUE(attach(server, a, sa, ha));
  ASSERT_TRUE(attach(server, b, sb, hb));
  EXPECT_EQ(&sa->worker(), &sb->worker()) << "one worker, one PD, one CQ for both";

  // Transfer 1 to A: its read_request names the region and the rkey.
  on_worker(*sa, [&] { return sa->send(message(1, 100, kData)); });
  std::uint64_t id = 0;
  std::vector<ReadDescriptor> regions;
  ASSERT_TRUE(a.next_read_request(id, regions));
  ASSERT_EQ(regions.size(), 1u);
  ASSERT_EQ(regions[0].length, kData);

  // B, on its own connection to the same stack, READs with A's rkey.
  const WcStatus stolen = b.read(regions[0], 4096);
  if (windows) {
    EXPECT_EQ(stolen, WcStatus::remote_access_error) << to_string(stolen);
    EXPECT_FALSE(data_is(b, 1 + 3));
    ASSERT_TRUE(hb.wait([&] { return hb.fault.has_value(); })) << "B's connection was not faulted";
    std::printf("scoped rkeys: B's READ with A's rkey: %s; B faulted: %s\n", std::string(to_string(stolen)).c_str(),
                hb.get_fault()->reason.c_str());
    EXPECT_EQ(server.stack->counters().snapshot().at("transfer_windows"), 1u);
  } else {
    // The hazard of the fallback: the MR's rkey is valid on every QP of the PD.
    EXPECT_EQ(stolen, WcStatus::success) << "without windows the rkey is stack-wide";
    EXPECT_EQ(server.stack->counters().snapshot().at("transfer_windows"), 0u);
  }

  // A is unharmed: it pulls transfer 1, releases it, and does it again.
  for (std::uint32_t round = 1; round <= 2; ++round) {
    if (round == 2) {
      on_worker(*sa, [&] { return sa->send(message(2, 100, kData)); });
      ASSERT_TRUE(a.next_read_request(id, regions));
      ASSERT_EQ(regions.size(), 1u);
    }
    ASSERT_EQ(a.read(regions[0], kData), WcStatus::success) << "round " << round;
    EXPECT_TRUE(data_is(a, round + 3)) << "round " << round;
    SendHeader done;
    done.type = SendType::read_done;
    done.id = id;
    ASSERT_TRUE(a.send(done));
  }
  // Both read_dones were taken (a third one for transfer 2 would fault A:
  // the transfer is gone), and A's end never faulted.
  EXPECT_FALSE(ha.get_fault()) << ha.get_fault()->reason;
  EXPECT_EQ(server.stack->counters().snapshot().at("zero_copy_transfers"), 2u);
  if (windows) {
    EXPECT_EQ(server.stack->counters().snapshot().at("transfer_windows"), 2u);
  }
  close_sync(sa);
  close_sync(sb);
  sa.reset();
  sb.reset();
  EXPECT_TRUE(no_leaks(*server.stack));
}

INSTANTIATE_TEST_SUITE_P(RdmaStack, ScopedRkeys, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "MemoryWindows" : "FallbackWithoutWindows");
                         });

}  // namespace
}  // namespace siphon::rdma
