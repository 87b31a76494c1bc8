// cephx with aes256k keys (Ceph key type 2, 19.2.6 / 20.2.4 and later):
// the keyring form, the envelope under each key usage, the challenge proof
// and the mon-style and authorizer exchanges end to end at the function
// level. No Ceph here speaks aes256k (the lab's is 16.2.15), so these are
// round trips and refusals; the cipher itself is pinned by RFC 8009's
// vectors (aes256k_test.cc) and the layout by docs/security.md §5e.
#include <gtest/gtest.h>

#include <algorithm>

#include "golden.h"
#include "msgr/auth/cephx.h"
#include "msgr/auth/keyring.h"

namespace siphon::auth {
namespace {

using golden::unhex;

// RFC 8009's base key as an entity secret, and a second one.
const CryptoKey kClient{kCryptoAes256k, 1700000000, 0,
                        unhex("6d404d37faf79f9df0d33568d320669800eb4836472ea8a026d16b7182460c52")};
const CryptoKey kOther{kCryptoAes256k, 1700000000, 0,
                       unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")};

TEST(Aes256kKey, KeyringFormRoundTripsAndIsChecked) {
  // Ceph prints type-2 keys as base64 of the same CryptoKey encoding:
  // u16 2 | utime | u16 32 | secret, so they start "Ag".
  const std::string b64 = kClient.to_base64();
  EXPECT_EQ(b64.substr(0, 2), "Ag");
  EXPECT_EQ(hex(kClient.encode()).substr(0, 24), "020000f15365000000002000");
  std::string why;
  const auto k = CryptoKey::from_base64(b64, why);
  ASSERT_TRUE(k) << why;
  EXPECT_EQ(*k, kClient);

  CryptoKey shorty = kClient;
  shorty.secret.resize(31);
  EXPECT_FALSE(CryptoKey::from_base64(shorty.to_base64(), why));
  EXPECT_NE(why.find("aes256k secret has 31 bytes, needs at least 32"), std::string::npos) << why;
  CryptoKey three = kClient;
  three.type = 3;
  EXPECT_FALSE(CryptoKey::from_base64(three.to_base64(), why));
  EXPECT_NE(why.find("key type 3"), std::string::npos) << why;

  const std::string text = "[client.k256]\n\tkey = " + b64 + "\n\tcaps osd = \"allow *\"\n[client.aes]\n\tkey = " +
                           std::string(golden::kAdminBase64) + "\n";
  const auto kr = Keyring::parse(text, "mixed.keyring", why);
  ASSERT_TRUE(kr) << why;
  ASSERT_NE(kr->find("client.k256"), nullptr);
  EXPECT_EQ(kr->find("client.k256")->key.type, kCryptoAes256k);
  EXPECT_EQ(kr->find("client.aes")->key.type, kCryptoAes);
}

TEST(Aes256kEnvelope, SealsUnderAUsageAndOpensOnlyUnderIt) {
  const Bytes body = unhex("0102030405060708090a");
  std::string why;
  const auto ct = seal(kClient, kUsageTicketSessionKey, body, why);
  ASSERT_TRUE(ct) << why;
  // 01 | magic | body, plus the confounder and the 24-byte HMAC.
  EXPECT_EQ(ct->size(), 9 + body.size() + kAes256kConfounderSize + kAes256kHmacSize);
  const auto again = seal(kClient, kUsageTicketSessionKey, body, why);
  ASSERT_TRUE(again) << why;
  EXPECT_NE(*ct, *again) << "a random confounder each time";
  EXPECT_EQ(open(kClient, kUsageTicketSessionKey, *ct, why), body);
  EXPECT_EQ(open(kClient, kUsageTicketSessionKey, *again, why), body);

  EXPECT_FALSE(open(kClient, kUsageAuthConnectionSecret, *ct, why)) << "another usage derives other keys";
  EXPECT_NE(why.find("integrity check failed"), std::string::npos) << why;
  EXPECT_FALSE(open(kOther, kUsageTicketSessionKey, *ct, why));
  EXPECT_FALSE(open(KeyRef(kCryptoAes, kClient.secret), kUsageTicketSessionKey, *ct, why)) << "read as AES";
  for (std::size_t n = 0; n < ct->size(); ++n)
    EXPECT_FALSE(open(kClient, kUsageTicketSessionKey, ByteView(*ct).first(n), why)) << n;

  // The cipher is RFC 8009's: the primitive opens what the envelope sealed,
  // and finds 01 | magic | body inside.
  std::string w;
  const auto keys = aes256k_derive(kClient.secret, kUsageTicketSessionKey, w);
  ASSERT_TRUE(keys) << w;
  const auto inner = aes256k_open(*keys, *ct, w);
  ASSERT_TRUE(inner) << w;
  EXPECT_EQ(hex(*inner), "0155aa2688ad9c00ff" + hex(body));

  // With the length prefix (encode_encrypt).
  const auto wl = seal_with_length(kClient, kUsageAuthorizeReply, body, why);
  ASSERT_TRUE(wl) << why;
  EXPECT_EQ(wl->size(), 4 + ct->size());

  // An AES KeyRef is the old envelope, byte for byte (usage ignored).
  EXPECT_EQ(seal(KeyRef(golden::kAdminSecret), kUsageTicketInfo, body, why), seal(golden::kAdminSecret, body, why));
  // Type none or unknown: refused with the reason.
  EXPECT_FALSE(seal(KeyRef(kCryptoNone, kClient.secret), kUsageNone, body, why));
  EXPECT_NE(why.find("type 0"), std::string::npos) << why;
}

TEST(Aes256kProof, IsTheFoldedHmacOfTheChallenges) {
  std::string why;
  const auto p = challenge_proof(kClient, 0x1111222233334444ull, 0x5555666677778888ull, why);
  ASSERT_TRUE(p) << why;
  // HMAC-SHA256(secret, le64 server | le64 client), four LE words XORed.
  const Sha256 mac = hmac_sha256(kClient.secret, unhex("4444333322221111" "8888777766665555"));
  std::uint64_t want = 0;
  for (std::size_t w = 0; w < 4; ++w) {
    std::uint64_t v = 0;
    for (std::size_t i = 8; i-- > 0;) v = (v << 8) | mac[w * 8 + i];
    want ^= v;
  }
  EXPECT_EQ(*p, want);
  EXPECT_EQ(challenge_proof(kClient, 0x1111222233334444ull, 0x5555666677778888ull, why), p) << "deterministic";
  EXPECT_NE(challenge_proof(kOther, 0x1111222233334444ull, 0x5555666677778888ull, why), p);
  EXPECT_NE(challenge_proof(KeyRef(kCryptoAes, kClient.secret), 0x1111222233334444ull, 0x5555666677778888ull, why),
            p);
}

// The key-based exchange (cephx.md §8.4a) with an aes256k entity key: the
// session key takes the client's type, each structure opens under its usage.
TEST(Aes256kExchange, MonStyleExchangeRoundTrips) {
  std::string why;
  const std::uint64_t server_challenge = 0x0123456789abcdefull;
  const auto req_bytes = authenticate_payload(kClient, server_challenge, 42, kDefaultWantKeys, why);
  ASSERT_TRUE(req_bytes) << why;
  const auto req = decode_authenticate(*req_bytes, why);
  ASSERT_TRUE(req) << why;
  EXPECT_EQ(challenge_proof(kClient, server_challenge, req->client_challenge, why), req->key);

  CryptoKey session{kCryptoAes256k, 5, 6, Bytes(kAes256kKeySize)};
  random_bytes(session.secret);
  Bytes secret(kConnectionSecretSize);
  random_bytes(secret);
  const auto done = mon_auth_done_payload(kClient, session, 3600, secret, why);
  ASSERT_TRUE(done) << why;
  const auto r = decode_mon_auth_done(kClient, *done, why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(r->auth.session_key, session);
  EXPECT_EQ(r->auth.validity_sec, 3600u);
  EXPECT_EQ(r->connection_secret, secret);

  // A wrong key of the same type, or the right bytes read as AES, fail
  // with a reason; an aes256k session key under 32 bytes cannot seal.
  EXPECT_FALSE(decode_mon_auth_done(kOther, *done, why));
  EXPECT_NE(why.find("integrity check failed"), std::string::npos) << why;
  EXPECT_FALSE(decode_mon_auth_done(KeyRef(kCryptoAes, kClient.secret), *done, why));
  CryptoKey short_session = session;
  short_session.secret.resize(16);
  EXPECT_FALSE(mon_auth_done_payload(kClient, short_session, 3600, secret, why));
  EXPECT_NE(why.find("32"), std::string::npos) << why;
}

// The authorizer (§4, §8.4b) with an aes256k service key and session key,
// and the usages kept apart: a challenge does not open as a reply.
TEST(Aes256kExchange, AuthorizerRoundTripsAndKeepsUsagesApart) {
  TicketInfo t;
  t.entity_type = 8;
  t.entity_id = "k256";
  t.global_id = 9;
  t.created_sec = 100;
  t.expires_sec = 3700;
  t.caps = "allow *";
  t.session_key = CryptoKey{kCryptoAes256k, 100, 0, Bytes(kAes256kKeySize, 0x5a)};
  std::string why;
  const auto blob = mint_ticket_blob(kOther, kLongTermSecretId, t, why);
  ASSERT_TRUE(blob) << why;
  ServiceTicket st;
  st.service_id = kServiceOsd;
  st.session_key = t.session_key;
  st.ticket_blob = *blob;
  const auto payload = authorizer_payload(9, st, 777, std::nullopt, why);
  ASSERT_TRUE(payload) << why;
  const auto a = decode_authorizer(*payload, why);
  ASSERT_TRUE(a) << why;
  const auto opened = open_ticket(kOther, a->ticket_ct, why);
  ASSERT_TRUE(opened) << why;
  EXPECT_EQ(opened->session_key, t.session_key);
  EXPECT_EQ(opened->caps, "allow *");
  EXPECT_FALSE(open_ticket(kClient, a->ticket_ct, why));
  const auto z = open_authorize(opened->session_key, a->authorize_ct, why);
  ASSERT_TRUE(z) << why;
  EXPECT_EQ(z->nonce, 777u);

  const auto c = authorizer_challenge_payload(opened->session_key, 0xabcdef, why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(decode_authorizer_challenge(st.session_key, *c, why), 0xabcdefu);
  Bytes as_reply;
  const std::uint32_t n = static_cast<std::uint32_t>(c->size());
  for (int i = 0; i < 4; ++i) as_reply.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  as_reply.insert(as_reply.end(), c->begin(), c->end());
  EXPECT_FALSE(decode_authorize_reply(st.session_key, as_reply, 0xabcdef - 1, why)) << "usage 0x11 is not 0x12";

  const Bytes secret(kConnectionSecretSize, 0x33);
  const auto reply = authorize_reply_payload(opened->session_key, z->nonce, secret, why);
  ASSERT_TRUE(reply) << why;
  EXPECT_EQ(decode_authorize_reply(st.session_key, *reply, 777, why), secret);
}

TEST(Aes256kExchange, RotatingSecretsRoundTrip) {
  RotatingSecrets s;
  s.max_ver = 2;
  s.secrets.push_back({1, CryptoKey{kCryptoAes256k, 1, 0, Bytes(32, 1)}, 10, 0});
  s.secrets.push_back({2, CryptoKey{kCryptoAes, 1, 0, Bytes(16, 2)}, 20, 0});
  std::string why;
  const auto reply = rotating_key_reply(kClient, s, why);
  ASSERT_TRUE(reply) << why;
  const auto back = decode_rotating_key_reply(kClient, *reply, why);
  ASSERT_TRUE(back) << why;
  ASSERT_EQ(back->secrets.size(), 2u);
  EXPECT_EQ(back->secrets[0].key, s.secrets[0].key);
  EXPECT_EQ(back->secrets[1].key, s.secrets[1].key);
  EXPECT_FALSE(decode_rotating_key_reply(kOther, *reply, why));
}

}  // namespace
}  // namespace siphon::auth
