// Soft-fabric specifics that the provider-neutral conformance suite does not
// cover: option validation, seeded fault injection and its counters, wire
// golden bytes, IB timer encodings and the modify() attribute table.
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "msgr/base/error.h"
#include "rdma/soft/core.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/soft/wire.h"

namespace siphon::rdma::soft {
namespace {

using namespace std::chrono_literals;

struct Pair {
  std::unique_ptr<Provider> prov;
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cqa, cqb;
  std::unique_ptr<QueuePair> a, b;
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(1 << 16);
  std::unique_ptr<MemoryRegion> mr;

  // one_cq: both QPs complete on cqa (cqb stays without QPs).
  explicit Pair(const SoftOptions& o, std::uint8_t timeout = 14, bool one_cq = false) {
    prov = make_provider(o);
    std::error_code ec;
    dev = prov->open_device("soft0", ec);
    pd = dev->alloc_pd(ec);
    cqa = dev->create_cq(4096, ec);
    cqb = dev->create_cq(4096, ec);
    QpInit init;
    init.caps.max_send_wr = init.caps.max_recv_wr = 512;
    init.send_cq = init.recv_cq = cqa.get();
    a = pd->create_qp(init, ec);
    init.send_cq = init.recv_cq = one_cq ? cqa.get() : cqb.get();
    b = pd->create_qp(init, ec);
    mr = pd->reg_mr(mem.data(), mem.size(), kLocalWrite | kRemoteWrite | kRemoteRead, ec);
    std::vector<GidEntry> gids;
    dev->query_gids(1, gids);
    std::uint8_t gi = 0;
    for (const auto& g : gids)
      if (g.gid[10] == 0xff && g.gid[12] == 127) gi = static_cast<std::uint8_t>(g.index);
    for (auto [q, d] : {std::pair{a.get(), b->qp_num()}, std::pair{b.get(), a->qp_num()}}) {
      QpAttr at;
      at.state = QpState::init;
      at.access_flags = kRemoteWrite | kRemoteRead;
      EXPECT_FALSE(q->modify(at, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags));
      at.state = QpState::rtr;
      at.av.dgid = gids[gi].gid;
      at.av.sgid_index = gi;
      at.dest_qp_num = d;
      at.min_rnr_timer = 1;
      EXPECT_FALSE(q->modify(at, kAttrState | kAttrPath | kAttrDestQpn | kAttrRqPsn |
                                     kAttrMaxDestRdAtomic | kAttrMinRnrTimer));
      at.state = QpState::rts;
      at.timeout = timeout;
      EXPECT_FALSE(q->modify(at, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt |
                                     kAttrRnrRetry | kAttrMaxRdAtomic));
    }
  }
  // A signaled SEND of `sg`.
  static SendWr send(std::uint64_t id, Sge* sg) {
    SendWr w;
    w.wr_id = id;
    w.opcode = Opcode::send;
    w.flags = kSignaled;
    w.sg_list = sg;
    w.num_sge = 1;
    return w;
  }
  SendWr write(std::uint64_t id, Sge* sg) {
    *sg = Sge{reinterpret_cast<std::uint64_t>(mem.data()), 64, mr->lkey()};
    SendWr w;
    w.wr_id = id;
    w.opcode = Opcode::rdma_write;
    w.flags = kSignaled;
    w.sg_list = sg;
    w.num_sge = 1;
    w.remote_addr = reinterpret_cast<std::uint64_t>(mem.data()) + 32768;
    w.rkey = mr->rkey();
    return w;
  }
  // Posts one WR on A and returns the one completion it yields on `cq`
  // (nullopt, with the test failed, if posting fails or none comes).
  std::optional<Wc> complete_one(SendWr& w, CompletionQueue& cq) {
    if (const std::error_code ec = a->post_send({&w, 1}, nullptr)) {
      ADD_FAILURE() << "post_send: " << ec.message();
      return std::nullopt;
    }
    auto got = poll(cq, 1);
    if (got.size() != 1) {
      ADD_FAILURE() << got.size() << " completions, expected one";
      return std::nullopt;
    }
    return got[0];
  }
  std::vector<Wc> poll(CompletionQueue& cq, std::size_t n, std::chrono::milliseconds t = 20s) {
    std::vector<Wc> out;
    Wc wc[64];
    const auto end = std::chrono::steady_clock::now() + t;
    while (out.size() < n && std::chrono::steady_clock::now() < end) {
      const std::size_t got = cq.poll(wc);
      out.insert(out.end(), wc, wc + got);
      if (got == 0) std::this_thread::sleep_for(100us);
    }
    return out;
  }
};

// Driven engine: a CQ's progress fd is its own domain, holding the links of
// the QPs that complete on it, so traffic between QPs of one CQ does not
// wake the thread attached to another. (Before the domains every attached
// thread waited on the engine's one epoll fd and woke for every event: the
// bystander below counted one wake-up per SEND.)
TEST(SoftDriven, LinkEventsWakeOnlyTheThreadOfTheirQpsCq) {
  SoftOptions o;
  o.driven_engine = true;
  Pair p(o, 14, /*one_cq=*/true);
  ASSERT_TRUE(p.a && p.b);
  ASSERT_GE(p.cqa->progress_fd(), 0);
  ASSERT_GE(p.cqb->progress_fd(), 0);
  EXPECT_NE(p.cqa->progress_fd(), p.cqb->progress_fd());

  std::atomic<bool> stop{false}, attached{false};
  std::atomic<std::uint64_t> bystander_wakes{0};
  std::thread bystander([&] {
    p.cqb->attach_progress(true, [](void*) {}, nullptr);
    attached = true;
    while (!stop.load()) {
      pollfd pf{p.cqb->progress_fd(), POLLIN, 0};
      if (::poll(&pf, 1, 5) == 1) {
        bystander_wakes.fetch_add(1);
        p.cqb->progress(true, false);  // takes what woke it (shared events: timers)
      }
    }
    p.cqb->attach_progress(false, nullptr, nullptr);
  });
  while (!attached.load()) std::this_thread::sleep_for(1ms);

  p.cqa->attach_progress(true, [](void*) {}, nullptr);
  constexpr std::uint64_t kSends = 1000;
  Sge ssg{reinterpret_cast<std::uint64_t>(p.mem.data()), 64, p.mr->lkey()};
  Sge rsg{reinterpret_cast<std::uint64_t>(p.mem.data()) + 32768, 64, p.mr->lkey()};
  std::uint64_t sends_done = 0, recvs_done = 0;
  for (std::uint64_t i = 0; i < kSends; ++i) {
    RecvWr rw{1000 + i, &rsg, 1};
    ASSERT_FALSE(p.b->post_recv({&rw, 1}, nullptr));
    SendWr w = Pair::send(i, &ssg);
    ASSERT_FALSE(p.a->post_send({&w, 1}, nullptr));
    // Driven the way a worker does: rounds on the CQ's own domain.
    const auto end = std::chrono::steady_clock::now() + 20s;
    while ((sends_done <= i || recvs_done <= i) && std::chrono::steady_clock::now() < end) {
      Wc wc[8];
      const std::size_t n = p.cqa->poll(wc);
      for (std::size_t k = 0; k < n; ++k) {
        ASSERT_EQ(wc[k].status, WcStatus::success) << "wr " << wc[k].wr_id;
        (wc[k].wr_id >= 1000 ? recvs_done : sends_done)++;
      }
      if (n == 0) {
        pollfd pf{p.cqa->progress_fd(), POLLIN, 0};
        if (::poll(&pf, 1, 1) == 1) p.cqa->progress(true, false);
      }
    }
    ASSERT_GT(sends_done, i);
    ASSERT_GT(recvs_done, i);
  }
  p.cqa->attach_progress(false, nullptr, nullptr);
  stop = true;
  bystander.join();
  // Shared events (the engine's timers) may wake it; the traffic may not.
  EXPECT_LT(bystander_wakes.load(), kSends / 20) << "the bystander woke for the other CQ's traffic";
  RecordProperty("bystander_wakes", static_cast<int>(bystander_wakes.load()));
  EXPECT_GT(counters(*p.prov)->driven_rounds, kSends);
}

// Driven engine: a thread attached to a CQ but busy in its own code runs no
// round, so the links of its QPs would go unserved and their peers would
// time out (retry_exceeded after 8 x 67 ms; an ASan build's worker building
// test frames for 0.6 s did exactly that). An adapter answers regardless:
// the engine thread runs a backstop round when none ran for 10 ms.
TEST(SoftDriven, AThreadBusyElsewhereDoesNotStopItsQpsPeers) {
  SoftOptions o;
  o.driven_engine = true;
  Pair p(o);  // a on cqa, b on cqb
  ASSERT_TRUE(p.a && p.b);
  constexpr std::uint64_t kSends = 20;
  Sge ssg{reinterpret_cast<std::uint64_t>(p.mem.data()), 64, p.mr->lkey()};
  Sge rsg{reinterpret_cast<std::uint64_t>(p.mem.data()) + 32768, 64, p.mr->lkey()};
  for (std::uint64_t i = 0; i < kSends; ++i) {
    RecvWr rw{1000 + i, &rsg, 1};
    ASSERT_FALSE(p.b->post_recv({&rw, 1}, nullptr));
  }
  // b's thread attaches, then stays busy until the SENDs are done: it never drives.
  std::atomic<bool> attached{false}, release{false};
  std::thread busy([&] {
    p.cqb->attach_progress(true, [](void*) {}, nullptr);
    attached = true;
    while (!release.load()) std::this_thread::sleep_for(1ms);
    p.cqb->attach_progress(false, nullptr, nullptr);
  });
  struct Joiner {  // also when an assertion below returns early
    std::atomic<bool>& release;
    std::thread& t;
    ~Joiner() {
      release = true;
      t.join();
    }
  } joiner{release, busy};
  while (!attached.load()) std::this_thread::sleep_for(1ms);
  const auto before = *counters(*p.prov);
  p.cqa->attach_progress(true, [](void*) {}, nullptr);
  std::uint64_t done = 0;
  for (std::uint64_t i = 0; i < kSends; ++i) {
    SendWr w = Pair::send(i, &ssg);
    ASSERT_FALSE(p.a->post_send({&w, 1}, nullptr));
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (done <= i && std::chrono::steady_clock::now() < end) {
      Wc wc[8];
      const std::size_t n = p.cqa->poll(wc);
      for (std::size_t k = 0; k < n; ++k) {
        ASSERT_EQ(wc[k].status, WcStatus::success) << "send " << wc[k].wr_id << ": its ACK never came";
        ++done;
      }
      if (n == 0) {
        pollfd pf{p.cqa->progress_fd(), POLLIN, 0};
        if (::poll(&pf, 1, 1) == 1) p.cqa->progress(true, false);
      }
    }
    ASSERT_GT(done, i) << "send " << i << " did not complete";
  }
  const auto after = *counters(*p.prov);
  p.cqa->attach_progress(false, nullptr, nullptr);
  // (A loaded machine may delay a backstop past one 67 ms ACK timeout: a
  // retransmission, not a failure. Without the backstop every SEND ends in
  // retry_exceeded, checked above.)
  EXPECT_GT(after.backstop_rounds, before.backstop_rounds) << "no backstop round ran";
  // Every SEND reached b's receive queue, for b's thread to poll later.
  Wc wc[32];
  EXPECT_EQ(p.cqb->poll(wc), kSends);
}

TEST(SoftOptions, InvalidOptionsThrowSetupError) {
  SoftOptions o;
  o.device_count = 0;
  EXPECT_THROW(make_provider(o), SetupError);
  o = {};
  o.faults.fail_post.probability = 1.5;
  EXPECT_THROW(make_provider(o), SetupError);
  o = {};
  o.faults.corrupt_data.probability = -0.5;
  EXPECT_THROW(make_provider(o), SetupError);
  o = {};
  o.active_mtu = Mtu::mtu4096;
  o.max_mtu = Mtu::mtu1024;
  EXPECT_THROW(make_provider(o), SetupError);
  o = {};
  o.device_count = 3;
  auto p = make_provider(o);
  EXPECT_EQ(p->list_devices(), (std::vector<std::string>{"soft0", "soft1", "soft2"}));
  std::error_code ec;
  EXPECT_FALSE(p->open_device("mlx5_0", ec));
  EXPECT_EQ(ec, make_error_code(errc::device_not_found));
  ASSERT_TRUE(counters(*p));
  EXPECT_EQ(counters(*p)->failed_posts, 0u);
}

TEST(SoftOptions, AttributesComeFromOptions) {
  SoftOptions o;
  o.max_qp_wr = 333;
  o.max_sge = 5;
  o.active_mtu = Mtu::mtu1024;
  auto p = make_provider(o);
  std::error_code ec;
  auto d = p->open_device("soft0", ec);
  EXPECT_EQ(d->attr().max_qp_wr, 333u);
  EXPECT_EQ(d->attr().max_sge, 5u);
  PortAttr pa;
  ASSERT_FALSE(d->query_port(1, pa));
  EXPECT_EQ(pa.active_mtu, Mtu::mtu1024);
  EXPECT_EQ(pa.max_mtu, Mtu::mtu4096);
}

std::vector<std::size_t> failed_post_indices(std::uint64_t seed) {
  SoftOptions o;
  o.faults.seed = seed;
  o.faults.fail_post.one_in = 4;
  Pair p(o);
  std::vector<std::size_t> fails;
  Sge sg;
  for (std::size_t i = 0; i < 64; ++i) {
    SendWr w = p.write(i, &sg);
    std::size_t bad = 0;
    const auto ec = p.a->post_send({&w, 1}, &bad);
    if (ec) {
      EXPECT_EQ(ec, make_error_code(errc::injected_fault));
      fails.push_back(i);
    }
  }
  EXPECT_EQ(p.poll(*p.cqa, 64 - fails.size()).size(), 64 - fails.size());
  EXPECT_EQ(counters(*p.prov)->failed_posts, fails.size());
  return fails;
}

TEST(SoftFaults, FailedPostsAreSeededAndCounted) {
  const auto a = failed_post_indices(7), b = failed_post_indices(7), c = failed_post_indices(8);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);  // same seed, same faults
  EXPECT_NE(a, c);
}

TEST(SoftFaults, ErrorCompletionMovesTheQpToErr) {
  SoftOptions o;
  o.faults.error_completion.one_in = 1;
  o.faults.completion_error = WcStatus::remote_operation_error;
  Pair p(o);
  Sge sg[2];
  SendWr w[2] = {p.write(1, &sg[0]), p.write(2, &sg[1])};
  ASSERT_FALSE(p.a->post_send(w, nullptr));
  auto got = p.poll(*p.cqa, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].status, WcStatus::remote_operation_error);
  EXPECT_EQ(got[1].status, WcStatus::flushed);
  EXPECT_EQ(p.a->state(), QpState::err);
  EXPECT_EQ(counters(*p.prov)->error_completions, 1u);
}

