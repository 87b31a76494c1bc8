// The soft fabric's same-host copy (docs/rdma-provider.md, "Same-host
// copy"): READ responses copied with process_vm_readv between processes of
// one host, with the responder's access checks, and the TCP link whenever
// the copy is off, refused by the kernel, or fails. And its same-host rings
// ("Same-host rings"): a link's bytes through shared memory instead of the
// socket, under the same conditions.
//
// The two-process tests fork before any provider exists in the child: the
// child is the responder (its memory is what the READs copy), the parent the
// requester. They exchange what a CM would (QPN, GID, buffer, rkey) over a
// socketpair.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "rdma/soft/soft_provider.h"

namespace siphon::rdma::soft {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kMem = 4u << 20;

// These tests choose the link themselves: a SIPHON_SOFT_LINK=tcp given to
// the whole run (docs/testing.md) is not theirs to follow.
const bool kEnvCleared = (::unsetenv("SIPHON_SOFT_LINK"), true);

// The same-host rings are opt-in (SoftOptions::same_host_rings): the
// forked-responder cases run with them.
SoftOptions rings_on() {
  SoftOptions o;
  o.same_host_rings = true;
  return o;
}

// One adapter's side: device, PD, CQ, one RC QP and one MR over `mem`.
struct Side {
  std::unique_ptr<Provider> prov;
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(kMem);
  std::unique_ptr<MemoryRegion> mr;
  Gid gid{};
  std::uint8_t gid_index = 0;

