// Conformance: two sides (threads, processes or namespaces; harness.h) --
// SEND/RECV ordering and completion contents, immediate data, RDMA WRITE and
// READ byte-exact, remote access errors, RNR, flush, SRQ, peer death.
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "harness.h"

namespace siphon::rdma::conformance {
namespace {

QpCaps caps() { return make_caps(128, 4); }

// Creates an RC QP, swaps endpoints with the other side and brings it to RTS.
Rc connect_rc(Side& s, const QpParams& p = {}, SharedReceiveQueue* srq = nullptr, Endpoint* remote_out = nullptr) {
  Rc rc = make_rc(s, caps(), srq);
  if (!rc.qp) return rc;
  const Endpoint self = endpoint_of(s, *rc.qp, s.is_a ? 0x123 : 0xABCDE);
  Endpoint remote;
  EXPECT_TRUE(s.oob->send(self) && s.oob->recv(remote)) << "endpoint exchange";
  EXPECT_FALSE(bring_up(s, *rc.qp, self, remote, p));
  if (remote_out != nullptr) *remote_out = remote;
  // Both QPs are in RTS before anything is posted: a request reaching a QP
  // that is not yet in RTR is dropped, and costs a transport retry.
  EXPECT_TRUE(s.oob->sync());
  return rc;
}

struct RemoteMr {
  std::uint64_t addr;
  std::uint32_t rkey;
  std::uint32_t len;
};

std::uint8_t pattern(std::size_t i, std::uint32_t seed) {
  return static_cast<std::uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

// ---------------------------------------------------------------- SEND/RECV

constexpr int kMsgs = 100;

SIPHON_TWO_SIDED(SendRecv, InOrderWithCompletionContents)
void SendRecv_InOrderWithCompletionContents::a(Side& s) {
  Rc rc = connect_rc(s);
  ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, kMsgs * 512, kLocalWrite);
  for (int i = 0; i < kMsgs; ++i)
    for (int k = 0; k < 512; ++k) buf.bytes[i * 512 + k] = pattern(k, i);
  ASSERT_TRUE(s.oob->sync());  // B's receives are posted
  for (int i = 0; i < kMsgs; ++i) {
    // Sizes 0..~500, two SGEs when there is room.
    const std::uint32_t len = static_cast<std::uint32_t>((i * 37) % 500);
    Sge sg[2] = {buf.sge(i * 512, len / 2), buf.sge(i * 512 + len / 2, len - len / 2)};
    SendWr w = signaled(1000 + i, sg, 2);
    ASSERT_FALSE(rc.qp->post_send({&w, 1}, nullptr)) << i;
  }
  auto got = poll_n(*rc.scq, kMsgs);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kMsgs));
  for (int i = 0; i < kMsgs; ++i) {
    EXPECT_EQ(got[i].wr_id, 1000u + i);
    EXPECT_EQ(got[i].status, WcStatus::success) << describe(got[i]);
    EXPECT_EQ(got[i].opcode, WcOpcode::send);
    EXPECT_EQ(got[i].qp_num, rc.qp->qp_num());
  }
  ASSERT_TRUE(s.oob->sync());
}
void SendRecv_InOrderWithCompletionContents::b(Side& s) {
  Rc rc = connect_rc(s);
  ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, kMsgs * 512, kLocalWrite);
  for (int i = 0; i < kMsgs; ++i) {
    Sge sg = buf.sge(i * 512, 512);
    RecvWr r{static_cast<std::uint64_t>(i), &sg, 1};
    ASSERT_FALSE(rc.qp->post_recv({&r, 1}, nullptr));
  }
  ASSERT_TRUE(s.oob->sync());
  auto got = poll_n(*rc.rcq, kMsgs);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kMsgs));
  for (int i = 0; i < kMsgs; ++i) {
    const std::uint32_t len = static_cast<std::uint32_t>((i * 37) % 500);
    EXPECT_EQ(got[i].wr_id, static_cast<std::uint64_t>(i));  // in order
    EXPECT_EQ(got[i].status, WcStatus::success) << describe(got[i]);
    EXPECT_EQ(got[i].opcode, WcOpcode::recv);
    EXPECT_EQ(got[i].byte_len, len);
    EXPECT_FALSE(got[i].has_imm);
    EXPECT_EQ(got[i].qp_num, rc.qp->qp_num());
    for (std::uint32_t k = 0; k < len; ++k)
      ASSERT_EQ(buf.bytes[i * 512 + k], pattern(k, i)) << "message " << i << " byte " << k;
  }
  ASSERT_TRUE(s.oob->sync());
}

