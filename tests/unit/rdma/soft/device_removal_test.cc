// soft::set_device_removed: a device of the soft fabric taken away (as
// `rdma link delete rxe0` does to a kernel device) and given back. What its
// users see (DEVICE_REMOVAL once per CM id, QPs flushed, creation refused,
// the device unlisted), that releasing every handle brings the live-object
// gauges to 0, and that the device works again for fresh opens.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "msgr/base/error.h"
#include "rdma/soft/soft_provider.h"

namespace siphon::rdma::soft {
namespace {

using namespace std::chrono_literals;

const std::error_code kGone = make_error_code(errc::device_not_found);

NetAddress loopback(std::uint16_t port) { return NetAddress::ipv4(0x7f000001, port); }

// The next event of `ch` (false when none comes within `t`).
bool wait_event(EventChannel& ch, CmEvent& out, std::chrono::milliseconds t = 10s) {
  const auto end = std::chrono::steady_clock::now() + t;
  while (!ch.get_event(out)) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Every event pending on `ch` now and within `settle` after.
std::vector<CmEvent> drain(EventChannel& ch, std::chrono::milliseconds settle = 300ms) {
  std::vector<CmEvent> out;
  const auto end = std::chrono::steady_clock::now() + settle;
  while (std::chrono::steady_clock::now() < end) {
    CmEvent ev;
    if (ch.get_event(ev))
      out.push_back(std::move(ev));
    else
      std::this_thread::sleep_for(1ms);
  }
  return out;
}

// Up to `n` completions of `cq` within `t`, then whatever else arrives
// within `settle` (so a test sees a surplus too).
std::vector<Wc> poll_n(CompletionQueue& cq, std::size_t n, std::chrono::milliseconds t = 10s,
                       std::chrono::milliseconds settle = 100ms) {
  std::vector<Wc> out;
  Wc wc[16];
  auto end = std::chrono::steady_clock::now() + t;
  bool settling = false;
  for (;;) {
    const std::size_t got = cq.poll(wc);
    out.insert(out.end(), wc, wc + got);
    if (!settling && out.size() >= n) {
      settling = true;
      end = std::chrono::steady_clock::now() + settle;
    }
    if (std::chrono::steady_clock::now() >= end) return out;
    if (got == 0) std::this_thread::sleep_for(100us);
  }
}

// One end of a CM connection: its id's PD, CQ, QP and a registered buffer.
struct End {
  std::unique_ptr<CmId> id;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(4096);
  std::unique_ptr<MemoryRegion> mr;

  void make_qp() {
    std::error_code ec;
    Device* dev = id->device();
    ASSERT_NE(dev, nullptr);
    pd = dev->alloc_pd(ec);
    ASSERT_TRUE(pd) << ec.message();
    cq = dev->create_cq(64, ec);
    ASSERT_TRUE(cq) << ec.message();
    mr = pd->reg_mr(mem.data(), mem.size(), kLocalWrite, ec);
    ASSERT_TRUE(mr) << ec.message();
    QpInit init;
    init.send_cq = init.recv_cq = cq.get();
    init.caps.max_send_wr = init.caps.max_recv_wr = 16;
    qp = id->create_qp(*pd, init, ec);
    ASSERT_TRUE(qp) << ec.message();
  }
  // Receives wr_id first.. first + n - 1, 64 bytes each.
  void post_recvs(std::uint64_t first, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      Sge sg{reinterpret_cast<std::uint64_t>(mem.data() + 64 * i), 64, mr->lkey()};
      RecvWr r{first + i, &sg, 1};
      ASSERT_FALSE(qp->post_recv({&r, 1}, nullptr));
    }
  }
  void send(std::uint64_t wr_id, const char* text) {
    std::memcpy(mem.data() + 2048, text, std::strlen(text));
    const auto len = static_cast<std::uint32_t>(std::strlen(text));
    Sge sg{reinterpret_cast<std::uint64_t>(mem.data() + 2048), len, mr->lkey()};
    SendWr w;
    w.wr_id = wr_id;
    w.flags = kSignaled;
    w.sg_list = &sg;
    w.num_sge = 1;
    ASSERT_FALSE(qp->post_send({&w, 1}, nullptr));
  }
  void release() {
    qp.reset();
    mr.reset();
    cq.reset();
    pd.reset();
    id.reset();
  }
};

// A listener (on `sch`), and an RC connection from an active id (on `cch`)
// to it, with `server_recvs` receives posted on the passive QP before it
// accepts.
struct Connection {
  std::unique_ptr<CmId> listener;
  End active, passive;
};

void open_connection(EventChannel& sch, EventChannel& cch, Connection& c,
                     std::size_t server_recvs) {
  std::error_code ec;
  c.listener = sch.create_id(ec);
  ASSERT_TRUE(c.listener) << ec.message();
  ASSERT_FALSE(c.listener->bind(loopback(0)));
  ASSERT_FALSE(c.listener->listen(8));
  const std::uint16_t port = c.listener->local_address().port();
  ASSERT_NE(port, 0);

  c.active.id = cch.create_id(ec);
  ASSERT_TRUE(c.active.id) << ec.message();
  CmEvent ev;
  ASSERT_FALSE(c.active.id->resolve_addr(nullptr, loopback(port), 1000));
  ASSERT_TRUE(wait_event(cch, ev));
  ASSERT_EQ(ev.type, CmEventType::addr_resolved) << to_string(ev.type);
  ASSERT_FALSE(c.active.id->resolve_route(1000));
  ASSERT_TRUE(wait_event(cch, ev));
  ASSERT_EQ(ev.type, CmEventType::route_resolved) << to_string(ev.type);
  ASSERT_NO_FATAL_FAILURE(c.active.make_qp());
  ASSERT_FALSE(c.active.id->connect(ConnParam{}));

  ASSERT_TRUE(wait_event(sch, ev));
  ASSERT_EQ(ev.type, CmEventType::connect_request) << to_string(ev.type);
  ASSERT_EQ(ev.id, c.listener.get());
  c.passive.id = std::move(ev.new_id);
  ASSERT_NO_FATAL_FAILURE(c.passive.make_qp());
  ASSERT_NO_FATAL_FAILURE(c.passive.post_recvs(100, server_recvs));
  ASSERT_FALSE(c.passive.id->accept(ConnParam{}));
  ASSERT_TRUE(wait_event(sch, ev));
  ASSERT_EQ(ev.type, CmEventType::established) << to_string(ev.type);
  ASSERT_EQ(ev.id, c.passive.id.get());
  ASSERT_TRUE(wait_event(cch, ev));
  ASSERT_EQ(ev.type, CmEventType::established) << to_string(ev.type);
  ASSERT_EQ(ev.id, c.active.id.get());
}

// A SEND from the active end lands in the passive end's first receive.
void send_arrives(Connection& c, const char* text) {
  ASSERT_NO_FATAL_FAILURE(c.active.send(1, text));
  auto sent = poll_n(*c.active.cq, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::success) << to_string(sent[0].status);
  auto got = poll_n(*c.passive.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::success) << to_string(got[0].status);
  EXPECT_EQ(got[0].opcode, WcOpcode::recv);
  EXPECT_EQ(got[0].wr_id, 100u);
  EXPECT_EQ(got[0].byte_len, std::strlen(text));
  EXPECT_EQ(std::memcmp(c.passive.mem.data(), text, std::strlen(text)), 0);
}

void expect_all_released(const Provider& prov) {
  const auto n = counters(prov);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->contexts_live, 0u);
  EXPECT_EQ(n->pds_live, 0u);
  EXPECT_EQ(n->cqs_live, 0u);
  EXPECT_EQ(n->srqs_live, 0u);
  EXPECT_EQ(n->mws_live, 0u);
  EXPECT_EQ(n->mrs_live, 0u);
  EXPECT_EQ(n->qps_live, 0u);
  EXPECT_EQ(n->cm_ids_live, 0u);
}

TEST(SoftDeviceRemoval, UsersAreToldReleaseEverythingAndTheDeviceComesBack) {
  SoftOptions o;
  o.device_count = 2;
  auto prov = make_provider(o);
  std::error_code ec;
  EXPECT_EQ(prov->list_devices(), (std::vector<std::string>{"soft0", "soft1"}));
  auto sch = prov->create_event_channel(ec);
  auto cch = prov->create_event_channel(ec);
  ASSERT_TRUE(sch && cch);
  Connection c;
  ASSERT_NO_FATAL_FAILURE(open_connection(*sch, *cch, c, 4));
  ASSERT_NO_FATAL_FAILURE(send_arrives(c, "before"));  // takes receive 100; 101..103 stay posted
  ASSERT_NO_FATAL_FAILURE(c.active.post_recvs(200, 2));
  // An id made but not bound: not on any device, so not told.
  auto idle = cch->create_id(ec);
  ASSERT_TRUE(idle);
  // Handles opened directly on each device, with objects on them.
  auto dev0 = prov->open_device("soft0", ec);
  auto dev1 = prov->open_device("soft1", ec);
  ASSERT_TRUE(dev0 && dev1) << ec.message();
  auto pd0 = dev0->alloc_pd(ec);
  ASSERT_TRUE(pd0) << ec.message();
  auto srq0 = pd0->create_srq(SrqInit{16, 1}, ec);
  ASSERT_TRUE(srq0) << ec.message();
  auto mw0 = pd0->alloc_mw(ec);
  ASSERT_TRUE(mw0) << ec.message();
  auto cq1 = dev1->create_cq(8, ec);
  ASSERT_TRUE(cq1) << ec.message();

  auto before = counters(*prov);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->device_removals, 0u);
  EXPECT_EQ(before->cm_ids_live, 4u);    // listener, active, passive, idle
  EXPECT_EQ(before->contexts_live, 4u);  // device() of the active and passive ids, dev0, dev1
  EXPECT_EQ(before->pds_live, 3u);
  EXPECT_EQ(before->cqs_live, 3u);
  EXPECT_EQ(before->srqs_live, 1u);
  EXPECT_EQ(before->mws_live, 1u);
  EXPECT_EQ(before->mrs_live, 2u);
  EXPECT_EQ(before->qps_live, 2u);

