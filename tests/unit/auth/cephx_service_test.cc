// The daemon's side of cephx against the lab capture (cephx.md §12):
// CEPHX_GET_ROTATING_KEY's reply of connection D (§12.5), opened with
// osd.0's key, and the authorizer of connection B (§12.3) as osd.0 sees it:
// the ticket opened with the rotating key osd:2, CephXAuthorize with the
// ticket's session key, and -- the cipher being deterministic (fixed IV) --
// the challenge and the reply osd.0 sent re-encoded byte for byte. Then the
// bad inputs: truncations, wrong keys, flipped bits; none may crash.
#include <gtest/gtest.h>

#include "golden.h"
#include "msgr/auth/cephx.h"

namespace siphon::auth {
namespace {

using golden::unhex;

const Bytes kOsd0Secret = unhex("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
const Bytes kOsdRotating2 = unhex("df736495be27ddf702303967d1ac8629");
const Bytes kOsdSessionKey = unhex("6baf4dcc9c398224e11a84d239c261c4");

// MAuthReply's result_bl on connection D (seq 4), taken from the decrypted
// secure MESSAGE: 0004 | status 0 | u32 160 + ciphertext.
const Bytes kRotatingReply = unhex("000400000000a0000000b262598ed1bc4dbffaef56968b3f7de6e473744f5208230429de01f380928e08dd7c2697a02a1554bc1d44e42e69ac5fc1aad8abdc716c81d868c01d02ad9c985404fc6d7c3f9b26841637f9c6f110fa95e161e2791a5f3e6481fcffbc7e610a31a5c77dd414c81ce8d0cdb50bb6751b5b97c943b7cdd1ae1b6c191f16e604a0a45243784d46bd04acf7586486829064f30facdf6905510165acb36631bdd5be");

// Connection B: the AUTH_REQUEST and AUTH_REQUEST_MORE payloads (174 B),
// the AUTH_REPLY_MORE payload (the raw 32 B enc_bl) and AUTH_DONE's (100 B).
const Bytes kAuthorizer1 = unhex(
    "0121100000000000000400000001020000000000000070000000d947a7b3d142a36256a1f7d4becd867783239df42c1ccbbeb30908ee4c"
    "9030211b6985ebb9ef8fbe57d4636481f3e5454ab00aff8530f86ab3ebc128c914baf70ff488532c0fd94e47d14147409e02436ba09043"
    "442d97ec29c2dc1781fb8608c9a7cfe07dfe20c2a020592f54aee55720000000cbc7d035529155dc1eaa9fd9d48e728963c4d4419bbf8e"
    "e3795510749d55fe0b");
const Bytes kAuthorizer2 = unhex(
    "0121100000000000000400000001020000000000000070000000d947a7b3d142a36256a1f7d4becd867783239df42c1ccbbeb30908ee4c"
    "9030211b6985ebb9ef8fbe57d4636481f3e5454ab00aff8530f86ab3ebc128c914baf70ff488532c0fd94e47d14147409e02436ba09043"
    "442d97ec29c2dc1781fb8608c9a7cfe07dfe20c2a020592f54aee55720000000cbc7d035529155dc1eaa9fd9d48e728927e7eea26e0ffc"
    "d50ce87de204fd1063");
const Bytes kChallengePayload = unhex("0bd3d091a0c1d786be28e43d4f16b12649347522745a948ff15f2b7a95494978");
const Bytes kAuthDonePayload = unhex(
    "600000000c9c2e488e566ccab652b3aa9a8f39e17caaef279b1ace0841c948a0b2c5bee79e41304cff8478188473abe6afce6b1f28b6c3"
    "2a31c4f530caa8ff53987fd1b748cdba341ccb529f7368420550bf55a8b0b9e0bd5609e203ec59e2592ba61127");
const Bytes kConnectionSecret = unhex(
    "f170b3730f470002523044f458d2ec6068cbd326d078c802782f37e2ab32db83dc5e8289d73c03924ccc61768835ec0cb135f7d667121c"
    "207f9d6c2b1e017476");
constexpr std::uint64_t kNonce = 0xa6b323d8a174bcccull;
constexpr std::uint64_t kChallenge = 0xef9aae02967d43a6ull;

TEST(CephxRotating, RequestIsTwoBytes) { EXPECT_EQ(hex(rotating_key_request()), "0004"); }

TEST(CephxRotating, CapturedReplyOpensWithOsd0sKey) {
  std::string why;
  const auto s = decode_rotating_key_reply(kOsd0Secret, kRotatingReply, why);
  ASSERT_TRUE(s) << why;
  ASSERT_EQ(s->secrets.size(), 3u);
  EXPECT_EQ(s->max_ver, 3u);
  const char* keys[] = {"d1c0fc60e0dbf565ecf6a910f82b9353", "df736495be27ddf702303967d1ac8629",
                        "3445d28869b5f2dc6d517e00ac9bcf5c"};
  const std::uint32_t expires[] = {1796120508, 1796124108, 1796127708};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s->secrets[i].secret_id, i + 1);
    EXPECT_EQ(hex(s->secrets[i].key.secret), keys[i]);
    EXPECT_EQ(s->secrets[i].expires_sec, expires[i]);
    EXPECT_EQ(s->secrets[i].expires_nsec, 328003995u);
  }
  // The encoder is its inverse, byte for byte (the cipher is deterministic).
  const auto again = rotating_key_reply(kOsd0Secret, *s, why);
  ASSERT_TRUE(again) << why;
  EXPECT_EQ(hex(*again), hex(kRotatingReply));
}

TEST(CephxRotating, RefusalsAndBadInputSayWhy) {
  std::string why;
  // client.admin asking: MAuthReply result -13 and the 6-byte header only.
  EXPECT_FALSE(decode_rotating_key_reply(kOsd0Secret, unhex("0004 f3ffffff"), why));
  EXPECT_NE(why.find("status -13"), std::string::npos) << why;
  EXPECT_FALSE(decode_rotating_key_reply(kOsd0Secret, unhex("0002 00000000"), why));
  EXPECT_NE(why.find("request type"), std::string::npos) << why;
  EXPECT_FALSE(decode_rotating_key_reply(golden::kAdminSecret, kRotatingReply, why));
  EXPECT_NE(why.find("our own key"), std::string::npos) << why;
  for (std::size_t n = 0; n < kRotatingReply.size(); ++n)
    EXPECT_FALSE(decode_rotating_key_reply(kOsd0Secret, ByteView(kRotatingReply).first(n), why)) << n;
  for (std::size_t i = 0; i < kRotatingReply.size(); ++i) {
    Bytes b = kRotatingReply;
    b[i] ^= 0x41;
    (void)decode_rotating_key_reply(kOsd0Secret, b, why);  // must not crash
  }
}

TEST(CephxAuthorizerServer, CapturedAuthorizerOpensWithTheRotatingKey) {
  std::string why;
  const auto a = decode_authorizer(kAuthorizer1, why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(a->global_id, 4129u);
  EXPECT_EQ(a->service_id, kServiceOsd);
  EXPECT_EQ(a->secret_id, 2u);
  const auto t = open_ticket(kOsdRotating2, a->ticket_ct, why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->entity_type, 8u);
  EXPECT_EQ(t->entity_id, "admin");
  EXPECT_EQ(t->global_id, 4129u);
  EXPECT_EQ(t->caps, "allow *");
  EXPECT_EQ(t->expires_sec - t->created_sec, 3600u);
  EXPECT_EQ(hex(t->session_key.secret), hex(kOsdSessionKey));
  const auto z = open_authorize(t->session_key.secret, a->authorize_ct, why);
  ASSERT_TRUE(z) << why;
  EXPECT_EQ(z->nonce, kNonce);
  EXPECT_FALSE(z->have_challenge);
  const auto a2 = decode_authorizer(kAuthorizer2, why);
  ASSERT_TRUE(a2) << why;
  const auto z2 = open_authorize(kOsdSessionKey, a2->authorize_ct, why);
  ASSERT_TRUE(z2) << why;
  EXPECT_TRUE(z2->have_challenge);
  EXPECT_EQ(z2->server_challenge_plus_one, kChallenge + 1);
  EXPECT_EQ(z2->nonce, kNonce);
}

TEST(CephxAuthorizerServer, ChallengeAndReplyAreTheCapturedBytes) {
  std::string why;
  const auto c = authorizer_challenge_payload(kOsdSessionKey, kChallenge, why);
  ASSERT_TRUE(c) << why;
  EXPECT_EQ(hex(*c), hex(kChallengePayload));
  const auto r = authorize_reply_payload(kOsdSessionKey, kNonce, kConnectionSecret, why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(hex(*r), hex(kAuthDonePayload));
  // And the client's decoders accept them.
  EXPECT_EQ(decode_authorizer_challenge(kOsdSessionKey, *c, why), kChallenge);
  EXPECT_EQ(decode_authorize_reply(kOsdSessionKey, *r, kNonce, why), kConnectionSecret);
  // crc mode: v1, no secret.
  const auto crc = authorize_reply_payload(kOsdSessionKey, kNonce, {}, why);
  ASSERT_TRUE(crc) << why;
  EXPECT_EQ(crc->size(), 36u);
  EXPECT_EQ(decode_authorize_reply(kOsdSessionKey, *crc, kNonce, why), Bytes{});
}

TEST(CephxAuthorizerServer, MintedTicketRoundTrips) {
  TicketInfo t;
  t.entity_type = 8;
  t.entity_id = "bench";
  t.global_id = 77;
  t.created_sec = 100;
  t.expires_sec = 3700;
  t.caps = "allow rw";
  t.session_key.secret = kOsdSessionKey;
  std::string why;
  const auto blob = mint_ticket_blob(kOsdRotating2, 2, t, why);
  ASSERT_TRUE(blob) << why;
  ServiceTicket st;
  st.service_id = kServiceOsd;
  st.session_key = t.session_key;
  st.ticket_blob = *blob;
  const auto payload = authorizer_payload(77, st, 5, std::nullopt, why);
  ASSERT_TRUE(payload) << why;
  const auto a = decode_authorizer(*payload, why);
  ASSERT_TRUE(a) << why;
  EXPECT_EQ(a->secret_id, 2u);
  const auto back = open_ticket(kOsdRotating2, a->ticket_ct, why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->entity_id, "bench");
  EXPECT_EQ(back->caps, "allow rw");
  EXPECT_EQ(back->expires_sec, 3700u);
  EXPECT_EQ(back->session_key.secret, kOsdSessionKey);
}

TEST(CephxAuthorizerServer, BadInputIsRefusedNeverCrashes) {
  std::string why;
  // Truncated anywhere: refused.
  for (std::size_t n = 0; n < kAuthorizer1.size(); ++n)
    EXPECT_FALSE(decode_authorizer(ByteView(kAuthorizer1).first(n), why)) << n;
  Bytes longer = kAuthorizer1;
  longer.push_back(0);
  EXPECT_FALSE(decode_authorizer(longer, why));
  EXPECT_NE(why.find("after the authorizer"), std::string::npos) << why;
  const auto a = decode_authorizer(kAuthorizer1, why);
  ASSERT_TRUE(a) << why;
  // The wrong rotating key (osd:1), or the daemon's own key: refused.
  EXPECT_FALSE(open_ticket(unhex("d1c0fc60e0dbf565ecf6a910f82b9353"), a->ticket_ct, why));
  EXPECT_NE(why.find("ticket blob"), std::string::npos) << why;
  EXPECT_FALSE(open_ticket(kOsd0Secret, a->ticket_ct, why));
  // CephXAuthorize under another key: refused.
  EXPECT_FALSE(open_authorize(kOsdRotating2, a->authorize_ct, why));
  // Every truncation of the ticket and of CephXAuthorize: refused.
  for (std::size_t n = 0; n < a->ticket_ct.size(); ++n)
    EXPECT_FALSE(open_ticket(kOsdRotating2, ByteView(a->ticket_ct).first(n), why)) << n;
  for (std::size_t n = 0; n < a->authorize_ct.size(); ++n)
    EXPECT_FALSE(open_authorize(kOsdSessionKey, ByteView(a->authorize_ct).first(n), why)) << n;
  // Flipped bits anywhere: no crash; the first block (version, magic) refused.
  for (std::size_t i = 0; i < kAuthorizer1.size(); ++i) {
    Bytes b = kAuthorizer1;
    b[i] ^= 0x41;
    auto d = decode_authorizer(b, why);
    if (!d) continue;
    auto t = open_ticket(kOsdRotating2, d->ticket_ct, why);
    if (t) (void)open_authorize(t->session_key.secret, d->authorize_ct, why);
  }
  for (std::size_t i = 0; i < 16; ++i) {
    Bytes ct = a->ticket_ct;
    ct[i] ^= 0x41;
    EXPECT_FALSE(open_ticket(kOsdRotating2, ct, why)) << i;
  }
}

}  // namespace
}  // namespace siphon::auth