// ---------------------------------------------------------------- immediate data

SIPHON_TWO_SIDED(Imm, SendWithImmAndWriteWithImm)
void Imm_SendWithImmAndWriteWithImm::a(Side& s) {
  Rc rc = connect_rc(s);
  ASSERT_TRUE(rc.qp);
  RemoteMr rm{};
  ASSERT_TRUE(s.oob->recv(rm));
  Buffer buf = make_buffer(*s.pd, 4096, kLocalWrite);
  for (int i = 0; i < 4096; ++i) buf.bytes[i] = pattern(i, 9);
  Sge sg0 = buf.sge(0, 100), sg1 = buf.sge(100, 3000);
  SendWr w[2] = {signaled(1, &sg0, 1, Opcode::send_with_imm), signaled(2, &sg1, 1, Opcode::rdma_write_with_imm)};
  w[0].imm_data = 0x12345678;
  w[1].imm_data = 0xCAFEBABE;
  w[1].remote_addr = rm.addr + 50;
  w[1].rkey = rm.rkey;
  ASSERT_FALSE(rc.qp->post_send(w, nullptr));
  auto got = poll_n(*rc.scq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].opcode, WcOpcode::send);
  EXPECT_EQ(got[1].opcode, WcOpcode::rdma_write);
  EXPECT_EQ(got[0].status, WcStatus::success) << describe(got[0]);
  EXPECT_EQ(got[1].status, WcStatus::success) << describe(got[1]);
  ASSERT_TRUE(s.oob->sync());
}
void Imm_SendWithImmAndWriteWithImm::b(Side& s) {
  Rc rc = connect_rc(s);
  ASSERT_TRUE(rc.qp);
  Buffer target = make_buffer(*s.pd, 8192, kLocalWrite | kRemoteWrite);
  Buffer rbuf = make_buffer(*s.pd, 4096, kLocalWrite);
  Sge sg = rbuf.sge(0, 4096);
  RecvWr r[2] = {{10, &sg, 1}, {11, &sg, 1}};
  ASSERT_FALSE(rc.qp->post_recv(r, nullptr));
  ASSERT_TRUE(s.oob->send(RemoteMr{target.addr(), target.mr->rkey(), 8192}));
  auto got = poll_n(*rc.rcq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 10u);
  EXPECT_EQ(got[0].opcode, WcOpcode::recv);
  EXPECT_TRUE(got[0].has_imm);
  EXPECT_EQ(got[0].imm_data, 0x12345678u);
  EXPECT_EQ(got[0].byte_len, 100u);
  EXPECT_EQ(got[1].wr_id, 11u);
  EXPECT_EQ(got[1].opcode, WcOpcode::recv_rdma_with_imm);
  EXPECT_TRUE(got[1].has_imm);
  EXPECT_EQ(got[1].imm_data, 0xCAFEBABEu);
  EXPECT_EQ(got[1].byte_len, 3000u);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(rbuf.bytes[i], pattern(i, 9));
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(target.bytes[50 + i], pattern(100 + i, 9)) << i;
  EXPECT_EQ(target.bytes[49], 0);
  EXPECT_EQ(target.bytes[3050], 0);
  ASSERT_TRUE(s.oob->sync());
}

// ---------------------------------------------------------------- WRITE / READ

constexpr std::size_t kRegion = 1 << 20;