TEST(SoftFaults, QpToErrFlushes) {
  SoftOptions o;
  o.faults.qp_to_err.one_in = 1;
  Pair p(o);
  Sge sg;
  SendWr w = p.write(1, &sg);
  const auto wc = p.complete_one(w, *p.cqa);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::flushed);
  EXPECT_EQ(p.a->state(), QpState::err);
  EXPECT_EQ(counters(*p.prov)->qp_errors_injected, 1u);
}

TEST(SoftFaults, DroppedLinksAreRecoveredByRetransmission) {
  SoftOptions o;
  o.faults.link_drop.probability = 0.05;
  o.faults.seed = 3;
  Pair p(o);
  // Receives on B, numbered SENDs from A: all arrive, once, in order.
  std::vector<RecvWr> recvs(300);
  Sge rsg{reinterpret_cast<std::uint64_t>(p.mem.data()) + 40000, 8, p.mr->lkey()};
  for (std::size_t i = 0; i < recvs.size(); ++i) recvs[i] = RecvWr{i, &rsg, 1};
  ASSERT_FALSE(p.b->post_recv(recvs, nullptr));
  for (std::uint32_t i = 0; i < 300; ++i) {
    Sge sg;
    SendWr w = p.write(i, &sg);
    w.opcode = Opcode::send_with_imm;
    w.imm_data = i;
    sg.length = 4;
    ASSERT_FALSE(p.a->post_send({&w, 1}, nullptr)) << i;
    if (i % 100 == 99) {
      ASSERT_EQ(p.poll(*p.cqa, 100).size(), 100u);
    }
  }
  auto got = p.poll(*p.cqb, 300);
  ASSERT_EQ(got.size(), 300u);
  for (std::uint32_t i = 0; i < 300; ++i) {
    EXPECT_EQ(got[i].status, WcStatus::success);
    EXPECT_EQ(got[i].imm_data, i);
  }
  const auto c = *counters(*p.prov);
  EXPECT_GT(c.link_drops, 0u);
  EXPECT_GT(c.links_opened, 2u);
}

