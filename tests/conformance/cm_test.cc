// Conformance: the connection manager across two sides -- connect/accept and
// reject with private data, ESTABLISHED on both sides, traffic on the CM's
// QPs, DISCONNECTED on both sides after one disconnects.
#include <unistd.h>

#include <algorithm>

#include "harness.h"

namespace siphon::rdma::conformance {
namespace {

bool prefix_equal(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want) {
  return got.size() >= want.size() && std::equal(want.begin(), want.end(), got.begin());
}

struct Conn {
  std::unique_ptr<EventChannel> ch;
  std::unique_ptr<CmId> id;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
};

NetAddress with_port(NetAddress a, std::uint16_t port) {
  a.set_port(port);
  return a;
}

// A PD, one CQ of `cqe` entries and a QP on `c.id` (the CM moves it to INIT).
bool create_cm_qp(Conn& c, std::uint32_t cqe) {
  std::error_code ec;
  Device* dev = c.id->device();
  EXPECT_NE(dev, nullptr);
  if (dev == nullptr) return false;
  c.pd = dev->alloc_pd(ec);
  c.cq = dev->create_cq(cqe, ec);
  EXPECT_TRUE(c.pd && c.cq) << ec.message();
  if (!c.pd || !c.cq) return false;
  QpInit init;
  init.send_cq = init.recv_cq = c.cq.get();
  init.caps = make_caps(16, 1);
  c.qp = c.id->create_qp(*c.pd, init, ec);
  EXPECT_TRUE(c.qp) << ec.message();
  return c.qp != nullptr;
}

// Active side up to a QP in INIT on a resolved route.
bool active_prepare(Side& s, Conn& c, std::uint16_t port) {
  std::error_code ec;
  c.ch = s.prov->create_event_channel(ec);
  EXPECT_TRUE(c.ch) << ec.message();
  if (!c.ch) return false;
  c.id = c.ch->create_id(ec);
  NetAddress dst = s.addr;  // overwritten with B's address below
  return c.id != nullptr && port != 0 && dst.family() != 0;
}

bool active_connect(Side& s, Conn& c, const NetAddress& dst, const ConnParam& cp) {
  CmEvent ev;
  EXPECT_FALSE(c.id->resolve_addr(nullptr, dst, 2000));
  if (!wait_event(*c.ch, ev) || ev.type != CmEventType::addr_resolved) {
    ADD_FAILURE() << "addr_resolved expected, got " << to_string(ev.type);
    return false;
  }
  EXPECT_EQ(ev.id, c.id.get());
  EXPECT_FALSE(c.id->resolve_route(2000));
  if (!wait_event(*c.ch, ev) || ev.type != CmEventType::route_resolved) {
    ADD_FAILURE() << "route_resolved expected, got " << to_string(ev.type);
    return false;
  }
  if (!create_cm_qp(c, 64)) return false;
  EXPECT_EQ(c.qp->state(), QpState::init);
  (void)s;
  EXPECT_FALSE(c.id->connect(cp));
  return true;
}

// B: a listening id on an ephemeral port of B's address; A learns the port
// and the address over the side channel (learn_listener).
struct Listener {
  std::unique_ptr<EventChannel> ch;
  std::unique_ptr<CmId> id;
};
void listen_and_announce(Side& s, Listener& l) {
  std::error_code ec;
  l.ch = s.prov->create_event_channel(ec);
  ASSERT_TRUE(l.ch) << ec.message();
  l.id = l.ch->create_id(ec);
  ASSERT_TRUE(l.id) << ec.message();
  ASSERT_FALSE(l.id->bind(with_port(s.addr, 0)));
  ASSERT_FALSE(l.id->listen(8));
  const std::uint16_t port = l.id->local_address().port();
  ASSERT_NE(port, 0);
  std::string a = s.addr.to_string();
  std::vector<std::uint8_t> raw = {static_cast<std::uint8_t>(port & 0xff),
                                   static_cast<std::uint8_t>(port >> 8)};
  raw.insert(raw.end(), a.begin(), a.end());
  ASSERT_TRUE(s.oob->send_bytes(raw.data(), raw.size()));
}
// B: listens, announces, and waits for A's CONNECT_REQUEST.
void listen_for_request(Side& s, Listener& l, CmEvent& req) {
  ASSERT_NO_FATAL_FAILURE(listen_and_announce(s, l));
  ASSERT_TRUE(wait_event(*l.ch, req));
  ASSERT_EQ(req.type, CmEventType::connect_request) << to_string(req.type);
  EXPECT_EQ(req.id, l.id.get());
}
// A: B's listening address (port included).
void learn_listener(Side& s, NetAddress& out) {
  std::vector<std::uint8_t> raw;
  ASSERT_TRUE(s.oob->recv_bytes(raw));
  ASSERT_GE(raw.size(), 2u);
  const std::uint16_t port = static_cast<std::uint16_t>(raw[0] | raw[1] << 8);
  const auto peer = NetAddress::parse(std::string(raw.begin() + 2, raw.end()));
  ASSERT_TRUE(peer);
  out = with_port(*peer, port);
}
// B: takes the id of a CONNECT_REQUEST and gives it a QP (not yet accepted).
void take_request(CmEvent& req, Conn& c, std::uint32_t cqe) {
  ASSERT_TRUE(req.new_id);
  c.id = std::move(req.new_id);
  ASSERT_TRUE(create_cm_qp(c, cqe));
}

// ---------------------------------------------------------------- connect / accept

SIPHON_TWO_SIDED(Cm, ConnectAcceptPrivateDataTrafficDisconnect)
void Cm_ConnectAcceptPrivateDataTrafficDisconnect::a(Side& s) {
  NetAddress peer;
  ASSERT_NO_FATAL_FAILURE(learn_listener(s, peer));
  const std::uint16_t port = peer.port();
  Conn c;
  ASSERT_TRUE(active_prepare(s, c, port));
  ConnParam cp;
  cp.private_data = {'h', 'e', 'l', 'l', 'o', 0, 1, 2, 3};
  cp.rnr_retry_count = 7;
  ASSERT_TRUE(active_connect(s, c, peer, cp));
  CmEvent ev;
  ASSERT_TRUE(wait_event(*c.ch, ev));
  ASSERT_EQ(ev.type, CmEventType::established) << to_string(ev.type) << " " << ev.status.message();
  EXPECT_EQ(ev.id, c.id.get());
  EXPECT_TRUE(prefix_equal(ev.private_data, {'w', 'e', 'l', 'c', 'o', 'm', 'e'}));
  EXPECT_EQ(c.qp->state(), QpState::rts);
  EXPECT_EQ(c.id->peer_address().port(), port);
  // Traffic on the CM's QP: A sends, B receives and answers.
  Buffer buf = make_buffer(*c.pd, 256, kLocalWrite);
  Sge rsg = buf.sge(128, 128);
  RecvWr r{5, &rsg, 1};
  ASSERT_FALSE(c.qp->post_recv({&r, 1}, nullptr));
  ASSERT_TRUE(s.oob->sync());  // B's receive is posted
  std::memcpy(buf.bytes.data(), "ping", 4);
  Sge ssg = buf.sge(0, 4);
  SendWr w = signaled(6, &ssg);
  ASSERT_FALSE(c.qp->post_send({&w, 1}, nullptr));
  auto got = poll_n(*c.cq, 2);
  ASSERT_EQ(got.size(), 2u);
  for (auto& wc : got) EXPECT_EQ(wc.status, WcStatus::success) << describe(wc);
  EXPECT_EQ(std::memcmp(&buf.bytes[128], "pong", 4), 0);
  // A disconnects: both sides see DISCONNECTED.
  ASSERT_TRUE(s.oob->sync());
  ASSERT_FALSE(c.id->disconnect());
  ASSERT_TRUE(wait_event(*c.ch, ev));
  EXPECT_EQ(ev.type, CmEventType::disconnected) << to_string(ev.type);
  EXPECT_EQ(settled_state(*c.qp, QpState::err), QpState::err);
  ASSERT_TRUE(s.oob->sync());
}
void Cm_ConnectAcceptPrivateDataTrafficDisconnect::b(Side& s) {
  Listener l;
  CmEvent ev;
  ASSERT_NO_FATAL_FAILURE(listen_for_request(s, l, ev));
  EXPECT_TRUE(prefix_equal(ev.private_data, {'h', 'e', 'l', 'l', 'o', 0, 1, 2, 3}));
  EXPECT_EQ(ev.param.rnr_retry_count, 7);
  Conn c;
  ASSERT_NO_FATAL_FAILURE(take_request(ev, c, 64));
  Buffer buf = make_buffer(*c.pd, 256, kLocalWrite);
  Sge rsg = buf.sge(0, 128);
  RecvWr r{1, &rsg, 1};
  ASSERT_FALSE(c.qp->post_recv({&r, 1}, nullptr));
  ConnParam cp;
  cp.private_data = {'w', 'e', 'l', 'c', 'o', 'm', 'e'};
  ASSERT_FALSE(c.id->accept(cp));
  EXPECT_EQ(c.qp->state(), QpState::rts);
  ASSERT_TRUE(wait_event(*l.ch, ev));
  ASSERT_EQ(ev.type, CmEventType::established) << to_string(ev.type);
  EXPECT_EQ(ev.id, c.id.get());
  ASSERT_TRUE(s.oob->sync());
  auto got = poll_n(*c.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].byte_len, 4u);
  EXPECT_EQ(std::memcmp(buf.bytes.data(), "ping", 4), 0);
  std::memcpy(&buf.bytes[128], "pong", 4);
  Sge ssg = buf.sge(128, 4);
  SendWr w = signaled(2, &ssg);
  ASSERT_FALSE(c.qp->post_send({&w, 1}, nullptr));
  got = poll_n(*c.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::success);
  ASSERT_TRUE(s.oob->sync());
  ASSERT_TRUE(wait_event(*l.ch, ev));
  EXPECT_EQ(ev.type, CmEventType::disconnected) << to_string(ev.type);
  EXPECT_EQ(ev.id, c.id.get());
  // rdma-cm's handshake: the initiator's own DISCONNECTED comes with our DREP,
  // i.e. once we disconnect too (on rxe, found by the rxe tier; a provider
  // may deliver it earlier, which this order also accepts).
  ASSERT_FALSE(c.id->disconnect());
  ASSERT_TRUE(s.oob->sync());
}

// ---------------------------------------------------------------- reject

SIPHON_TWO_SIDED(Cm, RejectCarriesPrivateData)
void Cm_RejectCarriesPrivateData::a(Side& s) {
  NetAddress peer;
  ASSERT_NO_FATAL_FAILURE(learn_listener(s, peer));
  Conn c;
  ASSERT_TRUE(active_prepare(s, c, peer.port()));
  ConnParam cp;
  cp.private_data = {9, 9, 9};
  ASSERT_TRUE(active_connect(s, c, peer, cp));
  CmEvent ev;
  ASSERT_TRUE(wait_event(*c.ch, ev));
  ASSERT_EQ(ev.type, CmEventType::rejected) << to_string(ev.type);
  EXPECT_TRUE(ev.status);
  EXPECT_TRUE(prefix_equal(ev.private_data, {'n', 'o', 'p', 'e'}));
  ASSERT_TRUE(s.oob->sync());
}
void Cm_RejectCarriesPrivateData::b(Side& s) {
  Listener l;
  CmEvent ev;
  ASSERT_NO_FATAL_FAILURE(listen_for_request(s, l, ev));
  EXPECT_TRUE(prefix_equal(ev.private_data, {9, 9, 9}));
  const std::uint8_t nope[] = {'n', 'o', 'p', 'e'};
  std::vector<std::uint8_t> too_long(149, 1);
  ASSERT_TRUE(ev.new_id);
  EXPECT_TRUE(ev.new_id->reject(too_long));
  ASSERT_FALSE(ev.new_id->reject(nope));
  ASSERT_TRUE(s.oob->sync());
}

// ---------------------------------------------------------------- peer death

SIPHON_TWO_SIDED(Cm, PeerDeathIsDisconnected)
void Cm_PeerDeathIsDisconnected::a(Side& s) {
  if (config().peer == "shared") GTEST_SKIP() << "--peer=shared: B shares A's adapter and cannot die alone";
  NetAddress peer;
  ASSERT_NO_FATAL_FAILURE(learn_listener(s, peer));
  Conn c;
  ASSERT_TRUE(active_prepare(s, c, peer.port()));
  ASSERT_TRUE(active_connect(s, c, peer, ConnParam{}));
  CmEvent ev;
  ASSERT_TRUE(wait_event(*c.ch, ev));
  ASSERT_EQ(ev.type, CmEventType::established) << to_string(ev.type);
  ASSERT_TRUE(s.oob->sync());
  std::vector<std::uint8_t> eof;
  EXPECT_FALSE(s.oob->recv_bytes(eof, 30s));  // B is gone
  ASSERT_TRUE(wait_event(*c.ch, ev, 30s));
  EXPECT_EQ(ev.type, CmEventType::disconnected) << to_string(ev.type);
  EXPECT_EQ(ev.id, c.id.get());
}
void Cm_PeerDeathIsDisconnected::b(Side& s) {
  if (config().peer == "shared") {
    s.oob->close();
    return;
  }
  Listener l;
  CmEvent ev;
  ASSERT_NO_FATAL_FAILURE(listen_for_request(s, l, ev));
  Conn c;
  ASSERT_NO_FATAL_FAILURE(take_request(ev, c, 16));
  ASSERT_FALSE(c.id->accept(ConnParam{}));
  ASSERT_TRUE(wait_event(*l.ch, ev));
  ASSERT_EQ(ev.type, CmEventType::established);
  ASSERT_TRUE(s.oob->sync());
  if (config().peer == "process" || config().peer == "netns") ::_exit(0);  // die, unclean
  c.qp.reset();
  c.cq.reset();
  c.pd.reset();
  c.id.reset();
  l.id.reset();
  l.ch.reset();
  s.pd.reset();
  s.device.reset();
  s.provider.reset();
  s.oob->close();
}

}  // namespace
}  // namespace siphon::rdma::conformance
