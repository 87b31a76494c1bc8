// BulkTransfers through its port alone: no QP, no connection, no peer. The
// port records what the class asks of the connection (WRs into the batch,
// flushes, read_done SENDs, faults, waits for buffers); the receive pool has
// a registrar that registers nothing; a software-fabric PD (no QP) backs the
// registrations of what we offer. Nothing here asserts a duration: the
// timeout tests only check that the fault comes, and why.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "msgr/base/error.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/transport/bulk_transfers_impl.h"

namespace siphon::rdma {
namespace {

struct NoRegistrar : Registrar {
  std::error_code register_region(void*, std::size_t, RegionKeys& keys) override {
    keys.lkey = 0x11;
    keys.rkey = 0x22;
    return {};
  }
  void deregister_region(const RegionKeys&) noexcept override {}
};

// What the class asked of "the connection".
struct Record {
  struct Posted {
    WrCtx::Kind kind;
    SendWr wr;
    Sge sge;
    WrCtx* ctx;
  };
  bool open = true;
  std::uint32_t sq_depth = 64;
  std::size_t in_flight = 0;  // WRs posted and not retired (send_queue_full)
  std::deque<WrCtx> ctxs;     // stable addresses, as the connection's ctx pool
  std::vector<Posted> posted;
  int flushes = 0;
  std::vector<std::uint64_t> read_dones;
  struct Fault {
    std::error_code ec;
    std::string reason;
  };
  std::vector<Fault> faults;
  std::vector<std::size_t> waits;
  std::shared_ptr<int> alive = std::make_shared<int>(0);
};

struct FakePort {
  Record& r;
  bool open() const noexcept { return r.open; }
  std::uint32_t qp_num() const noexcept { return 7; }
  std::uint32_t send_queue_depth() const noexcept { return r.sq_depth; }
  bool send_queue_full() const noexcept { return r.in_flight >= r.sq_depth; }
  WrCtx* post(WrCtx::Kind kind, SendWr wr, const Sge* sge) {
    r.ctxs.push_back(WrCtx{kind});
    WrCtx* ctx = &r.ctxs.back();
    wr.wr_id = reinterpret_cast<std::uint64_t>(ctx);
    r.posted.push_back({kind, wr, sge != nullptr ? *sge : Sge{}, ctx});
    ++r.in_flight;
    return ctx;
  }
  void flush() { ++r.flushes; }
  void queue_read_done(std::uint64_t id) { r.read_dones.push_back(id); }
  void fault(std::error_code ec, std::string reason) { r.faults.push_back({ec, std::move(reason)}); }
  void wait_for_recv_buffers(std::size_t n) { r.waits.push_back(n); }
  std::weak_ptr<void> keepalive() const { return r.alive; }
};

using Bulk = BulkTransfers<FakePort>;
constexpr std::size_t kBuf = 4096;

struct Fixture {
  std::unique_ptr<Provider> provider;
  NoRegistrar registrar;  // outlives the pool in `shared`
  RdmaShared shared;
  std::unique_ptr<PoolCache> cache;
  RdmaWorkerCounters counters{0};
  boost::asio::io_context io;
  Record rec;
  std::unique_ptr<Bulk> bulk;

  explicit Fixture(std::size_t recv_buffers = 64, std::chrono::milliseconds timeout = std::chrono::seconds(30),
                   bool scoped = false)
      : provider(soft::make_provider()), shared(*provider, options(recv_buffers, timeout)) {
    std::error_code ec;
    shared.device = provider->open_device("soft0", ec);
    EXPECT_TRUE(shared.device) << ec.message();
    if (shared.device) shared.pd = shared.device->alloc_pd(ec);
    EXPECT_TRUE(shared.pd) << ec.message();
    shared.scoped_rkeys = scoped;
    shared.recv_pool =
        std::make_unique<BufferPool>(PoolConfig{"recv", kBuf, recv_buffers, recv_buffers, 4, false}, registrar);
    EXPECT_FALSE(shared.recv_pool->prefill_slab()) << "the whole pool, so the data path never waits for the grower";
    cache = std::make_unique<PoolCache>(*shared.recv_pool);
    bulk = std::make_unique<Bulk>(shared, *cache, counters, io, FakePort{rec});
  }
  ~Fixture() {
    bulk.reset();  // its buffers back to the pool before the cache and pool go
    cache.reset();
  }
  static RdmaOptions options(std::size_t recv_buffers, std::chrono::milliseconds timeout) {
    RdmaOptions o;
    o.buffer_size = kBuf;
    o.receive_buffers = recv_buffers;
    o.transfer_timeout = timeout;
    return o;
  }

