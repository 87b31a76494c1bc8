// Byte-level hostile peers for tests/unit/api/hostile_test.cc: a HostileLink moves
// raw msgr2 stream bytes to a messenger, over a plain TCP socket or -- in the
// RDMA build -- over a raw RC queue pair on the software fabric that speaks
// the RDMA stack's SEND framing (SendHeader + stream bytes) and its credit
// protocol, but does with them whatever the test says (trickle, flood, hold
// credits back, advertise regions it never registered). A RawClient drives
// the msgr2 banner and the client handshake (msgr/session's state machine)
// over a HostileLink, so the same attacks run on both stacks.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "msgr/proto/control.h"
#include "msgr/proto/frame.h"
#include "msgr/session/handshake.h"
#ifdef SIPHON_TEST_RDMA
#include "raw_rc_peer.h"
#include "rdma/provider.h"
#include "rdma/soft/soft_provider.h"
#include "rdma/transport/credits.h"
#include "rdma/transport/rdma_wire.h"
#endif

namespace siphon::test {

using namespace std::chrono_literals;

class HostileLink {
 public:
  virtual ~HostileLink() = default;
  // Hands `bytes` to the peer in order (TCP: written; RDMA: SENDs of at most
  // the peer's buffer size). False once the connection is dead.
  virtual bool send(std::string_view bytes) = 0;
  // Appends what arrived to `out`; waits up to `timeout` for something.
  // False once the connection is dead (peer closed, error).
  virtual bool recv(std::string& out, std::chrono::milliseconds timeout) = 0;
  // Waits for the peer to close the connection, draining what it sends.
  bool closed_by_peer(std::chrono::milliseconds timeout = 20s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    std::string sink;
    while (std::chrono::steady_clock::now() < end) {
      if (!recv(sink, 50ms)) return true;
      sink.clear();
    }
    return false;
  }
  // Why the link died or a send failed (empty: no failure seen), for the
  // failure messages of the tests.
  virtual std::string why() const { return {}; }
};

// --- TCP ------------------------------------------------------------------------

class TcpLink final : public HostileLink {
 public:
  explicit TcpLink(const NetAddress& to) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    ok_ = fd_ >= 0 && ::connect(fd_, to.sockaddr_ptr(), to.sockaddr_len()) == 0;
  }
  ~TcpLink() override {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return ok_; }
  bool send(std::string_view s) override {
    std::size_t off = 0;
    while (ok_ && off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        ok_ = false;
        break;
      }
      off += static_cast<std::size_t>(n);
    }
    return ok_;
  }
  bool recv(std::string& out, std::chrono::milliseconds timeout) override {
    if (!ok_) return false;
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (r <= 0) return true;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return ok_ = false;
    out.append(buf, static_cast<std::size_t>(n));
    return true;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

#ifdef SIPHON_TEST_RDMA
// --- RDMA (software fabric) --------------------------------------------------------

class RdmaLink final : public HostileLink {
 public:
  static constexpr std::uint32_t kRecvSize = 4096;
  static constexpr std::uint32_t kCredits = 8;
  static constexpr std::uint32_t kSlots = kCredits + rdma::kUpdateSlots;
  static constexpr std::uint64_t kSendId = 1u << 20;
  static constexpr std::uint64_t kUpdateId = kSendId + 1;

  // [data SEND area][credit-update header][kSlots receive buffers]
  explicit RdmaLink(rdma::Provider& prov)
      : peer_(prov, {kRecvArea + std::size_t{kRecvSize} * kSlots, kRecvArea, kRecvSize, kCredits}) {}

  // Never give the server its credits back (it must stop sending to us and
  // keep everyone else going).
  bool hold_credits = false;

  ::testing::AssertionResult connect(const NetAddress& to) {
    auto r = peer_.connect(to);
    if (!r) return r;
    credits_ = peer_.server_info().credits;
    ok_ = true;
    return r;
  }

  bool send(std::string_view s) override {
    const std::size_t room =
        std::min<std::size_t>(peer_.server_info().recv_buffer_size, kSendArea) - rdma::SendHeader::kSize;
    for (std::size_t off = 0; ok_ && off < s.size(); off += room) {
      const std::string_view chunk = s.substr(off, room);
      if (!send_raw(rdma::SendType::stream, chunk.size(), 0,
                    {reinterpret_cast<const std::uint8_t*>(chunk.data()), chunk.size()}))
        return false;
    }
    return ok_;
  }

  bool recv(std::string& out, std::chrono::milliseconds timeout) override {
    const auto end = std::chrono::steady_clock::now() + timeout;
    do {
      const std::size_t before = rx_.size();
      if (!progress()) break;
      if (rx_.size() > before) break;
      std::this_thread::sleep_for(200us);
    } while (std::chrono::steady_clock::now() < end);
    out += rx_;
    rx_.clear();
    return ok_;
  }

  // One SEND with a header the caller chooses (read_request lies and such).
  // Waits for a data credit and for the completion.
  bool send_raw(rdma::SendType type, std::size_t length, std::uint64_t id, std::span<const std::uint8_t> payload) {
    using namespace rdma;
    if (!ok_ || payload.size() + SendHeader::kSize > kSendArea) return false;
    while (ok_ && credits_ == 0) {
      if (!progress()) return false;
      std::this_thread::sleep_for(100us);
    }
    --credits_;
    SendHeader h;
    h.type = type;
    h.length = static_cast<std::uint32_t>(length);
    h.id = id;
    h.credits_returned = hold_credits ? 0 : static_cast<std::uint16_t>(std::exchange(owed_, 0));
    h.encode(peer_.at(0));
    if (!payload.empty()) std::memcpy(peer_.at(SendHeader::kSize), payload.data(), payload.size());
    return post_send_and_wait(static_cast<std::uint32_t>(SendHeader::kSize + payload.size()));
  }

  std::uint64_t region_addr(std::size_t off) const { return peer_.addr(off); }
  std::uint32_t rkey() const { return peer_.rkey(); }
  const rdma::ConnectInfo& server_info() const { return peer_.server_info(); }

 private:
  static constexpr std::size_t kSendArea = 16 * 1024;        // data SENDs
  static constexpr std::size_t kRecvArea = kSendArea + 64;   // after the credit-update header

  bool post_send_and_wait(std::uint32_t bytes) {
    send_done_ = false;
    if (const auto ec = peer_.post_send(0, bytes, kSendId)) return fail("post_send: " + ec.message());
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (!send_done_ && std::chrono::steady_clock::now() < end) {
      if (!progress()) return false;
      if (!send_done_) std::this_thread::sleep_for(50us);
    }
    if (ok_ && !send_done_) why_ = "no send completion within 20 s";
    return ok_ && send_done_;
  }
  bool fail(std::string why) {
    if (why_.empty()) why_ = std::move(why);
    return ok_ = false;
  }
  // Processes completions and CM events; false once the connection is dead.
  bool progress() {
    using namespace rdma;
    if (!ok_) return false;
    CmEvent ev;
    while (peer_.channel().get_event(ev))
      if (ev.type == CmEventType::disconnected) return fail("disconnected (CM event)");
    Wc wc[32];
    const std::size_t n = peer_.cq().poll(wc);
    for (std::size_t i = 0; i < n; ++i) {
      if (wc[i].status != WcStatus::success)
        return fail(fmt::format("completion of wr_id {:#x}: {}", wc[i].wr_id, rdma::to_string(wc[i].status)));
      if (wc[i].wr_id == kSendId) {
        send_done_ = true;
        continue;
      }
      if (wc[i].wr_id == kUpdateId) {
        update_inflight_ = false;
        continue;
      }
      const auto slot = static_cast<std::uint32_t>(wc[i].wr_id);
      const std::uint8_t* p = peer_.slot_data(slot);
      SendHeader h;
      if (const auto ec = SendHeader::decode({p, wc[i].byte_len}, h))
        return fail("a SEND from the server did not decode: " + ec.message());
      credits_ += h.credits_returned;
      if (h.type == SendType::stream) rx_.append(reinterpret_cast<const char*>(p + SendHeader::kSize), h.length);
      if (const auto ec = peer_.post_recv(slot)) return fail("post_recv: " + ec.message());
      if (h.type != SendType::credit_update) ++owed_;
    }
    // Give credits back explicitly when half a window is owed (as the stack
    // does), from a header area of its own: a data SEND may be in flight.
    if (!hold_credits && !update_inflight_ && owed_ >= (kCredits + 1) / 2) {
      SendHeader h;
      h.type = SendType::credit_update;
      h.credits_returned = static_cast<std::uint16_t>(std::exchange(owed_, 0));
      h.encode(peer_.at(kSendArea));
      if (const auto ec = peer_.post_send(kSendArea, static_cast<std::uint32_t>(SendHeader::kSize), kUpdateId))
        return fail("post_send (credit update): " + ec.message());
      update_inflight_ = true;
    }
    return ok_;
  }

  std::string why() const override { return why_; }

  RawRcPeer peer_;
  std::string why_;
  std::uint32_t credits_ = 0, owed_ = 0;
  bool ok_ = false, send_done_ = false, update_inflight_ = false;
  std::string rx_;
};

inline rdma::Provider& raw_provider() {
  static const std::unique_ptr<rdma::Provider> p = rdma::soft::make_provider();
  return *p;
}
#endif

inline std::unique_ptr<HostileLink> open_link(const NetAddress& to) {
#ifdef SIPHON_TEST_RDMA
  auto l = std::make_unique<RdmaLink>(raw_provider());
  const auto r = l->connect(to);
  EXPECT_TRUE(r);
  if (!r) return nullptr;
  return l;
#else
  auto l = std::make_unique<TcpLink>(to);
  EXPECT_TRUE(l->connected());
  if (!l->connected()) return nullptr;
  return l;
#endif
}

// --- msgr2 over a HostileLink ---------------------------------------------------------------

// A client that speaks msgr2 over a HostileLink only as far as the test wants.
class RawClient {
 public:
  explicit RawClient(std::unique_ptr<HostileLink> link) : link_(std::move(link)) {}
  HostileLink& link() { return *link_; }
  bool ok() const { return link_ != nullptr; }

  static std::string banner() { return proto::encode_banner(proto::Banner{}).to_string(); }
  std::string wire(const proto::Frame& f) const { return proto::encode_frame(f, rev_).to_string(); }
  bool send(std::string_view bytes) { return link_->send(bytes); }
  bool send(const proto::Frame& f) { return link_->send(wire(f)); }

  // Sends our banner and reads the server's.
  ::testing::AssertionResult exchange_banners() {
    if (!send(banner())) return ::testing::AssertionFailure() << "banner not sent: " << link_->why();
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < end) {
      const BufferList bl = BufferList::copy_of(rx_);
      const proto::BannerResult r = proto::decode_banner(bl);
      if (r.error) return ::testing::AssertionFailure() << "server banner: " << r.reason;
      if (r.consumed > 0) {
        const auto n = proto::negotiate(proto::Banner{}, r.banner);
        if (!n) return ::testing::AssertionFailure() << "banner features conflict";
        rev_ = n->rev;
        decoder_.emplace(rev_, proto::FrameLimits{});
        decoder_->feed(rx_.data() + r.consumed, rx_.size() - r.consumed);
        rx_.clear();
        return ::testing::AssertionSuccess();
      }
      if (!link_->recv(rx_, 50ms)) return ::testing::AssertionFailure() << "closed during the banner exchange";
    }
    return ::testing::AssertionFailure() << "no banner from the server";
  }

  // The next frame from the server (nullopt: closed, malformed or timeout).
  std::optional<proto::Frame> next_frame(std::chrono::milliseconds timeout = 20s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      proto::Frame f;
      const auto st = decoder_->next(f);
      if (st == proto::FrameDecoder::Status::frame) return f;
      if (st == proto::FrameDecoder::Status::error) return std::nullopt;
      if (std::chrono::steady_clock::now() > end) return std::nullopt;
      std::string got;
      if (!link_->recv(got, 50ms)) return std::nullopt;
      if (!got.empty()) decoder_->feed(got.data(), got.size());
    }
  }

  // Runs the client handshake until it has sent CLIENT_IDENT or
  // SESSION_RECONNECT, and returns the tag of the server's answer to it.
  std::optional<proto::Tag> reply_to_ident(session::ClientHandshake& hs) {
    session::Step st = hs.start();
    for (;;) {
      for (const auto& f : st.send)
        if (!send(f)) return std::nullopt;
      if (st.outcome != session::Step::Outcome::none) return std::nullopt;
      auto f = next_frame();
      if (!f) return std::nullopt;
      if (hs.state() == session::ClientHandshake::State::ident_wait) return f->tag;
      st = hs.on_frame(*f);
    }
  }

  // Runs the client handshake until it is ready, faults, or (when
  // `stop_at_reset`) the server answers SESSION_RESET. Returns the last step.
  session::Step handshake(session::ClientHandshake& hs, bool stop_at_reset = false) {
    session::Step st = hs.start();
    for (;;) {
      for (const auto& f : st.send)
        if (!send(f)) return session::Step::fault(errc::not_connected, "send failed");
      if (st.outcome != session::Step::Outcome::none || (stop_at_reset && st.session_reset)) return st;
      auto f = next_frame();
      if (!f) return session::Step::fault(errc::not_connected, "no frame from the server");
      st = hs.on_frame(*f);
    }
  }

 private:
  std::unique_ptr<HostileLink> link_;
  proto::FrameRev rev_ = proto::FrameRev::rev1;
  std::optional<proto::FrameDecoder> decoder_;
  std::string rx_;
};