  // ---- take soft0 away
  ASSERT_TRUE(set_device_removed(*prov, "soft0", true));
  EXPECT_EQ(counters(*prov)->device_removals, 1u);
  EXPECT_EQ(prov->list_devices(), std::vector<std::string>{"soft1"});
  ec.clear();
  EXPECT_FALSE(prov->open_device("soft0", ec));
  EXPECT_EQ(ec, kGone);

  // One DEVICE_REMOVAL for each id on the device (the listener and the
  // passive id on the server's channel, the active id on the client's), and
  // nothing else, not even later.
  auto sev = drain(*sch);
  auto cev = drain(*cch);
  ASSERT_EQ(sev.size(), 2u);
  ASSERT_EQ(cev.size(), 1u);
  for (auto* evs : {&sev, &cev})
    for (const CmEvent& ev : *evs)
      EXPECT_EQ(ev.type, CmEventType::device_removal) << to_string(ev.type);
  EXPECT_TRUE((sev[0].id == c.listener.get() && sev[1].id == c.passive.id.get()) ||
              (sev[1].id == c.listener.get() && sev[0].id == c.passive.id.get()));
  EXPECT_EQ(cev[0].id, c.active.id.get());

  // The QPs are in ERR and every posted receive completes as flushed.
  EXPECT_EQ(c.active.qp->state(), QpState::err);
  EXPECT_EQ(c.passive.qp->state(), QpState::err);
  auto pf = poll_n(*c.passive.cq, 3);
  ASSERT_EQ(pf.size(), 3u);
  for (std::size_t i = 0; i < pf.size(); ++i) {
    EXPECT_EQ(pf[i].status, WcStatus::flushed) << to_string(pf[i].status);
    EXPECT_EQ(pf[i].opcode, WcOpcode::recv);
    EXPECT_EQ(pf[i].wr_id, 101u + i);
  }
  auto af = poll_n(*c.active.cq, 2);
  ASSERT_EQ(af.size(), 2u);
  for (std::size_t i = 0; i < af.size(); ++i) {
    EXPECT_EQ(af[i].status, WcStatus::flushed) << to_string(af[i].status);
    EXPECT_EQ(af[i].wr_id, 200u + i);
  }
  // A SEND posted now is flushed too (ERR), and the QP cannot leave ERR.
  ASSERT_NO_FATAL_FAILURE(c.active.send(7, "late"));
  auto late = poll_n(*c.active.cq, 1);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].wr_id, 7u);
  EXPECT_EQ(late[0].status, WcStatus::flushed);
  QpAttr reset;
  reset.state = QpState::reset;
  EXPECT_EQ(c.active.qp->modify(reset, kAttrState), kGone);
  QpAttr err;
  err.state = QpState::err;
  EXPECT_FALSE(c.active.qp->modify(err, kAttrState));

  // Nothing new on the old handles.
  ec.clear();
  EXPECT_FALSE(dev0->create_cq(8, ec));
  EXPECT_EQ(ec, kGone);
  ec.clear();
  EXPECT_FALSE(dev0->alloc_pd(ec));
  EXPECT_EQ(ec, kGone);
  ec.clear();
  EXPECT_FALSE(c.passive.id->device()->create_cq(8, ec));
  EXPECT_EQ(ec, kGone);
  ec.clear();
  EXPECT_FALSE(pd0->reg_mr(c.active.mem.data(), 64, kLocalWrite, ec));
  EXPECT_EQ(ec, kGone);
  ec.clear();
  EXPECT_FALSE(pd0->create_srq(SrqInit{16, 1}, ec));
  EXPECT_EQ(ec, kGone);
  ec.clear();
  EXPECT_FALSE(pd0->alloc_mw(ec));
  EXPECT_EQ(ec, kGone);
  {
    QpInit init;
    init.send_cq = init.recv_cq = c.passive.cq.get();
    init.caps.max_send_wr = init.caps.max_recv_wr = 4;
    ec.clear();
    EXPECT_FALSE(c.passive.pd->create_qp(init, ec));
    EXPECT_EQ(ec, kGone);
  }
  PortAttr port;
  EXPECT_EQ(dev0->query_port(1, port), kGone);
  // soft1 is untouched.
  EXPECT_TRUE(dev1->create_cq(8, ec)) << ec.message();
  EXPECT_FALSE(dev1->query_port(1, port));

  // Calls on a told id fail; a new id cannot bind or resolve.
  EXPECT_EQ(c.active.id->disconnect(), kGone);
  EXPECT_EQ(c.listener->listen(8), kGone);
  EXPECT_EQ(idle->bind(loopback(0)), kGone);
  EXPECT_EQ(idle->resolve_addr(nullptr, loopback(c.listener->local_address().port()), 1000), kGone);
  auto fresh = cch->create_id(ec);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->bind(loopback(0)), kGone);
  EXPECT_EQ(fresh->device(), nullptr);
  fresh.reset();

  // Removing it again changes nothing and tells nobody twice.
  EXPECT_TRUE(set_device_removed(*prov, "soft0", true));
  EXPECT_EQ(set_device_removed_all("soft0", true), 1u);
  EXPECT_EQ(counters(*prov)->device_removals, 1u);
  EXPECT_TRUE(drain(*sch, 100ms).empty());
  EXPECT_TRUE(drain(*cch, 100ms).empty());
  EXPECT_TRUE(poll_n(*c.passive.cq, 0, 0ms, 100ms).empty());

  // ---- the user releases everything (soft1's objects too).
  c.active.release();
  c.passive.release();
  c.listener.reset();
  idle.reset();
  mw0.reset();
  srq0.reset();
  pd0.reset();
  cq1.reset();
  dev1.reset();
  {
    // An old handle stays dead after the device comes back; kept to check.
    ASSERT_TRUE(set_device_removed(*prov, "soft0", false));
    ec.clear();
    EXPECT_FALSE(dev0->create_cq(8, ec));
    EXPECT_EQ(ec, kGone);
    dev0.reset();
  }
  ASSERT_NO_FATAL_FAILURE(expect_all_released(*prov));
  EXPECT_TRUE(drain(*sch, 50ms).empty());
  EXPECT_TRUE(drain(*cch, 50ms).empty());

  // ---- given back: listed, opens, and a fresh connection carries a SEND.
  EXPECT_EQ(prov->list_devices(), (std::vector<std::string>{"soft0", "soft1"}));
  auto again = prov->open_device("soft0", ec);
  ASSERT_TRUE(again) << ec.message();
  auto cq = again->create_cq(8, ec);
  EXPECT_TRUE(cq) << ec.message();
  EXPECT_FALSE(again->query_port(1, port));
  Connection c2;
  ASSERT_NO_FATAL_FAILURE(open_connection(*sch, *cch, c2, 2));
  ASSERT_NO_FATAL_FAILURE(send_arrives(c2, "after"));
  EXPECT_EQ(counters(*prov)->device_removals, 1u);
  cq.reset();
  again.reset();
  c2.active.release();
  c2.passive.release();
  c2.listener.reset();
  ASSERT_NO_FATAL_FAILURE(expect_all_released(*prov));
}