TEST(SoftFaults, DelayHoldsTransmission) {
  SoftOptions o;
  o.faults.delay.one_in = 1;
  o.faults.delay_us = 30000;
  Pair p(o);
  Sge sg;
  SendWr w = p.write(1, &sg);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_FALSE(p.a->post_send({&w, 1}, nullptr));
  ASSERT_EQ(p.poll(*p.cqa, 1).size(), 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
  EXPECT_EQ(counters(*p.prov)->delays, 1u);
}

// FaultPlan::corrupt_data: data placed in the receiver's memory by a SEND,
// an RDMA WRITE and an RDMA READ response has bits flipped (one per chunk the
// fabric copies: a 64-byte message is one chunk, unless the TCP stream split
// it); the sender's memory is untouched and the completions are successful
// (the link cannot see this kind of damage).
TEST(SoftFaults, CorruptDataFlipsBitsOfPlacedPayloads) {
  SoftOptions o;
  o.faults.corrupt_data.one_in = 1;
  o.faults.seed = 5;
  Pair p(o);
  std::uint8_t* m = p.mem.data();
  const auto base = reinterpret_cast<std::uint64_t>(m);
  for (std::size_t i = 0; i < 64; ++i) m[i] = static_cast<std::uint8_t>(i * 7 + 1);
  const std::vector<std::uint8_t> src(m, m + 64);
  auto flipped_bits = [&](std::size_t at) {
    int bits = 0;
    for (std::size_t i = 0; i < 64; ++i) bits += __builtin_popcount(static_cast<unsigned>(m[at + i] ^ src[i]));
    return bits;
  };
  std::uint64_t seen = 0;
  auto check = [&](const char* what, std::size_t at) {
    const std::uint64_t now = counters(*p.prov)->corruptions;
    EXPECT_GT(now, seen) << what;
    const int bits = flipped_bits(at);
    EXPECT_GE(bits, 1) << what;
    EXPECT_LE(static_cast<std::uint64_t>(bits), now - seen) << what;
    EXPECT_TRUE(std::equal(src.begin(), src.end(), m)) << what << ": the source changed";
    seen = now;
  };
  // RDMA WRITE: A's bytes 0..63 into B's MR at 32768.
  Sge sg;
  SendWr w = p.write(1, &sg);
  auto wc = p.complete_one(w, *p.cqa);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::success);
  check("write", 32768);
  // RDMA READ: bytes 0..63 pulled into 16384 (the response lands at A).
  Sge rsg{base + 16384, 64, p.mr->lkey()};
  SendWr r;
  r.wr_id = 2;
  r.opcode = Opcode::rdma_read;
  r.flags = kSignaled;
  r.sg_list = &rsg;
  r.num_sge = 1;
  r.remote_addr = base;
  r.rkey = p.mr->rkey();
  wc = p.complete_one(r, *p.cqa);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::success);
  check("read", 16384);
  // SEND into a receive buffer of B at 49152.
  Sge recv_sg{base + 49152, 64, p.mr->lkey()};
  RecvWr rw{3, &recv_sg, 1};
  ASSERT_FALSE(p.b->post_recv({&rw, 1}, nullptr));
  SendWr s = p.write(4, &sg);
  s.opcode = Opcode::send;
  wc = p.complete_one(s, *p.cqb);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::success);
  EXPECT_EQ(wc->byte_len, 64u);
  ASSERT_EQ(p.poll(*p.cqa, 1).size(), 1u);
  check("send", 49152);
}

