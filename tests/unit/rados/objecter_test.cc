// The Objecter (rados/client) against a fake cluster in this process: a
// monitor played by a Siphon messenger that hands out the reference OSDMap
// (tests/unit/osdmap/data, epoch 88, four OSDs) with its OSD addresses
// rewritten to point at four fake OSDs, each a Siphon messenger that decodes
// MOSDOp and answers MOSDOpReply from an in-memory object store. Objects
// named by the tests make an OSD misbehave: stay silent, drop the session,
// or send a reply that does not decode.
//
// Built once and run per stack (siphon_gtest_stacks): objecter_test on TCP
// and objecter_test_rdma on the RDMA stack's software fabric
// (make_test_stack, SIPHON_TEST_STACK=rdma).
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "msgr/base/crc32c.h"
#include "msgr/mon/messages.h"
#include "msgr/mon/mon_client.h"
#include "rados/client/objecter.h"
#include "rados/osdmap/mosdmap.h"
#include "rados/osdmap/placement.h"
#include "fake_mon.h"
#include "msgr_test_util.h"
#include "../osdmap/test_data.h"

namespace siphon::rados {
namespace {

using namespace std::chrono_literals;
using test::loopback_any_port;
using test::make_test_stack;

constexpr std::uint32_t kEpoch = 88;
constexpr int kOsds = 4;

// The reference map with osd.i's client (msgr2) address moved to `ports[i]`
// and the crc32c recomputed (rados-client.md §1.3: over everything before
// the crc field). The four addresses are found by their lab ports, which the
// map holds once each as client addresses.
BufferList map_with_ports(const std::vector<std::uint16_t>& ports) {
  std::string bytes = osdmap::test::read_text("osdmap-4osd.bin");
  const std::uint16_t lab[kOsds] = {3601, 3605, 3609, 3613};
  for (int i = 0; i < kOsds; ++i) {
    // sockaddr_in as entity_addr_t carries it: port big-endian, then 127.0.0.1.
    const std::string needle{static_cast<char>(lab[i] >> 8), static_cast<char>(lab[i] & 0xff), '\x7f', '\0', '\0',
                             '\x01'};
    const std::size_t at = bytes.find(needle);
    EXPECT_NE(at, std::string::npos) << "osd." << i << "'s lab address is not in the reference map";
    if (at == std::string::npos) continue;
    bytes[at] = static_cast<char>(ports[static_cast<std::size_t>(i)] >> 8);
    bytes[at + 1] = static_cast<char>(ports[static_cast<std::size_t>(i)] & 0xff);
  }
  const std::uint32_t crc = crc32c(0xffffffffu, bytes.data(), bytes.size() - 4);
  for (int k = 0; k < 4; ++k) bytes[bytes.size() - 4 + static_cast<std::size_t>(k)] = static_cast<char>(crc >> (8 * k));
  return BufferList::copy_of(bytes);
}

// The nonces of the lab OSDs' client addresses (a client dials the address
// with its nonce; the fake OSDs use the same ones).
constexpr std::uint32_t kNonces[kOsds] = {21175, 21332, 21489, 21646};

// A MOSDMap front carrying one full map (v4: fsid, incrementals, maps,
// oldest, newest, gap_removed_snaps).
BufferList mosdmap_front(const proto::Uuid& fsid, const BufferList& full) {
  proto::Encoder e;
  e.raw(fsid.bytes.data(), fsid.bytes.size());
  e.u32(0);
  e.u32(1);
  e.u32(kEpoch);
  e.u32(static_cast<std::uint32_t>(full.length()));
  e.raw(full);
  e.u32(1);
  e.u32(kEpoch);
  e.u32(0);
  return e.take();
}

// Answers subscriptions with a MonMap and, for "osdmap", the map above.
struct FakeMon : Dispatcher {
  FakeMon() {
    msgr = test::start_fake_mon(make_test_stack(), this, loopback_any_port(), test::test_options());
  }
  ~FakeMon() override {
    msgr->shutdown();
    msgr->wait();
  }
  bool ms_dispatch(MessageRef m) override {
    const ConnectionRef& con = m->get_connection();
    if (m->get_type() == mon::MMonSubscribe::kType) {
      const auto& sub = static_cast<const mon::MMonSubscribe&>(*m);
      if (sub.what.count("osdmap")) {
        auto mm = make_message<Message>(osdmap::kMsgOsdMap, 4, 3);
        mm->front() = mosdmap_front(fsid, map);
        con->send_message(mm);
        ++osdmap_requests;
      }
      auto mm = make_message<mon::MMonMap>();
      mm->monmap.fsid = fsid;
      mm->monmap.epoch = 1;
      con->send_message(mm);
      return true;
    }
    if (m->get_type() == mon::MMonGetVersion::kType) {
      auto r = make_message<mon::MMonGetVersionReply>();
      r->handle = static_cast<const mon::MMonGetVersion&>(*m).handle;
      r->version = kEpoch;
      r->oldest_version = 1;
      con->send_message(r);
      return true;
    }
    return false;
  }
  proto::Uuid fsid = *proto::Uuid::parse("3f0d7b25-4c86-4f9f-9976-657c90f59e74");
  BufferList map;
  std::atomic<int> osdmap_requests{0};
  std::unique_ptr<Messenger> msgr;
};

// One OSD: an object store keyed by name. Objects whose name starts with
// "silent" are never answered; "reset" drops the session on the first
// attempt; "damage" gets a reply that does not decode on the first attempt.
struct FakeOsd : Dispatcher {
  explicit FakeOsd(int osd_id) : id(osd_id) {
    msgr = Messenger::create(make_test_stack(), {entity_type::osd, osd_id}, test::test_options(),
                             kNonces[osd_id]);
    msgr->set_policy(entity_type::client, Policy::stateless_server());
    msgr->add_dispatcher_tail(this);
    EXPECT_FALSE(msgr->bind(loopback_any_port()));
    msgr->start();
  }
  ~FakeOsd() override {
    {
      std::lock_guard l(mu);
      seen.clear();
      connections.clear();
    }
    msgr->shutdown();
    msgr->wait();
  }
  std::uint16_t port() const { return msgr->get_myaddrs().addrs.at(0).port(); }