SIPHON_TWO_SIDED(Rdma, WriteAndReadAreByteExact)
void Rdma_WriteAndReadAreByteExact::a(Side& s) {
  Rc rc = connect_rc(s);
  ASSERT_TRUE(rc.qp);
  RemoteMr rm{};
  ASSERT_TRUE(s.oob->recv(rm));
  Buffer src = make_buffer(*s.pd, kRegion, kLocalWrite);
  Buffer dst = make_buffer(*s.pd, kRegion, kLocalWrite);
  for (std::size_t i = 0; i < kRegion; ++i) src.bytes[i] = pattern(i, 3);
  // WRITE 300000 bytes from three SGEs to offset 1000.
  Sge wsg[3] = {src.sge(0, 100000), src.sge(100000, 150000), src.sge(250000, 50000)};
  SendWr w = signaled(1, wsg, 3, Opcode::rdma_write);
  w.remote_addr = rm.addr + 1000;
  w.rkey = rm.rkey;
  ASSERT_FALSE(rc.qp->post_send({&w, 1}, nullptr));
  // READ 512 KiB of B's pattern (at offset 400000) into two SGEs.
  Sge rsg[2] = {dst.sge(0, 200000), dst.sge(300000, 324288)};
  SendWr r = signaled(2, rsg, 2, Opcode::rdma_read);
  r.remote_addr = rm.addr + 400000;
  r.rkey = rm.rkey;
  ASSERT_FALSE(rc.qp->post_send({&r, 1}, nullptr));
  auto got = poll_n(*rc.scq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[0].opcode, WcOpcode::rdma_write);
  EXPECT_EQ(got[0].status, WcStatus::success) << describe(got[0]);
  EXPECT_EQ(got[1].wr_id, 2u);
  EXPECT_EQ(got[1].opcode, WcOpcode::rdma_read);
  EXPECT_EQ(got[1].status, WcStatus::success) << describe(got[1]);
  EXPECT_EQ(got[1].byte_len, 524288u);
  for (std::size_t i = 0; i < 200000; ++i) ASSERT_EQ(dst.bytes[i], pattern(400000 + i, 5)) << i;
  for (std::size_t i = 200000; i < 300000; ++i) ASSERT_EQ(dst.bytes[i], 0) << i;
  for (std::size_t i = 0; i < 324288; ++i)
    ASSERT_EQ(dst.bytes[300000 + i], pattern(600000 + i, 5)) << i;
  // More READs than max_rd_atomic (1 here) in one post: they queue and all
  // complete, in order.
  std::vector<SendWr> reads(16, r);
  std::vector<Sge> rs(16);
  for (int i = 0; i < 16; ++i) {
    rs[i] = dst.sge(700000 + i * 1000, 1000);
    reads[i].wr_id = 100 + i;
    reads[i].sg_list = &rs[i];
    reads[i].num_sge = 1;
    reads[i].remote_addr = rm.addr + 500000 + i * 1000;
  }
  ASSERT_FALSE(rc.qp->post_send(reads, nullptr));
  got = poll_n(*rc.scq, 16);
  ASSERT_EQ(got.size(), 16u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(got[i].wr_id, 100u + i);
    EXPECT_EQ(got[i].status, WcStatus::success) << describe(got[i]);
  }
  for (std::size_t i = 0; i < 16000; ++i) ASSERT_EQ(dst.bytes[700000 + i], pattern(500000 + i, 5)) << i;
  // B learns that the WRITE landed the RDMA way: from a later SEND (RC
  // delivers in order), not from the side channel.
  SendWr note;
  note.wr_id = 3;
  note.flags = kSignaled;
  ASSERT_FALSE(rc.qp->post_send({&note, 1}, nullptr));
  ASSERT_EQ(poll_n(*rc.scq, 1).size(), 1u);
  ASSERT_TRUE(s.oob->sync());
}
void Rdma_WriteAndReadAreByteExact::b(Side& s) {
  Rc rc = connect_rc(s);
  ASSERT_TRUE(rc.qp);
  Buffer region = make_buffer(*s.pd, kRegion, kLocalWrite | kRemoteWrite | kRemoteRead);
  for (std::size_t i = 400000; i < kRegion; ++i) region.bytes[i] = pattern(i, 5);
  RecvWr note{9, nullptr, 0};
  ASSERT_FALSE(rc.qp->post_recv({&note, 1}, nullptr));
  ASSERT_TRUE(s.oob->send(RemoteMr{region.addr(), region.mr->rkey(), kRegion}));
  auto got = poll_n(*rc.rcq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 9u);
  ASSERT_TRUE(s.oob->sync());
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(region.bytes[i], 0) << i;
  for (std::size_t i = 0; i < 300000; ++i) ASSERT_EQ(region.bytes[1000 + i], pattern(i, 3)) << i;
  EXPECT_EQ(region.bytes[301000], 0);
}