TEST(SoftQueues, UnsignaledSendSlotsAreReleasedOnlyBySignaledCompletions) {
  // As on mlx5: without a signaled WR the send queue fills up for good.
  Pair p(SoftOptions{});
  const std::uint32_t cap = p.a->caps().max_send_wr;
  std::vector<SendWr> wrs(cap);
  Sge sg;
  for (std::uint32_t i = 0; i < cap; ++i) {
    wrs[i] = p.write(i, &sg);
    wrs[i].flags = 0;
  }
  ASSERT_FALSE(p.a->post_send(wrs, nullptr));
  std::this_thread::sleep_for(50ms);  // they complete, silently
  Wc wc[4];
  EXPECT_EQ(p.cqa->poll(wc), 0u);
  SendWr more = p.write(99, &sg);
  std::size_t bad = 7;
  EXPECT_EQ(p.a->post_send({&more, 1}, &bad), make_error_code(errc::queue_full));
  EXPECT_EQ(bad, 0u);
}

TEST(SoftQueues, ASlotIsFreeOnceItsCompletionIsPolled) {
  // Regression: the engine released send-queue slots only after pushing the
  // completion (and signalling the channel fd), so a poller woken by the fd
  // that re-posted at once (as the RDMA stack does) got queue_full from a
  // queue it knew had room. With the engine and this thread on one CPU the
  // woken poller preempts the engine right at the wake-up, every time.
  cpu_set_t saved;
  ASSERT_EQ(::sched_getaffinity(0, sizeof saved, &saved), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &saved)) {
      CPU_SET(c, &one);
      break;
    }
  ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);  // the engine thread inherits it
  Pair p(SoftOptions{});
  ASSERT_EQ(::sched_setaffinity(0, sizeof saved, &saved), 0);
  // The queue is kept full: one new WR for every completion seen.
  const std::uint32_t cap = p.a->caps().max_send_wr;
  Sge sg;
  std::vector<SendWr> wrs(cap);
  for (std::uint32_t i = 0; i < cap; ++i) wrs[i] = p.write(i, &sg);
  ASSERT_FALSE(p.a->post_send(wrs, nullptr));
  std::uint64_t next = cap, done = 0, full = 0;
  const std::uint64_t total = 20000;
  const auto end = std::chrono::steady_clock::now() + 60s;
  Wc wc[64];
  while (done < total && full == 0 && std::chrono::steady_clock::now() < end) {
    ASSERT_FALSE(p.cqa->arm());
    std::size_t n = p.cqa->poll(wc);
    if (n == 0) {
      pollfd pfd{p.cqa->channel_fd(), POLLIN, 0};
      ::poll(&pfd, 1, 1000);
      p.cqa->consume_events();
      n = p.cqa->poll(wc);
    }
    for (std::size_t i = 0; i < n && full == 0; ++i) {
      ASSERT_EQ(wc[i].status, WcStatus::success) << to_string(wc[i].status);
      ++done;
      if (next >= total) continue;
      SendWr w = p.write(next, &sg);
      if (const auto ec = p.a->post_send({&w, 1}, nullptr)) {
        ASSERT_EQ(ec, make_error_code(errc::queue_full)) << ec.message();
        ++full;
      } else {
        ++next;
      }
    }
  }
  EXPECT_EQ(full, 0u) << "queue_full after " << done << " completions";
  EXPECT_EQ(done, total);
}

