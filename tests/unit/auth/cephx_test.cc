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
