// Conformance: type-2 memory windows (ProtectionDomain::alloc_mw,
// Opcode::bind_mw / local_inv). Side B owns the memory and binds windows to
// its QPs; side A reads through them. An rkey of a window works only on the
// QP it was bound to, within its range, until it is invalidated; everything
// else is a remote access error at the requester (and its QP enters ERR).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "harness.h"
#include "msgr/base/error.h"

namespace siphon::rdma::conformance {
namespace {

QpCaps caps() { return make_caps(64, 2); }

Rc connect_rc(Side& s) {
  Rc rc = make_rc(s, caps());
  if (!rc.qp) return rc;
  const Endpoint self = endpoint_of(s, *rc.qp, s.is_a ? 0x321 : 0x4567);
  Endpoint remote;
  EXPECT_TRUE(s.oob->send(self) && s.oob->recv(remote)) << "endpoint exchange";
  EXPECT_FALSE(bring_up(s, *rc.qp, self, remote));
  EXPECT_TRUE(s.oob->sync());
  return rc;
}

struct Window {
  std::uint64_t addr;
  std::uint32_t rkey;
  std::uint32_t len;
};

constexpr std::size_t kLen = 4096;

std::uint8_t pattern(std::size_t i) { return static_cast<std::uint8_t>((i * 29 + 7) & 0xff); }

// A device without windows skips them, except in the rxe guest: rxe has them.
bool skip_without_windows(Side& s) {
  if (s.device->attr().mw_type2) return false;
  if (std::getenv("SIPHON_RXE_GUEST") != nullptr)
    ADD_FAILURE() << "in the rxe guest nothing may skip: rxe0 reports no type-2 memory windows";
  return true;
}

// B: a buffer whose MR may carry windows (and grants no remote access itself).
Buffer window_buffer(Side& s, std::uint32_t access = kLocalWrite | kMwBind) {
  Buffer b = make_buffer(*s.pd, kLen, access);
  for (std::size_t i = 0; i < kLen; ++i) b.bytes[i] = pattern(i);
  return b;
}

SendWr bind_wr(std::uint64_t id, MemoryWindow& mw, const Buffer& b, std::size_t off, std::size_t len,
               std::uint32_t access = kRemoteRead) {
  SendWr w;
  w.wr_id = id;
  w.opcode = Opcode::bind_mw;
  w.flags = kSignaled;
  w.rkey = next_rkey(mw.rkey());
  w.bind = MwBind{&mw, b.mr.get(), b.addr(off), len, access};
  return w;
}

// B: binds and waits for the bind's completion.
void bind_ok(Rc& rc, MemoryWindow& mw, const Buffer& b, std::size_t off, std::size_t len) {
  const std::uint32_t before = mw.rkey();
  SendWr w = bind_wr(7, mw, b, off, len);
  ASSERT_FALSE(rc.qp->post_send({&w, 1}, nullptr));
  EXPECT_EQ(mw.rkey(), next_rkey(before)) << "post_send records the window's new rkey";
  auto got = poll_n(*rc.scq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::success) << describe(got[0]);
  EXPECT_EQ(got[0].opcode, WcOpcode::bind_mw);
  EXPECT_EQ(got[0].wr_id, 7u);
}

// A: one READ of `len` bytes at `addr` through `rkey`; returns its status.
WcStatus read_one(Rc& rc, Buffer& dst, std::uint64_t addr, std::uint32_t rkey, std::uint32_t len,
                  std::uint64_t id) {
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  Sge sg = dst.sge(0, len);
  SendWr w = signaled(id, &sg, 1, Opcode::rdma_read);
  w.remote_addr = addr;
  w.rkey = rkey;
  EXPECT_FALSE(rc.qp->post_send({&w, 1}, nullptr));
  auto got = poll_n(*rc.scq, 1);
  EXPECT_EQ(got.size(), 1u);
  if (got.empty()) return WcStatus::general_error;
  EXPECT_EQ(got[0].wr_id, id);
  return got[0].status;
}

bool bytes_match(const Buffer& dst, std::size_t remote_off, std::size_t len) {
  for (std::size_t i = 0; i < len; ++i)
    if (dst.bytes[i] != pattern(remote_off + i)) return false;
  return true;
}

}  // namespace

TEST(MemoryWindow, DeviceSaysWhetherItHasThemAndAllocMatches) {
  Side s;
  if (!open_side(s, nullptr, config().local_addr)) {
    if (!s.skip_reason.empty()) GTEST_SKIP() << s.skip_reason;
    FAIL() << "cannot open the device";
  }
  std::error_code ec;
  auto mw = s.pd->alloc_mw(ec);
  if (!s.device->attr().mw_type2) {
    EXPECT_FALSE(mw);
    EXPECT_EQ(ec, make_error_code(errc::not_supported));
    return;
  }
  ASSERT_TRUE(mw) << ec.message();
  EXPECT_GT(s.device->attr().max_mw, 0u);
  auto mw2 = s.pd->alloc_mw(ec);
  ASSERT_TRUE(mw2) << ec.message();
  EXPECT_NE(mw->rkey() >> 8, mw2->rkey() >> 8) << "two windows, two indices";
  // An MR may carry windows (kMwBind) with or without remote rights of its own.
  Buffer b = make_buffer(*s.pd, 4096, kLocalWrite | kMwBind);
  EXPECT_TRUE(b.mr);
}

// The heart of issue 14: the same rkey, presented on another QP of the same
// PD, is a remote access error; the bound QP keeps working.
SIPHON_TWO_SIDED(MemoryWindow, RkeyWorksOnlyOnTheBoundQp)
void MemoryWindow_RkeyWorksOnlyOnTheBoundQp::a(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  Rc a1 = connect_rc(s);
  Rc a2 = connect_rc(s);
  ASSERT_TRUE(a1.qp && a2.qp);
  Window w{};
  ASSERT_TRUE(s.oob->recv(w));
  Buffer dst = make_buffer(*s.pd, kLen, kLocalWrite);
  EXPECT_EQ(read_one(a1, dst, w.addr, w.rkey, 1024, 1), WcStatus::success);
  EXPECT_TRUE(bytes_match(dst, 0, 1024));
  EXPECT_EQ(read_one(a2, dst, w.addr, w.rkey, 1024, 2), WcStatus::remote_access_error)
      << "an rkey bound to another QP";
  EXPECT_EQ(dst.bytes[0], 0) << "nothing was placed";
  EXPECT_EQ(settled_state(*a2.qp, QpState::err), QpState::err);
  EXPECT_EQ(read_one(a1, dst, w.addr + 512, w.rkey, 2048, 3), WcStatus::success)
      << "the bound QP is unharmed";
  EXPECT_TRUE(bytes_match(dst, 512, 2048));
  ASSERT_TRUE(s.oob->sync());
}
void MemoryWindow_RkeyWorksOnlyOnTheBoundQp::b(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  Rc b1 = connect_rc(s);
  Rc b2 = connect_rc(s);
  ASSERT_TRUE(b1.qp && b2.qp);
  Buffer mem = window_buffer(s);
  std::error_code ec;
  auto mw = s.pd->alloc_mw(ec);
  ASSERT_TRUE(mw) << ec.message();
  bind_ok(b1, *mw, mem, 0, kLen);
  ASSERT_TRUE(s.oob->send(Window{mem.addr(), mw->rkey(), kLen}));
  ASSERT_TRUE(s.oob->sync());
  EXPECT_EQ(b1.qp->state(), QpState::rts);
}

// After a local invalidate the rkey is dead; a rebind (the next rkey, here
// to a new QP) works, and the old rkey stays dead.
SIPHON_TWO_SIDED(MemoryWindow, InvalidatedRkeyIsDeadAndRebindGivesANewOne)
void MemoryWindow_InvalidatedRkeyIsDeadAndRebindGivesANewOne::a(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  Buffer dst = make_buffer(*s.pd, kLen, kLocalWrite);
  Window w{};
  {
    Rc a = connect_rc(s);
    ASSERT_TRUE(a.qp);
    ASSERT_TRUE(s.oob->recv(w));
    EXPECT_EQ(read_one(a, dst, w.addr, w.rkey, 4096, 1), WcStatus::success);
    EXPECT_TRUE(bytes_match(dst, 0, 4096));
    ASSERT_TRUE(s.oob->sync());  // B invalidates
    ASSERT_TRUE(s.oob->sync());
    EXPECT_EQ(read_one(a, dst, w.addr, w.rkey, 64, 2), WcStatus::remote_access_error)
        << "an invalidated window";
    EXPECT_EQ(settled_state(*a.qp, QpState::err), QpState::err);
    ASSERT_TRUE(s.oob->sync());
  }
  Rc a = connect_rc(s);
  ASSERT_TRUE(a.qp);
  Window w2{};
  ASSERT_TRUE(s.oob->recv(w2));
  EXPECT_NE(w2.rkey, w.rkey);
  EXPECT_EQ(read_one(a, dst, w2.addr, w2.rkey, 256, 3), WcStatus::success);
  EXPECT_TRUE(bytes_match(dst, 0, 256));
  EXPECT_EQ(read_one(a, dst, w.addr, w.rkey, 64, 4), WcStatus::remote_access_error)
      << "the rkey of an earlier bind";
  ASSERT_TRUE(s.oob->sync());
}
void MemoryWindow_InvalidatedRkeyIsDeadAndRebindGivesANewOne::b(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  Buffer mem = window_buffer(s);
  std::error_code ec;
  auto mw = s.pd->alloc_mw(ec);
  ASSERT_TRUE(mw) << ec.message();
  {
    Rc b = connect_rc(s);
    ASSERT_TRUE(b.qp);
    bind_ok(b, *mw, mem, 0, kLen);
    const std::uint32_t rkey = mw->rkey();
    ASSERT_TRUE(s.oob->send(Window{mem.addr(), rkey, kLen}));
    ASSERT_TRUE(s.oob->sync());
    SendWr inv;
    inv.wr_id = 9;
    inv.opcode = Opcode::local_inv;
    inv.flags = kSignaled;
    inv.rkey = rkey;
    ASSERT_FALSE(b.qp->post_send({&inv, 1}, nullptr));
    auto got = poll_n(*b.scq, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, WcStatus::success) << describe(got[0]);
    EXPECT_EQ(got[0].opcode, WcOpcode::local_inv);
    ASSERT_TRUE(s.oob->sync());
    ASSERT_TRUE(s.oob->sync());
  }
  Rc b = connect_rc(s);
  ASSERT_TRUE(b.qp);
  bind_ok(b, *mw, mem, 0, kLen);
  ASSERT_TRUE(s.oob->send(Window{mem.addr(), mw->rkey(), kLen}));
  ASSERT_TRUE(s.oob->sync());
  // The window goes before the QP it is bound to (provider.h, MemoryWindow):
  // in the other order rxe's ibv_destroy_qp blocked for 50 s here.
  mw.reset();
}

// Destroying a bound window (ibv_dealloc_mw) revokes it at once: this is how
// the RDMA stack ends a zero-copy transfer, before deregistering the MR.
SIPHON_TWO_SIDED(MemoryWindow, DeallocatedWindowIsDead)
void MemoryWindow_DeallocatedWindowIsDead::a(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  Rc a = connect_rc(s);
  ASSERT_TRUE(a.qp);
  Window w{};
  ASSERT_TRUE(s.oob->recv(w));
  Buffer dst = make_buffer(*s.pd, kLen, kLocalWrite);
  EXPECT_EQ(read_one(a, dst, w.addr, w.rkey, 512, 1), WcStatus::success);
  ASSERT_TRUE(s.oob->sync());  // B destroys the window
  ASSERT_TRUE(s.oob->sync());
  EXPECT_EQ(read_one(a, dst, w.addr, w.rkey, 512, 2), WcStatus::remote_access_error)
      << "a deallocated window";
  EXPECT_EQ(settled_state(*a.qp, QpState::err), QpState::err);
  ASSERT_TRUE(s.oob->sync());
}
void MemoryWindow_DeallocatedWindowIsDead::b(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  Rc b = connect_rc(s);
  ASSERT_TRUE(b.qp);
  Buffer mem = window_buffer(s);
  std::error_code ec;
  auto mw = s.pd->alloc_mw(ec);
  ASSERT_TRUE(mw) << ec.message();
  bind_ok(b, *mw, mem, 0, kLen);
  ASSERT_TRUE(s.oob->send(Window{mem.addr(), mw->rkey(), kLen}));
  ASSERT_TRUE(s.oob->sync());
  mw.reset();
  ASSERT_TRUE(s.oob->sync());
  ASSERT_TRUE(s.oob->sync());
  mem.mr.reset();  // after the window (rxe refuses an MR with bound windows)
}

// A window covers exactly its range: a READ running past it is refused.
// Round 0: a window on [1024, 2048) of a 4 KiB MR, read 512 bytes past its
// end (still inside the MR). Round 1: a window over the whole MR, read past
// the MR's end. Kernel Soft-RoCE (rxe, Linux 6.1) checks a window's READ
// against the range of the MR under it, not the window's own (rxe_resp.c
// check_rkey -> mr_check_range), so on rxe round 0 succeeds; that deviation
// is accepted on rxe only and recorded in docs/rdma-provider.md. The RDMA
// stack binds each window over its whole MR, where rxe is exact (round 1).
SIPHON_TWO_SIDED(MemoryWindow, OutOfBoundsIsRemoteAccessError)
void MemoryWindow_OutOfBoundsIsRemoteAccessError::a(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  const bool rxe = s.device->attr().name.rfind("rxe", 0) == 0;
  Buffer dst = make_buffer(*s.pd, kLen, kLocalWrite);
  for (int round = 0; round < 2; ++round) {
    Rc a = connect_rc(s);
    ASSERT_TRUE(a.qp);
    Window w{};
    ASSERT_TRUE(s.oob->recv(w));
    EXPECT_EQ(read_one(a, dst, w.addr, w.rkey, w.len, 1), WcStatus::success);
    EXPECT_TRUE(bytes_match(dst, round == 0 ? 1024 : 0, w.len));
    const WcStatus past = read_one(a, dst, w.addr + w.len - 512, w.rkey, 1024, 2);
    if (round == 0 && rxe && past == WcStatus::success) {
      std::printf("rxe: a READ past the window but inside its MR succeeded (rxe checks the MR's range)\n");
    } else {
      EXPECT_EQ(past, WcStatus::remote_access_error)
          << (round == 0 ? "512 bytes past the window (inside the MR)" : "512 bytes past the window and the MR");
      EXPECT_EQ(settled_state(*a.qp, QpState::err), QpState::err);
    }
    ASSERT_TRUE(s.oob->sync());
  }
}
void MemoryWindow_OutOfBoundsIsRemoteAccessError::b(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  Buffer mem = window_buffer(s);
  for (int round = 0; round < 2; ++round) {
    Rc b = connect_rc(s);
    ASSERT_TRUE(b.qp);
    std::error_code ec;
    auto mw = s.pd->alloc_mw(ec);
    ASSERT_TRUE(mw) << ec.message();
    const std::size_t off = round == 0 ? 1024 : 0, len = round == 0 ? 1024 : kLen;
    bind_ok(b, *mw, mem, off, len);
    ASSERT_TRUE(s.oob->send(Window{mem.addr(off), mw->rkey(), static_cast<std::uint32_t>(len)}));
    ASSERT_TRUE(s.oob->sync());
  }
}

// Binding needs an MR registered with kMwBind: without it the bind completes
// in error (verbs: IBV_WC_MW_BIND_ERR) and the QP enters ERR.
SIPHON_TWO_SIDED(MemoryWindow, BindWithoutMwBindAccessFails)
void MemoryWindow_BindWithoutMwBindAccessFails::a(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  Rc a = connect_rc(s);
  ASSERT_TRUE(a.qp);
  ASSERT_TRUE(s.oob->sync());
}
void MemoryWindow_BindWithoutMwBindAccessFails::b(Side& s) {
  if (skip_without_windows(s)) GTEST_SKIP() << "device without type-2 memory windows";
  Rc b = connect_rc(s);
  ASSERT_TRUE(b.qp);
  Buffer mem = window_buffer(s, kLocalWrite | kRemoteRead);
  std::error_code ec;
  auto mw = s.pd->alloc_mw(ec);
  ASSERT_TRUE(mw) << ec.message();
  SendWr w = bind_wr(5, *mw, mem, 0, kLen);
  SendWr after;
  after.wr_id = 6;
  after.opcode = Opcode::send;
  after.flags = kSignaled;
  SendWr both[2] = {w, after};
  ASSERT_FALSE(b.qp->post_send(both, nullptr));
  auto got = poll_n(*b.scq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 5u);
  EXPECT_EQ(got[0].status, WcStatus::local_protection_error) << describe(got[0]);
  EXPECT_EQ(got[1].wr_id, 6u);
  EXPECT_EQ(got[1].status, WcStatus::flushed) << describe(got[1]);
  EXPECT_EQ(settled_state(*b.qp, QpState::err), QpState::err);
  ASSERT_TRUE(s.oob->sync());
}

}  // namespace siphon::rdma::conformance