  struct Seen {
    std::uint64_t tid;
    std::string oid;
    std::int32_t attempt;
    std::uint32_t flags;
    std::uint32_t epoch;
    ConnectionRef con;  // held, so a later session cannot reuse its address
  };

  bool ms_dispatch(MessageRef m) override {
    if (m->get_type() != kMsgOsdOp) return false;
    auto req = decode_osd_op(m->front(), m->data());
    EXPECT_TRUE(req) << (req ? "" : req.error().message());
    if (!req) return true;
    const ConnectionRef& con = m->get_connection();
    {
      std::lock_guard l(mu);
      seen.push_back({m->get_tid(), req->oid, req->retry_attempt, req->flags, req->epoch, con});
      connections.insert(con);
    }
    if (req->oid.rfind("silent", 0) == 0) return true;
    if (req->oid.rfind("reset", 0) == 0 && req->retry_attempt == 0) {
      con->mark_down();
      return true;
    }
    OsdOpReply r;
    r.oid = req->oid;
    r.pgid = req->pgid;
    r.flags = flag::ondisk | flag::ack | (req->flags & (flag::read | flag::write));
    r.epoch = kEpoch;
    r.retry_attempt = req->retry_attempt;
    r.ops = req->ops;
    {
      std::lock_guard l(mu);
      for (OsdOp& o : r.ops) {
        o.rval = execute(req->oid, o);
        if (o.rval < 0 && !(o.flags & kOpFlagFailOk) && r.result == 0) r.result = o.rval;
      }
      r.user_version = ++version;
    }
    auto reply = make_message<Message>(kMsgOsdOpReply, kOsdOpReplyVersion, 2);
    reply->set_tid(m->get_tid());
    reply->front() = encode_osd_op_reply(r, reply->data());
    if (req->oid.rfind("damage", 0) == 0 && req->retry_attempt == 0) {
      // The reply cut short in the middle of its ops: it cannot decode.
      BufferList cut = reply->front().slice(0, reply->front().length() / 2);
      reply->front() = std::move(cut);
    }
    con->send_message(reply);
    return true;
  }

