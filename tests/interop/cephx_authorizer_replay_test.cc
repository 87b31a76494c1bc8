// The cephx authorizer (shared/reference/cephx.md §4) replayed against the
// lab capture with known keys (reference/ceph-lab/cephx-known-key.pcap,
// §12.3 and §12.4): `rados` as client.admin authenticating to osd.0 in
// secure mode (connection B) and in crc mode (connection C).
//
// Nothing of the client's side is taken from the client's own frames: the
// OSD tickets come from the monitor's AUTH_DONE of the same `rados` run,
// opened with client.admin's key from the keyring, exactly as a client gets
// them; only the authorizer's random nonce is set to the captured one. Then
// every frame the handshake sends must be the captured bytes, its
// AUTH_SIGNATURE the captured HMAC, the connection secret the one the OSD
// sent, and the OSD's captured signature must verify.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../unit/auth/golden.h"
#include "captured_frames.h"
#include "msgr/proto/frame.h"
#include "msgr/session/handshake.h"
#include "scripted_services.h"
#include "pcap_streams.h"

namespace siphon::session {
namespace {

using auth::Bytes;
using auth::golden::unhex;
namespace golden = auth::golden;

using test::bytes_of;
std::vector<Frame> frames_of(const std::vector<std::uint8_t>& stream, std::size_t n) {
  return test::frames_after_banner(stream, n);
}

const siphon::testing::TcpStream* stream(const std::vector<siphon::testing::TcpStream>& all, std::string_view client) {
  for (const auto& s : all)
    if (s.client == client) return &s;
  return nullptr;
}

struct AuthorizerReplay : ::testing::Test {
  std::vector<siphon::testing::TcpStream> mon, osd;
  std::vector<std::uint64_t> randoms;

  void SetUp() override {
    const std::string pcap = std::string(SIPHON_INTEROP_DATA) + "/cephx-known-key.pcap";
    std::string err;
    ASSERT_TRUE(siphon::testing::read_tcp_streams(pcap, 3401, mon, err)) << err;
    ASSERT_TRUE(siphon::testing::read_tcp_streams(pcap, 3410, osd, err)) << err;
  }

  // A ClientAuth whose ticket store holds what the mon's AUTH_DONE on
  // connection `mon_client` handed out (opened with client.admin's key).
  ClientAuth auth_from_mon(std::string_view mon_client, std::vector<std::uint32_t> modes) {
    ClientAuth a;
    a.methods = {proto::kAuthMethodCephx};
    a.secret = golden::kAdminSecret;
    a.key_source = "keyring /lab/cephx-known-key.keyring";
    a.modes = std::move(modes);
    const auto* s = stream(mon, mon_client);
    EXPECT_NE(s, nullptr) << "no mon connection from " << mon_client;
    if (s == nullptr) return a;
    const auto frames = frames_of(s->server_to_client, 3);  // HELLO, AUTH_REPLY_MORE, AUTH_DONE
    EXPECT_EQ(frames.size(), 3u);
    if (frames.size() != 3) return a;
    proto::AuthDone done;
    std::string why;
    EXPECT_TRUE(decode(frames[2], done, why)) << why;
    auto r = auth::decode_mon_auth_done(a.secret, bytes_of(done.auth_payload), why);
    EXPECT_TRUE(r) << why;
    if (r) a.tickets->update(done.global_id, r->extra);
    return a;
  }

  HandshakeServices services() { return test::scripted_services(randoms); }

