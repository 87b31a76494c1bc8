// The cephx mon exchange of golden connection A (cephx.md §12.2): the proof,
// AUTH_REQUEST_MORE's bytes, and everything AUTH_DONE's payload carries.
#include <gtest/gtest.h>

#include "golden.h"
#include "msgr/auth/cephx.h"

namespace siphon::auth {
namespace {

using golden::unhex;

ByteView auth_done_payload() {
  return ByteView(golden::kServerSent).subspan(golden::kAuthDonePayloadOffset, golden::kAuthDonePayloadSize);
}

TEST(Cephx, ChallengeProofIncludesTheLengthPrefix) {
  std::string why;
  auto k = challenge_proof(golden::kAdminSecret, golden::kServerChallenge, golden::kClientChallenge, why);
  ASSERT_TRUE(k) << why;
  EXPECT_EQ(*k, 0x198ae71eda76fbfdull);
}

TEST(Cephx, ServerChallengeDecodes) {
  std::string why;
  auto c = decode_server_challenge(unhex("01480f5f62021615d5"), why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(*c, golden::kServerChallenge);
  EXPECT_FALSE(decode_server_challenge(unhex("02480f5f62021615d5"), why));
  EXPECT_NE(why.find("version"), std::string::npos);
  EXPECT_FALSE(decode_server_challenge(unhex("01480f5f"), why));
  EXPECT_NE(why.find("truncated"), std::string::npos);
}

TEST(Cephx, AuthenticatePayloadIsTheCapturedOne) {
  std::string why;
  auto p = authenticate_payload(golden::kAdminSecret, golden::kServerChallenge, golden::kClientChallenge,
                                kServiceAuth, why);
  ASSERT_TRUE(p) << why;
  EXPECT_EQ(hex(*p), "0001" "03" "98696eef9c47d21c" "fdfb76da1ee78a19" "01" "0000000000000000" "00000000"
                     "20000000");
}

TEST(Cephx, AuthDoneGivesSessionKeyTicketAndConnectionSecret) {
  std::string why;
  auto r = decode_mon_auth_done(golden::kAdminSecret, auth_done_payload(), why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(r->auth.service_id, kServiceAuth);
  EXPECT_EQ(hex(r->auth.session_key.secret), hex(golden::kSessionKey));
  EXPECT_EQ(r->auth.validity_sec, 259200u);
  EXPECT_EQ(r->auth.secret_id, 2u);
  EXPECT_EQ(r->auth.ticket_blob.size(), 109u);
  EXPECT_EQ(hex(r->connection_secret), hex(golden::kConnectionSecret));
  EXPECT_TRUE(r->extra.empty());
}

TEST(Cephx, AuthDoneWithTheWrongKeyFailsNamingTheStep) {
  std::string why;
  const Bytes osd0 = unhex("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
  EXPECT_FALSE(decode_mon_auth_done(osd0, auth_done_payload(), why));
  EXPECT_NE(why.find("entity's key"), std::string::npos) << why;
}

TEST(Cephx, EveryTruncationOfAuthDoneFailsCleanly) {
  const ByteView full = auth_done_payload();
  std::string why;
  for (std::size_t n = 0; n < full.size(); ++n) {
    // The cut right after the AUTH ticket is a valid reply to other_keys 0.
    auto r = decode_mon_auth_done(golden::kAdminSecret, full.subspan(0, n), why);
    if (r) {
      EXPECT_TRUE(r->connection_secret.empty());
      EXPECT_EQ(n, 6u + 5 + 5 + 4 + 48 + 1 + 4 + 109) << "accepted a cut at " << n;
    }
  }
}

TEST(Cephx, FlippedBitsNeverCrash) {
  // CBC has no integrity: a flipped bit deep inside a ciphertext garbles
  // bytes the client cannot check (the AUTH_SIGNATURE over the transcript
  // catches those). The framing bytes and the first block of each envelope
  // (version and magic) must be refused.
  const ByteView full = auth_done_payload();
  std::string why;
  for (std::size_t i = 0; i < full.size(); ++i) {
    Bytes b(full.begin(), full.end());
    b[i] ^= 0x40;
    const bool ok = decode_mon_auth_done(golden::kAdminSecret, b, why).has_value();
    const bool header = i < 20;                  // hdr, v/num, svc/v, ct length
    const bool first_block = i >= 20 && i < 36;  // the ticket's first CBC block
    if (header || first_block) {
      EXPECT_FALSE(ok) << "byte " << i << " flipped was accepted";
    }
  }
}

}  // namespace
}  // namespace siphon::auth

namespace siphon::auth {
namespace {

// The renewal request of golden connection E (cephx.md §12.6): gid 4139,
// the AUTH ticket (secret_id 2, a 96-byte blob), AUTH session key
// adc7...ecda, nonce 0x05098b7360d4d987, keys 0x15: 165 bytes laid out as
// captured, and its CephXAuthorize opens to the captured plaintext.
TEST(CephxRenewal, RequestHasTheCapturedLayout) {
  ServiceTicket t;
  t.service_id = kServiceAuth;
  t.session_key.secret = golden::unhex("adc7174aac52ba6a8fea3d2dbfb3ecda");
  Bytes blob = golden::unhex("01 0200000000000000 60000000");
  blob.resize(blob.size() + 96, 0xab);
  t.ticket_blob = blob;
  std::string why;
  const auto req = principal_session_key_request(4139, t, 0x05098b7360d4d987ull, 0x15, why);
  ASSERT_TRUE(req) << why;
  ASSERT_EQ(req->size(), 165u);
  EXPECT_EQ(hex(ByteView(*req).first(19)), "0002012b100000000000002000000001020000");
  EXPECT_EQ(hex(ByteView(*req).last(5)), "0115000000");
  const ByteView ct = ByteView(*req).subspan(2 + 1 + 8 + 4 + blob.size() + 4, 32);
  const auto plain = open(t.session_key.secret, ct, why);
  ASSERT_TRUE(plain) << why;
  EXPECT_EQ(hex(*plain), "0287d9d460738b0905000000000000000000");
}

// The reply: a status other than 0, a wrong request type and a truncated
// ticket reply are refused with the reason; a good one gives the tickets.
TEST(CephxRenewal, ReplyIsCheckedAndOpened) {
  const Bytes key = golden::unhex("adc7174aac52ba6a8fea3d2dbfb3ecda");
  std::string why;
  EXPECT_FALSE(decode_principal_session_key_reply(key, golden::unhex("0002 f3ffffff"), why));
  EXPECT_NE(why.find("status -13"), std::string::npos) << why;
  EXPECT_FALSE(decode_principal_session_key_reply(key, golden::unhex("0001 00000000"), why));
  EXPECT_NE(why.find("request type"), std::string::npos) << why;
  EXPECT_FALSE(decode_principal_session_key_reply(key, golden::unhex("0002 00000000 01 03000000"), why));
  // One OSD ticket, its CephXServiceTicket sealed with the AUTH session key.
  Bytes st = golden::unhex("01 0100 09920e6b 0671aa0c 1000 6baf4dcc9c398224e11a84d239c261c4 3c000000 00000000");
  const auto sealed = seal_with_length(key, st, why);
  ASSERT_TRUE(sealed) << why;
  Bytes bl = golden::unhex("0002 00000000 01 01000000 04000000 01");
  bl.insert(bl.end(), sealed->begin(), sealed->end());
  const Bytes ticket = golden::unhex("00 11000000 01 0300000000000000 04000000 deadbeef");
  bl.insert(bl.end(), ticket.begin(), ticket.end());
  const auto tickets = decode_principal_session_key_reply(key, bl, why);
  ASSERT_TRUE(tickets) << why;
  ASSERT_EQ(tickets->size(), 1u);
  EXPECT_EQ((*tickets)[0].service_id, kServiceOsd);
  EXPECT_EQ(hex((*tickets)[0].session_key.secret), "6baf4dcc9c398224e11a84d239c261c4");
  EXPECT_EQ((*tickets)[0].validity_sec, 60u);
  EXPECT_EQ((*tickets)[0].secret_id, 3u);
}

}  // namespace
}  // namespace siphon::auth