TEST(SoftMemory, UnmappedMemoryCannotBeRegistered) {
  auto prov = make_provider();
  std::error_code ec;
  auto dev = prov->open_device("soft0", ec);
  auto pd = dev->alloc_pd(ec);
  void* m = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  ::munmap(m, 8192);
  EXPECT_FALSE(pd->reg_mr(m, 8192, kLocalWrite, ec));
  EXPECT_EQ(ec, make_error_code(errc::memory_registration_failed));
  EXPECT_FALSE(pd->reg_mr(nullptr, 10, kLocalWrite, ec));
  EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
}

// Whatever a peer writes to the fabric's ports, the adapter survives and keeps
// serving its QPs.
// ------------------------------------------------------------- memory windows

SendWr bind_wr(MemoryWindow& mw, const MemoryRegion& mr, std::uint64_t id) {
  SendWr w;
  w.wr_id = id;
  w.opcode = Opcode::bind_mw;
  w.flags = kSignaled;
  w.rkey = next_rkey(mw.rkey());
  w.bind = MwBind{&mw, &mr, reinterpret_cast<std::uint64_t>(mr.addr()), mr.length(), kRemoteRead};
  return w;
}

TEST(SoftMemoryWindows, OptionTurnsThemOff) {
  SoftOptions o;
  o.memory_windows = false;
  auto prov = make_provider(o);
  std::error_code ec;
  auto dev = prov->open_device("soft0", ec);
  ASSERT_TRUE(dev) << ec.message();
  EXPECT_FALSE(dev->attr().mw_type2);
  EXPECT_EQ(dev->attr().max_mw, 0u);
  auto pd = dev->alloc_pd(ec);
  EXPECT_FALSE(pd->alloc_mw(ec));
  EXPECT_EQ(ec, make_error_code(errc::not_supported));
}

