// The client and server handshake state machines driven against each other
// through an in-memory frame pipe (no sockets): the Pacific frame order,
// auth none payloads, ident checks, every reconnect reply, and the
// out-of-state and malformed-input faults.
#include <gtest/gtest.h>

#include "msgr/proto/features.h"
#include "pipe.h"

namespace siphon::session::test {
namespace {

constexpr std::uint64_t kAll = proto::features::kSupported;

struct Fixture : ::testing::Test {
  EntityAddr server_addr = v2("127.0.0.1", 6800, 77);
  EntityAddr client_addr = v2("127.0.0.1", 6801, 88);
  Services svc;

  LocalIdentity server_me() {
    LocalIdentity me;
    me.entity_type = proto::kEntityTypeOsd;
    me.gid = 3;
    me.addrs = EntityAddrVec(server_addr);
    me.nonce = 77;
    me.auth_name = {proto::kEntityTypeOsd, "3"};
    return me;
  }
  LocalIdentity client_me(bool bound = true) {
    LocalIdentity me;
    me.entity_type = proto::kEntityTypeClient;
    me.gid = 4099;
    if (bound) me.addrs = EntityAddrVec(client_addr);
    me.nonce = 88;
    me.auth_name = {proto::kEntityTypeClient, "admin"};
    return me;
  }
  static PolicyView lossless() { return {false, false, true, kAll, 0}; }
  static PolicyView lossy() { return {true, false, false, kAll, 0}; }
  static PolicyView server_policy(bool is_lossy = false, std::uint64_t req = 0) {
    return {is_lossy, true, true, kAll, req};
  }