  explicit Side(const SoftOptions& o = rings_on()) {
    prov = make_provider(o);
    std::error_code ec;
    dev = prov->open_device("soft0", ec);
    pd = dev->alloc_pd(ec);
    cq = dev->create_cq(4096, ec);
    QpInit init;
    init.caps.max_send_wr = init.caps.max_recv_wr = 256;
    init.send_cq = init.recv_cq = cq.get();
    qp = pd->create_qp(init, ec);
    mr = pd->reg_mr(mem.data(), mem.size(), kLocalWrite | kRemoteRead, ec);
    std::vector<GidEntry> gids;
    dev->query_gids(1, gids);
    for (const auto& g : gids)
      if (g.gid[10] == 0xff && g.gid[12] == 127) {
        gid = g.gid;
        gid_index = static_cast<std::uint8_t>(g.index);
      }
  }
  // To RTS towards `dest` at `dgid`. The ACK timeout (~67 ms, 7 retries)
  // leaves room for a slow sanitizer build and still reports a dead peer
  // within about a second.
  bool connect(std::uint32_t dest, const Gid& dgid) {
    QpAttr at;
    at.state = QpState::init;
    at.access_flags = kRemoteRead;
    if (qp->modify(at, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags)) return false;
    at.state = QpState::rtr;
    at.av.dgid = dgid;
    at.av.sgid_index = gid_index;
    at.dest_qp_num = dest;
    at.min_rnr_timer = 1;
    at.max_dest_rd_atomic = 16;
    if (qp->modify(at, kAttrState | kAttrPath | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                           kAttrMinRnrTimer))
      return false;
    at.state = QpState::rts;
    at.timeout = 14;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 16;
    return !qp->modify(at, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                               kAttrMaxRdAtomic);
  }
  std::error_code read(std::uint64_t id, std::size_t local_off, std::uint64_t raddr,
                       std::uint32_t rkey, std::uint32_t len) {
    Sge sg{reinterpret_cast<std::uint64_t>(mem.data()) + local_off, len, mr->lkey()};
    SendWr w;
    w.wr_id = id;
    w.opcode = Opcode::rdma_read;
    w.flags = kSignaled;
    w.sg_list = &sg;
    w.num_sge = 1;
    w.remote_addr = raddr;
    w.rkey = rkey;
    return qp->post_send({&w, 1}, nullptr);
  }
  std::vector<Wc> poll(std::size_t n, std::chrono::milliseconds t = 20s) {
    std::vector<Wc> out;
    Wc wc[64];
    const auto end = std::chrono::steady_clock::now() + t;
    while (out.size() < n && std::chrono::steady_clock::now() < end) {
      const std::size_t got = cq->poll(wc);
      out.insert(out.end(), wc, wc + got);
      if (got == 0) std::this_thread::sleep_for(100us);
    }
    return out;
  }
};

std::uint8_t pattern(std::size_t i) { return static_cast<std::uint8_t>(i * 131 + (i >> 9) + 7); }

// Two QPs of one provider (one process), A reading B's memory.
struct Local {
  Side a, b;
  explicit Local(const SoftOptions& o) : a(o), b(o) {
    EXPECT_TRUE(a.connect(b.qp->qp_num(), b.gid));
    EXPECT_TRUE(b.connect(a.qp->qp_num(), a.gid));
    for (std::size_t i = 0; i < kMem; ++i) b.mem[i] = pattern(i);
  }
  // READs `len` bytes at B's offset `off` into A's offset 0; the status.
  WcStatus read(std::uint64_t id, std::size_t off, std::uint32_t len, std::uint32_t rkey = 0) {
    const auto raddr = reinterpret_cast<std::uint64_t>(b.mem.data()) + off;
    EXPECT_FALSE(a.read(id, 0, raddr, rkey != 0 ? rkey : b.mr->rkey(), len));
    auto wc = a.poll(1);
    if (wc.size() != 1) {
      ADD_FAILURE() << "no completion for READ " << id;
      return WcStatus::general_error;
    }
    EXPECT_EQ(wc[0].wr_id, id);
    return wc[0].status;
  }
  bool placed(std::size_t off, std::size_t len) const {
    for (std::size_t i = 0; i < len; ++i)
      if (a.mem[i] != pattern(off + i)) return false;
    return true;
  }
};

TEST(SoftSameHost, ReadsAreCopiedAndCounted) {
  Local p{SoftOptions{}};
  // The first READ may leave before the link's HELLO_ACK (TCP); later ones
  // are copied once the probe succeeded.
  for (std::uint64_t i = 1; i <= 8; ++i) {
    const std::size_t off = static_cast<std::size_t>(i) * 65536 + 3;
    ASSERT_EQ(p.read(i, off, 65536), WcStatus::success);
    EXPECT_TRUE(p.placed(off, 65536)) << "READ " << i;
  }
  EXPECT_GE(counters(*p.a.prov)->same_host_reads, 7u);
  EXPECT_EQ(counters(*p.a.prov)->same_host_refused, 0u);
}

TEST(SoftSameHost, OptionAndEnvironmentKeepTheTcpLink) {
  SoftOptions off;
  off.same_host_copy = false;
  {
    Local p{off};
    for (std::uint64_t i = 1; i <= 4; ++i) {
      ASSERT_EQ(p.read(i, i * 1000, 65536), WcStatus::success);
      EXPECT_TRUE(p.placed(i * 1000, 65536));
    }
    EXPECT_EQ(counters(*p.a.prov)->same_host_reads, 0u);
  }
  ::setenv("SIPHON_SOFT_LINK", "tcp", 1);
  std::optional<Local> p;
  p.emplace(SoftOptions{});
  ::unsetenv("SIPHON_SOFT_LINK");
  for (std::uint64_t i = 1; i <= 4; ++i) {
    ASSERT_EQ(p->read(i, i * 1000, 65536), WcStatus::success);
    EXPECT_TRUE(p->placed(i * 1000, 65536));
  }
  EXPECT_EQ(counters(*p->a.prov)->same_host_reads, 0u);
}

TEST(SoftSameHost, OutOfBoundsReadIsARemoteAccessError) {
  Local p{SoftOptions{}};
  ASSERT_EQ(p.read(1, 0, 4096), WcStatus::success);
  ASSERT_EQ(p.read(2, 4096, 4096), WcStatus::success);
  ASSERT_GE(counters(*p.a.prov)->same_host_reads, 1u);  // the path is in use
  const std::uint64_t copied = counters(*p.a.prov)->same_host_reads;
  std::fill(p.a.mem.begin(), p.a.mem.begin() + 8192, 0xEE);
  // One byte past the end of B's MR: refused by B, nothing copied.
  EXPECT_EQ(p.read(3, kMem - 4096 + 1, 4096), WcStatus::remote_access_error);
  EXPECT_EQ(counters(*p.a.prov)->same_host_reads, copied);
  EXPECT_EQ(p.a.mem[0], 0xEE);
  EXPECT_EQ(p.a.qp->state(), QpState::err);
}

TEST(SoftSameHost, WrongRkeyIsARemoteAccessError) {
  Local p{SoftOptions{}};
  ASSERT_EQ(p.read(1, 0, 4096), WcStatus::success);
  ASSERT_EQ(p.read(2, 0, 4096), WcStatus::success);
  EXPECT_EQ(p.read(3, 0, 4096, p.b.mr->rkey() ^ 0x100), WcStatus::remote_access_error);
}

// ---------------------------------------------------------------- two processes

// Same-host rings (docs/rdma-provider.md, "Same-host rings"): SENDs of
// every size from 1 byte to three times a 4 KiB ring, so payloads stream
// through the ring in pieces, headers straddle its wrap and a full ring
// makes the writer wait for the reader. All arrive, once, in order, intact;
// READs and their ACKs share the rings; both links moved to them.
TEST(SoftSameHostRings, SendsOfEverySizeCrossTheRingsInOrder) {
  SoftOptions o;
  o.same_host_rings = true;
  o.same_host_ring_bytes = 4096;
  Local p{o};
  constexpr std::uint32_t kSends = 240;
  constexpr std::size_t kSlot = 16384;  // B's receive buffers, in its MR
  auto size_of = [](std::uint32_t i) { return 1 + (i * 2654435761u) % 12288; };
  std::size_t total = 0;
  for (std::uint32_t round = 0; round < 2; ++round) {
    // 120 receives on B, 120 SENDs from A's memory at a moving offset.
    std::vector<Sge> rsg(kSends / 2);
    std::vector<RecvWr> recvs(kSends / 2);
    for (std::uint32_t k = 0; k < kSends / 2; ++k) {
      rsg[k] = Sge{reinterpret_cast<std::uint64_t>(p.b.mem.data()) + k * kSlot, kSlot, p.b.mr->lkey()};
      recvs[k] = RecvWr{k, &rsg[k], 1};
    }
    ASSERT_FALSE(p.b.qp->post_recv(recvs, nullptr));
    for (std::uint32_t k = 0; k < kSends / 2; ++k) {
      const std::uint32_t i = round * (kSends / 2) + k;
      const std::size_t off = static_cast<std::size_t>(i) * 12289;  // apart: copied when sent
      for (std::size_t j = 0; j < size_of(i); ++j) p.a.mem[off + j] = pattern(off + j + i);
      Sge sg{reinterpret_cast<std::uint64_t>(p.a.mem.data()) + off, size_of(i), p.a.mr->lkey()};
      SendWr w;
      w.wr_id = i;
      w.opcode = Opcode::send_with_imm;
      w.imm_data = i;
      w.flags = kSignaled;
      w.sg_list = &sg;
      w.num_sge = 1;
      ASSERT_FALSE(p.a.qp->post_send({&w, 1}, nullptr)) << i;
      // A's sends and B's receives share their CQs with nothing else here:
      // drain A's send completions as they come so its queue never fills.
      if (k % 32 == 31) {
        ASSERT_EQ(p.a.poll(32).size(), 32u);
      }
    }
    ASSERT_EQ(p.a.poll((kSends / 2) % 32).size(), (kSends / 2) % 32);
    auto got = p.b.poll(kSends / 2);
    ASSERT_EQ(got.size(), kSends / 2);
    for (std::uint32_t k = 0; k < kSends / 2; ++k) {
      const std::uint32_t i = round * (kSends / 2) + k;
      const std::size_t off = static_cast<std::size_t>(i) * 12289;  // apart: copied when sent
      ASSERT_EQ(got[k].status, WcStatus::success) << i;
      ASSERT_EQ(got[k].imm_data, i) << "out of order";
      ASSERT_EQ(got[k].byte_len, size_of(i));
      const std::uint8_t* at = p.b.mem.data() + got[k].wr_id * kSlot;
      for (std::size_t j = 0; j < size_of(i); ++j)
        ASSERT_EQ(at[j], pattern(off + j + i)) << "SEND " << i << " byte " << j;
      total += size_of(i);
    }
    // B's memory is overwritten by the receives: put the READ pattern back.
    for (std::size_t j = 0; j < kMem; ++j) p.b.mem[j] = pattern(j);
    ASSERT_EQ(p.read(1000 + round, 70001, 65536), WcStatus::success);
    EXPECT_TRUE(p.placed(70001, 65536));
  }
  const auto c = *counters(*p.a.prov);
  EXPECT_EQ(c.shm_links, 1u) << "A's requester link (A's provider; B sends nothing)";
  EXPECT_GT(c.shm_wakeups, 0u);
  EXPECT_GE(total, 12 * o.same_host_ring_bytes) << "the sizes did not cycle the ring";
}

// SIPHON_SOFT_LINK=copy, and the option, keep the socket (READs are still
// copied); tcp turns both off.
TEST(SoftSameHostRings, CopyAndTheOptionKeepTheSocket) {
  SoftOptions no_rings;
  no_rings.same_host_rings = false;
  for (const char* env : {static_cast<const char*>("copy"), static_cast<const char*>(nullptr)}) {
    if (env != nullptr) ::setenv("SIPHON_SOFT_LINK", env, 1);
    std::optional<Local> p;
    p.emplace(env != nullptr ? rings_on() : no_rings);
    ::unsetenv("SIPHON_SOFT_LINK");
    for (std::uint64_t i = 1; i <= 4; ++i) {
      ASSERT_EQ(p->read(i, i * 1000, 65536), WcStatus::success);
      EXPECT_TRUE(p->placed(i * 1000, 65536));
    }
    EXPECT_EQ(counters(*p->a.prov)->shm_links, 0u) << (env != nullptr ? env : "option");
    EXPECT_GE(counters(*p->a.prov)->same_host_reads, 3u);
  }
  ::setenv("SIPHON_SOFT_LINK", "tcp", 1);
  std::optional<Local> p;
  p.emplace(rings_on());
  ::unsetenv("SIPHON_SOFT_LINK");
  ASSERT_EQ(p->read(1, 1000, 65536), WcStatus::success);
  EXPECT_EQ(counters(*p->a.prov)->shm_links, 0u);
  EXPECT_EQ(counters(*p->a.prov)->same_host_reads, 0u);
}

struct Wire {  // what the child (responder) tells the parent
  std::uint32_t qpn;
  std::uint32_t rkey;
  std::uint64_t addr;
  Gid gid;
};

bool send_all(int fd, const void* p, std::size_t n) {
  return ::send(fd, p, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}
bool recv_all(int fd, void* p, std::size_t n) {
  return ::recv(fd, p, n, MSG_WAITALL) == static_cast<ssize_t>(n);
}

// Forks the responder. It makes itself non-dumpable when asked (then a
// process without CAP_SYS_PTRACE may not read it), builds its side, sends
// its Wire, connects to the parent's QPN and serves until the socket closes.
pid_t fork_responder(int& sock, bool non_dumpable) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(sv[0]);
    if (non_dumpable) ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    int rc = 1;
    {
      Side s;
      for (std::size_t i = 0; i < kMem; ++i) s.mem[i] = pattern(i);
      Wire w{s.qp->qp_num(), s.mr->rkey(), reinterpret_cast<std::uint64_t>(s.mem.data()), s.gid};
      std::uint32_t peer = 0;
      Gid peer_gid{};
      if (send_all(sv[1], &w, sizeof w) && recv_all(sv[1], &peer, sizeof peer) &&
          recv_all(sv[1], &peer_gid, sizeof peer_gid) && s.connect(peer, peer_gid)) {
        const char ok = 1;
        send_all(sv[1], &ok, 1);
        char c;
        while (::recv(sv[1], &c, 1, 0) > 0) {
        }
        rc = 0;
      }
    }
    ::_exit(rc);
  }
  ::close(sv[1]);
  sock = sv[0];
  return pid;
}

