// The client handshake's cephx phase replayed against golden connection A
// of shared/reference/cephx.md §12.2 (client.admin -> mon, known keys): the
// frames it sends must be the captured bytes, its AUTH_SIGNATURE the
// captured HMAC, and the mon's captured signature must verify. Then the
// failure paths: wrong key, refused key, tampered signature, method
// fallback, no key.
#include <gtest/gtest.h>

#include "../auth/golden.h"
#include "captured_frames.h"
#include "msgr/proto/frame.h"
#include "msgr/session/handshake.h"
#include "scripted_services.h"

namespace siphon::session {
namespace {

using auth::Bytes;
using auth::golden::unhex;
namespace golden = auth::golden;

using test::bytes_of;
std::vector<Frame> frames_of(const Bytes& stream) { return test::frames_after_banner(stream); }

struct CephxReplay : ::testing::Test {
  std::vector<std::uint64_t> randoms{golden::kClientChallenge};

  HandshakeServices services() { return test::scripted_services(randoms); }
  ClientAuth cephx_auth(Bytes secret = golden::kAdminSecret) {
    ClientAuth a;
    a.methods = {proto::kAuthMethodCephx};
    a.secret = std::move(secret);
    a.key_source = "keyring /lab/cephx-known-key.keyring";
    a.mon_modes = {proto::kConModeSecure, proto::kConModeCrc};  // as the captured rados client
    a.want_keys = 0x20;
    return a;
  }
  ClientHandshake client(ClientAuth a) {
    LocalIdentity me;
    me.entity_type = proto::kEntityTypeClient;
    me.auth_name = {proto::kEntityTypeClient, "admin"};
    me.auth = std::move(a);
    EntityAddr target(proto::AddrType::msgr2, NetAddress::parse("127.0.0.1").value(), 0);
    target.addr.set_port(3401);
    return ClientHandshake(me, PolicyView{true, false, false, ~0ull, 0}, target, proto::kEntityTypeMon, {},
                           services());
  }
  static Step start(ClientHandshake& c) {
    proto::Negotiated n;
    n.rev = proto::FrameRev::rev1;
    return c.start(proto::Banner{}, n);
  }
  static Frame signature(const Bytes& sig) {
    proto::AuthSignature s;
    std::copy(sig.begin(), sig.end(), s.sha256.begin());
    return s.frame();
  }
  static Frame bad_method(std::uint32_t method, std::int32_t result, std::vector<std::uint32_t> methods) {
    proto::AuthBadMethod b;
    b.method = method;
    b.result = result;
    b.allowed_methods = std::move(methods);
    b.allowed_modes = {2, 1};
    return b.frame();
  }
};

TEST_F(CephxReplay, ReproducesTheCapturedClientBytesAndSignatures) {
  const auto server = frames_of(golden::kServerSent);
  const auto client_frames = frames_of(golden::kClientSent);
  ASSERT_EQ(server.size(), 3u);  // HELLO, AUTH_REPLY_MORE, AUTH_DONE
  ASSERT_EQ(client_frames.size(), 3u);  // HELLO, AUTH_REQUEST, AUTH_REQUEST_MORE
  // Re-encoding what the decoder read gives the wire bytes back: the
  // transcript the handshake keeps is exact.
  Bytes reencoded(golden::kServerSent.begin(), golden::kServerSent.begin() + 26);
  for (const Frame& f : server) {
    const Bytes b = bytes_of(proto::encode_frame(f, proto::FrameRev::rev1));
    reencoded.insert(reencoded.end(), b.begin(), b.end());
  }
  EXPECT_EQ(reencoded, golden::kServerSent);

  ClientHandshake c = client(cephx_auth());
  Bytes sent = bytes_of(proto::encode_banner(proto::Banner{}));
  auto take = [&](const Step& s) {
    for (const Frame& f : s.send) {
      const Bytes b = bytes_of(proto::encode_frame(f, proto::FrameRev::rev1));
      sent.insert(sent.end(), b.begin(), b.end());
    }
  };
  take(start(c));
  Step s = c.on_frame(server[0]);  // HELLO -> AUTH_REQUEST
  ASSERT_EQ(s.outcome, Step::Outcome::none) << s.reason;
  take(s);
  s = c.on_frame(server[1]);  // AUTH_REPLY_MORE -> AUTH_REQUEST_MORE
  ASSERT_EQ(s.outcome, Step::Outcome::none) << s.reason;
  take(s);
  EXPECT_EQ(auth::hex(sent), auth::hex(golden::kClientSent));

  s = c.on_frame(server[2]);  // AUTH_DONE -> our AUTH_SIGNATURE, secure mode
  ASSERT_EQ(s.outcome, Step::Outcome::none) << s.reason;
  ASSERT_EQ(s.send.size(), 1u);
  EXPECT_TRUE(s.secure);
  EXPECT_EQ(auth::hex(s.connection_secret), auth::hex(golden::kConnectionSecret));
  proto::AuthSignature ours;
  std::string why;
  ASSERT_TRUE(decode(s.send[0], ours, why)) << why;
  EXPECT_EQ(auth::hex(ours.sha256), auth::hex(golden::kClientSignature));
  ASSERT_TRUE(c.cephx());
  EXPECT_EQ(auth::hex(c.cephx()->auth.session_key.secret), auth::hex(golden::kSessionKey));
  EXPECT_EQ(c.peer().global_id, 4124u);
  EXPECT_EQ(c.peer().auth_method, proto::kAuthMethodCephx);

  s = c.on_frame(signature(golden::kServerSignature));  // the mon's, verified -> CLIENT_IDENT
  ASSERT_EQ(s.outcome, Step::Outcome::none) << s.reason;
  ASSERT_EQ(s.send.size(), 1u);
  EXPECT_EQ(s.send[0].tag, Tag::client_ident);
}

TEST_F(CephxReplay, ATamperedServerSignatureFaults) {
  const auto server = frames_of(golden::kServerSent);
  ClientHandshake c = client(cephx_auth());
  (void)start(c);
  (void)c.on_frame(server[0]);
  (void)c.on_frame(server[1]);
  (void)c.on_frame(server[2]);
  Bytes sig = golden::kServerSignature;
  sig[5] ^= 1;
  const Step s = c.on_frame(signature(sig));
  EXPECT_EQ(s.outcome, Step::Outcome::fault);
  EXPECT_EQ(s.error, make_error_code(errc::bad_signature));
}

TEST_F(CephxReplay, ADifferentClientTranscriptFailsTheServerSignature) {
  // A man in the middle that changed our AUTH_REQUEST's modes: the mon signs
  // what it received, which is not what we sent.
  const auto server = frames_of(golden::kServerSent);
  ClientAuth a = cephx_auth();
  a.mon_modes = {proto::kConModeSecure};
  ClientHandshake c = client(a);
  (void)start(c);
  (void)c.on_frame(server[0]);
  (void)c.on_frame(server[1]);
  (void)c.on_frame(server[2]);
  const Step s = c.on_frame(signature(golden::kServerSignature));
  EXPECT_EQ(s.error, make_error_code(errc::bad_signature));
}

TEST_F(CephxReplay, AWrongKeyCannotReadAuthDoneAndSaysWhose) {
  const auto server = frames_of(golden::kServerSent);
  ClientHandshake c = client(cephx_auth(unhex("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf")));
  (void)start(c);
  (void)c.on_frame(server[0]);
  (void)c.on_frame(server[1]);
  const Step s = c.on_frame(server[2]);
  EXPECT_EQ(s.outcome, Step::Outcome::fault);
  EXPECT_EQ(s.error, make_error_code(errc::auth_failed));
  EXPECT_NE(s.reason.find("client.admin"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("/lab/cephx-known-key.keyring"), std::string::npos) << s.reason;
}

TEST_F(CephxReplay, TheMonRefusingTheKeyNamesEntityAndKeyring) {
  const auto server = frames_of(golden::kServerSent);
  ClientHandshake c = client(cephx_auth());
  (void)start(c);
  (void)c.on_frame(server[0]);
  (void)c.on_frame(server[1]);
  const Step s = c.on_frame(bad_method(2, -13, {2}));
  EXPECT_EQ(s.error, make_error_code(errc::auth_failed));
  EXPECT_NE(s.reason.find("refused the cephx key of client.admin from keyring /lab/cephx-known-key.keyring"),
            std::string::npos)
      << s.reason;
}

TEST_F(CephxReplay, FallsBackToTheNextAllowedMethod) {
  const auto server = frames_of(golden::kServerSent);
  ClientAuth a = cephx_auth();
  a.methods = {proto::kAuthMethodNone, proto::kAuthMethodCephx};
  ClientHandshake c = client(a);
  (void)start(c);
  Step s = c.on_frame(server[0]);
  proto::AuthRequest req;
  std::string why;
  ASSERT_TRUE(decode(s.send.at(0), req, why));
  EXPECT_EQ(req.method, proto::kAuthMethodNone);
  s = c.on_frame(bad_method(1, -95, {2}));  // a cephx-only mon
  ASSERT_EQ(s.outcome, Step::Outcome::none) << s.reason;
  ASSERT_TRUE(decode(s.send.at(0), req, why));
  EXPECT_EQ(req.method, proto::kAuthMethodCephx);
  EXPECT_EQ(req.preferred_modes, (std::vector<std::uint32_t>{2, 1}));
}

TEST_F(CephxReplay, WithoutAKeyACephxMonIsRefusedWithTheReason) {
  const auto server = frames_of(golden::kServerSent);
  ClientAuth a;
  a.methods = {proto::kAuthMethodNone};  // cephx dropped: no keyring
  a.key_source = "no keyring found at /etc/ceph/ceph.client.admin.keyring";
  ClientHandshake c = client(a);
  (void)start(c);
  (void)c.on_frame(server[0]);
  const Step s = c.on_frame(bad_method(1, -95, {2}));
  EXPECT_EQ(s.error, make_error_code(errc::auth_unsupported));
  EXPECT_NE(s.reason.find("cephx needs a key for client.admin: no keyring found at /etc/ceph/"),
            std::string::npos)
      << s.reason;
}

TEST_F(CephxReplay, GarbageChallengeAndUnexpectedFramesFault) {
  const auto server = frames_of(golden::kServerSent);
  ClientHandshake c = client(cephx_auth());
  (void)start(c);
  (void)c.on_frame(server[0]);
  proto::AuthReplyMore more;
  more.auth_payload = BufferList::copy_of("\x01\x02", 2);
  Step s = c.on_frame(more.frame());
  EXPECT_EQ(s.error, make_error_code(errc::decode_error));
  // AUTH_DONE before any challenge.
  ClientHandshake c2 = client(cephx_auth());
  (void)start(c2);
  (void)c2.on_frame(server[0]);
  s = c2.on_frame(server[2]);
  EXPECT_EQ(s.outcome, Step::Outcome::fault);
}

}  // namespace
}  // namespace siphon::session