  ClientHandshake client(PolicyView p, SessionIds ids = {}, std::uint8_t peer_type = proto::kEntityTypeOsd,
                         bool bound = true) {
    return ClientHandshake(client_me(bound), p, server_addr, peer_type, ids, svc.make());
  }
  ServerHandshake server(PolicyView p) {
    return ServerHandshake(server_me(), client_addr.addr, svc.make(p));
  }
};

TEST_F(Fixture, FreshSessionFollowsPacificFrameOrder) {
  auto c = client(lossless());
  auto s = server(server_policy());
  Pipe pipe(c, s);
  pipe.run();
  ASSERT_EQ(c.state(), ClientHandshake::State::ready);
  ASSERT_EQ(s.state(), ServerHandshake::State::ready);
  const std::vector<std::pair<char, Tag>> expected = {
      {'c', Tag::hello},          {'s', Tag::hello},          {'c', Tag::auth_request},
      {'s', Tag::auth_done},      {'s', Tag::auth_signature}, {'c', Tag::auth_signature},
      {'c', Tag::client_ident},   {'s', Tag::server_ident},
  };
  EXPECT_EQ(pipe.wire, expected);
  EXPECT_EQ(pipe.client_last.outcome, Step::Outcome::ready);
  EXPECT_FALSE(pipe.client_last.reconnected);
  // Identities and negotiated state.
  EXPECT_EQ(c.peer().type, proto::kEntityTypeOsd);
  EXPECT_EQ(c.peer().gid, 3);
  EXPECT_EQ(c.peer().features, kAll);
  EXPECT_FALSE(c.peer().lossy);
  // The client (gid 4099, the global_id a mon gave it) names it in its
  // auth-none authorizer, and the server keeps it (rados-client.md §3.1).
  EXPECT_EQ(c.peer().global_id, 4099u);
  EXPECT_NE(c.ids().client_cookie, 0u);
  EXPECT_EQ(c.ids().server_cookie, 0xabcdefu);
  EXPECT_EQ(c.ids().peer_global_seq, 7u);
  EXPECT_EQ(s.peer().type, proto::kEntityTypeClient);
  EXPECT_EQ(s.peer().gid, 4099);
  EXPECT_EQ(s.peer().addrs, EntityAddrVec(client_addr));
  EXPECT_EQ(s.ids().client_cookie, c.ids().client_cookie);
  EXPECT_EQ(s.ids().peer_global_seq, c.ids().global_seq);
}

TEST_F(Fixture, LossyClientSendsNoCookieAndServerFlagsLossy) {
  auto c = client(lossy());
  auto s = server(server_policy(true));
  Pipe pipe(c, s);
  pipe.run();
  ASSERT_EQ(c.state(), ClientHandshake::State::ready);
  EXPECT_EQ(c.ids().client_cookie, 0u);
  EXPECT_EQ(c.ids().server_cookie, 0u);  // lossy server: no cookie
  EXPECT_TRUE(c.peer().lossy);
}

TEST_F(Fixture, AuthNonePayloadDependsOnPeerType) {
  for (const std::uint8_t peer : {proto::kEntityTypeMon, proto::kEntityTypeOsd}) {
    auto c = client(lossy(), {}, peer);
    c.start();
    // Feed the server's HELLO.
    Step hello_reply = c.on_frame(encode(Hello{peer, client_addr}));
    ASSERT_EQ(hello_reply.send.size(), 1u);
    AuthRequest req;
    std::string why;
    ASSERT_TRUE(decode(hello_reply.send[0], req, why)) << why;
    EXPECT_EQ(req.method, proto::kAuthMethodNone);
    EXPECT_EQ(req.preferred_modes, std::vector<std::uint32_t>{proto::kConModeCrc});
    auto payload = proto::AuthNonePayload::decode(req.auth_payload);
    ASSERT_TRUE(payload);
    EXPECT_EQ(payload->mode, peer == proto::kEntityTypeMon ? proto::kAuthModeMon : proto::kAuthModeAuthorizer);
    EXPECT_EQ(payload->name.id, "admin");
    // To a mon: 0 (a fresh client asks for one); to an OSD: our gid, the
    // global_id the mon assigned (Ceph's authorizer carries it).
    EXPECT_EQ(payload->global_id, peer == proto::kEntityTypeMon ? 0u : 4099u);
  }
}

TEST_F(Fixture, SignaturesAreThirtyTwoZeroBytes) {
  auto c = client(lossless());
  c.start();
  c.on_frame(encode(Hello{proto::kEntityTypeOsd, client_addr}));
  AuthDone done;
  done.global_id = 9;
  Step st = c.on_frame(encode(done));
  ASSERT_EQ(st.send.size(), 1u);
  EXPECT_EQ(st.send[0].tag, Tag::auth_signature);
  EXPECT_EQ(st.send[0].segments[0].length(), 32u);
  EXPECT_EQ(st.send[0].segments[0].to_string(), std::string(32, '\0'));
  // A non-zero signature from the server is rejected.
  AuthSignature bad;
  bad.sha256[5] = 1;
  Step f = c.on_frame(encode(bad));
  EXPECT_EQ(f.outcome, Step::Outcome::fault);
  EXPECT_EQ(c.state(), ClientHandshake::State::failed);
}

TEST_F(Fixture, UnboundClientLearnsItsAddressFromHello) {
  auto c = client(lossless(), {}, proto::kEntityTypeOsd, /*bound=*/false);
  c.start();
  EntityAddr seen = v2("127.0.0.1", 40000, 0);
  Step st = c.on_frame(encode(Hello{proto::kEntityTypeOsd, seen}));
  EXPECT_TRUE(st.learned_addr);
  ASSERT_EQ(c.me().addrs.size(), 1u);
  EXPECT_EQ(c.me().addrs.front().type, AddrType::any);
  EXPECT_EQ(c.me().addrs.front().nonce, 88u);
  EXPECT_EQ(c.me().addrs.front().port(), 0);
}

TEST_F(Fixture, WrongPeerTypeFaults) {
  auto c = client(lossless(), {}, proto::kEntityTypeMon);
  c.start();
  Step st = c.on_frame(encode(Hello{proto::kEntityTypeOsd, client_addr}));
  EXPECT_EQ(st.outcome, Step::Outcome::fault);
}

TEST_F(Fixture, MissingFeaturesGetIdentMissingFeatures) {
  PolicyView weak = lossless();
  weak.features_supported = kAll & ~proto::features::kMsgAddr2;
  auto c = client(weak);
  auto s = server(server_policy());
  Pipe pipe(c, s);
  pipe.run();
  EXPECT_EQ(pipe.wire.back(), (std::pair<char, Tag>{'s', Tag::ident_missing_features}));
  EXPECT_EQ(pipe.client_last.outcome, Step::Outcome::fault);
  EXPECT_EQ(pipe.client_last.error, make_error_code(errc::feature_mismatch));
  EXPECT_EQ(s.state(), ServerHandshake::State::ident_wait);  // the server keeps waiting, as Ceph
}

TEST_F(Fixture, ServerRejectsATargetThatIsNotItself) {
  auto c = ClientHandshake(client_me(), lossless(), v2("127.0.0.1", 6800, 78) /*wrong nonce*/,
                           proto::kEntityTypeOsd, {}, svc.make());
  auto s = server(server_policy());
  Pipe pipe(c, s);
  pipe.run();
  EXPECT_EQ(s.state(), ServerHandshake::State::failed);
  EXPECT_EQ(pipe.server_last.outcome, Step::Outcome::fault);
}

TEST_F(Fixture, ClientRejectsAServerThatDoesNotIncludeTheTarget) {
  auto c = client(lossless());
  LocalIdentity other = server_me();
  other.addrs = EntityAddrVec(v2("127.0.0.1", 6800, 99));
  // The server accepts any target here (it believes it is 6800/77 too).
  other.addrs.addrs.push_back(server_addr);
  ServerHandshake s(other, client_addr.addr, svc.make(server_policy()));
  Pipe pipe(c, s);
  pipe.decide = [&](ServerHandshake& sh, Step::Outcome) {
    // Answer with an ident that lists only the other address.
    ServerIdent si;
    si.addrs = EntityAddrVec(v2("127.0.0.1", 6800, 99));
    Step st;
    st.send.push_back(encode(si));
    (void)sh;
    return st;
  };
  pipe.run();
  EXPECT_EQ(pipe.client_last.outcome, Step::Outcome::fault);
}

TEST_F(Fixture, AuthBadMethodWhenCrcIsNotOffered) {
  auto s = server(server_policy());
  s.start();
  ASSERT_EQ(s.on_frame(encode(Hello{proto::kEntityTypeClient, server_addr})).outcome, Step::Outcome::none);
  AuthRequest req;
  req.preferred_modes = {proto::kConModeSecure};
  req.auth_payload = proto::auth_none_authorizer_payload({proto::kEntityTypeClient, "x"}, 0);
  Step st = s.on_frame(encode(req));
  ASSERT_EQ(st.send.size(), 1u);
  AuthBadMethod bad;
  std::string why;
  ASSERT_TRUE(decode(st.send[0], bad, why));
  EXPECT_EQ(bad.result, -95);
  EXPECT_EQ(s.state(), ServerHandshake::State::auth_wait);  // may try again
  req.preferred_modes = {proto::kConModeCrc};
  Step ok = s.on_frame(encode(req));
  ASSERT_EQ(ok.send.size(), 2u);
  EXPECT_EQ(ok.send[0].tag, Tag::auth_done);
  EXPECT_EQ(ok.send[1].tag, Tag::auth_signature);
}

TEST_F(Fixture, FramesInTheWrongStateFault) {
  {  // MESSAGE before the handshake is done
    auto s = server(server_policy());
    s.start();
    Frame m;
    m.tag = Tag::message;
    m.segments[0] = proto::MessageHeader2::make(1, 1, 0).encode();
    Step st = s.on_frame(m);
    EXPECT_EQ(st.outcome, Step::Outcome::fault);
    EXPECT_EQ(st.error, make_error_code(errc::unexpected_frame));
  }
  {  // HELLO twice
    auto s = server(server_policy());
    s.start();
    s.on_frame(encode(Hello{proto::kEntityTypeClient, server_addr}));
    Step st = s.on_frame(encode(Hello{proto::kEntityTypeClient, server_addr}));
    EXPECT_EQ(st.outcome, Step::Outcome::fault);
  }
  {  // KEEPALIVE2 to a client waiting for SERVER_IDENT
    auto c = client(lossless());
    c.start();
    Step st = c.on_frame(encode(Keepalive2{}));
    EXPECT_EQ(st.outcome, Step::Outcome::fault);
  }
  {  // SESSION_RECONNECT_OK in reply to CLIENT_IDENT
    auto c = client(lossless());
    auto s = server(server_policy());
    Pipe pipe(c, s);
    pipe.decide = [](ServerHandshake&, Step::Outcome) {
      Step st;
      st.send.push_back(encode(ReconnectOk{5}));
      return st;
    };
    pipe.run();
    EXPECT_EQ(pipe.client_last.outcome, Step::Outcome::fault);
  }
}

TEST_F(Fixture, MalformedPayloadFaultsWithAReason) {
  auto s = server(server_policy());
  s.start();
  Frame f = Frame::control(Tag::hello, BufferList::copy_of("\x08\x01\x01", 3));  // truncated address
  Step st = s.on_frame(f);
  EXPECT_EQ(st.outcome, Step::Outcome::fault);
  EXPECT_EQ(st.error, make_error_code(errc::decode_error));
  EXPECT_FALSE(st.reason.empty());
}

// --- reconnect: every server reply -------------------------------------------

struct Reconnect : Fixture {
  SessionIds established() {
    SessionIds ids;
    ids.client_cookie = 0x1111;
    ids.server_cookie = 0x2222;
    ids.connect_seq = 1;
    ids.in_seq = 42;
    return ids;
  }
  // Runs the client to the point where it sent SESSION_RECONNECT; returns it.
  SessionReconnect start(ClientHandshake& c) {
    c.start();
    c.on_frame(encode(Hello{proto::kEntityTypeOsd, client_addr}));
    c.on_frame(encode(AuthDone{}));
    Step st = c.on_frame(encode(AuthSignature{}));
    EXPECT_EQ(st.send.size(), 1u);
    SessionReconnect r;
    std::string why;
    EXPECT_TRUE(decode(st.send.at(0), r, why)) << why;
    return r;
  }
};

TEST_F(Reconnect, ClientWithASessionSendsSessionReconnect) {
  auto c = client(lossless(), established());
  SessionReconnect r = start(c);
  EXPECT_EQ(r.client_cookie, 0x1111u);
  EXPECT_EQ(r.server_cookie, 0x2222u);
  EXPECT_EQ(r.connect_seq, 1u);
  EXPECT_EQ(r.msg_seq, 42u);
  EXPECT_EQ(r.addrs, EntityAddrVec(client_addr));
  EXPECT_GT(r.global_seq, 0u);
}

TEST_F(Reconnect, ReconnectOkResumesWithThePeersInSeq) {
  auto c = client(lossless(), established());
  start(c);
  Step st = c.on_frame(encode(ReconnectOk{17}));
  EXPECT_EQ(st.outcome, Step::Outcome::ready);
  EXPECT_TRUE(st.reconnected);
  EXPECT_EQ(st.peer_in_seq, 17u);
  EXPECT_EQ(c.ids().in_seq, 42u);  // ours is kept
}

TEST_F(Reconnect, RetryBumpsConnectSeqPastTheServers) {
  auto c = client(lossless(), established());
  start(c);
  Step st = c.on_frame(encode(SessionRetry{9}));
  ASSERT_EQ(st.send.size(), 1u);
  SessionReconnect r;
  std::string why;
  ASSERT_TRUE(decode(st.send[0], r, why));
  EXPECT_EQ(r.connect_seq, 10u);
  EXPECT_EQ(st.outcome, Step::Outcome::none);
}

TEST_F(Reconnect, RetryGlobalTakesAGlobalSeqAboveTheServers) {
  auto c = client(lossless(), established());
  start(c);
  Step st = c.on_frame(encode(SessionRetryGlobal{1000}));
  ASSERT_EQ(st.send.size(), 1u);
  SessionReconnect r;
  std::string why;
  ASSERT_TRUE(decode(st.send[0], r, why));
  EXPECT_GT(r.global_seq, 1000u);
}

TEST_F(Reconnect, FullResetStartsANewSessionWithANewCookie) {
  auto c = client(lossless(), established());
  start(c);
  Step st = c.on_frame(encode(SessionReset{true}));
  EXPECT_TRUE(st.session_reset);
  EXPECT_TRUE(st.reset_full);
  ASSERT_EQ(st.send.size(), 1u);
  ClientIdent ci;
  std::string why;
  ASSERT_TRUE(decode(st.send[0], ci, why));
  EXPECT_NE(ci.cookie, 0x1111u);
  EXPECT_NE(ci.cookie, 0u);
  EXPECT_EQ(c.ids().server_cookie, 0u);
  EXPECT_EQ(c.ids().connect_seq, 0u);
  EXPECT_EQ(c.ids().in_seq, 0u);
  // ... and SERVER_IDENT (not RECONNECT_OK) completes it.
  ServerIdent si;
  si.addrs = EntityAddrVec(server_addr);
  si.cookie = 0x3333;
  Step done = c.on_frame(encode(si));
  EXPECT_EQ(done.outcome, Step::Outcome::ready);
  EXPECT_FALSE(done.reconnected);
}

TEST_F(Reconnect, PartialResetKeepsTheClientCookie) {
  auto c = client(lossless(), established());
  start(c);
  Step st = c.on_frame(encode(SessionReset{false}));
  EXPECT_TRUE(st.session_reset);
  EXPECT_FALSE(st.reset_full);
  ClientIdent ci;
  std::string why;
  ASSERT_TRUE(decode(st.send.at(0), ci, why));
  EXPECT_EQ(ci.cookie, 0x1111u);
}

TEST_F(Reconnect, WaitMeansBackOff) {
  auto c = client(lossless(), established());
  start(c);
  Step st = c.on_frame(encode(Wait{}));
  EXPECT_EQ(st.outcome, Step::Outcome::wait);
}

TEST_F(Reconnect, ServerSurfacesTheReconnectAndAnswersEachVerdict) {
  auto c = client(lossless(), established());
  auto s = server(server_policy());
  Pipe pipe(c, s);
  int asked = 0;
  pipe.decide = [&](ServerHandshake& sh, Step::Outcome o) -> Step {
    ++asked;
    if (o == Step::Outcome::reconnect_request) {
      EXPECT_EQ(sh.reconnect().client_cookie, 0x1111u);
      switch (asked) {
        case 1: return sh.reply_retry(5);          // client retries with cs 6
        case 2: EXPECT_EQ(sh.reconnect().connect_seq, 6u); return sh.reply_retry_global(500);
        case 3: EXPECT_GT(sh.reconnect().global_seq, 500u); return sh.accept_reconnect(33);
        default: break;
      }
    }
    return sh.refuse("unexpected");
  };
  pipe.run();
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(c.state(), ClientHandshake::State::ready);
  EXPECT_EQ(s.state(), ServerHandshake::State::ready);
  EXPECT_TRUE(pipe.client_last.reconnected);
  EXPECT_EQ(pipe.client_last.peer_in_seq, 33u);
  EXPECT_TRUE(pipe.server_last.reconnected);
  EXPECT_EQ(pipe.server_last.peer_in_seq, 42u);
}

TEST_F(Reconnect, ServerResetThenClientIdentOnTheSameConnection) {
  auto c = client(lossless(), established());
  auto s = server(server_policy());
  Pipe pipe(c, s);
  pipe.decide = [&](ServerHandshake& sh, Step::Outcome o) -> Step {
    if (o == Step::Outcome::reconnect_request) return sh.reply_reset(true);
    return sh.accept_new_session(9, 0x4444);
  };
  pipe.run();
  EXPECT_EQ(c.state(), ClientHandshake::State::ready);
  EXPECT_FALSE(pipe.client_last.reconnected);
  EXPECT_EQ(c.ids().server_cookie, 0x4444u);
}

}  // namespace
}  // namespace siphon::session::test
