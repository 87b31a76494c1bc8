// Siphon's MonClient against a real ceph-mon 16.2.x (issue 4). Every test
// starts its own throwaway mon (tests/interop/ceph-mon-fixture) in a temp
// directory and stops it by pid when it ends, also on failure; a mon that
// does not start fails the test.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mon_fixture.h"
#include "msgr/auth/keyring.h"
#include "msgr/base/log.h"
#include "msgr/mon/mon_client.h"
#include "msgr/transport/tcp_stack.h"

namespace siphon {
namespace {

using namespace std::chrono_literals;
using mon::MonClient;
using mon::MonClientOptions;
using nlohmann::json;

// --- log capture (which msgr2 revision each connection used) ---
std::mutex g_log_mtx;
std::vector<std::string> g_log;
void capture(log::Subsys, int, std::string_view line) noexcept {
  std::lock_guard l(g_log_mtx);
  g_log.emplace_back(line);
}
std::size_t count_log(std::string_view what) {
  std::lock_guard l(g_log_mtx);
  std::size_t n = 0;
  for (const auto& s : g_log) n += s.find(what) != std::string::npos;
  return n;
}

MonClientOptions client_options(const testing::MonFixture& mon) {
  MonClientOptions o;
  o.mon_addrs = *proto::parse_mon_host(mon.mon_host());
  o.hostname = "siphon-test";
  return o;
}

// The TCP stack each MonClient runs on (one worker).
std::shared_ptr<transport::Stack> tcp_stack() {
  transport::TcpOptions t;
  t.common.async_op_threads = 1;
  return transport::make_tcp_stack(t);
}

// client.admin's entry of the fixture's keyring (a cephx mon).
std::optional<auth::KeyringEntry> admin_key(const testing::MonFixture& mon) {
  std::ifstream in(mon.keyring());
  std::stringstream text;
  text << in.rdbuf();
  std::string why;
  const auto kr = auth::Keyring::parse(text.str(), mon.keyring(), why);
  EXPECT_TRUE(kr) << why;
  const auth::KeyringEntry* admin = kr ? kr->find("client.admin") : nullptr;
  EXPECT_NE(admin, nullptr);
  return admin ? std::optional<auth::KeyringEntry>(*admin) : std::nullopt;
}

json ceph_json(const testing::MonFixture& mon, const std::string& args) {
  int rc = 0;
  const std::string out = mon.ceph(args, &rc);
  EXPECT_EQ(rc, 0) << "ceph " << args;
  return json::parse(out, nullptr, false);
}

// utime as `ceph mon dump -f json` prints it: 2026-11-30T04:28:20.189263Z
std::string gmtime_text(const proto::UTime& t) {
  const std::time_t s = t.sec;
  std::tm tm{};
  ::gmtime_r(&s, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:06d}Z", buf, t.nsec / 1000);
}

TEST(MonInterop, HandshakeInMsgr21AndMsgr20) {
  SIPHON_START_MON(mon);
  log::set_sink(&capture);
  log::set_level(log::Subsys::transport, 5);
  for (const bool rev1 : {true, false}) {
    const std::string expect = rev1 ? "(msgr2 rev1," : "(msgr2 rev0,";
    const std::size_t before = count_log(expect);
    MonClientOptions o = client_options(mon);
    o.messenger.ms_msgr2_rev1 = rev1;
    MonClient mc(tcp_stack(), o);
    const mon::MonError e = mc.connect(20s);
    ASSERT_FALSE(e) << e.message;
    const auto v = mc.get_version("monmap", 20s);
    ASSERT_FALSE(v.error) << v.error.message;
    EXPECT_EQ(v.version, 1u);
    const auto pong = mc.ping(20s);
    ASSERT_TRUE(pong.has_value());
    EXPECT_TRUE(json::parse(*pong, nullptr, false).contains("mon_status")) << *pong;
    EXPECT_EQ(count_log(expect), before + 1) << (rev1 ? "rev1" : "rev0") << " connection not seen";
    mc.shutdown();
  }
  log::set_level(log::Subsys::transport, log::kDefaultLevel);
  log::set_sink(nullptr);
}

// cephx (issue 15): the MonClient authenticates as client.admin with the key
// from the fixture's keyring, in crc mode (the default modes "secure crc":
// Siphon offers crc); a wrong key is refused at once, naming the entity.
TEST(MonInterop, CephxWithTheKeyringAndAWrongKey) {
  SIPHON_START_MON(mon, std::vector<std::string>{}, true);
  std::optional<auth::KeyringEntry> admin;
  ASSERT_NO_FATAL_FAILURE(admin = admin_key(mon));
  ASSERT_TRUE(admin);
  log::set_sink(&capture);
  log::set_level(log::Subsys::session, 5);
  {
    MonClientOptions o = client_options(mon);
    o.auth.methods = {proto::kAuthMethodCephx};
    o.auth.secret = admin->key.secret;
    o.auth.key_source = "keyring " + mon.keyring();
    const std::size_t before = count_log("auth cephx, crc mode");
    MonClient mc(tcp_stack(), o);
    const mon::MonError e = mc.connect(20s);
    ASSERT_FALSE(e) << e.message;
    const auto v = mc.get_version("monmap", 20s);
    ASSERT_FALSE(v.error) << v.error.message;
    EXPECT_EQ(v.version, 1u);
    const auto r = mc.command({R"({"prefix": "fsid", "format": "json"})"}, {}, 20s);
    EXPECT_EQ(r.r, 0) << r.rs;
    EXPECT_EQ(count_log("auth cephx, crc mode"), before + 1);
    mc.shutdown();
  }
  {
    MonClientOptions o = client_options(mon);
    o.auth.methods = {proto::kAuthMethodCephx};
    o.auth.secret = std::vector<std::uint8_t>(16, 0x5a);
    o.auth.key_source = "keyring /wrong.keyring";
    MonClient mc(tcp_stack(), o);
    const auto t0 = std::chrono::steady_clock::now();
    const mon::MonError e = mc.connect(20s);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << "a refused key waited for the timeout";
    ASSERT_TRUE(e);
    EXPECT_EQ(e.kind, mon::MonError::Kind::auth_failed) << e.message;
    EXPECT_NE(e.message.find("client.admin from keyring /wrong.keyring"), std::string::npos) << e.message;
    mc.shutdown();
  }
  log::set_level(log::Subsys::session, log::kDefaultLevel);
  log::set_sink(nullptr);
}

// Secure mode over msgr2.0 frames (cephx.md §6.3): a MonClient that leaves
// msgr2.1 out of its banner, offering secure mode only, against a mon that
// requires cephx and allows secure mode only. The session runs in rev0 and
// secure mode (both logged), and requests and replies of several frames
// come and go (one GCM message a frame, the nonce's fixed part stepping).
TEST(MonInterop, CephxSecureModeOverMsgr20) {
  SIPHON_START_MON(mon, std::vector<std::string>{"ms mon service mode = secure", "ms mon cluster mode = secure"},
                   true);
  std::optional<auth::KeyringEntry> admin;
  ASSERT_NO_FATAL_FAILURE(admin = admin_key(mon));
  ASSERT_TRUE(admin);
  log::set_sink(&capture);
  log::set_level(log::Subsys::session, 5);
  log::set_level(log::Subsys::transport, 5);
  const std::size_t rev0_before = count_log("(msgr2 rev0,");
  const std::size_t secure_before = count_log("auth cephx, secure mode");
  MonClientOptions o = client_options(mon);
  o.messenger.ms_msgr2_rev1 = false;
  o.auth.methods = {proto::kAuthMethodCephx};
  o.auth.mon_modes = {proto::kConModeSecure};
  o.auth.secret = admin->key.secret;
  o.auth.key_source = "keyring " + mon.keyring();
  MonClient mc(tcp_stack(), o);
  const mon::MonError e = mc.connect(20s);
  ASSERT_FALSE(e) << e.message;
  EXPECT_EQ(count_log("(msgr2 rev0,"), rev0_before + 1) << "the session is not msgr2.0";
  EXPECT_EQ(count_log("auth cephx, secure mode"), secure_before + 1) << "the session is not secure";
  const auto v = mc.get_version("monmap", 20s);
  ASSERT_FALSE(v.error) << v.error.message;
  EXPECT_EQ(v.version, 1u);
  // Replies the CLI would print, and as ceph prints them.
  const auto r = mc.command({R"({"prefix": "mon dump", "format": "json"})"}, {}, 20s);
  ASSERT_EQ(r.r, 0) << r.rs;
  EXPECT_EQ(json::parse(r.outbl.to_string(), nullptr, false), ceph_json(mon, "mon dump -f json"));
  for (int i = 0; i < 20; ++i) {
    const auto s = mc.command({R"({"prefix": "status", "format": "json"})"}, {}, 20s);
    ASSERT_EQ(s.r, 0) << s.rs;
    EXPECT_TRUE(json::parse(s.outbl.to_string(), nullptr, false).contains("fsid"));
  }
  EXPECT_EQ(mc.sessions_opened(), 1u) << "the session did not hold";
  mc.shutdown();
  log::set_level(log::Subsys::session, log::kDefaultLevel);
  log::set_level(log::Subsys::transport, log::kDefaultLevel);
  log::set_sink(nullptr);
}

// Service tickets are renewed before they expire (cephx.md §3.8): with
// auth_service_ticket_ttl lowered to 20 s the MonClient asks the mon for new
// ones (MAuth GET_PRINCIPAL_SESSION_KEY) after 15 s; the OSD ticket in the
// shared store changes (a new session key), and the session keeps working.
TEST(MonInterop, CephxServiceTicketsAreRenewedBeforeTheyExpire) {
  SIPHON_START_MON(mon, std::vector<std::string>{"auth service ticket ttl = 20"}, true);
  std::optional<auth::KeyringEntry> admin;
  ASSERT_NO_FATAL_FAILURE(admin = admin_key(mon));
  ASSERT_TRUE(admin);
  MonClientOptions o = client_options(mon);
  o.auth.methods = {proto::kAuthMethodCephx};
  o.auth.secret = admin->key.secret;
  o.auth.key_source = "keyring " + mon.keyring();
  MonClient mc(tcp_stack(), o);
  ASSERT_FALSE(mc.connect(20s));
  const auto first = o.auth.tickets->get(auth::kServiceOsd);
  ASSERT_TRUE(first) << "the mon handed out no OSD ticket";
  EXPECT_EQ(first->ticket.validity_sec, 20u);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (mc.ticket_renewals() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(200ms);
  ASSERT_GT(mc.ticket_renewals(), 0u) << "no renewal within 60 s of a 20 s ticket";
  const auto renewed = o.auth.tickets->get(auth::kServiceOsd);
  ASSERT_TRUE(renewed);
  EXPECT_NE(auth::hex(renewed->ticket.session_key.secret), auth::hex(first->ticket.session_key.secret));
  EXPECT_EQ(renewed->global_id, first->global_id);
  EXPECT_NE(renewed->ticket.ticket_blob, first->ticket.ticket_blob);
  const auto r = mc.command({R"({"prefix": "fsid", "format": "json"})"}, {}, 20s);
  EXPECT_EQ(r.r, 0) << r.rs;
  EXPECT_EQ(mc.sessions_opened(), 1u) << "the session was not kept";
  mc.shutdown();
}

TEST(MonInterop, GetVersionEqualsWhatCephReports) {
  SIPHON_START_MON(mon);
  int rc = 0;
  mon.ceph("osd pool create interop 8", &rc);  // moves the osdmap past epoch 1
  ASSERT_EQ(rc, 0);
  MonClient mc(tcp_stack(), client_options(mon));
  ASSERT_FALSE(mc.connect(20s));
  const json mondump = ceph_json(mon, "mon dump -f json");
  const json osddump = ceph_json(mon, "osd dump -f json");
  const auto monmap = mc.get_version("monmap", 20s);
  const auto osdmap = mc.get_version("osdmap", 20s);
  ASSERT_FALSE(monmap.error) << monmap.error.message;
  ASSERT_FALSE(osdmap.error) << osdmap.error.message;
  EXPECT_EQ(monmap.version, mondump["epoch"].get<std::uint64_t>());
  EXPECT_EQ(osdmap.version, osddump["epoch"].get<std::uint64_t>());
  EXPECT_GE(osdmap.version, 2u);
  EXPECT_GE(osdmap.oldest_version, 1u);
  EXPECT_LE(osdmap.oldest_version, osdmap.version);
  // A map the mon does not know gets no reply (Pacific): a timeout, not a hang.
  const auto unknown = mc.get_version("nosuchmap", 1s);
  EXPECT_TRUE(unknown.error);
  // The session survives it.
  EXPECT_FALSE(mc.get_version("osdmap", 20s).error);
}

TEST(MonInterop, SubscribedMonMapMatchesCephMonDump) {
  SIPHON_START_MON(mon);
  MonClient mc(tcp_stack(), client_options(mon));
  ASSERT_FALSE(mc.connect(20s));
  mc.subscribe("monmap", 0);
  const auto m = mc.wait_for_monmap(1, 20s);
  ASSERT_TRUE(m.has_value());
  const json d = ceph_json(mon, "mon dump -f json");
  EXPECT_EQ(m->fsid.to_string(), d["fsid"].get<std::string>());
  EXPECT_EQ(m->epoch, d["epoch"].get<std::uint32_t>());
  EXPECT_EQ(gmtime_text(m->created), d["created"].get<std::string>());
  EXPECT_EQ(gmtime_text(m->last_changed), d["modified"].get<std::string>());
  EXPECT_EQ(m->min_mon_release, d["min_mon_release"].get<int>());
  EXPECT_EQ(mon::release_name(m->min_mon_release), d["min_mon_release_name"].get<std::string>());
  EXPECT_EQ(m->election_strategy, d["election_strategy"].get<int>());
  EXPECT_EQ(m->stretch_mode_enabled, d["stretch_mode"].get<bool>());
  EXPECT_EQ(m->tiebreaker_mon, d["tiebreaker_mon"].get<std::string>());
  EXPECT_EQ(mon::mon_feature_names(m->persistent_features),
            d["features"]["persistent"].get<std::vector<std::string>>());
  EXPECT_EQ(mon::mon_feature_names(m->optional_features),
            d["features"]["optional"].get<std::vector<std::string>>());
  ASSERT_EQ(m->size(), d["mons"].size());
  for (std::size_t r = 0; r < m->size(); ++r) {
    const json& jm = d["mons"][r];
    const mon::MonInfo* info = m->by_rank(r);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(jm["rank"].get<std::size_t>(), r);
    EXPECT_EQ(info->name, jm["name"].get<std::string>());
    EXPECT_EQ(info->priority, jm["priority"].get<int>());
    EXPECT_EQ(info->weight, jm["weight"].get<int>());
    const json& av = jm["public_addrs"]["addrvec"];
    ASSERT_EQ(info->public_addrs.size(), av.size());
    for (std::size_t i = 0; i < av.size(); ++i) {
      const EntityAddr& a = info->public_addrs.addrs[i];
      EXPECT_EQ(std::string(proto::to_string(a.type)), av[i]["type"].get<std::string>());
      EXPECT_EQ(a.addr.to_string(), av[i]["addr"].get<std::string>());
      EXPECT_EQ(a.nonce, av[i]["nonce"].get<std::uint32_t>());
    }
  }
  EXPECT_EQ(m->fsid.to_string(), ceph_json(mon, "fsid -f json")["fsid"].get<std::string>());
}

TEST(MonInterop, KeepalivesKeepAnIdleSessionAlive) {
  // The mon drops sessions idle for mon_session_timeout (checked every
  // mon_tick_interval); 4 s here instead of 300 s.
  SIPHON_START_MON(mon, {"mon session timeout = 4", "mon tick interval = 1"});
  MonClientOptions with = client_options(mon);
  with.keepalive_interval = 1s;
  MonClientOptions without = client_options(mon);
  without.keepalive_interval = 0s;  // the control: never sends KEEPALIVE2
  without.keepalive_timeout = 0s;
  MonClient alive(tcp_stack(), with), idle(tcp_stack(), without);
  ASSERT_FALSE(alive.connect(20s));
  ASSERT_FALSE(idle.connect(20s));
  const ConnectionRef con = alive.connection();
  ASSERT_TRUE(con);
  // Idle for longer than the session timeout plus two ticks.
  const auto deadline = std::chrono::steady_clock::now() + 12s;
  while (std::chrono::steady_clock::now() < deadline && idle.session_resets() == 0)
    std::this_thread::sleep_for(200ms);
  std::this_thread::sleep_for(7s);  // the keepalive session idles past the timeout too
  EXPECT_GE(idle.session_resets(), 1u) << "the control session was not dropped: the test proves nothing";
  EXPECT_EQ(alive.session_resets(), 0u) << alive.last_error().message;
  EXPECT_EQ(alive.sessions_opened(), 1u);
  EXPECT_EQ(alive.connection(), con) << "the session was replaced";
  EXPECT_GT(con->last_keepalive_ack_ns(), 0u);
  const auto r = alive.command({R"({"prefix": "mon dump", "format": "json"})"}, {}, 20s);
  ASSERT_FALSE(r.error) << r.error.message;
  EXPECT_EQ(r.r, 0);
  EXPECT_EQ(alive.session_resets(), 0u);
}

TEST(MonInterop, MonRestartMidSessionReconnects) {
  SIPHON_START_MON(mon);
  MonClientOptions o = client_options(mon);
  MonClient mc(tcp_stack(), o);
  ASSERT_FALSE(mc.connect(20s));
  auto r = mc.command({R"({"prefix": "status", "format": "json"})"}, {}, 20s);
  ASSERT_FALSE(r.error) << r.error.message;
  ASSERT_EQ(r.r, 0);
  ASSERT_TRUE(mon.restart()) << mon.error();
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline && mc.session_resets() == 0)
    std::this_thread::sleep_for(50ms);
  EXPECT_GE(mc.session_resets(), 1u) << "the client did not see the reset";
  r = mc.command({R"({"prefix": "status", "format": "json"})"}, {}, 30s);
  ASSERT_FALSE(r.error) << r.error.message;
  EXPECT_EQ(r.r, 0);
  EXPECT_TRUE(json::parse(r.outbl.to_string(), nullptr, false).contains("health"));
  EXPECT_GE(mc.sessions_opened(), 2u);
}

TEST(MonInterop, StoppedMonIsAClearError) {
  SIPHON_START_MON(mon);
  ASSERT_TRUE(mon.stop());
  MonClient mc(tcp_stack(), client_options(mon));
  const auto t0 = std::chrono::steady_clock::now();
  const mon::MonError e = mc.connect(2s);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(e);
  EXPECT_EQ(e.kind, mon::MonError::Kind::refused) << e.message;
  EXPECT_NE(e.message.find("connection refused"), std::string::npos) << e.message;
  EXPECT_LT(took, 4s);
}

}  // namespace
}  // namespace siphon