  // Runs one op on the store (mu held); returns its rval.
  int execute(const std::string& oid, OsdOp& o) {
    const auto it = store.find(oid);
    BufferList in = std::move(o.indata);
    o.indata = {};
    switch (o.op) {
      case op::setallochint:
        ++alloc_hints;
        return 0;
      case op::write: {
        std::string& s = store[oid];
        const std::string data = in.to_string();
        if (s.size() < o.offset + data.size()) s.resize(o.offset + data.size(), '\0');
        s.replace(o.offset, data.size(), data);
        return 0;
      }
      case op::writefull:
        store[oid] = in.to_string();
        return 0;
      case op::read: {
        if (it == store.end()) return -ENOENT;
        const std::string& s = it->second;
        const std::string part = o.offset < s.size() ? s.substr(o.offset, o.length) : std::string();
        o.outdata = BufferList::copy_of(part);
        o.length = part.size();
        return 0;
      }
      case op::stat: {
        if (it == store.end()) return -ENOENT;
        proto::Encoder e;
        e.u64(it->second.size());
        e.u32(0);
        e.u32(0);
        o.outdata = e.take();
        return 0;
      }
      case op::remove:
        if (it == store.end()) return -ENOENT;
        store.erase(it);
        return 0;
      case op::create:
        if (it != store.end()) return (o.flags & kOpFlagExcl) ? -EEXIST : 0;
        store[oid];
        return 0;
      default:
        return -EOPNOTSUPP;
    }
  }

  std::vector<Seen> seen_of(const std::string& oid) {
    std::lock_guard l(mu);
    std::vector<Seen> out;
    for (const Seen& s : seen)
      if (s.oid == oid) out.push_back(s);
    return out;
  }
  std::size_t connection_count() {
    std::lock_guard l(mu);
    return connections.size();
  }

  int id;
  std::mutex mu;
  std::map<std::string, std::string> store;
  std::vector<Seen> seen;
  std::set<ConnectionRef> connections;  // every session that sent an op (held)
  std::uint64_t version = 0;
  int alloc_hints = 0;
  std::unique_ptr<Messenger> msgr;
};

class ObjecterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::uint16_t> ports;
    for (int i = 0; i < kOsds; ++i) {
      osds.push_back(std::make_unique<FakeOsd>(i));
      ports.push_back(osds.back()->port());
    }
    mon.map = map_with_ports(ports);
    auto decoded = osdmap::decode_osdmap(mon.map);
    ASSERT_TRUE(decoded) << decoded.error().message();
    map = *decoded;
    pool = map.lookup_pool("rep3");
    ASSERT_GE(pool, 0);

    mon::MonClientOptions mo;
    mo.mon_addrs = {mon.msgr->get_myaddrs()};
    mo.messenger = test::test_options();
    stack = make_test_stack();
    mc = std::make_unique<mon::MonClient>(stack, mo);
    const mon::MonError e = mc->connect(30s);
    ASSERT_FALSE(e) << e.message;
  }
  void TearDown() override {
    if (objecter) objecter->shutdown();
    objecter.reset();
    if (mc) mc->shutdown();
  }

  void start(std::chrono::nanoseconds op_timeout = 60s) {
    ObjecterOptions oo;
    oo.messenger = test::test_options();
    oo.op_timeout = op_timeout;
    objecter = std::make_unique<Objecter>(*mc, stack, oo);
    const std::string err = objecter->start(30s);
    ASSERT_EQ(err, "") << err;
    ASSERT_EQ(objecter->epoch(), kEpoch);
  }

  // An object name with `prefix` whose acting primary in rep3 is `osd`.
  std::string name_on(const std::string& prefix, int osd) {
    for (int i = 0; i < 10000; ++i) {
      const std::string n = prefix + std::to_string(i);
      const auto m = osdmap::map_object(map, pool, n);
      if (m && m->pg.acting_primary == osd) return n;
    }
    ADD_FAILURE() << "no object for osd." << osd;
    return prefix;
  }
  osdmap::PgId pg_of(const std::string& oid) { return osdmap::map_object(map, pool, oid)->pg.pg; }

  OpResult run(const std::string& oid, std::vector<OsdOp> ops) {
    auto r = objecter->submit(pool, oid, std::move(ops))->wait_for(60s);
    EXPECT_TRUE(r.has_value()) << "no completion within 60 s for " << oid;
    if (r) return *r;
    OpResult none;
    none.result = -EINTR;
    return none;
  }

  FakeMon mon;
  std::vector<std::unique_ptr<FakeOsd>> osds;
  osdmap::OsdMap map;
  std::int64_t pool = -1;
  std::shared_ptr<transport::Stack> stack;
  std::unique_ptr<mon::MonClient> mc;
  std::unique_ptr<Objecter> objecter;
};