  // Replays one captured client->osd.0 connection through a ClientHandshake
  // (kept in `c`): the client's frames must be the captured bytes; returns
  // what AUTH_DONE produced (our AUTH_SIGNATURE, the secure switch).
  Step replay(const siphon::testing::TcpStream& s, ClientAuth a) {
    const auto theirs = frames_of(s.server_to_client, 3);  // HELLO, AUTH_REPLY_MORE, AUTH_DONE
    const auto ours = frames_of(s.client_to_server, 3);    // HELLO, AUTH_REQUEST, AUTH_REQUEST_MORE
    EXPECT_EQ(theirs.size(), 3u);
    EXPECT_EQ(ours.size(), 3u);
    if (theirs.size() != 3 || ours.size() != 3) return Step{};
    proto::Hello hello;  // whom the client dialled: the OSD's address from its map
    std::string why;
    EXPECT_TRUE(decode(ours[0], hello, why)) << why;
    LocalIdentity me;
    me.entity_type = proto::kEntityTypeClient;
    me.auth_name = {proto::kEntityTypeClient, "admin"};
    me.auth = std::move(a);
    c = std::make_unique<ClientHandshake>(me, PolicyView{true, false, false, ~0ull, 0}, hello.peer_addr,
                                          proto::kEntityTypeOsd, SessionIds{}, services());
    Bytes sent = bytes_of(proto::encode_banner(proto::Banner{}));
    auto take = [&](const Step& st) {
      for (const Frame& f : st.send) {
        const Bytes b = bytes_of(proto::encode_frame(f, proto::FrameRev::rev1));
        sent.insert(sent.end(), b.begin(), b.end());
      }
    };
    proto::Negotiated n;
    n.rev = proto::FrameRev::rev1;
    take(c->start(proto::Banner{}, n));
    Step st = c->on_frame(theirs[0]);  // HELLO -> AUTH_REQUEST (the authorizer)
    EXPECT_EQ(st.outcome, Step::Outcome::none) << st.reason;
    take(st);
    st = c->on_frame(theirs[1]);  // AUTH_REPLY_MORE (the challenge) -> AUTH_REQUEST_MORE
    EXPECT_EQ(st.outcome, Step::Outcome::none) << st.reason;
    take(st);
    std::size_t pre_auth = 26;
    for (const Frame& f : ours) pre_auth += proto::encode_frame(f, proto::FrameRev::rev1).length();
    EXPECT_EQ(auth::hex(sent), auth::hex(auth::ByteView(s.client_to_server.data(), pre_auth)))
        << "the client's frames differ from the capture";
    return c->on_frame(theirs[2]);  // AUTH_DONE -> our AUTH_SIGNATURE
  }
  static Frame signature(const Bytes& sig) {
    proto::AuthSignature s;
    std::copy(sig.begin(), sig.end(), s.sha256.begin());
    return s.frame();
  }
  std::unique_ptr<ClientHandshake> c;
};

// Connection B (§12.3): modes [secure], the OSD ticket of gid 4129.
TEST_F(AuthorizerReplay, SecureModeToAnOsdIsTheCapturedExchange) {
  const auto* b = stream(osd, "127.0.0.1:33322");
  ASSERT_NE(b, nullptr);
  randoms = {0xa6b323d8a174bcccull};  // the captured CephXAuthorize nonce
  ClientAuth a = auth_from_mon("127.0.0.1:59846", {proto::kConModeSecure});
  ASSERT_TRUE(a.tickets->get(auth::kServiceOsd)) << "the mon handed out no OSD ticket";
  EXPECT_EQ(auth::hex(a.tickets->get(auth::kServiceOsd)->ticket.session_key.secret),
            "6baf4dcc9c398224e11a84d239c261c4");
  const Step st = replay(*b, a);
  ASSERT_EQ(st.outcome, Step::Outcome::none) << st.reason;
  ASSERT_EQ(st.send.size(), 1u);
  EXPECT_TRUE(st.secure);
  EXPECT_EQ(auth::hex(st.connection_secret),
            "f170b3730f470002523044f458d2ec6068cbd326d078c802782f37e2ab32db83dc5e8289d73c0392"
            "4ccc61768835ec0cb135f7d667121c207f9d6c2b1e017476");
  proto::AuthSignature ours;
  std::string why;
  ASSERT_TRUE(decode(st.send[0], ours, why)) << why;
  EXPECT_EQ(auth::hex(ours.sha256), "32b20816bd5c3124089e5e77577922ef6f70ddbed66dc3329e460542492b4f80");
  EXPECT_EQ(c->peer().global_id, 4129u);
  EXPECT_EQ(c->peer().auth_method, proto::kAuthMethodCephx);
  // The OSD's signature (sent encrypted; its plaintext is in §12.3) verifies.
  const Step ident = c->on_frame(signature(unhex("452ebcfb58a18a9cc39a4056a5380844c9ae152e04dd64e5fb4e1c95ca9e8b72")));
  ASSERT_EQ(ident.outcome, Step::Outcome::none) << ident.reason;
  ASSERT_EQ(ident.send.size(), 1u);
  EXPECT_EQ(ident.send[0].tag, Tag::client_ident);
}

// Connection C (§12.4): modes [crc, secure], the OSD picked crc; the OSD
// ticket of gid 4126; the AUTH_SIGNATURE frames are cleartext.
TEST_F(AuthorizerReplay, CrcModeToAnOsdIsTheCapturedExchange) {
  const auto* cs = stream(osd, "127.0.0.1:33312");
  ASSERT_NE(cs, nullptr);
  randoms = {0x009aa4d92b04d3bfull};  // the OSD answered nonce + 1 = 0x009aa4d92b04d3c0
  const Step st = replay(*cs, auth_from_mon("127.0.0.1:59836", {proto::kConModeCrc, proto::kConModeSecure}));
  ASSERT_EQ(st.outcome, Step::Outcome::none) << st.reason;
  ASSERT_EQ(st.send.size(), 1u);
  EXPECT_FALSE(st.secure);
  EXPECT_EQ(c->peer().global_id, 4126u);
  // Both signatures are the captured cleartext frames (4th of each side).
  const auto c2s = frames_of(cs->client_to_server, 4);
  const auto s2c = frames_of(cs->server_to_client, 4);
  ASSERT_EQ(c2s.size(), 4u);
  ASSERT_EQ(s2c.size(), 4u);
  EXPECT_EQ(auth::hex(bytes_of(proto::encode_frame(st.send[0], proto::FrameRev::rev1))),
            auth::hex(bytes_of(proto::encode_frame(c2s[3], proto::FrameRev::rev1))));
  const Step ident = c->on_frame(s2c[3]);
  ASSERT_EQ(ident.outcome, Step::Outcome::none) << ident.reason;
  ASSERT_EQ(ident.send.size(), 1u);
  EXPECT_EQ(ident.send[0].tag, Tag::client_ident);
}

// The OSD's reply must answer our nonce: a reply replayed from another
// connection (another nonce) is refused, naming why.
TEST_F(AuthorizerReplay, AReplyToAnotherNonceIsRefused) {
  const auto* b = stream(osd, "127.0.0.1:33322");
  ASSERT_NE(b, nullptr);
  randoms = {0xa6b323d8a174bccdull};  // one off: the captured frames no longer match ours
  const auto theirs = frames_of(b->server_to_client, 3);
  ASSERT_EQ(theirs.size(), 3u);
  proto::Hello hello;
  std::string why;
  ASSERT_TRUE(decode(frames_of(b->client_to_server, 1).at(0), hello, why)) << why;
  LocalIdentity me;
  me.auth_name = {proto::kEntityTypeClient, "admin"};
  me.auth = auth_from_mon("127.0.0.1:59846", {proto::kConModeSecure});
  ClientHandshake h(me, PolicyView{true, false, false, ~0ull, 0}, hello.peer_addr, proto::kEntityTypeOsd,
                    SessionIds{}, services());
  proto::Negotiated n;
  n.rev = proto::FrameRev::rev1;
  h.start(proto::Banner{}, n);
  ASSERT_EQ(h.on_frame(theirs[0]).outcome, Step::Outcome::none);
  ASSERT_EQ(h.on_frame(theirs[1]).outcome, Step::Outcome::none);
  const Step st = h.on_frame(theirs[2]);
  ASSERT_EQ(st.outcome, Step::Outcome::fault);
  EXPECT_EQ(st.error, make_error_code(errc::auth_failed));
  EXPECT_NE(st.reason.find("nonce"), std::string::npos) << st.reason;
}

// With cephx required and no ticket for the peer's type (no monitor session
// handed one out), the handshake fails at once and says what is missing.
TEST_F(AuthorizerReplay, NoTicketSaysSo) {
  LocalIdentity me;
  me.auth_name = {proto::kEntityTypeClient, "admin"};
  me.auth.methods = {proto::kAuthMethodCephx};
  me.auth.secret = golden::kAdminSecret;
  EntityAddr target(proto::AddrType::msgr2, NetAddress::parse("127.0.0.1").value(), 0);
  target.addr.set_port(3410);
  ClientHandshake h(me, PolicyView{true, false, false, ~0ull, 0}, target, proto::kEntityTypeOsd, SessionIds{},
                    services());
  proto::Negotiated n;
  n.rev = proto::FrameRev::rev1;
  h.start(proto::Banner{}, n);
  proto::Hello hello;
  hello.entity_type = proto::kEntityTypeOsd;
  hello.peer_addr = target;
  const Step st = h.on_frame(hello.frame());
  ASSERT_EQ(st.outcome, Step::Outcome::fault);
  EXPECT_NE(st.reason.find("service ticket"), std::string::npos) << st.reason;
}

}  // namespace
}  // namespace siphon::session