// The parent's side connected to a forked responder.
// The responder is forked before this side's provider exists, so the child
// starts with no fabric threads of ours.
struct Remote {
  int sock = -1;
  pid_t child = -1;
  std::optional<Side> side;
  Side& a;  // built after the fork (the member order matters)
  Wire w{};
  explicit Remote(bool non_dumpable)
      : a((child = fork_responder(sock, non_dumpable), side.emplace())) {
    if (child < 0) return;
    const std::uint32_t me = a.qp->qp_num();
    char ok = 0;
    if (!recv_all(sock, &w, sizeof w) || !send_all(sock, &me, sizeof me) ||
        !send_all(sock, &a.gid, sizeof a.gid) || !recv_all(sock, &ok, 1) || ok != 1 ||
        !a.connect(w.qpn, w.gid)) {
      ADD_FAILURE() << "could not connect to the forked responder";
      child = -1;
    }
  }
  ~Remote() {
    if (sock >= 0) ::close(sock);
    if (child > 0) {
      int st = 0;
      ::waitpid(child, &st, 0);
    }
  }
  WcStatus read(std::uint64_t id, std::size_t off, std::uint32_t len) {
    EXPECT_FALSE(a.read(id, 0, w.addr + off, w.rkey, len));
    auto wc = a.poll(1);
    if (wc.size() != 1) {
      ADD_FAILURE() << "no completion for READ " << id;
      return WcStatus::general_error;
    }
    return wc[0].status;
  }
};