// Ids on soft0 are not told when another device goes; that device's own
// QPs (made out of band) are flushed.
TEST(SoftDeviceRemoval, AnotherDeviceLeavesTheIdsAlone) {
  SoftOptions o;
  o.device_count = 2;
  auto prov = make_provider(o);
  std::error_code ec;
  auto sch = prov->create_event_channel(ec);
  auto cch = prov->create_event_channel(ec);
  Connection c;
  ASSERT_NO_FATAL_FAILURE(open_connection(*sch, *cch, c, 2));
  auto dev1 = prov->open_device("soft1", ec);
  ASSERT_TRUE(dev1) << ec.message();
  auto pd = dev1->alloc_pd(ec);
  auto cq = dev1->create_cq(8, ec);
  ASSERT_TRUE(pd && cq) << ec.message();
  std::vector<std::uint8_t> mem(256);
  auto mr = pd->reg_mr(mem.data(), mem.size(), kLocalWrite, ec);
  ASSERT_TRUE(mr) << ec.message();
  QpInit init;
  init.send_cq = init.recv_cq = cq.get();
  init.caps.max_send_wr = init.caps.max_recv_wr = 4;
  auto qp = pd->create_qp(init, ec);
  ASSERT_TRUE(qp) << ec.message();
  QpAttr at;
  at.state = QpState::init;
  ASSERT_FALSE(qp->modify(at, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags));
  for (std::uint64_t i = 0; i < 3; ++i) {
    Sge sg{reinterpret_cast<std::uint64_t>(mem.data() + 64 * i), 64, mr->lkey()};
    RecvWr r{10 + i, &sg, 1};
    ASSERT_FALSE(qp->post_recv({&r, 1}, nullptr));
  }

  ASSERT_TRUE(set_device_removed(*prov, "soft1", true));
  EXPECT_EQ(prov->list_devices(), std::vector<std::string>{"soft0"});
  EXPECT_EQ(qp->state(), QpState::err);
  auto flushed = poll_n(*cq, 3);
  ASSERT_EQ(flushed.size(), 3u);
  for (const Wc& wc : flushed) EXPECT_EQ(wc.status, WcStatus::flushed);
  EXPECT_TRUE(drain(*sch, 200ms).empty());
  EXPECT_TRUE(drain(*cch, 50ms).empty());
  EXPECT_EQ(c.active.qp->state(), QpState::rts);
  ASSERT_NO_FATAL_FAILURE(send_arrives(c, "still up"));

  ASSERT_TRUE(set_device_removed(*prov, "soft1", false));
  qp.reset();
  mr.reset();
  cq.reset();
  pd.reset();
  dev1.reset();
  c.active.release();
  c.passive.release();
  c.listener.reset();
  ASSERT_NO_FATAL_FAILURE(expect_all_released(*prov));
  EXPECT_EQ(counters(*prov)->device_removals, 1u);
}