// An identity for a raw client: a client entity at 127.0.0.1 with its own
// nonce (so it never collides with a real client's session).
inline session::LocalIdentity raw_identity(std::uint32_t nonce, std::int64_t gid = 1000) {
  session::LocalIdentity me;
  me.entity_type = proto::kEntityTypeClient;
  me.gid = gid;
  me.nonce = nonce;
  me.addrs = proto::EntityAddrVec(
      proto::EntityAddr(proto::AddrType::msgr2, NetAddress::parse("127.0.0.1:1").value(), nonce));
  me.auth_name = proto::EntityName{proto::kEntityTypeClient, "admin"};
  return me;
}

inline session::HandshakeServices raw_services() {
  session::HandshakeServices s;
  auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
  auto gseq = std::make_shared<std::uint64_t>(0);
  s.next_global_seq = [gseq](std::uint64_t at_least) { return *gseq = std::max(*gseq, at_least) + 1; };
  s.random_cookie = [rng] { return (*rng)() | 1; };
  s.policy_for = [](std::uint8_t) { return session::PolicyView{}; };
  s.new_global_id = [] { return std::uint64_t{1}; };
  return s;
}

inline session::PolicyView lossless_client_view() {
  session::PolicyView p;
  p.lossy = false;
  p.server = false;
  p.features_supported = proto::features::kSupported;
  return p;
}

}  // namespace siphon::test