// Soft-only: deregistering an MR with a bound window is allowed here (rxe
// refuses it) and the window stops working at once.
TEST(SoftMemoryWindows, DeregisteringTheMrRevokesItsWindows) {
  Pair p(SoftOptions{});
  std::vector<std::uint8_t> mem(4096, 0x5a);
  std::error_code ec;
  auto mr = p.pd->reg_mr(mem.data(), mem.size(), kMwBind, ec);
  auto mw = p.pd->alloc_mw(ec);
  ASSERT_TRUE(mr && mw);
  SendWr b = bind_wr(*mw, *mr, 1);
  ASSERT_FALSE(p.b->post_send({&b, 1}, nullptr));
  auto got = p.poll(*p.cqb, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].status, WcStatus::success);
  Sge sg{reinterpret_cast<std::uint64_t>(p.mem.data()), 64, p.mr->lkey()};
  SendWr r;
  r.wr_id = 2;
  r.opcode = Opcode::rdma_read;
  r.flags = kSignaled;
  r.sg_list = &sg;
  r.num_sge = 1;
  r.remote_addr = reinterpret_cast<std::uint64_t>(mem.data());
  r.rkey = mw->rkey();
  auto wc = p.complete_one(r, *p.cqa);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::success);
  EXPECT_EQ(p.mem[0], 0x5a);
  mr.reset();
  r.wr_id = 3;
  wc = p.complete_one(r, *p.cqa);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::remote_access_error) << "the window outlived its MR";
}

