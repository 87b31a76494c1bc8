// The accepting side's authorizer validation (msgr/session/
// server_authorizer.cc, cephx.md §8.1): a Siphon client holding a ticket a
// "monitor" minted with the OSD service's rotating key reaches READY with a
// Siphon server that holds that rotating key, in secure and in crc mode,
// through the challenge round; each bad ticket (expired, another global_id,
// an unknown or newer secret_id, the wrong key, another service, no keys
// fetched yet, a daemon without a monitor, a wrong challenge answer, a
// malformed payload) is refused with AUTH_BAD_METHOD and a reason the driver
// logs and counts -- never a crash, never READY.
#include <gtest/gtest.h>

#include <chrono>

#include "msgr/proto/features.h"
#include "msgr/session/transcript.h"
#include "pipe.h"

namespace siphon::session::test {
namespace {

constexpr std::uint64_t kAll = proto::features::kSupported;
const auth::Bytes kRotating2 = {0xdf, 0x73, 0x64, 0x95, 0xbe, 0x27, 0xdd, 0xf7,
                                0x02, 0x30, 0x39, 0x67, 0xd1, 0xac, 0x86, 0x29};
const auth::Bytes kRotating3 = {0x34, 0x45, 0xd2, 0x88, 0x69, 0xb5, 0xf2, 0xdc,
                                0x6d, 0x51, 0x7e, 0x00, 0xac, 0x9b, 0xcf, 0x5c};
const auth::Bytes kSession = {0x6b, 0xaf, 0x4d, 0xcc, 0x9c, 0x39, 0x82, 0x24,
                              0xe1, 0x1a, 0x84, 0xd2, 0x39, 0xc2, 0x61, 0xc4};
const auth::Bytes kClientKey = {0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};

std::uint32_t now_sec() {
  return static_cast<std::uint32_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

struct ServerAuthorizer : ::testing::Test {
  EntityAddr server_addr = v2("127.0.0.1", 6800, 77);
  EntityAddr client_addr = v2("127.0.0.1", 6801, 88);
  Services svc;
  ServerAuth server_auth;
  ClientAuth client_auth;
  std::shared_ptr<RotatingKeys> rotating = std::make_shared<RotatingKeys>(auth::kServiceOsd);
  // The ticket as the mon mints it: client.admin, gid 4129, osd secret_id 2.
  auth::TicketInfo info;
  std::uint64_t secret_id = 2;
  auth::Bytes mint_key = kRotating2;
  std::uint64_t client_gid = 4129;
  std::uint32_t ticket_service = auth::kServiceOsd;

  ServerAuthorizer() {
    server_auth.service_methods = {proto::kAuthMethodCephx};
    server_auth.service_modes = {proto::kConModeSecure, proto::kConModeCrc};
    server_auth.rotating = rotating;
    auth::RotatingSecrets s;
    for (std::uint64_t id : {2, 3}) {
      auth::RotatingSecret k;
      k.secret_id = id;
      k.key.secret = id == 2 ? kRotating2 : kRotating3;
      k.expires_sec = now_sec() + 3600 * static_cast<std::uint32_t>(id);
      s.secrets.push_back(k);
    }
    s.max_ver = 3;
    rotating->update(s);
    client_auth.methods = {proto::kAuthMethodCephx};
    client_auth.secret = kClientKey;
    client_auth.key_source = "keyring /test/client.keyring";
    client_auth.modes = {proto::kConModeSecure, proto::kConModeCrc};
    info.entity_type = proto::kEntityTypeClient;
    info.entity_id = "admin";
    info.global_id = 4129;
    info.created_sec = now_sec() - 10;
    info.expires_sec = now_sec() + 3600;
    info.caps = "allow *";
    info.session_key.secret = kSession;
  }

  void give_ticket() {
    std::string why;
    auto blob = auth::mint_ticket_blob(mint_key, secret_id, info, why);
    ASSERT_TRUE(blob) << why;
    auth::ServiceTicket t;
    t.service_id = ticket_service;
    t.session_key = info.session_key;
    t.validity_sec = 3600;
    t.secret_id = secret_id;
    t.ticket_blob = *blob;
    // The client's store is keyed by the peer's type: an OSD.
    auth::ServiceTicket stored = t;
    stored.service_id = auth::kServiceOsd;
    client_auth.tickets->update(client_gid, {stored});
    // Keep the real service id in the authorizer's payload.
    ticket_for_payload = t;
  }
  auth::ServiceTicket ticket_for_payload;

  ClientHandshake client() {
    LocalIdentity me;
    me.entity_type = proto::kEntityTypeClient;
    me.gid = 4129;
    me.addrs = EntityAddrVec(client_addr);
    me.nonce = 88;
    me.auth_name = {proto::kEntityTypeClient, "admin"};
    me.auth = client_auth;
    return ClientHandshake(me, {false, false, true, kAll, 0}, server_addr, proto::kEntityTypeOsd, {}, svc.make());
  }
  ServerHandshake server() {
    LocalIdentity me;
    me.entity_type = proto::kEntityTypeOsd;
    me.gid = 3;
    me.addrs = EntityAddrVec(server_addr);
    me.nonce = 77;
    me.auth_name = {proto::kEntityTypeOsd, "3"};
    me.server_auth = server_auth;
    return ServerHandshake(me, client_addr.addr, svc.make({false, true, true, kAll, 0}));
  }
  static std::string refusals(const std::vector<Step>& steps) {
    std::string out;
    for (const Step& s : steps) out += s.auth_refused;
    return out;
  }
  // Runs a client with the ticket against the server; the server's refusals.
  std::string refused_run() {
    give_ticket();
    auto c = client();
    auto s = server();
    Pipe pipe(c, s);
    pipe.run();
    EXPECT_NE(c.state(), ClientHandshake::State::ready);
    EXPECT_NE(s.state(), ServerHandshake::State::ready);
    return refusals(pipe.server_steps);
  }

  // Hand-built frames, for what a Siphon client would never send.
  Frame auth_request(const auth::Bytes& payload) {
    AuthRequest r;
    r.method = proto::kAuthMethodCephx;
    r.preferred_modes = {proto::kConModeCrc};
    r.auth_payload = BufferList::copy_of(payload.data(), payload.size());
    return encode(r);
  }
};

TEST_F(ServerAuthorizer, TicketFromTheMonReachesReadyInSecureMode) {
  give_ticket();
  auto c = client();
  auto s = server();
  Pipe pipe(c, s);
  pipe.run();
  ASSERT_EQ(c.state(), ClientHandshake::State::ready) << pipe.client_last.reason << refusals(pipe.server_steps);
  ASSERT_EQ(s.state(), ServerHandshake::State::ready) << pipe.server_last.reason;
  const std::vector<std::pair<char, Tag>> expected = {
      {'c', Tag::hello},          {'s', Tag::hello},           {'c', Tag::auth_request},
      {'s', Tag::auth_reply_more}, {'c', Tag::auth_request_more}, {'s', Tag::auth_done},
      {'s', Tag::auth_signature}, {'c', Tag::auth_signature},  {'c', Tag::client_ident},
      {'s', Tag::server_ident},
  };
  EXPECT_EQ(pipe.wire, expected);
  EXPECT_EQ(s.peer().auth_name.to_string(), "client.admin");  // from the ticket
  EXPECT_EQ(s.peer().global_id, 4129u);
  EXPECT_EQ(s.peer().caps, "allow *");  // for the application to enforce
  EXPECT_EQ(s.peer().auth_method, proto::kAuthMethodCephx);
  EXPECT_EQ(s.peer().con_mode, proto::kConModeSecure);
  EXPECT_EQ(c.peer().con_mode, proto::kConModeSecure);
  const Step* cs = nullptr;
  const Step* ss = nullptr;
  for (const Step& x : pipe.client_steps)
    if (x.secure) cs = &x;
  for (const Step& x : pipe.server_steps)
    if (x.secure) ss = &x;
  ASSERT_NE(cs, nullptr);
  ASSERT_NE(ss, nullptr);
  EXPECT_EQ(cs->connection_secret.size(), 64u);
  EXPECT_EQ(cs->connection_secret, ss->connection_secret);
  EXPECT_EQ(refusals(pipe.server_steps), "");
}

TEST_F(ServerAuthorizer, CrcModeAndTheNewestKeyWork) {
  client_auth.modes = {proto::kConModeCrc};
  secret_id = 3;
  mint_key = kRotating3;
  give_ticket();
  auto c = client();
  auto s = server();
  Pipe pipe(c, s);
  pipe.run();
  ASSERT_EQ(s.state(), ServerHandshake::State::ready) << refusals(pipe.server_steps) << pipe.server_last.reason;
  EXPECT_EQ(s.peer().con_mode, proto::kConModeCrc);
}

TEST_F(ServerAuthorizer, AnExpiredTicketIsRefusedNamingTheClientAndTheExpiry) {
  info.expires_sec = now_sec() - 120;
  const std::string why = refused_run();
  EXPECT_NE(why.find("the ticket of client.admin (global_id 4129)"), std::string::npos) << why;
  EXPECT_NE(why.find("expired at"), std::string::npos) << why;
  EXPECT_NE(why.find("UTC"), std::string::npos) << why;
}

TEST_F(ServerAuthorizer, AnotherGlobalIdIsRefused) {
  client_gid = 4200;
  const std::string why = refused_run();
  EXPECT_NE(why.find("issued to global_id 4129 as global_id 4200"), std::string::npos) << why;
}

TEST_F(ServerAuthorizer, ANewerSecretIdIsRefusedAndAsksForAFetch) {
  secret_id = 4;
  EXPECT_FALSE(rotating->refresh_due(RotatingKeys::Clock::now()));
  const std::string why = refused_run();
  EXPECT_NE(why.find("unknown rotating secret_id 4 (have 2..3); fetching"), std::string::npos) << why;
  EXPECT_TRUE(rotating->refresh_due(RotatingKeys::Clock::now()));
}

TEST_F(ServerAuthorizer, AnOldSecretIdIsRefused) {
  secret_id = 1;
  const std::string why = refused_run();
  EXPECT_NE(why.find("unknown rotating secret_id 1 (have 2..3)"), std::string::npos) << why;
  EXPECT_EQ(why.find("fetching"), std::string::npos) << why;
}

TEST_F(ServerAuthorizer, TheWrongKeyIsRefused) {
  mint_key = kRotating3;  // under secret_id 2: another cluster, or forged
  const std::string why = refused_run();
  EXPECT_NE(why.find("does not open with the osd rotating secret_id 2 key"), std::string::npos) << why;
}

TEST_F(ServerAuthorizer, NoKeysFetchedYetIsRefused) {
  server_auth.rotating = std::make_shared<RotatingKeys>(auth::kServiceOsd);
  const std::string why = refused_run();
  EXPECT_NE(why.find("no rotating keys yet"), std::string::npos) << why;
}

TEST_F(ServerAuthorizer, AStandaloneDaemonRefusesAuthorizers) {
  server_auth.rotating = nullptr;
  const std::string why = refused_run();
  EXPECT_NE(why.find("no monitor session"), std::string::npos) << why;
}

TEST_F(ServerAuthorizer, ASelfMintedTicketNeedsTheTypeKey) {
  secret_id = auth::kLongTermSecretId;
  mint_key = kClientKey;
  {
    const std::string why = refused_run();
    EXPECT_NE(why.find("no osd. key"), std::string::npos) << why;
  }
  server_auth.keys["osd."] = kClientKey;
  give_ticket();
  auto c = client();
  auto s = server();
  Pipe pipe(c, s);
  pipe.run();
  EXPECT_EQ(s.state(), ServerHandshake::State::ready) << refusals(pipe.server_steps);
}

TEST_F(ServerAuthorizer, ATicketForAnotherServiceIsRefused) {
  ticket_service = auth::kServiceMgr;
  give_ticket();
  auto s = server();
  s.start();
  s.on_frame(encode(Hello{proto::kEntityTypeClient, server_addr}));
  std::string err;
  auto payload = auth::authorizer_payload(4129, ticket_for_payload, 7, std::nullopt, err);
  ASSERT_TRUE(payload) << err;
  Step r = s.on_frame(auth_request(*payload));
  EXPECT_NE(r.auth_refused.find("ticket for service mgr, not for this osd"), std::string::npos) << r.auth_refused;
  ASSERT_EQ(r.send.size(), 1u);
  EXPECT_EQ(r.send[0].tag, Tag::auth_bad_method);
}

TEST_F(ServerAuthorizer, AWrongChallengeAnswerIsRefused) {
  give_ticket();
  auto s = server();
  s.start();
  s.on_frame(encode(Hello{proto::kEntityTypeClient, server_addr}));
  std::string err;
  auto first = auth::authorizer_payload(4129, ticket_for_payload, 7, std::nullopt, err);
  ASSERT_TRUE(first) << err;
  Step r = s.on_frame(auth_request(*first));
  ASSERT_EQ(r.send.size(), 1u);
  ASSERT_EQ(r.send[0].tag, Tag::auth_reply_more);
  AuthReplyMore more;
  ASSERT_TRUE(decode(r.send[0], more, err)) << err;
  const auto challenge = auth::decode_authorizer_challenge(kSession, detail::bytes_of(more.auth_payload), err);
  ASSERT_TRUE(challenge) << err;
  // Answer challenge + 2 (authorizer_payload adds one to what it is given).
  auto answer = auth::authorizer_payload(4129, ticket_for_payload, 7, *challenge + 1, err);
  ASSERT_TRUE(answer) << err;
  AuthRequestMore m;
  m.auth_payload = BufferList::copy_of(answer->data(), answer->size());
  r = s.on_frame(encode(m));
  EXPECT_NE(r.auth_refused.find("answered the challenge wrongly"), std::string::npos) << r.auth_refused;
  EXPECT_NE(s.state(), ServerHandshake::State::sig_wait);
  // A replayed first-round authorizer after a refusal starts over: challenged
  // again, not accepted.
  r = s.on_frame(auth_request(*first));
  ASSERT_EQ(r.send.size(), 1u);
  EXPECT_EQ(r.send[0].tag, Tag::auth_reply_more);
}

TEST_F(ServerAuthorizer, MalformedAuthorizersAreRefusedNeverCrash) {
  give_ticket();
  std::string err;
  auto payload = auth::authorizer_payload(4129, ticket_for_payload, 7, std::nullopt, err);
  ASSERT_TRUE(payload) << err;
  for (std::size_t n = 1; n < payload->size(); n += 7) {
    auto s = server();
    s.start();
    s.on_frame(encode(Hello{proto::kEntityTypeClient, server_addr}));
    Step r = s.on_frame(auth_request(auth::Bytes(payload->begin(), payload->begin() + n)));
    EXPECT_NE(r.auth_refused.find("malformed"), std::string::npos) << n << ": " << r.auth_refused << r.reason;
  }
  for (std::size_t i = 1; i < payload->size(); ++i) {
    auth::Bytes b = *payload;
    b[i] ^= 0x41;
    auto s = server();
    s.start();
    s.on_frame(encode(Hello{proto::kEntityTypeClient, server_addr}));
    Step r = s.on_frame(auth_request(b));
    EXPECT_NE(s.state(), ServerHandshake::State::sig_wait) << i;
    EXPECT_NE(s.state(), ServerHandshake::State::ready) << i;
    (void)r;
  }
}

// The store's refresh rule: at once when never fetched (retried every
// min_refetch), every refresh_interval after a fetch, and at once (rate-
// limited) when a newer secret_id was seen.
TEST(RotatingKeysStore, RefreshRule) {
  using namespace std::chrono_literals;
  RotatingKeys k(auth::kServiceOsd, 100s, 1s);
  const auto t0 = RotatingKeys::Clock::now();
  EXPECT_FALSE(k.ready());
  EXPECT_TRUE(k.refresh_due(t0));
  EXPECT_FALSE(k.refresh_due(t0 + 500ms));  // rate-limited
  EXPECT_TRUE(k.refresh_due(t0 + 1s));      // the fetch failed: again
  auth::RotatingSecrets s;
  s.secrets.resize(1);
  s.secrets[0].secret_id = 5;
  s.secrets[0].key.secret.assign(16, 1);
  k.update(s, t0 + 2s);
  EXPECT_TRUE(k.ready());
  EXPECT_EQ(k.generation(), 1u);
  EXPECT_FALSE(k.refresh_due(t0 + 50s));
  k.want_newer(5);  // not newer
  EXPECT_FALSE(k.refresh_due(t0 + 51s));
  k.want_newer(6);
  EXPECT_TRUE(k.refresh_due(t0 + 52s));
  EXPECT_FALSE(k.refresh_due(t0 + 52s + 100ms));
  k.update(s, t0 + 53s);
  EXPECT_FALSE(k.refresh_due(t0 + 100s));
  EXPECT_TRUE(k.refresh_due(t0 + 153s));
  const auto l = k.get(5);
  EXPECT_TRUE(l.key.has_value());
  EXPECT_EQ(l.newest, 5u);
  EXPECT_FALSE(k.get(6).key.has_value());
}

}  // namespace
}  // namespace siphon::session::test