  // A read_request SEND as it arrives: header, descriptors, their CRC.
  std::error_code read_request(std::uint64_t id, const std::vector<ReadDescriptor>& regions, std::string& why,
                               std::int64_t length_delta = 0) {
    std::vector<std::uint8_t> send(SendHeader::kSize + regions.size() * ReadDescriptor::kSize +
                                   ReadDescriptor::kCrcSize);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < regions.size(); ++i) {
      regions[i].encode(send.data() + SendHeader::kSize + i * ReadDescriptor::kSize);
      total += regions[i].length;
    }
    ReadDescriptor::seal(send.data() + SendHeader::kSize, regions.size());
    SendHeader h;
    h.type = SendType::read_request;
    h.id = id;
    h.length = static_cast<std::uint32_t>(static_cast<std::int64_t>(total) + length_delta);
    return bulk->on_read_request(h, send.data(), send.size(), why);
  }
  // Retires every posted READ not retired yet (as a signaled completion does).
  void retire_reads(bool ok = true) {
    for (auto& p : rec.posted)
      if (p.kind == WrCtx::Kind::read && p.ctx->transfer != nullptr) {
        bulk->read_retired(*p.ctx->transfer, ok);
        p.ctx->transfer = nullptr;
        --rec.in_flight;
      }
  }
  proto::Frame message(std::size_t a, std::size_t b) {
    proto::Frame f;
    f.tag = proto::Tag::message;
    f.segments[3] = BufferList::copy_of(std::string(a, 'a'));
    f.segments[3].append(BufferList::copy_of(std::string(b, 'b')));
    return f;
  }
};

TEST(BulkTransfers, ReadsGoOutInBufferSizedChunksAndReadDoneOnceTheLastRetires) {
  Fixture fx;
  std::string why;
  const std::vector<ReadDescriptor> regions{{0x10000, 0xAB, 6000}, {0x50000, 0xCD, 3000}};
  ASSERT_FALSE(fx.read_request(9, regions, why)) << why;
  EXPECT_EQ(fx.bulk->in_count(), 1u);
  EXPECT_TRUE(fx.rec.posted.empty()) << "nothing is posted before issue_reads()";
  fx.bulk->issue_reads();
  ASSERT_EQ(fx.rec.posted.size(), 3u) << "6000 B = 4096 + 1904, then 3000";
  const std::uint64_t addrs[] = {0x10000, 0x10000 + kBuf, 0x50000};
  const std::uint32_t lens[] = {4096, 1904, 3000};
  const std::uint32_t rkeys[] = {0xAB, 0xAB, 0xCD};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& p = fx.rec.posted[i];
    EXPECT_EQ(p.kind, WrCtx::Kind::read);
    EXPECT_EQ(p.wr.opcode, Opcode::rdma_read);
    EXPECT_EQ(p.wr.num_sge, 1u);
    EXPECT_EQ(p.wr.remote_addr, addrs[i]) << i;
    EXPECT_EQ(p.wr.rkey, rkeys[i]) << i;
    EXPECT_EQ(p.sge.length, lens[i]) << i;
    EXPECT_EQ(p.sge.lkey, 0x11u) << "into our receive pool";
    EXPECT_EQ(p.ctx->len, lens[i]);
    EXPECT_NE(p.ctx->transfer, nullptr);
  }
  EXPECT_GE(fx.rec.flushes, 1);
  EXPECT_EQ(fx.counters.rdma_reads.load(), 3u);
  EXPECT_EQ(fx.shared.recv_pool->buffers_in_use(), 3u) << "reserved all at once";

