// A raw RC client of the RDMA stack built directly on the provider seam
// (rdma/provider.h): it connects through the CM with the stack's ConnectInfo,
// registers one memory area, posts its receive buffers in it and then sends
// whatever the test puts in that memory -- the stack's wire format, or lies
// in it. The hostile peers of tests/unit/rdma/transport/rdma_stack_peer_test.cc
// and tests/unit/api/hostile_link.h are built on it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "msgr/proto/frame.h"
#include "rdma/provider.h"
#include "rdma/transport/credits.h"
#include "rdma/transport/rdma_wire.h"

namespace siphon::test {

class RawRcPeer {
 public:
  // Where things live in the registered memory (the rest is the test's).
  struct Layout {
    std::size_t mem_bytes = 0;        // the whole registered area
    std::size_t recv_offset = 0;      // the first receive buffer
    std::uint32_t recv_size = 4096;   // each receive buffer; advertised as recv_buffer_size
    std::uint32_t credits = 8;        // advertised; update_slots more receives are posted
    std::uint16_t update_slots = rdma::kUpdateSlots;  // advertised
    std::uint32_t max_read = 0;       // advertised: the largest transfer we offer to pull (0 = none)
  };

  RawRcPeer(rdma::Provider& prov, const Layout& l) : prov_(prov), layout_(l), mem_(l.mem_bytes) {}
  ~RawRcPeer() {
    if (id_) (void)id_->disconnect();
    qp_.reset();
    id_.reset();
  }
  RawRcPeer(const RawRcPeer&) = delete;
  RawRcPeer& operator=(const RawRcPeer&) = delete;

  // The receive slots posted (receive wr_id = slot number).
  std::uint32_t slots() const { return layout_.credits + layout_.update_slots; }

  // Resolves, creates the QP, posts every receive slot and connects with our
  // ConnectInfo; on success server_info() is the server's.
  ::testing::AssertionResult connect(const NetAddress& to) {
    using namespace rdma;
    std::error_code ec;
    ch_ = prov_.create_event_channel(ec);
    if (!ch_) return fail("event channel", ec);
    id_ = ch_->create_id(ec);
    if (!id_) return fail("create_id", ec);
    if ((ec = id_->resolve_addr(nullptr, to, 2000))) return fail("resolve_addr", ec);
    if (!wait_cm(CmEventType::addr_resolved)) return ::testing::AssertionFailure() << "no ADDR_RESOLVED";
    if ((ec = id_->resolve_route(2000))) return fail("resolve_route", ec);
    if (!wait_cm(CmEventType::route_resolved)) return ::testing::AssertionFailure() << "no ROUTE_RESOLVED";
    Device* dev = id_->device();
    pd_ = dev->alloc_pd(ec);
    cq_ = dev->create_cq(1024, ec);
    if (!pd_ || !cq_) return fail("pd/cq", ec);
    mr_ = pd_->reg_mr(mem_.data(), mem_.size(), kLocalWrite | kRemoteRead, ec);
    if (!mr_) return fail("reg_mr", ec);
    QpInit init;
    init.send_cq = init.recv_cq = cq_.get();
    init.caps.max_send_wr = 16;
    init.caps.max_recv_wr = slots();
    qp_ = id_->create_qp(*pd_, init, ec);
    if (!qp_) return fail("create_qp", ec);
    for (std::uint32_t i = 0; i < slots(); ++i)
      if ((ec = post_recv(i))) return fail("post_recv", ec);
    ConnectInfo mine;
    mine.update_slots = layout_.update_slots;
    mine.credits = layout_.credits;
    mine.recv_buffer_size = layout_.recv_size;
    mine.max_read = layout_.max_read;
    ConnParam param;
    const auto b = mine.encode();
    param.private_data.assign(b.begin(), b.end());
    if ((ec = id_->connect(param))) return fail("connect", ec);
    CmEvent ev;
    if (!wait_cm(CmEventType::established, &ev)) return ::testing::AssertionFailure() << "not established";
    if ((ec = ConnectInfo::decode(ev.private_data, server_))) return fail("server's ConnectInfo", ec);
    return ::testing::AssertionSuccess();
  }

  // Re-posts receive slot `slot`.
  std::error_code post_recv(std::uint32_t slot) {
    const rdma::Sge sg{addr(slot_offset(slot)), layout_.recv_size, mr_->lkey()};
    const rdma::RecvWr wr{slot, &sg, 1};
    return qp_->post_recv({&wr, 1}, nullptr);
  }
  // Posts one signaled SEND of `bytes` from offset `off`.
  std::error_code post_send(std::size_t off, std::uint32_t bytes, std::uint64_t wr_id) {
    const rdma::Sge sg{addr(off), bytes, mr_->lkey()};
    rdma::SendWr wr;
    wr.wr_id = wr_id;
    wr.flags = rdma::kSignaled;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    return qp_->post_send({&wr, 1}, nullptr);
  }

  // Posts one signaled RDMA READ of `bytes` at (`raddr`, `rkey`) into offset `off`.
  std::error_code post_read(std::size_t off, std::uint32_t bytes, std::uint64_t raddr, std::uint32_t rkey,
                            std::uint64_t wr_id) {
    const rdma::Sge sg{addr(off), bytes, mr_->lkey()};
    rdma::SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = rdma::Opcode::rdma_read;
    wr.flags = rdma::kSignaled;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.remote_addr = raddr;
    wr.rkey = rkey;
    return qp_->post_send({&wr, 1}, nullptr);
  }

