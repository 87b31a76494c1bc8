// The server's decision rules when a handshake meets an existing session:
// every SESSION_RECONNECT rule in Ceph's order, every CLIENT_IDENT verdict,
// and the connection race resolved consistently from both ends.
#include <gtest/gtest.h>

#include "msgr/session/decide.h"
#include "pipe.h"

namespace siphon::session::test {
namespace {

using RK = ReconnectVerdict::Kind;
using IK = IdentVerdict::Kind;

const EntityAddr kLow = v2("127.0.0.1", 6800, 1);
const EntityAddr kHigh = v2("127.0.0.1", 6801, 2);

ExistingSession live_session() {
  ExistingSession e;
  e.client_cookie = 10;
  e.server_cookie = 20;
  e.peer_global_seq = 5;
  e.connect_seq = 2;
  e.ready_or_standby = true;
  e.peer_addr = kHigh;
  return e;
}

SessionReconnect request() {
  SessionReconnect r;
  r.addrs = EntityAddrVec(kHigh);
  r.client_cookie = 10;
  r.server_cookie = 20;
  r.global_seq = 6;
  r.connect_seq = 3;
  r.msg_seq = 100;
  return r;
}

TEST(DecideReconnect, Rule1NoSessionMeansFullReset) {
  auto v = decide_reconnect(nullptr, request(), kLow);
  EXPECT_EQ(v.kind, RK::reset);
  EXPECT_TRUE(v.full);
  ExistingSession closed = live_session();
  closed.closed = true;
  v = decide_reconnect(&closed, request(), kLow);
  EXPECT_EQ(v.kind, RK::reset);
  EXPECT_TRUE(v.full);
}

TEST(DecideReconnect, Rule2BeingReplacedMeansRetryGlobal) {
  ExistingSession e = live_session();
  e.replacing = true;
  e.client_cookie = 999;  // rule 2 comes before the cookie check
  const auto v = decide_reconnect(&e, request(), kLow);
  EXPECT_EQ(v.kind, RK::retry_global);
  EXPECT_EQ(v.value, 5u);
}

TEST(DecideReconnect, Rule3ClientRestartedMeansResetPerResetcheck) {
  ExistingSession e = live_session();
  e.client_cookie = 11;
  auto v = decide_reconnect(&e, request(), kLow);
  EXPECT_EQ(v.kind, RK::reset);
  EXPECT_TRUE(v.full);
  e.resetcheck = false;
  v = decide_reconnect(&e, request(), kLow);
  EXPECT_EQ(v.kind, RK::reset);
  EXPECT_FALSE(v.full);
}

TEST(DecideReconnect, Rule4UnfinishedEstablishmentMeansPartialReset) {
  ExistingSession e = live_session();
  e.server_cookie = 0;
  const auto v = decide_reconnect(&e, request(), kLow);
  EXPECT_EQ(v.kind, RK::reset);
  EXPECT_FALSE(v.full);
}

TEST(DecideReconnect, Rule5StaleGlobalSeqMeansRetryGlobal) {
  ExistingSession e = live_session();
  e.peer_global_seq = 50;
  const auto v = decide_reconnect(&e, request(), kLow);
  EXPECT_EQ(v.kind, RK::retry_global);
  EXPECT_EQ(v.value, 50u);
}

TEST(DecideReconnect, Rule6StaleConnectSeqMeansRetry) {
  ExistingSession e = live_session();
  e.connect_seq = 7;
  const auto v = decide_reconnect(&e, request(), kLow);
  EXPECT_EQ(v.kind, RK::retry);
  EXPECT_EQ(v.value, 7u);
}

TEST(DecideReconnect, Rule7ReconnectRaceHigherPeerWaits) {
  ExistingSession e = live_session();
  e.connect_seq = 3;  // both reconnecting
  e.peer_addr = kHigh;
  auto v = decide_reconnect(&e, request(), kLow);
  EXPECT_EQ(v.kind, RK::wait);
  e.server_policy = true;  // unless the existing policy is "server"
  v = decide_reconnect(&e, request(), kLow);
  EXPECT_EQ(v.kind, RK::accept);
  e.server_policy = false;
  e.peer_addr = kLow;  // lower peer: this connection wins
  v = decide_reconnect(&e, request(), kHigh);
  EXPECT_EQ(v.kind, RK::accept);
}

TEST(DecideReconnect, Rule8Accept) {
  ExistingSession e = live_session();
  const auto v = decide_reconnect(&e, request(), kLow);
  EXPECT_EQ(v.kind, RK::accept);
}

TEST(DecideClientIdent, Verdicts) {
  EXPECT_EQ(decide_client_ident(nullptr, 1, 1, kHigh, kLow).kind, IK::new_session);
  ExistingSession e = live_session();
  e.replacing = true;
  EXPECT_EQ(decide_client_ident(&e, 6, 10, kHigh, kLow).kind, IK::wait);
  e = live_session();
  EXPECT_EQ(decide_client_ident(&e, 4, 10, kHigh, kLow).kind, IK::stale);
  e.lossy = true;
  EXPECT_EQ(decide_client_ident(&e, 6, 10, kHigh, kLow).kind, IK::replace_lossy);
  e = live_session();
  EXPECT_EQ(decide_client_ident(&e, 6, 77, kHigh, kLow).kind, IK::reuse_after_reset);
  EXPECT_EQ(decide_client_ident(&e, 6, 10, kHigh, kLow).kind, IK::reuse);
  e.server_cookie = 0;
  e.client_cookie = 0;
  EXPECT_EQ(decide_client_ident(&e, 6, 10, kHigh, kLow).kind, IK::reuse);  // ready/standby
}

// Both sides connect to each other at the same time. Each side sees the
// other's CLIENT_IDENT while its own outgoing session is not ready yet:
// exactly one side lets the incoming connection win, the other sends WAIT.
TEST(DecideClientIdent, ConnectionRaceHasExactlyOneWinner) {
  auto outgoing_to = [](const EntityAddr& peer) {
    ExistingSession e;
    e.client_cookie = 0x55;  // our own cookie for the outgoing attempt
    e.peer_addr = peer;
    return e;
  };
  // At A (kLow): B's ident arrives; A's existing session is its attempt to B.
  const ExistingSession at_a = outgoing_to(kHigh);
  const auto va = decide_client_ident(&at_a, 1, 0x66, /*peer*/ kHigh, /*me*/ kLow);
  // At B (kHigh): A's ident arrives.
  const ExistingSession at_b = outgoing_to(kLow);
  const auto vb = decide_client_ident(&at_b, 1, 0x55 + 1, /*peer*/ kLow, /*me*/ kHigh);
  EXPECT_EQ(va.kind, IK::wait);   // the higher peer's connection loses at A
  EXPECT_EQ(vb.kind, IK::reuse);  // the lower peer's connection wins at B
  // A server-policy existing session always yields to the incoming one.
  ExistingSession srv = outgoing_to(kHigh);
  srv.server_policy = true;
  EXPECT_EQ(decide_client_ident(&srv, 1, 0x66, kHigh, kLow).kind, IK::reuse);
}

TEST(RaceOrder, ComparesAsLegacyAddressesNonceFirst) {
  EXPECT_LT(compare_for_race(kLow, kHigh), 0);
  EXPECT_GT(compare_for_race(kHigh, kLow), 0);
  EntityAddr any = kLow;
  any.type = AddrType::any;
  EXPECT_EQ(compare_for_race(any, kLow), 0);  // the type is ignored (legacy_addr)
  const EntityAddr n1 = v2("127.0.0.2", 1, 1);
  const EntityAddr n2 = v2("127.0.0.1", 9, 2);
  EXPECT_LT(compare_for_race(n1, n2), 0);  // nonce compared before the socket address
}

}  // namespace
}  // namespace siphon::session::test