// Drops CAP_SYS_PTRACE from this process's effective set while alive (a
// no-op for a process that did not have it) and restores it.
class WithoutPtraceCap {
 public:
  WithoutPtraceCap() {
    hdr_.version = _LINUX_CAPABILITY_VERSION_3;
    if (::syscall(SYS_capget, &hdr_, saved_) != 0) return;
    __user_cap_data_struct now[2] = {saved_[0], saved_[1]};
    now[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
    ok_ = ::syscall(SYS_capset, &hdr_, now) == 0;
  }
  ~WithoutPtraceCap() {
    if (ok_) ::syscall(SYS_capset, &hdr_, saved_);
  }
  WithoutPtraceCap(const WithoutPtraceCap&) = delete;
  WithoutPtraceCap& operator=(const WithoutPtraceCap&) = delete;

 private:
  __user_cap_header_struct hdr_{};
  __user_cap_data_struct saved_[2]{};
  bool ok_ = false;
};

TEST(SoftSameHostProcess, ReadsFromAnotherProcessAreCopied) {
  Remote r(false);
  ASSERT_GT(r.child, 0);
  for (std::uint64_t i = 1; i <= 8; ++i) {
    const std::size_t off = i * 70000;
    ASSERT_EQ(r.read(i, off, 65536), WcStatus::success);
    for (std::size_t k = 0; k < 65536; ++k)
      ASSERT_EQ(r.a.mem[k], pattern(off + k)) << "READ " << i << " byte " << k;
  }
  EXPECT_GE(counters(*r.a.prov)->same_host_reads, 7u);
  EXPECT_EQ(counters(*r.a.prov)->shm_links, 1u) << "the link to the other process uses the rings";
  EXPECT_GT(counters(*r.a.prov)->shm_wakeups, 0u);
}

TEST(SoftSameHostProcess, RefusedByTheKernelFallsBackToTcp) {
  WithoutPtraceCap no_cap;
  Remote r(true);  // a non-dumpable responder: EPERM without CAP_SYS_PTRACE
  ASSERT_GT(r.child, 0);
  for (std::uint64_t i = 1; i <= 4; ++i) {
    const std::size_t off = i * 70000;
    ASSERT_EQ(r.read(i, off, 65536), WcStatus::success);
    for (std::size_t k = 0; k < 65536; ++k)
      ASSERT_EQ(r.a.mem[k], pattern(off + k)) << "READ " << i << " byte " << k;
  }
  EXPECT_EQ(counters(*r.a.prov)->same_host_reads, 0u);
  EXPECT_EQ(counters(*r.a.prov)->same_host_refused, 1u);
  EXPECT_EQ(counters(*r.a.prov)->shm_links, 0u) << "no rings without the probe";
}

TEST(SoftSameHostProcess, APeerDyingMidTransferFailsTheReadsCleanly) {
  Remote r(false);
  ASSERT_GT(r.child, 0);
  ASSERT_EQ(r.read(1, 0, 4096), WcStatus::success);
  ASSERT_EQ(r.read(2, 0, 4096), WcStatus::success);
  ASSERT_GE(counters(*r.a.prov)->same_host_reads, 1u);
  ASSERT_EQ(counters(*r.a.prov)->shm_links, 1u);  // requests and responses on the rings
  // 200 READs of 1 MiB in flight (16 at a time on the wire), then the
  // responder is killed: every WR completes, in order (the successes first),
  // the rest with an error, the QP in ERR, and nothing hangs or crashes.
  constexpr int kReads = 200;
  for (int i = 0; i < kReads; ++i)
    ASSERT_FALSE(r.a.read(100 + i, 0, r.w.addr + static_cast<std::uint64_t>(i % 3) * 1000, r.w.rkey,
                          1u << 20));
  std::this_thread::sleep_for(2ms);
  ::kill(r.child, SIGKILL);
  auto wc = r.a.poll(kReads, 30s);
  ASSERT_EQ(wc.size(), static_cast<std::size_t>(kReads));
  int ok = 0, failed = 0;
  for (const Wc& c : wc) {
    if (c.status == WcStatus::success) {
      ++ok;
      EXPECT_EQ(failed, 0) << "a READ succeeded after one had failed (order)";
    } else {
      ++failed;
    }
  }
  EXPECT_GT(failed, 0) << "the peer died with nothing outstanding (" << ok << " done)";
  EXPECT_EQ(r.a.qp->state(), QpState::err);
}

}  // namespace
}  // namespace siphon::rdma::soft