  // The next completion matching `want` within `t`, or nullopt. Completions
  // polled meanwhile that do not match stay queued for later calls.
  std::optional<rdma::Wc> await(const std::function<bool(const rdma::Wc&)>& want,
                                std::chrono::milliseconds t = std::chrono::seconds(10)) {
    const auto end = std::chrono::steady_clock::now() + t;
    for (;;) {
      for (auto it = seen_.begin(); it != seen_.end(); ++it)
        if (want(*it)) {
          const rdma::Wc wc = *it;
          seen_.erase(it);
          return wc;
        }
      if (std::chrono::steady_clock::now() >= end) return std::nullopt;
      rdma::Wc wc[16];
      const std::size_t n = cq_->poll(wc);
      seen_.insert(seen_.end(), wc, wc + n);
      if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // How a SEND's completion is judged. `counts_as_sent`: a flushed SEND
  // counts as sent, for lies that make the server READ from us: our
  // responder rejects the READ, our QP goes to ERR and can flush the SEND's
  // completion before its ACK is seen, though the server received it. So
  // does retry_exceeded, for lies the server faults at once: on the soft
  // fabric a responder that destroys its QP while its same-host ring offer
  // is unanswered (the first microseconds of a link) cannot send the ACK it
  // owes (docs/rdma-provider.md, "Same-host rings"). Either way the caller
  // checks next that the server saw the SEND and faulted for it.
  enum class Flushed : bool { fails, counts_as_sent };

  // One signaled SEND of exactly `bytes`, copied to offset `off`; waits for
  // its completion.
  ::testing::AssertionResult send_bytes_at(std::size_t off, std::span<const std::uint8_t> bytes,
                                           Flushed flushed = Flushed::fails) {
    std::memcpy(at(off), bytes.data(), bytes.size());
    const std::uint64_t id = next_wr_id();
    if (const auto ec = post_send(off, static_cast<std::uint32_t>(bytes.size()), id))
      return ::testing::AssertionFailure() << "post_send: " << ec.message();
    const auto wc = await([id](const rdma::Wc& w) { return w.wr_id == id; });
    if (!wc) return ::testing::AssertionFailure() << "no send completion";
    if (wc->status == rdma::WcStatus::success ||
        (flushed == Flushed::counts_as_sent &&
         (wc->status == rdma::WcStatus::flushed || wc->status == rdma::WcStatus::retry_exceeded)))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << rdma::to_string(wc->status);
  }
  // One SEND of the stack's header `h` then `payload`, from offset `off`.
  ::testing::AssertionResult send_at(std::size_t off, const rdma::SendHeader& h,
                                     std::span<const std::uint8_t> payload = {},
                                     Flushed flushed = Flushed::fails) {
    std::vector<std::uint8_t> bytes(rdma::SendHeader::kSize + payload.size());
    h.encode(bytes.data());
    if (!payload.empty()) std::memcpy(bytes.data() + rdma::SendHeader::kSize, payload.data(), payload.size());
    return send_bytes_at(off, bytes, flushed);
  }
  // Our msgr2 banner as the stack's stream bytes, from offset `off`.
  ::testing::AssertionResult send_banner_at(std::size_t off) {
    const BufferList b = proto::encode_banner(proto::Banner{});
    std::vector<std::uint8_t> bytes(b.length());
    b.copy_out(0, bytes.size(), bytes.data());
    rdma::SendHeader h;
    h.type = rdma::SendType::stream;
    h.length = static_cast<std::uint32_t>(bytes.size());
    return send_at(off, h, bytes);
  }

  // A wr_id for a SEND or READ of ours, never a receive slot's.
  std::uint64_t next_wr_id() { return next_wr_id_++; }

  std::uint8_t* at(std::size_t off) { return mem_.data() + off; }
  // The receive buffer of `slot`.
  const std::uint8_t* slot_data(std::uint32_t slot) const { return mem_.data() + slot_offset(slot); }
  std::uint64_t addr(std::size_t off) const { return reinterpret_cast<std::uint64_t>(mem_.data() + off); }
  std::uint32_t rkey() const { return mr_->rkey(); }
  std::uint64_t region_bytes() const { return mem_.size(); }
  const rdma::ConnectInfo& server_info() const { return server_; }
  rdma::CompletionQueue& cq() { return *cq_; }
  rdma::EventChannel& channel() { return *ch_; }

 private:
  static ::testing::AssertionResult fail(const char* what, std::error_code ec) {
    return ::testing::AssertionFailure() << what << ": " << ec.message();
  }
  std::size_t slot_offset(std::uint32_t slot) const {
    return layout_.recv_offset + std::size_t{layout_.recv_size} * slot;
  }
  // The next CM event, which must be `type`.
  bool wait_cm(rdma::CmEventType type, rdma::CmEvent* out = nullptr) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) {
      rdma::CmEvent ev;
      if (ch_->get_event(ev)) {
        if (ev.type != type) return false;
        if (out != nullptr) *out = std::move(ev);
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

  rdma::Provider& prov_;
  Layout layout_;
  std::unique_ptr<rdma::EventChannel> ch_;
  std::unique_ptr<rdma::CmId> id_;
  std::unique_ptr<rdma::ProtectionDomain> pd_;
  std::unique_ptr<rdma::CompletionQueue> cq_;
  std::unique_ptr<rdma::QueuePair> qp_;
  std::vector<std::uint8_t> mem_;
  std::unique_ptr<rdma::MemoryRegion> mr_;
  rdma::ConnectInfo server_;
  std::deque<rdma::Wc> seen_;  // polled, not yet awaited
  // Our SENDs' and READs' wr_ids, far above the receive slots' (wr_id = slot number).
  std::uint64_t next_wr_id_ = std::uint64_t{1} << 32;
};

}  // namespace siphon::test