// A connection being set up when the device goes: the connecting id and
// the listener are told once; the request already queued on the listener's
// channel still hands over its id, which is told too and cannot accept.
TEST(SoftDeviceRemoval, ConnectionInTheMakingIsToldOnce) {
  auto prov = make_provider();
  std::error_code ec;
  auto sch = prov->create_event_channel(ec);
  auto cch = prov->create_event_channel(ec);
  auto listener = sch->create_id(ec);
  ASSERT_FALSE(listener->bind(loopback(0)));
  ASSERT_FALSE(listener->listen(8));
  End active;
  active.id = cch->create_id(ec);
  CmEvent ev;
  ASSERT_FALSE(active.id->resolve_addr(nullptr, loopback(listener->local_address().port()), 1000));
  ASSERT_TRUE(wait_event(*cch, ev));
  ASSERT_FALSE(active.id->resolve_route(1000));
  ASSERT_TRUE(wait_event(*cch, ev));
  ASSERT_NO_FATAL_FAILURE(active.make_qp());
  ASSERT_FALSE(active.id->connect(ConnParam{}));
  // Wait until the request is queued (not taken) on the server's channel.
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (counters(*prov)->cm_ids_live < 3 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(counters(*prov)->cm_ids_live, 3u);

  ASSERT_TRUE(set_device_removed(*prov, "soft0", true));
  auto sev = drain(*sch);
  auto cev = drain(*cch);
  ASSERT_EQ(sev.size(), 3u);
  EXPECT_EQ(sev[0].type, CmEventType::connect_request);
  EXPECT_EQ(sev[0].id, listener.get());
  ASSERT_TRUE(sev[0].new_id);
  std::unique_ptr<CmId> passive = std::move(sev[0].new_id);
  std::size_t told_listener = 0, told_passive = 0;
  for (std::size_t i = 1; i < sev.size(); ++i) {
    EXPECT_EQ(sev[i].type, CmEventType::device_removal) << to_string(sev[i].type);
    told_listener += sev[i].id == listener.get();
    told_passive += sev[i].id == passive.get();
  }
  EXPECT_EQ(told_listener, 1u);
  EXPECT_EQ(told_passive, 1u);
  ASSERT_EQ(cev.size(), 1u);
  EXPECT_EQ(cev[0].type, CmEventType::device_removal);
  EXPECT_EQ(cev[0].id, active.id.get());
  EXPECT_EQ(passive->accept(ConnParam{}), kGone);
  EXPECT_EQ(passive->reject({}), kGone);

  passive.reset();
  active.release();
  listener.reset();
  ASSERT_NO_FATAL_FAILURE(expect_all_released(*prov));
}

// An id destroyed with its DEVICE_REMOVAL still queued: the event goes
// with it (never delivered for a destroyed id).
TEST(SoftDeviceRemoval, NoEventForADestroyedId) {
  auto prov = make_provider();
  std::error_code ec;
  auto ch = prov->create_event_channel(ec);
  auto a = ch->create_id(ec);
  auto b = ch->create_id(ec);
  ASSERT_FALSE(a->bind(loopback(0)));
  ASSERT_FALSE(b->bind(loopback(0)));
  ASSERT_TRUE(set_device_removed(*prov, "soft0", true));
  a.reset();
  auto evs = drain(*ch, 100ms);
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].type, CmEventType::device_removal);
  EXPECT_EQ(evs[0].id, b.get());
  b.reset();
  ASSERT_TRUE(set_device_removed(*prov, "soft0", false));
  auto c = ch->create_id(ec);
  EXPECT_FALSE(c->bind(loopback(0)));  // a fresh id binds again
  c.reset();
  ASSERT_NO_FATAL_FAILURE(expect_all_released(*prov));
}