// READ of a region registered without REMOTE_READ; WRITE past the region.
SIPHON_TWO_SIDED(Rdma, AccessViolationsAreRemoteAccessErrors)
void Rdma_AccessViolationsAreRemoteAccessErrors::a(Side& s) {
  RemoteMr rm{};
  Buffer dst = make_buffer(*s.pd, 4096, kLocalWrite);
  Sge sg = dst.sge(0, 1024);
  for (int round = 0; round < 2; ++round) {
    Rc rc = connect_rc(s);
    ASSERT_TRUE(rc.qp);
    ASSERT_TRUE(s.oob->recv(rm));
    SendWr w = signaled(40 + round, &sg, 1, round == 0 ? Opcode::rdma_read : Opcode::rdma_write);
    w.remote_addr = rm.addr + (round == 0 ? 0 : rm.len - 512);  // write runs 512 bytes past
    w.rkey = rm.rkey;
    SendWr after = w;
    after.wr_id = 50;
    after.opcode = Opcode::send;
    SendWr both[2] = {w, after};
    ASSERT_FALSE(rc.qp->post_send(both, nullptr));
    auto got = poll_n(*rc.scq, 2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].wr_id, 40u + round);
    EXPECT_EQ(got[0].status, WcStatus::remote_access_error) << describe(got[0]);
    EXPECT_EQ(got[1].wr_id, 50u);
    EXPECT_EQ(got[1].status, WcStatus::flushed) << describe(got[1]);
    EXPECT_EQ(settled_state(*rc.qp, QpState::err), QpState::err);
    ASSERT_TRUE(s.oob->sync());
  }
}
void Rdma_AccessViolationsAreRemoteAccessErrors::b(Side& s) {
  Buffer noread = make_buffer(*s.pd, 4096, kLocalWrite | kRemoteWrite);
  for (int round = 0; round < 2; ++round) {
    Rc rc = connect_rc(s);
    ASSERT_TRUE(rc.qp);
    ASSERT_TRUE(s.oob->send(RemoteMr{noread.addr(), noread.mr->rkey(), 4096}));
    ASSERT_TRUE(s.oob->sync());
  }
  EXPECT_EQ(noread.bytes[4095], 0);  // nothing was written past the checks
}

// A SEND longer than the receive buffer: the requester sees a remote error,
// the responder a local error, both QPs end in ERR. The IB spec (and mlx5)
// report remote invalid request / local length error; kernel Soft-RoCE (rxe,
// Linux 6.1) reports remote operation error / local QP operation error.
// Both pairs are accepted; nothing else is.
SIPHON_TWO_SIDED(SendRecv, TooLongForTheReceiveBuffer)
void SendRecv_TooLongForTheReceiveBuffer::a(Side& s) {
  Rc rc = connect_rc(s);
  ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, 4096, kLocalWrite);
  ASSERT_TRUE(s.oob->sync());  // B's 100-byte receive is posted
  Sge sg = buf.sge(0, 1000);
  SendWr w = signaled(5, &sg);
  ASSERT_FALSE(rc.qp->post_send({&w, 1}, nullptr));
  auto got = poll_n(*rc.scq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].status == WcStatus::remote_invalid_request ||
              got[0].status == WcStatus::remote_operation_error)
      << describe(got[0]);
  EXPECT_EQ(settled_state(*rc.qp, QpState::err), QpState::err);
  ASSERT_TRUE(s.oob->sync());
}
void SendRecv_TooLongForTheReceiveBuffer::b(Side& s) {
  Rc rc = connect_rc(s);
  ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, 4096, kLocalWrite);
  Sge sg = buf.sge(0, 100);
  RecvWr r{1, &sg, 1};
  ASSERT_FALSE(rc.qp->post_recv({&r, 1}, nullptr));
  ASSERT_TRUE(s.oob->sync());
  auto got = poll_n(*rc.rcq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_TRUE(got[0].status == WcStatus::local_length_error ||
              got[0].status == WcStatus::local_qp_operation_error)
      << describe(got[0]);
  EXPECT_EQ(settled_state(*rc.qp, QpState::err), QpState::err);
  ASSERT_TRUE(s.oob->sync());
}