// ctest runs this binary once per stack (SIPHON_TEST_STACK): a run that lost
// the variable fails here rather than testing TCP twice.
TEST(StackUnderTest, IsTheOneThisRunAskedFor) { EXPECT_TRUE(test::is_the_stack_under_test(*test::make_test_stack())); }

TEST_F(ObjecterTest, WriteThenReadRoundTripsOnThePrimary) {
  start();
  for (int osd = 0; osd < kOsds; ++osd) {
    const std::string oid = name_on("obj", osd);
    const std::string payload = "payload of " + oid + std::string(5000, 'x');
    OsdOp hint = OsdOp::setallochint(8192, payload.size(), 0x35);
    OpResult w = run(oid, {hint, OsdOp::write(0, BufferList::copy_of(payload))});
    ASSERT_EQ(w.result, 0) << w.message;
    EXPECT_EQ(w.osd, osd);
    EXPECT_EQ(w.pg, pg_of(oid));
    EXPECT_EQ(w.attempts, 1);
    OpResult r = run(oid, {OsdOp::read(0, 1 << 20)});
    ASSERT_EQ(r.result, 0) << r.message;
    ASSERT_EQ(r.ops.size(), 1u);
    EXPECT_EQ(r.ops[0].outdata.to_string(), payload);
    OpResult s = run(oid, {OsdOp::stat()});
    ASSERT_EQ(s.result, 0) << s.message;
    proto::Decoder d(s.ops.at(0).outdata);
    EXPECT_EQ(d.u64("size"), payload.size());
    // Only the primary saw it, as a write then reads, on the map's epoch.
    const auto seen = osds[static_cast<std::size_t>(osd)]->seen_of(oid);
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_TRUE(seen[0].flags & flag::write);
    EXPECT_TRUE(seen[1].flags & flag::read);
    EXPECT_EQ(seen[0].epoch, kEpoch);
    EXPECT_EQ(osds[static_cast<std::size_t>(osd)]->alloc_hints, 1);
  }
  EXPECT_EQ(objecter->stats().resends, 0u);
}

// A reply is handled on the worker that read it (the fast path): the
// completion's callback runs there, and an op it submits goes out from
// there, with no hand-over to the dispatch thread (siphon-bench rados chains
// its ops this way). 100 writes, each submitted by the previous one's
// callback; every callback must run on one of the client stack's workers.
TEST_F(ObjecterTest, ACallbackRunsOnTheWorkerAndItsNextOpGoesOut) {
  start();
  const std::string oid = name_on("chain", 2);
  constexpr int kOps = 100;
  std::mutex m;
  std::condition_variable cv;
  int completed = 0, failed = 0, off_worker = 0;
  std::function<void(int)> submit_next;
  const auto on_worker = [this] {
    for (std::size_t i = 0; i < stack->worker_count(); ++i)
      if (stack->worker(i).in_worker_thread()) return true;
    return false;
  };
  submit_next = [&](int n) {
    OsdOp w = OsdOp::write(static_cast<std::uint64_t>(n) * 8, BufferList::copy_of(fmt::format("{:08}", n)));
    objecter->submit(pool, oid, {w}, {}, [&, n](const OpResult& r) {
      const bool worker = on_worker();
      {
        std::lock_guard l(m);
        ++completed;
        if (r.result != 0) ++failed;
        if (!worker) ++off_worker;
      }
      if (n + 1 < kOps) submit_next(n + 1);
      cv.notify_all();
    });
  };
  submit_next(0);
  {
    std::unique_lock l(m);
    ASSERT_TRUE(cv.wait_for(l, 60s, [&] { return completed == kOps; })) << completed << " of " << kOps;
  }
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(off_worker, 0) << "callbacks that ran off the client's workers (the dispatch thread)";
  // Every write reached the OSD in order: the object holds 0..99.
  OpResult r = run(oid, {OsdOp::read(0, kOps * 8)});
  ASSERT_EQ(r.result, 0) << r.message;
  std::string want;
  for (int i = 0; i < kOps; ++i) want += fmt::format("{:08}", i);
  EXPECT_EQ(r.ops.at(0).outdata.to_string(), want);
}