// The peer of a removed device, on another provider (another host): not
// told of the removal, but its connection goes (DISCONNECTED) and its QP's
// requests find no responder any more.
TEST(SoftDeviceRemoval, PeerOnAnotherProviderSeesTheConnectionGo) {
  auto server = make_provider();
  auto client = make_provider();
  std::error_code ec;
  auto sch = server->create_event_channel(ec);
  auto cch = client->create_event_channel(ec);
  Connection c;
  ASSERT_NO_FATAL_FAILURE(open_connection(*sch, *cch, c, 2));
  ASSERT_NO_FATAL_FAILURE(send_arrives(c, "hello"));

  ASSERT_TRUE(set_device_removed(*server, "soft0", true));
  auto sev = drain(*sch);
  ASSERT_EQ(sev.size(), 2u);
  for (const CmEvent& ev : sev) EXPECT_EQ(ev.type, CmEventType::device_removal);
  CmEvent ev;
  ASSERT_TRUE(wait_event(*cch, ev));
  EXPECT_EQ(ev.type, CmEventType::disconnected) << to_string(ev.type);
  EXPECT_EQ(ev.id, c.active.id.get());
  EXPECT_TRUE(drain(*cch).empty());
  EXPECT_EQ(counters(*client)->device_removals, 0u);
  EXPECT_EQ(client->list_devices(), std::vector<std::string>{"soft0"});
  // A SEND from the peer does not succeed: nobody answers it.
  ASSERT_NO_FATAL_FAILURE(c.active.send(9, "anyone?"));
  auto got = poll_n(*c.active.cq, 1, 30s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 9u);
  EXPECT_EQ(got[0].status, WcStatus::retry_exceeded) << to_string(got[0].status);
  EXPECT_EQ(c.active.qp->state(), QpState::err);

  c.active.release();
  c.passive.release();
  c.listener.reset();
  ASSERT_NO_FATAL_FAILURE(expect_all_released(*server));
  ASSERT_NO_FATAL_FAILURE(expect_all_released(*client));
}

