// Ceph's key encoding, AES-CBC envelope, HMAC and AES-GCM against the
// captured values of cephx.md §1, §2 and §12.
#include <gtest/gtest.h>

#include "golden.h"
#include "msgr/auth/crypto.h"

namespace siphon::auth {
namespace {

using golden::unhex;

TEST(CryptoKey, DecodesTheLabKeyAndEncodesItBack) {
  std::string why;
  auto k = CryptoKey::from_base64(golden::kAdminBase64, why);
  ASSERT_TRUE(k) << why;
  EXPECT_EQ(k->type, kCryptoAes);
  EXPECT_EQ(k->created_sec, 1700000000u);
  EXPECT_EQ(k->created_nsec, 0u);
  EXPECT_EQ(k->secret, golden::kAdminSecret);
  EXPECT_EQ(hex(k->encode()), "0100" "00f15365" "00000000" "1000" "00112233445566778899aabbccddeeff");
  EXPECT_EQ(k->to_base64(), golden::kAdminBase64);
}

TEST(CryptoKey, RefusesWhatIsNotACephAesKey) {
  std::string why;
  EXPECT_FALSE(CryptoKey::from_base64("not base64!", why));
  EXPECT_FALSE(CryptoKey::from_base64("AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u", why));  // truncated
  // Type 0 (none), otherwise the lab key.
  CryptoKey none{kCryptoNone, 1, 0, golden::kAdminSecret};
  EXPECT_FALSE(CryptoKey::from_base64(none.to_base64(), why));
  EXPECT_NE(why.find("neither AES (1) nor aes256k (2)"), std::string::npos) << why;
  // An AES key with 8 secret bytes.
  CryptoKey shorty{kCryptoAes, 1, 0, Bytes(8, 7)};
  EXPECT_FALSE(CryptoKey::from_base64(shorty.to_base64(), why));
  EXPECT_NE(why.find("16"), std::string::npos) << why;
}

TEST(Base64, IsStrict) {
  EXPECT_EQ(base64_decode("YQ=="), Bytes{'a'});
  EXPECT_EQ(base64_decode("YWI="), (Bytes{'a', 'b'}));
  EXPECT_EQ(base64_decode("YWJj"), (Bytes{'a', 'b', 'c'}));
  EXPECT_FALSE(base64_decode("YQ"));
  EXPECT_FALSE(base64_decode("Y=Q="));
  EXPECT_FALSE(base64_decode(""));
}

TEST(Envelope, EncryptsTheChallengeBlobAsCephDid) {
  // cephx.md §2.2: 01 | magic | server_challenge | client_challenge.
  std::string why;
  auto ct = seal(golden::kAdminSecret, unhex("480f5f62021615d5 98696eef9c47d21c"), why);
  ASSERT_TRUE(ct) << why;
  EXPECT_EQ(hex(*ct), "6b7f1c5d523996947a5525e82e09cb57e461f4d6a1cb2b19ebac477ab1f10f8d");
  auto body = open(golden::kAdminSecret, *ct, why);
  ASSERT_TRUE(body) << why;
  EXPECT_EQ(hex(*body), "480f5f62021615d598696eef9c47d21c");
}

TEST(Envelope, PadsAFullBlockWhenAligned) {
  std::string why;
  auto ct = aes_cbc_encrypt(golden::kAdminSecret, Bytes(16, 1), why);
  ASSERT_TRUE(ct);
  EXPECT_EQ(ct->size(), 32u);
  auto pt = aes_cbc_decrypt(golden::kAdminSecret, *ct, why);
  ASSERT_TRUE(pt);
  EXPECT_EQ(*pt, Bytes(16, 1));
}

TEST(Envelope, RejectsWrongKeysAndBadLengths) {
  std::string why;
  auto ct = seal(golden::kAdminSecret, unhex("0102030405"), why);
  ASSERT_TRUE(ct);
  const Bytes wrong = unhex("0f1e2d3c4b5a69788796a5b4c3d2e1f0");
  EXPECT_FALSE(open(wrong, *ct, why));
  EXPECT_FALSE(why.empty());
  Bytes cut(ct->begin(), ct->end() - 1);
  EXPECT_FALSE(open(golden::kAdminSecret, cut, why));
  EXPECT_NE(why.find("multiple of 16"), std::string::npos) << why;
  EXPECT_FALSE(open(golden::kAdminSecret, Bytes{}, why));
  EXPECT_FALSE(seal(Bytes(8, 0), unhex("00"), why));  // a key shorter than 16 bytes
}

TEST(Hmac, ReproducesBothCapturedAuthSignatures) {
  const Sha256 c = hmac_sha256(golden::kSessionKey, golden::kServerSent);
  EXPECT_EQ(hex(c), hex(golden::kClientSignature));
  const Sha256 s = hmac_sha256(golden::kSessionKey, golden::kClientSent);
  EXPECT_EQ(hex(s), hex(golden::kServerSignature));
  // In two parts, as a transcript is kept.
  const ByteView all = golden::kServerSent;
  const ByteView parts[] = {all.subspan(0, 100), all.subspan(100)};
  EXPECT_EQ(hmac_sha256(golden::kSessionKey, parts), c);
}

// §12.2: the client's first secure frame (AUTH_SIGNATURE) with nonce B.
TEST(Gcm, DecryptsTheFirstCapturedSecureFrames) {
  const ByteView secret = golden::kConnectionSecret;
  const Bytes c2s = unhex(
      "a9aef70a15320e9c7457769b67a5659b9e8175ba5944baf2e0b509c838c92577"
      "294e6ae8f7fe2385500c0e24491b13cdfd6233e93c16af61d1edd374afb42a41"
      "eaa58d181ce2029621daf6b4543b0e8b5e1fb421eed5e019a068ba7ac6c1d9b0");
  GcmStream server_rx(secret.subspan(0, 16), secret.subspan(28, 12), true);
  Bytes plain;
  std::string why;
  ASSERT_TRUE(server_rx.open(c2s, plain, why)) << why;
  ASSERT_EQ(plain.size(), 80u);
  EXPECT_EQ(hex(ByteView(plain).subspan(0, 32)),
            "07012000000008000000000000000000000000000000000000000000a80c9872");
  EXPECT_EQ(hex(ByteView(plain).subspan(32, 32)), hex(golden::kClientSignature));
  // rev1: the counter advanced by one.
  EXPECT_EQ(hex(server_rx.nonce()), "8c004dcfef6f132b1d375cf7");

  // The server's frame #0 with nonce A, from the client's side.
  const Bytes s2c = unhex(
      "440128ee8c8ab3662780eda350c167445e347b3a8335d82065208cf53adcea18"
      "90f43c468f41b6f23a4ad3149acaeee82b84f01a7db7944676969d0e51eb7182"
      "29cba81f5837393075e338be4b2614c02593c80fb46b874c96a6d332d174352f");
  GcmStream client_rx(secret.subspan(0, 16), secret.subspan(16, 12), true);
  plain.clear();
  ASSERT_TRUE(client_rx.open(s2c, plain, why)) << why;
  EXPECT_EQ(hex(ByteView(plain).subspan(32, 32)), hex(golden::kServerSignature));

  // Re-encrypting the plaintext with a fresh tx stream gives the captured bytes.
  GcmStream client_tx(secret.subspan(0, 16), secret.subspan(28, 12), true);
  Bytes again;
  GcmStream server_rx2(secret.subspan(0, 16), secret.subspan(28, 12), true);
  Bytes p2;
  ASSERT_TRUE(server_rx2.open(c2s, p2, why));
  ASSERT_TRUE(client_tx.seal(p2, again, why));
  EXPECT_EQ(again, c2s);
}

TEST(Gcm, ATamperedTagOrWrongNonceFails) {
  const ByteView secret = golden::kConnectionSecret;
  GcmStream tx(secret.subspan(0, 16), secret.subspan(28, 12), true);
  Bytes ct;
  std::string why;
  ASSERT_TRUE(tx.seal(view("hello"), ct, why));
  Bytes bad = ct;
  bad.back() ^= 1;
  GcmStream rx(secret.subspan(0, 16), secret.subspan(28, 12), true);
  Bytes out;
  EXPECT_FALSE(rx.open(bad, out, why));
  EXPECT_NE(why.find("tag"), std::string::npos);
  GcmStream wrong_dir(secret.subspan(0, 16), secret.subspan(16, 12), true);
  EXPECT_FALSE(wrong_dir.open(ct, out, why));
  EXPECT_FALSE(rx.open(Bytes(5, 0), out, why));
}

TEST(Gcm, NoncesAdvanceByRevision) {
  // rev0: fixed += 1. Start one step before the wrap back to the initial value.
  const Bytes key(16, 3);
  Bytes nonce = unhex("ffffffff 0102030405060708");
  GcmStream tx(key, nonce, false);
  Bytes ct;
  std::string why;
  ASSERT_TRUE(tx.seal(view("a"), ct, why));
  EXPECT_EQ(hex(tx.nonce()), "000000000102030405060708");
  // rev1 from counter ffff..: wraps to 0, not yet the initial value.
  GcmStream r1(key, unhex("01000000 ffffffffffffffff"), true);
  ASSERT_TRUE(r1.seal(view("a"), ct, why));
  EXPECT_EQ(hex(r1.nonce()), "010000000000000000000000");
}

}  // namespace
}  // namespace siphon::auth