  // Two of three retired: not ready, no read_done.
  fx.bulk->read_retired(*fx.rec.posted[0].ctx->transfer, true);
  fx.bulk->read_retired(*fx.rec.posted[1].ctx->transfer, true);
  EXPECT_TRUE(fx.rec.read_dones.empty());
  EXPECT_FALSE(fx.bulk->front_ready());
  fx.bulk->read_retired(*fx.rec.posted[2].ctx->transfer, true);
  ASSERT_EQ(fx.rec.read_dones.size(), 1u);
  EXPECT_EQ(fx.rec.read_dones[0], 9u);
  ASSERT_TRUE(fx.bulk->front_ready());
  BufferList data = fx.bulk->take_front();
  EXPECT_EQ(data.length(), 9000u);
  EXPECT_EQ(data.segment_count(), 3u) << "the pool buffers themselves, no copy";
  EXPECT_EQ(fx.bulk->in_count(), 0u);
  data.clear();
  EXPECT_EQ(fx.shared.recv_pool->buffers_in_use(), 0u);
}

TEST(BulkTransfers, AFailedReadQueuesNoReadDone) {
  Fixture fx;
  std::string why;
  ASSERT_FALSE(fx.read_request(1, {{0x1000, 1, 100}}, why)) << why;
  fx.bulk->issue_reads();
  fx.retire_reads(/*ok=*/false);
  EXPECT_TRUE(fx.rec.read_dones.empty()) << "the connection faults on the error completion instead";
}

TEST(BulkTransfers, UnknownAndDuplicateReadDoneAreRefusedWithTheReason) {
  Fixture fx;
  std::string why;
  EXPECT_EQ(fx.bulk->on_read_done(42, why), make_error_code(errc::malformed_frame));
  EXPECT_EQ(why, "read_done for a transfer that does not exist");

  proto::Frame f = fx.message(3000, 5000);
  ASSERT_EQ(f.segments[3].segment_count(), 2u);
  std::uint64_t id = 0;
  std::vector<ReadDescriptor> regions;
  ASSERT_FALSE(fx.bulk->offer(f, id, regions));
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[0].length, 3000u);
  EXPECT_EQ(regions[1].length, 5000u);
  EXPECT_EQ(regions[0].addr, reinterpret_cast<std::uint64_t>(f.segments[3].ptrs()[0].data())) << "in place";
  EXPECT_EQ(fx.bulk->out_count(), 1u);
  EXPECT_EQ(fx.counters.transfer_registrations.load(), 2u);
  fx.bulk->read_request_sent(id);
  EXPECT_TRUE(fx.rec.posted.empty()) << "no binds without scoped rkeys";

  why.clear();
  EXPECT_FALSE(fx.bulk->on_read_done(id, why)) << why;
  EXPECT_EQ(fx.bulk->out_count(), 0u);
  EXPECT_EQ(fx.bulk->on_read_done(id, why), make_error_code(errc::malformed_frame)) << "a duplicate";
  EXPECT_EQ(why, "read_done for a transfer that does not exist");
  EXPECT_TRUE(fx.rec.faults.empty()) << "the caller faults; the class only says why";
}

TEST(BulkTransfers, ScopedRkeysBindAWindowPerRegionBeforeTheReadRequest) {
  Fixture fx(64, std::chrono::seconds(30), /*scoped=*/true);
  proto::Frame f = fx.message(1000, 2000);
  std::uint64_t id = 0;
  std::vector<ReadDescriptor> regions;
  ASSERT_FALSE(fx.bulk->offer(f, id, regions));
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_TRUE(fx.rec.posted.empty()) << "binds go with the read_request, not before";
  fx.bulk->read_request_sent(id);
  ASSERT_EQ(fx.rec.posted.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(fx.rec.posted[i].kind, WrCtx::Kind::bind);
    EXPECT_EQ(fx.rec.posted[i].wr.opcode, Opcode::bind_mw);
    EXPECT_EQ(fx.rec.posted[i].wr.rkey, regions[i].rkey) << "the rkey advertised is the window's after the bind";
  }
  fx.bulk->read_request_sent(id);
  EXPECT_EQ(fx.rec.posted.size(), 2u) << "bound once";
  EXPECT_EQ(fx.counters.transfer_windows.load(), 2u);
}