// ---------------------------------------------------------------- RNR

SIPHON_TWO_SIDED(Rnr, SmallRetryCountEndsInRnrRetryExceeded)
void Rnr_SmallRetryCountEndsInRnrRetryExceeded::a(Side& s) {
  QpParams p;
  p.rnr_retry = 1;
  Rc rc = connect_rc(s, p);
  ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, 64, kLocalWrite);
  Sge sg = buf.sge(0, 8);
  SendWr w = signaled(7, &sg);
  ASSERT_FALSE(rc.qp->post_send({&w, 1}, nullptr));
  auto got = poll_n(*rc.scq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 7u);
  EXPECT_EQ(got[0].status, WcStatus::rnr_retry_exceeded) << describe(got[0]);
  EXPECT_EQ(settled_state(*rc.qp, QpState::err), QpState::err);
  ASSERT_TRUE(s.oob->sync());
}
void Rnr_SmallRetryCountEndsInRnrRetryExceeded::b(Side& s) {
  QpParams p;
  p.min_rnr_timer = 1;  // 0.01 ms
  Rc rc = connect_rc(s, p);
  ASSERT_TRUE(rc.qp);
  ASSERT_TRUE(s.oob->sync());  // no receive was ever posted
}

SIPHON_TWO_SIDED(Rnr, LateReceiveIsRetriedIntoSuccess)
void Rnr_LateReceiveIsRetriedIntoSuccess::a(Side& s) {
  QpParams p;
  p.rnr_retry = 7;  // infinite
  // About 4 s per transport retry instead of 67 ms: this test is about RNR,
  // and under TSan on a loaded CI machine the responder once took longer
  // than 8 x 67 ms to send its first RNR NAK (retry_exceeded instead of
  // success).
  p.timeout = 20;
  Rc rc = connect_rc(s, p);
  ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, 64, kLocalWrite);
  buf.bytes[0] = 0x42;
  Sge sg = buf.sge(0, 8);
  SendWr w = signaled(8, &sg);
  ASSERT_FALSE(rc.qp->post_send({&w, 1}, nullptr));
  ASSERT_TRUE(s.oob->sync());  // B posts its receive now, after some RNR NAKs
  auto got = poll_n(*rc.scq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::success) << describe(got[0]);
}
void Rnr_LateReceiveIsRetriedIntoSuccess::b(Side& s) {
  QpParams p;
  p.min_rnr_timer = 8;  // 0.16 ms
  Rc rc = connect_rc(s, p);
  ASSERT_TRUE(rc.qp);
  std::this_thread::sleep_for(50ms);
  Buffer buf = make_buffer(*s.pd, 64, kLocalWrite);
  Sge sg = buf.sge(0, 64);
  RecvWr r{1, &sg, 1};
  ASSERT_TRUE(s.oob->sync());
  ASSERT_FALSE(rc.qp->post_recv({&r, 1}, nullptr));
  auto got = poll_n(*rc.rcq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::success);
  EXPECT_EQ(got[0].byte_len, 8u);
  EXPECT_EQ(buf.bytes[0], 0x42);
}

// ---------------------------------------------------------------- flush