// A bind or invalidate executes once, even when a link loss makes the
// requester resend it (a second execution of the bind would fail: the
// window is bound already).
TEST(SoftMemoryWindows, ResendDoesNotExecuteThemAgain) {
  SoftOptions o;
  o.faults.link_drop.probability = 0.1;
  o.faults.seed = 5;
  Pair p(o);
  std::error_code ec;
  auto mr = p.pd->reg_mr(p.mem.data(), 4096, kMwBind, ec);
  auto mw = p.pd->alloc_mw(ec);
  ASSERT_TRUE(mr && mw);
  for (std::uint64_t i = 0; i < 100; ++i) {
    SendWr wrs[2] = {bind_wr(*mw, *mr, 2 * i), {}};
    wrs[1].wr_id = 2 * i + 1;
    wrs[1].opcode = Opcode::local_inv;
    wrs[1].flags = kSignaled;
    wrs[1].rkey = wrs[0].rkey;
    ASSERT_FALSE(p.a->post_send(wrs, nullptr)) << i;
    auto got = p.poll(*p.cqa, 2);
    ASSERT_EQ(got.size(), 2u) << i;
    EXPECT_EQ(got[0].status, WcStatus::success) << i;
    EXPECT_EQ(got[0].opcode, WcOpcode::bind_mw);
    EXPECT_EQ(got[1].status, WcStatus::success) << i;
    EXPECT_EQ(got[1].opcode, WcOpcode::local_inv);
  }
  EXPECT_GT(counters(*p.prov)->link_drops, 0u);
}

TEST(SoftRobustness, GarbageOnTheWireDoesNotHurtTheAdapter) {
  Pair p(SoftOptions{});
  const std::uint16_t qp_port = static_cast<std::uint16_t>(p.a->qp_num() >> 8);
  std::error_code ec;
  auto ch = p.prov->create_event_channel(ec);
  auto lid = ch->create_id(ec);
  ASSERT_FALSE(lid->bind(*NetAddress::parse("127.0.0.1:0")));
  ASSERT_FALSE(lid->listen(4));
  const std::uint16_t cm_port = lid->local_address().port();
  auto blast = [](std::uint16_t port, const std::vector<std::uint8_t>& bytes) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    const NetAddress to = NetAddress::ipv4(0x7f000001, port);
    ASSERT_EQ(::connect(fd, to.sockaddr_ptr(), to.sockaddr_len()), 0);
    [[maybe_unused]] auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(5ms);
    ::close(fd);
  };
  auto header = [](wire::Type t, std::uint32_t len, std::uint32_t psn = 0) {
    wire::Header h{};
    h.type = static_cast<wire::u8>(t);
    h.len = len;
    h.psn = psn;
    std::vector<std::uint8_t> v(sizeof h);
    std::memcpy(v.data(), &h, sizeof h);
    return v;
  };
  detail::Rng rng(42);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::uint8_t> junk(1 + rng.next() % 3000);
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng.next());
    blast(qp_port, junk);
    blast(cm_port, junk);
  }
  blast(qp_port, header(wire::Type::hello, 0xFFFFFFFF));     // oversized control payload
  blast(qp_port, header(wire::Type::send, 100));            // request before HELLO
  blast(cm_port, header(wire::Type::cm_req, 3));            // short REQ
  blast(cm_port, header(wire::Type::cm_rep, 0));            // REP to a listener
  {
    auto h = header(wire::Type::hello, sizeof(wire::Hello));
    wire::Hello hello{};
    hello.magic = wire::kMagic;
    hello.version = wire::kVersion;
    hello.dst_qpn = p.b->qp_num();
    hello.src_qpn = 0xABCDEF;  // not B's peer: its requests must be dropped
    h.resize(h.size() + sizeof hello);
    std::memcpy(h.data() + sizeof(wire::Header), &hello, sizeof hello);
    for (std::uint32_t psn = 0; psn < 4; ++psn) {
      auto w = header(wire::Type::write, 8, psn);
      w.resize(w.size() + 8, 0xEE);
      h.insert(h.end(), w.begin(), w.end());
    }
    blast(qp_port, h);
  }
  // The adapter still works, and B accepted nothing from the impostor.
  Sge sg;
  SendWr w = p.write(1, &sg);
  const auto wc = p.complete_one(w, *p.cqa);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::success);
  EXPECT_EQ(p.b->state(), QpState::rts);
  CmEvent ev;
  EXPECT_FALSE(ch->get_event(ev));  // garbage never became a connect request
}