TEST(BulkTransfers, DataFromOurOwnReceivePoolIsCopiedBeforeItIsOffered) {
  Fixture fx;
  PoolBuffer* b = fx.shared.recv_pool->get();
  ASSERT_NE(b, nullptr);
  std::memset(b->data(), 'x', 1000);
  proto::Frame f;
  f.tag = proto::Tag::message;
  f.segments[3].append(BufferPool::wrap(b, 1000));
  std::uint64_t id = 0;
  std::vector<ReadDescriptor> regions;
  ASSERT_FALSE(fx.bulk->offer(f, id, regions));
  ASSERT_EQ(regions.size(), 1u);
  EXPECT_NE(regions[0].addr, reinterpret_cast<std::uint64_t>(b->data())) << "the copy is offered";
  EXPECT_EQ(fx.counters.zero_copy_pool_copies.load(), 1u);
  EXPECT_EQ(fx.shared.recv_pool->buffers_in_use(), 0u) << "the pool buffer is not held by the transfer";
}

TEST(BulkTransfers, MalformedAndOversizedReadRequestsAreRefusedWithTheReason) {
  Fixture fx(/*recv_buffers=*/8);  // max_read = half the pool = 4 x 4096
  std::string why;
  EXPECT_EQ(fx.read_request(1, {{0x1000, 1, 100}}, why, /*length_delta=*/+1), make_error_code(errc::malformed_frame));
  EXPECT_EQ(why, "read request descriptors disagree with its length");
  EXPECT_EQ(fx.read_request(2, {{0x1000, 1, 100}, {0x2000, 1, 0}}, why), make_error_code(errc::malformed_frame))
      << "a descriptor of 0 bytes";
  EXPECT_EQ(why, "read request descriptors disagree with its length");
  EXPECT_EQ(fx.read_request(3, {{0x1000, 1, 4 * kBuf + 1}}, why), make_error_code(errc::malformed_frame));
  EXPECT_EQ(why, "peer offered a 16385-byte zero-copy transfer; we take at most 16384");
  EXPECT_EQ(fx.bulk->in_count(), 0u) << "nothing refused is kept";
  EXPECT_FALSE(fx.read_request(4, {{0x1000, 1, 4 * kBuf}}, why)) << why;
}

TEST(BulkTransfers, AReservationTakesEveryBufferOrNoneAndWaits) {
  Fixture fx(/*recv_buffers=*/8);
  std::string why;
  ASSERT_FALSE(fx.read_request(1, {{0x1000, 1, 3 * kBuf}}, why)) << why;
  ASSERT_FALSE(fx.read_request(2, {{0x9000, 1, 4 * kBuf}}, why)) << why;
  PoolBuffer* held[2] = {fx.shared.recv_pool->get(), fx.shared.recv_pool->get()};  // 6 of 8 left
  fx.bulk->issue_reads();
  ASSERT_EQ(fx.rec.posted.size(), 3u) << "the first transfer fits";
  ASSERT_EQ(fx.rec.waits.size(), 1u) << "the second needs 4 with 3 left: it waits";
  EXPECT_EQ(fx.rec.waits[0], 4u);
  EXPECT_EQ(fx.shared.recv_pool->buffers_in_use(), 5u) << "3 reserved + 2 held: the second holds none";
  for (PoolBuffer* b : held) fx.shared.recv_pool->put(b);
  fx.bulk->issue_reads();  // as the pool's wake-up does
  EXPECT_EQ(fx.rec.posted.size(), 7u);
  EXPECT_EQ(fx.rec.posted[3].wr.remote_addr, 0x9000u) << "in arrival order";
}

TEST(BulkTransfers, AFullSendQueueStopsTheReadsUntilThereIsRoom) {
  Fixture fx;
  fx.rec.sq_depth = 2;
  std::string why;
  ASSERT_FALSE(fx.read_request(1, {{0x1000, 1, 3 * kBuf}}, why)) << why;
  fx.bulk->issue_reads();
  EXPECT_EQ(fx.rec.posted.size(), 2u);
  fx.retire_reads();
  EXPECT_TRUE(fx.rec.read_dones.empty()) << "one READ is still to be issued";
  fx.bulk->issue_reads();
  EXPECT_EQ(fx.rec.posted.size(), 3u);
  fx.retire_reads();
  EXPECT_EQ(fx.rec.read_dones.size(), 1u);
}

// The timer is the only work: run() returns once it has fired and not
// re-armed. The bound is no timing assertion, only a cap for a timer that
// keeps re-arming (a broken expiry check): the test then fails, not hangs.
void run_timer(Fixture& fx) { fx.io.run_for(std::chrono::seconds(20)); }