class NotSoft final : public Provider {
 public:
  std::string_view name() const noexcept override { return "fake"; }
  std::vector<std::string> list_devices() override { return {"soft0"}; }
  std::unique_ptr<Device> open_device(std::string_view, std::error_code& ec) override {
    ec = errc::device_not_found;
    return nullptr;
  }
  std::unique_ptr<EventChannel> create_event_channel(std::error_code& ec) override {
    ec = errc::not_supported;
    return nullptr;
  }
};

TEST(SoftDeviceRemoval, UnknownNameOrProviderIsRefused) {
  auto prov = make_provider();
  EXPECT_FALSE(set_device_removed(*prov, "soft1", true));  // one device: soft0
  EXPECT_FALSE(set_device_removed(*prov, "", true));
  EXPECT_FALSE(set_device_removed(*prov, "rxe0", false));
  NotSoft other;
  EXPECT_FALSE(set_device_removed(other, "soft0", true));
  EXPECT_EQ(set_device_removed_all("soft7", true), 0u);
  EXPECT_EQ(counters(*prov)->device_removals, 0u);
  EXPECT_EQ(prov->list_devices(), std::vector<std::string>{"soft0"});
  // The one provider alive has soft0.
  EXPECT_EQ(set_device_removed_all("soft0", true), 1u);
  EXPECT_TRUE(prov->list_devices().empty());
  EXPECT_EQ(set_device_removed_all("soft0", false), 1u);
  EXPECT_EQ(prov->list_devices(), std::vector<std::string>{"soft0"});
  EXPECT_EQ(counters(*prov)->device_removals, 1u);
}