// A listener that never answers the REQ: UNREACHABLE after cm_timeout_ms.
TEST(SoftCm, SilentPeerIsUnreachable) {
  SoftOptions o;
  o.cm_timeout_ms = 200;
  auto prov = make_provider(o);
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(ls, 0);
  NetAddress at = NetAddress::ipv4(0x7f000001, 0);
  ASSERT_EQ(::bind(ls, at.sockaddr_ptr(), at.sockaddr_len()), 0);
  ASSERT_EQ(::listen(ls, 4), 0);  // the kernel completes the handshake; nobody reads
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&ss), &len);
  const NetAddress dst = NetAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
  std::error_code ec;
  auto ch = prov->create_event_channel(ec);
  auto id = ch->create_id(ec);
  ASSERT_FALSE(id->resolve_addr(nullptr, dst, 1000));
  ASSERT_FALSE(id->resolve_route(1000));
  auto pd = id->device()->alloc_pd(ec);
  auto cq = id->device()->create_cq(8, ec);
  QpInit init;
  init.send_cq = init.recv_cq = cq.get();
  init.caps.max_send_wr = init.caps.max_recv_wr = 4;
  auto qp = id->create_qp(*pd, init, ec);
  ASSERT_TRUE(qp);
  ASSERT_FALSE(id->connect(ConnParam{}));
  std::vector<CmEventType> seen;
  const auto end = std::chrono::steady_clock::now() + 10s;
  CmEvent ev;
  while (std::chrono::steady_clock::now() < end && (seen.empty() || seen.back() == CmEventType::addr_resolved ||
                                                    seen.back() == CmEventType::route_resolved)) {
    if (ch->get_event(ev))
      seen.push_back(ev.type);
    else
      std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2], CmEventType::unreachable);
  EXPECT_EQ(ev.status, make_error_code(errc::timed_out));
  ::close(ls);
}

TEST(SoftWire, HeaderGoldenBytes) {
  wire::Header h{};
  h.type = static_cast<wire::u8>(wire::Type::write);
  h.flags = wire::kHasImm;
  h.code = 0;
  h.rnr_timer = 12;
  h.psn = 0x123456;
  h.len = 0x01020304;
  h.imm = 0xCAFEBABE;
  h.raddr = 0x1122334455667788ull;
  h.rkey = 0xA0B0C0D0;
  const std::uint8_t golden[32] = {2,    1,    0,    12,   0x56, 0x34, 0x12, 0,    4,    3,    2,
                                   1,    0xBE, 0xBA, 0xFE, 0xCA, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33,
                                   0x22, 0x11, 0xD0, 0xC0, 0xB0, 0xA0, 0,    0,    0,    0};
  EXPECT_EQ(std::memcmp(&h, golden, sizeof golden), 0);
}

TEST(SoftTimers, IbEncodings) {
  using detail::ack_timeout_duration;
  using detail::rnr_timer_duration;
  EXPECT_EQ(rnr_timer_duration(0), 655360us);
  EXPECT_EQ(rnr_timer_duration(1), 10us);
  EXPECT_EQ(rnr_timer_duration(12), 640us);
  EXPECT_EQ(rnr_timer_duration(18), 5120us);
  EXPECT_EQ(rnr_timer_duration(31), 491520us);
  EXPECT_EQ(ack_timeout_duration(0).count(), 0);  // infinite
  EXPECT_EQ(ack_timeout_duration(14), std::chrono::nanoseconds(4096ull << 14));
}

TEST(SoftModify, AttributeTable) {
  using detail::modify_allowed;
  const std::uint32_t init = kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags;
  EXPECT_TRUE(modify_allowed(QpState::reset, QpState::init, init));
  EXPECT_FALSE(modify_allowed(QpState::reset, QpState::init, kAttrState | kAttrPort));
  EXPECT_FALSE(modify_allowed(QpState::reset, QpState::init, init | kAttrTimeout));
  EXPECT_TRUE(modify_allowed(QpState::rts, QpState::rts, kAttrMinRnrTimer));
  EXPECT_FALSE(modify_allowed(QpState::rts, QpState::rts, kAttrTimeout));
  EXPECT_TRUE(modify_allowed(QpState::rtr, QpState::err, kAttrState));
  EXPECT_FALSE(modify_allowed(QpState::init, QpState::rts, kAttrState));
}

}  // namespace
}  // namespace siphon::rdma::soft