TEST(BulkTransfers, TimeoutWithoutReadDoneFaultsNamingTheOption) {
  Fixture fx(64, std::chrono::milliseconds(20));
  proto::Frame f = fx.message(1000, 1000);
  std::uint64_t id = 0;
  std::vector<ReadDescriptor> regions;
  ASSERT_FALSE(fx.bulk->offer(f, id, regions));
  fx.bulk->read_request_sent(id);
  const auto before = fx.shared.counters.transfer_timeouts.load();
  run_timer(fx);
  ASSERT_EQ(fx.rec.faults.size(), 1u);
  EXPECT_EQ(fx.rec.faults[0].ec, make_error_code(errc::timed_out));
  EXPECT_NE(fx.rec.faults[0].reason.find("no read_done from the peer within ms_async_rdma_transfer_timeout"),
            std::string::npos)
      << fx.rec.faults[0].reason;
  EXPECT_EQ(fx.shared.counters.transfer_timeouts.load(), before + 1);
}

TEST(BulkTransfers, TimeoutOfAnUnfinishedReadFaultsNamingTheOption) {
  Fixture fx(64, std::chrono::milliseconds(20));
  std::string why;
  ASSERT_FALSE(fx.read_request(5, {{0x1000, 1, 100}}, why)) << why;
  fx.bulk->issue_reads();  // posted, never retired
  run_timer(fx);
  ASSERT_EQ(fx.rec.faults.size(), 1u);
  EXPECT_EQ(fx.rec.faults[0].ec, make_error_code(errc::timed_out));
  EXPECT_NE(fx.rec.faults[0].reason.find("zero-copy transfer 5 (100 bytes): RDMA READ from the peer not complete "
                                         "within ms_async_rdma_transfer_timeout"),
            std::string::npos)
      << fx.rec.faults[0].reason;
}

TEST(BulkTransfers, FinishedTransfersAndAGoneConnectionTimeNothingOut) {
  {
    Fixture fx(64, std::chrono::milliseconds(20));
    std::string why;
    ASSERT_FALSE(fx.read_request(5, {{0x1000, 1, 100}}, why)) << why;
    fx.bulk->issue_reads();
    fx.retire_reads();
    proto::Frame f = fx.message(10, 10);
    std::uint64_t id = 0;
    std::vector<ReadDescriptor> regions;
    ASSERT_FALSE(fx.bulk->offer(f, id, regions));
    fx.bulk->read_request_sent(id);
    ASSERT_FALSE(fx.bulk->on_read_done(id, why)) << why;
    run_timer(fx);
    EXPECT_TRUE(fx.rec.faults.empty()) << fx.rec.faults[0].reason;
  }
  {
    Fixture fx(64, std::chrono::milliseconds(20));
    std::string why;
    ASSERT_FALSE(fx.read_request(5, {{0x1000, 1, 100}}, why)) << why;
    fx.bulk->issue_reads();
    fx.rec.alive.reset();  // the connection is gone when the timer fires
    run_timer(fx);
    EXPECT_TRUE(fx.rec.faults.empty());
  }
  {
    Fixture fx(64, std::chrono::milliseconds(20));
    std::string why;
    ASSERT_FALSE(fx.read_request(5, {{0x1000, 1, 100}}, why)) << why;
    fx.bulk->issue_reads();
    fx.bulk->stop();  // closing: the timer is cancelled
    run_timer(fx);
    EXPECT_TRUE(fx.rec.faults.empty());
  }
}

TEST(BulkTransfers, StopDropsOfferedTransfersAndIssuesNoMoreReads) {
  Fixture fx;
  proto::Frame f = fx.message(10, 10);
  std::uint64_t id = 0;
  std::vector<ReadDescriptor> regions;
  ASSERT_FALSE(fx.bulk->offer(f, id, regions));
  std::string why;
  ASSERT_FALSE(fx.read_request(1, {{0x1000, 1, 100}}, why)) << why;
  fx.bulk->stop();
  EXPECT_EQ(fx.bulk->out_count(), 0u) << "registrations go when the QP is in ERR";
  fx.bulk->issue_reads();
  EXPECT_TRUE(fx.rec.posted.empty());
  EXPECT_EQ(fx.bulk->in_count(), 1u) << "kept until destruction (its READs may still flush back)";
}

}  // namespace
}  // namespace siphon::rdma