// Opens and creations racing removals: no handle made before or during a
// removal works after the device comes back (checked in a last round),
// and the gauges end at 0. Mostly for TSan.
TEST(SoftDeviceRemoval, OpensRacingRemovals) {
  auto prov = make_provider();
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Device>> kept;
  std::thread t([&] {
    while (!stop.load()) {
      std::error_code ec;
      auto d = prov->open_device("soft0", ec);
      if (!d) {
        EXPECT_EQ(ec, kGone);
        continue;
      }
      auto cq = d->create_cq(4, ec);
      auto pd = d->alloc_pd(ec);
      if (kept.size() < 64) kept.push_back(std::move(d));
    }
  });
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(set_device_removed(*prov, "soft0", true));
    std::this_thread::sleep_for(200us);
    ASSERT_TRUE(set_device_removed(*prov, "soft0", false));
    std::this_thread::sleep_for(200us);
  }
  // Every handle kept so far was opened before one of the removals.
  ASSERT_TRUE(set_device_removed(*prov, "soft0", true));
  stop.store(true);
  t.join();
  ASSERT_TRUE(set_device_removed(*prov, "soft0", false));
  std::error_code ec;
  for (auto& d : kept) {
    EXPECT_FALSE(d->create_cq(4, ec));
    EXPECT_EQ(ec, kGone);
  }
  kept.clear();
  EXPECT_EQ(counters(*prov)->device_removals, 51u);
  ASSERT_NO_FATAL_FAILURE(expect_all_released(*prov));
}

}  // namespace
}  // namespace siphon::rdma::soft
