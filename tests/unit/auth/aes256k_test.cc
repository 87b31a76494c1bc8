// aes256k (Ceph key type 2, RFC 8009 aes256-cts-hmac-sha384-192) against the
// RFC's published test vectors (RFC 8009 Appendix A: key derivation and
// encryption with key usage 2), plus the refusals a damaged, short or
// misaddressed ciphertext gets.
#include "msgr/auth/aes256k.h"

#include <gtest/gtest.h>

#include <string>

namespace siphon::auth {
namespace {

Bytes unhex(std::string_view h) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return out;
}

// RFC 8009 Appendix A, enctype aes256-cts-hmac-sha384-192.
const Bytes kBaseKey = unhex("6D404D37FAF79F9DF0D33568D320669800EB4836472EA8A026D16B7182460C52");

struct Vector {
  const char* name;
  const char* confounder;
  const char* plaintext;
  const char* ciphertext;  // AES output | truncated HMAC
};

const Vector kVectors[] = {
    {"empty plaintext", "F764E9FA15C276478B2C7D0C4E5F58E4", "",
     "41F53FA5BFE7026D91FAF9BE959195A058707273A96A40F0A01960621AC612748B9BBFBE7EB4CE3C"},
    {"shorter than a block", "B80D3251C1F6471494256FFE712D0B9A", "000102030405",
     "4ED7B37C2BCAC8F74F23C1CF07E62BC7B75FB3F637B9F559C7F664F69EAB7B6092237526EA0D1F61CB20D69D10F2"},
    {"one block", "53BF8A0D105265D4E276428624CE5E63", "000102030405060708090A0B0C0D0E0F",
     "BC47FFEC7998EB91E8115CF8D19DAC4BBBE2E163E87DD37F49BECA92027764F68CF51F14D798C2273F35DF574D1F932E40C4FF255B36A266"},
    {"more than a block", "763E65367E864F02F55153C7E3B58AF1", "000102030405060708090A0B0C0D0E0F1011121314",
     "40013E2DF58E8751957D2878BCD2D6FE101CCFD556CB1EAE79DB3C3EE86429F2B2A602AC86FEF6ECB647D6295FAE077A1FEB517508D2C16B4192E01F62"},
};

TEST(Aes256k, DerivedKeysMatchRfc8009) {
  std::string why;
  const auto k = aes256k_derive(kBaseKey, 2, why);
  ASSERT_TRUE(k) << why;
  EXPECT_EQ(Bytes(k->ke.begin(), k->ke.end()), unhex("56AB22BEE63D82D7BC5227F6773F8EA7A5EB1C825160C38312980C442E5C7E49"));
  EXPECT_EQ(Bytes(k->ki.begin(), k->ki.end()), unhex("69B16514E3CD8E56B82010D5C73012B622C4D00FFC23ED1F"));
  // Kc (0x99), which Ceph does not use, checks the KDF with a third label.
  const Bytes kc_label = {0, 0, 0, 2, 0x99};
  EXPECT_EQ(krb5_kdf_sha384(kBaseKey, kc_label, 24), unhex("EF5718BE86CC84963D8BBB5031E9F5C4BA41F28FAF69E73D"));
}

TEST(Aes256k, EncryptionMatchesRfc8009AndOpens) {
  std::string why;
  const auto k = aes256k_derive(kBaseKey, 2, why);
  ASSERT_TRUE(k) << why;
  for (const Vector& v : kVectors) {
    SCOPED_TRACE(v.name);
    const Bytes plain = unhex(v.plaintext);
    const auto sealed = aes256k_seal(*k, plain, unhex(v.confounder), why);
    ASSERT_TRUE(sealed) << why;
    EXPECT_EQ(hex(*sealed), hex(unhex(v.ciphertext)));
    EXPECT_EQ(sealed->size(), plain.size() + kAes256kConfounderSize + kAes256kHmacSize);
    const auto opened = aes256k_open(*k, unhex(v.ciphertext), why);
    ASSERT_TRUE(opened) << why;
    EXPECT_EQ(*opened, plain);
  }
}

TEST(Aes256k, RandomConfoundersRoundTripAtEveryLength) {
  std::string why;
  const auto k = aes256k_derive(kBaseKey, 7, why);
  ASSERT_TRUE(k) << why;
  for (std::size_t n = 0; n <= 70; ++n) {
    Bytes plain(n);
    for (std::size_t i = 0; i < n; ++i) plain[i] = static_cast<std::uint8_t>(i * 31 + 5);
    const auto a = aes256k_seal(*k, plain, {}, why);
    const auto b = aes256k_seal(*k, plain, {}, why);
    ASSERT_TRUE(a && b) << why;
    EXPECT_NE(*a, *b) << "a fresh confounder per message, length " << n;
    const auto back = aes256k_open(*k, *a, why);
    ASSERT_TRUE(back) << n << ": " << why;
    EXPECT_EQ(*back, plain);
  }
}

TEST(Aes256k, DamageWrongUsageAndShortInputsAreRefused) {
  std::string why;
  const auto k = aes256k_derive(kBaseKey, 2, why);
  const auto other = aes256k_derive(kBaseKey, 3, why);
  ASSERT_TRUE(k && other);
  const Bytes good = unhex(kVectors[3].ciphertext);
  for (std::size_t i = 0; i < good.size(); ++i) {
    Bytes bad = good;
    bad[i] ^= 0x01;
    EXPECT_FALSE(aes256k_open(*k, bad, why)) << "bit flip at byte " << i;
    EXPECT_NE(why.find("integrity"), std::string::npos) << why;
  }
  EXPECT_FALSE(aes256k_open(*other, good, why)) << "another key usage derives other keys";
  EXPECT_FALSE(aes256k_open(*k, Bytes(good.begin(), good.begin() + 39), why));
  EXPECT_NE(why.find("shorter"), std::string::npos) << why;
  EXPECT_FALSE(aes256k_open(*k, {}, why));
  EXPECT_FALSE(aes256k_derive(Bytes(31, 1), 2, why));
  EXPECT_NE(why.find("32"), std::string::npos) << why;
  EXPECT_FALSE(aes256k_seal(*k, Bytes(4, 0), Bytes(15, 0), why)) << "a confounder is one block";
}

}  // namespace
}  // namespace siphon::auth
