// Memory conformance of the soft fabric: 10 million operations (registered,
// posted, polled) between two QPs; the process's resident set after warm-up
// must not grow by more than a small tolerance. SIPHON_MEMTEST_OPS overrides
// the count (sanitizer builds use fewer).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "rdma/soft/soft_provider.h"

namespace siphon::rdma {
namespace {

long rss_kib() {
  long pages_total = 0, pages_rss = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_rss) != 2) pages_rss = -1;
  std::fclose(f);
  return pages_rss * (::sysconf(_SC_PAGESIZE) / 1024);
}

TEST(SoftMemory, TenMillionOperationsDoNotGrowRss) {
  std::uint64_t total = 10'000'000;
  if (const char* v = std::getenv("SIPHON_MEMTEST_OPS")) total = std::strtoull(v, nullptr, 10);
  constexpr std::uint32_t kDepth = 2048, kBatch = 512, kSignalEvery = 128;
  constexpr long kToleranceKib = 4096;  // allocator noise, never a leak per operation

  auto prov = soft::make_provider();
  std::error_code ec;
  auto dev = prov->open_device("soft0", ec);
  ASSERT_TRUE(dev);
  auto pd = dev->alloc_pd(ec);
  auto cq_a = dev->create_cq(8192, ec), cq_b = dev->create_cq(8192, ec);
  QpInit init;
  init.caps.max_send_wr = init.caps.max_recv_wr = kDepth;
  init.caps.max_send_sge = init.caps.max_recv_sge = 1;
  init.caps.max_inline_data = 64;
  init.send_cq = init.recv_cq = cq_a.get();
  auto qa = pd->create_qp(init, ec);
  init.send_cq = init.recv_cq = cq_b.get();
  auto qb = pd->create_qp(init, ec);
  ASSERT_TRUE(qa && qb) << ec.message();
  std::vector<GidEntry> gids;
  ASSERT_FALSE(dev->query_gids(1, gids));
  std::uint8_t gi = 0;
  for (const auto& g : gids)
    if (g.gid[10] == 0xff && g.gid[12] == 127) gi = static_cast<std::uint8_t>(g.index);
  auto up = [&](QueuePair& q, std::uint32_t dest) {
    QpAttr a;
    a.state = QpState::init;
    a.access_flags = kLocalWrite | kRemoteWrite | kRemoteRead;
    ASSERT_FALSE(q.modify(a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags));
    a.state = QpState::rtr;
    a.av.dgid = gids[gi].gid;
    a.av.sgid_index = gi;
    a.dest_qp_num = dest;
    ASSERT_FALSE(q.modify(a, kAttrState | kAttrPath | kAttrDestQpn | kAttrRqPsn |
                                 kAttrMaxDestRdAtomic | kAttrMinRnrTimer));
    a.state = QpState::rts;
    ASSERT_FALSE(q.modify(a, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt |
                                 kAttrRnrRetry | kAttrMaxRdAtomic));
  };
  up(*qa, qb->qp_num());
  up(*qb, qa->qp_num());

  std::vector<std::uint8_t> src(64 * 1024), dst(64 * 1024);
  auto mr_src = pd->reg_mr(src.data(), src.size(), kLocalWrite, ec);
  auto mr_dst = pd->reg_mr(dst.data(), dst.size(), kLocalWrite | kRemoteWrite, ec);
  ASSERT_TRUE(mr_src && mr_dst);

  // Each round: kBatch RDMA WRITEs (every kSignalEvery-th signaled) plus
  // kBatch/8 SEND/RECV pairs; every 64 rounds an MR is registered and
  // deregistered. Operations counted: work requests posted (each of which
  // completes; signaled ones are polled) plus registrations.
  std::vector<SendWr> writes(kBatch), sends(kBatch / 8);
  std::vector<RecvWr> recvs(kBatch / 8);
  std::vector<Sge> wsg(kBatch), ssg(kBatch / 8), rsg(kBatch / 8);
  for (std::uint32_t i = 0; i < kBatch; ++i) {
    wsg[i] = Sge{reinterpret_cast<std::uint64_t>(src.data()) + (i % 1024) * 64, 32, mr_src->lkey()};
    writes[i].wr_id = i;
    writes[i].opcode = Opcode::rdma_write;
    writes[i].flags = (i + 1) % kSignalEvery == 0 ? kSignaled : 0u;
    writes[i].sg_list = &wsg[i];
    writes[i].num_sge = 1;
    writes[i].remote_addr = reinterpret_cast<std::uint64_t>(dst.data()) + (i % 1024) * 64;
    writes[i].rkey = mr_dst->rkey();
  }
  for (std::uint32_t i = 0; i < kBatch / 8; ++i) {
    ssg[i] = Sge{reinterpret_cast<std::uint64_t>(src.data()) + i * 64, 16, mr_src->lkey()};
    sends[i].wr_id = 100000 + i;
    sends[i].flags = kSignaled | kInline;
    sends[i].sg_list = &ssg[i];
    sends[i].num_sge = 1;
    rsg[i] = Sge{reinterpret_cast<std::uint64_t>(dst.data()) + i * 64, 64, mr_dst->lkey()};
    recvs[i] = RecvWr{200000 + i, &rsg[i], 1};
  }
  std::vector<Wc> wc(1024);
  std::uint64_t ops = 0;
  long rss_warm = 0, rss_peak = 0;
  const std::uint64_t warm = std::min<std::uint64_t>(total / 10, 1'000'000);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t round = 0; ops < total; ++round) {
    ASSERT_FALSE(qb->post_recv(recvs, nullptr));
    ASSERT_FALSE(qa->post_send(writes, nullptr));
    ASSERT_FALSE(qa->post_send(sends, nullptr));
    // Completions: kBatch/kSignalEvery writes + sends on A, recvs on B.
    std::size_t want_a = kBatch / kSignalEvery + kBatch / 8, want_b = kBatch / 8;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((want_a != 0 || want_b != 0) && std::chrono::steady_clock::now() < deadline) {
      std::size_t n = cq_a->poll(wc);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(wc[i].status, WcStatus::success);
      want_a -= n;
      n = cq_b->poll(wc);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(wc[i].status, WcStatus::success);
      want_b -= n;
    }
    ASSERT_EQ(want_a + want_b, 0u) << "completions missing in round " << round;
    ops += kBatch + 2ull * (kBatch / 8);  // work requests posted and completed
    if (round % 64 == 0) {
      std::vector<std::uint8_t>* pool = &dst;
      auto mr = pd->reg_mr(pool->data(), 4096, kLocalWrite, ec);
      ASSERT_TRUE(mr);
      ops += 1;
    }
    if (rss_warm == 0 && ops >= warm) rss_warm = rss_kib();
    if (rss_warm != 0) rss_peak = std::max(rss_peak, rss_kib());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("memory test: %llu operations in %.1f s (%.0f ops/s); RSS after warm-up %ld KiB, "
              "peak %ld KiB (tolerance %ld KiB)\n",
              static_cast<unsigned long long>(ops), secs, ops / secs, rss_warm, rss_peak,
              kToleranceKib);
#if defined(__SANITIZE_ADDRESS__)
#define SIPHON_ASAN 1
#elif defined(__SANITIZE_THREAD__)
#define SIPHON_TSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIPHON_ASAN 1
#elif __has_feature(thread_sanitizer)
#define SIPHON_TSAN 1
#endif
#endif
#if defined(SIPHON_ASAN)
  // ASan's quarantine and shadow pages grow the resident set by design;
  // LeakSanitizer checks for leaks in this build instead.
  GTEST_SKIP() << "RSS bound not checked under AddressSanitizer (growth "
               << rss_peak - rss_warm << " KiB)";
#elif defined(SIPHON_TSAN)
  // TSan's runtime grows the resident set by itself: one step of 3-4 MiB,
  // at about 750k operations of this loop on an idle machine and later
  // under load, then flat up to 10M (RSS sampled every 50k operations,
  // 2026-12-05; the debug build grows by under 300 KiB over 2M). Here the
  // run is a race check of the provider; debug and release assert the bound.
  GTEST_SKIP() << "RSS bound not checked under ThreadSanitizer (growth "
               << rss_peak - rss_warm << " KiB)";
#else
  EXPECT_LE(rss_peak - rss_warm, kToleranceKib);
#endif
}

}  // namespace
}  // namespace siphon::rdma