TEST_F(ObjecterTest, AnErrorInTheReplySurfacesWithItsErrno) {
  start();
  const std::string oid = name_on("missing", 1);
  OpResult r = run(oid, {OsdOp::read(0, 100)});
  EXPECT_EQ(r.result, -ENOENT);
  EXPECT_NE(r.message.find("osd.1"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("No such file or directory"), std::string::npos) << r.message;
  ASSERT_EQ(run(oid, {OsdOp::create(true)}).result, 0);
  OpResult again = run(oid, {OsdOp::create(true)});
  EXPECT_EQ(again.result, -EEXIST) << again.message;
  // A pool the map does not have: ENOENT at once, no OSD involved.
  OpResult nopool = objecter->submit(77, "x", {OsdOp::stat()})->wait();
  EXPECT_EQ(nopool.result, -ENOENT);
  EXPECT_NE(nopool.message.find("pool 77 does not exist"), std::string::npos) << nopool.message;
}

TEST_F(ObjecterTest, AnUnansweredOpTimesOutNamingObjectPgOsdAndEpoch) {
  start(2s);
  const std::string oid = name_on("silent", 2);
  const auto t0 = std::chrono::steady_clock::now();
  OpResult r = run(oid, {OsdOp::write(0, BufferList::copy_of(std::string("lost")))});
  EXPECT_EQ(r.result, -ETIMEDOUT);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1900ms);  // not before its bound
  EXPECT_NE(r.message.find("'" + oid + "'"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("pg " + pg_of(oid).to_string()), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("osd.2"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("osdmap epoch 88"), std::string::npos) << r.message;
  EXPECT_EQ(objecter->stats().timeouts, 1u);
  // Other ops go on: the session is fine.
  EXPECT_EQ(run(name_on("obj", 2), {OsdOp::writefull(BufferList::copy_of(std::string("ok")))}).result, 0);
}

TEST_F(ObjecterTest, ASessionResetResendsTheOpWithTheSameTid) {
  start();
  const std::string oid = name_on("reset", 3);
  OpResult r = run(oid, {OsdOp::writefull(BufferList::copy_of(std::string("after the reset")))});
  ASSERT_EQ(r.result, 0) << r.message;
  EXPECT_EQ(r.attempts, 2);
  const auto seen = osds[3]->seen_of(oid);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].tid, seen[1].tid);
  EXPECT_EQ(seen[0].attempt, 0);
  EXPECT_EQ(seen[1].attempt, 1);
  EXPECT_FALSE(seen[0].flags & flag::retry);
  EXPECT_TRUE(seen[1].flags & flag::retry);
  EXPECT_NE(seen[0].con, seen[1].con) << "the resend went on a new session";
  const ObjecterStats st = objecter->stats();
  EXPECT_GE(st.session_resets, 1u);
  EXPECT_EQ(st.resends, 1u);
  EXPECT_EQ(run(oid, {OsdOp::read(0, 100)}).ops.at(0).outdata.to_string(), "after the reset");
}

TEST_F(ObjecterTest, ADamagedReplyClosesOnlyThatSession) {
  start();
  // A session to every OSD first.
  std::vector<std::string> names;
  for (int osd = 0; osd < kOsds; ++osd) {
    names.push_back(name_on("obj", osd));
    ASSERT_EQ(run(names.back(), {OsdOp::writefull(BufferList::copy_of(names.back()))}).result, 0);
  }
  const std::string bad = name_on("damage", 1);
  OpResult r = run(bad, {OsdOp::writefull(BufferList::copy_of(std::string("resent")))});
  ASSERT_EQ(r.result, 0) << r.message;
  EXPECT_EQ(r.attempts, 2);
  const ObjecterStats st = objecter->stats();
  EXPECT_EQ(st.decode_errors, 1u);
  EXPECT_EQ(st.session_resets, 1u);
  // The other OSDs keep their one session; osd.1 got a second.
  for (int osd = 0; osd < kOsds; ++osd)
    ASSERT_EQ(run(names[static_cast<std::size_t>(osd)], {OsdOp::stat()}).result, 0);
  for (int osd = 0; osd < kOsds; ++osd)
    EXPECT_EQ(osds[static_cast<std::size_t>(osd)]->connection_count(), osd == 1 ? 2u : 1u) << "osd." << osd;
}

}  // namespace
}  // namespace siphon::rados