SIPHON_TWO_SIDED(Flush, ErrCompletesEveryOutstandingWr)
void Flush_ErrCompletesEveryOutstandingWr::a(Side& s) {
  QpParams p;
  p.rnr_retry = 7;
  Rc rc = connect_rc(s, p);
  ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, 4096, kLocalWrite);
  Sge sg = buf.sge(0, 8);
  std::vector<RecvWr> recvs;
  for (int i = 0; i < 5; ++i) recvs.push_back(RecvWr{static_cast<std::uint64_t>(100 + i), &sg, 1});
  ASSERT_FALSE(rc.qp->post_recv(recvs, nullptr));
  std::vector<SendWr> sends(6);
  for (int i = 0; i < 6; ++i) {
    sends[i] = signaled(200 + i, &sg);
    if (i % 2 == 1) sends[i].flags = 0;  // flushes complete unsignaled WRs too
  }
  ASSERT_FALSE(rc.qp->post_send(sends, nullptr));  // B has no receive: RNR forever
  std::this_thread::sleep_for(20ms);
  QpAttr e;
  e.state = QpState::err;
  ASSERT_FALSE(rc.qp->modify(e, kAttrState));
  auto sg_got = poll_n(*rc.scq, 6);
  ASSERT_EQ(sg_got.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(sg_got[i].wr_id, 200u + i);
    EXPECT_EQ(sg_got[i].status, WcStatus::flushed) << describe(sg_got[i]);
  }
  auto r_got = poll_n(*rc.rcq, 5);
  ASSERT_EQ(r_got.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r_got[i].wr_id, 100u + i);
    EXPECT_EQ(r_got[i].status, WcStatus::flushed);
  }
  ASSERT_TRUE(s.oob->sync());
}
void Flush_ErrCompletesEveryOutstandingWr::b(Side& s) {
  QpParams p;
  p.min_rnr_timer = 14;
  Rc rc = connect_rc(s, p);
  ASSERT_TRUE(rc.qp);
  ASSERT_TRUE(s.oob->sync());
}

// ---------------------------------------------------------------- SRQ

constexpr int kSrqQps = 3;
constexpr int kSrqMsgs = 40;

SIPHON_TWO_SIDED(Srq, SharedByThreeQps)
void Srq_SharedByThreeQps::a(Side& s) {
  std::vector<Rc> qps;
  for (int q = 0; q < kSrqQps; ++q) qps.push_back(connect_rc(s));
  for (auto& rc : qps) ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, 64 * kSrqQps * kSrqMsgs, kLocalWrite);
  ASSERT_TRUE(s.oob->sync());
  for (int i = 0; i < kSrqMsgs; ++i)
    for (int q = 0; q < kSrqQps; ++q) {
      const std::size_t off = (q * kSrqMsgs + i) * 64;
      buf.bytes[off] = static_cast<std::uint8_t>(q);
      buf.bytes[off + 1] = static_cast<std::uint8_t>(i);
      Sge sg = buf.sge(off, 2);
      SendWr w = signaled(i, &sg);
      ASSERT_FALSE(qps[q].qp->post_send({&w, 1}, nullptr));
    }
  for (auto& rc : qps) {
    auto got = poll_n(*rc.scq, kSrqMsgs);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kSrqMsgs));
    for (auto& wc : got) EXPECT_EQ(wc.status, WcStatus::success) << describe(wc);
  }
  ASSERT_TRUE(s.oob->sync());
}
void Srq_SharedByThreeQps::b(Side& s) {
  std::error_code ec;
  auto srq = s.pd->create_srq(SrqInit{kSrqQps * kSrqMsgs, 1}, ec);
  ASSERT_TRUE(srq) << ec.message();
  auto cq = s.device->create_cq(1024, ec);
  ASSERT_TRUE(cq);
  std::vector<Rc> qps;
  for (int q = 0; q < kSrqQps; ++q) {
    Rc rc;
    QpInit init;
    init.send_cq = init.recv_cq = cq.get();
    init.srq = srq.get();
    init.caps = caps();
    rc.qp = s.pd->create_qp(init, ec);
    ASSERT_TRUE(rc.qp) << ec.message();
    const Endpoint self = endpoint_of(s, *rc.qp, 77);
    Endpoint remote;
    ASSERT_TRUE(s.oob->send(self) && s.oob->recv(remote));
    ASSERT_FALSE(bring_up(s, *rc.qp, self, remote));
    ASSERT_TRUE(s.oob->sync());
    qps.push_back(std::move(rc));
  }
  Buffer buf = make_buffer(*s.pd, 64 * kSrqQps * kSrqMsgs, kLocalWrite);
  std::vector<Sge> sges;
  std::vector<RecvWr> recvs;
  for (int i = 0; i < kSrqQps * kSrqMsgs; ++i) sges.push_back(buf.sge(i * 64, 64));
  for (int i = 0; i < kSrqQps * kSrqMsgs; ++i)
    recvs.push_back(RecvWr{static_cast<std::uint64_t>(i), &sges[i], 1});
  ASSERT_FALSE(srq->post_recv(recvs, nullptr));
  ASSERT_TRUE(s.oob->sync());
  auto got = poll_n(*cq, kSrqQps * kSrqMsgs);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kSrqQps * kSrqMsgs));
  std::vector<int> next(kSrqQps, 0);
  for (const Wc& wc : got) {
    ASSERT_EQ(wc.status, WcStatus::success) << describe(wc);
    const auto* data = &buf.bytes[wc.wr_id * 64];
    const int q = data[0];
    ASSERT_LT(q, kSrqQps);
    EXPECT_EQ(wc.qp_num, qps[q].qp->qp_num());
    EXPECT_EQ(data[1], next[q]++) << "per-QP order";
  }
  for (int q = 0; q < kSrqQps; ++q) EXPECT_EQ(next[q], kSrqMsgs);
  ASSERT_TRUE(s.oob->sync());
}

// ---------------------------------------------------------------- peer death

SIPHON_TWO_SIDED(PeerDeath, QpEndsInRetryExceeded)
void PeerDeath_QpEndsInRetryExceeded::a(Side& s) {
  if (config().peer == "shared") GTEST_SKIP() << "--peer=shared: B shares A's adapter and cannot die alone";
  QpParams p;
  p.timeout = 10;  // 4.2 ms per try
  p.retry_cnt = 3;
  Rc rc = connect_rc(s, p);
  ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, 64, kLocalWrite);
  Sge sg = buf.sge(0, 8);
  SendWr w = signaled(1, &sg);
  ASSERT_FALSE(rc.qp->post_send({&w, 1}, nullptr));
  ASSERT_EQ(poll_n(*rc.scq, 1).size(), 1u);
  ASSERT_TRUE(s.oob->sync());
  std::vector<std::uint8_t> eof;
  EXPECT_FALSE(s.oob->recv_bytes(eof, 30s));  // B is gone
  const auto t0 = std::chrono::steady_clock::now();
  w.wr_id = 2;
  ASSERT_FALSE(rc.qp->post_send({&w, 1}, nullptr));
  auto got = poll_n(*rc.scq, 1, 30s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 2u);
  EXPECT_EQ(got[0].status, WcStatus::retry_exceeded) << describe(got[0]);
  EXPECT_EQ(settled_state(*rc.qp, QpState::err), QpState::err);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
}
void PeerDeath_QpEndsInRetryExceeded::b(Side& s) {
  if (config().peer == "shared") {
    // One provider for both sides: B cannot die alone; let A fail fast.
    s.oob->close();
    return;
  }
  Rc rc = connect_rc(s);
  ASSERT_TRUE(rc.qp);
  Buffer buf = make_buffer(*s.pd, 64, kLocalWrite);
  Sge sg = buf.sge(0, 64);
  RecvWr r{1, &sg, 1};
  ASSERT_FALSE(rc.qp->post_recv({&r, 1}, nullptr));
  ASSERT_TRUE(s.oob->sync());
  if (config().peer == "process" || config().peer == "netns") ::_exit(0);  // die, unclean
  rc = Rc{};
  buf = Buffer{};
  s.pd.reset();
  s.device.reset();
  s.provider.reset();  // every socket of this adapter closes, as in a crash
  s.oob->close();
}

}  // namespace
}  // namespace siphon::rdma::conformance
