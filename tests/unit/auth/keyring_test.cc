// The text keyring format (cephx.md §1.2).
#include <gtest/gtest.h>

#include "golden.h"
#include "msgr/auth/keyring.h"

namespace siphon::auth {
namespace {

TEST(Keyring, ParsesTheLabKeyring) {
  const std::string text =
      "[mon.]\n\tkey = AQAA8VNlAAAAABAADx4tPEtaaXiHlqW0w9Lh8A==\n\tcaps mon = \"allow *\"\n"
      "[client.admin]\n"
      "\tkey = AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w==\n"
      "\tcaps mon = \"allow *\"   # comment\n"
      "\tcaps_osd = \"allow *\"\n"
      "\tauid = 0\n"
      "; a comment\n";
  std::string why;
  auto kr = Keyring::parse(text, "lab.keyring", why);
  ASSERT_TRUE(kr) << why;
  const KeyringEntry* admin = kr->find("client.admin");
  ASSERT_NE(admin, nullptr);
  EXPECT_EQ(admin->key.secret, golden::kAdminSecret);
  EXPECT_EQ(admin->caps.at("mon"), "allow *");
  EXPECT_EQ(admin->caps.at("osd"), "allow *");
  ASSERT_NE(kr->find("mon."), nullptr);
  EXPECT_EQ(hex(kr->find("mon.")->key.secret), "0f1e2d3c4b5a69788796a5b4c3d2e1f0");
  EXPECT_EQ(kr->find("client.nobody"), nullptr);
}

TEST(Keyring, SkipsGlobal) {
  std::string why;
  auto kr = Keyring::parse("[global]\nfoo = bar\n[client.x]\nkey = AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w==\n",
                           "k", why);
  ASSERT_TRUE(kr) << why;
  EXPECT_EQ(kr->entries().size(), 1u);
}

TEST(Keyring, ErrorsNameFileAndLine) {
  std::string why;
  EXPECT_FALSE(Keyring::parse("[client.admin]\nkey = AQAA\n", "/etc/ceph/x.keyring", why));
  EXPECT_EQ(why.rfind("/etc/ceph/x.keyring:2: bad key for client.admin", 0), 0u) << why;
  EXPECT_FALSE(Keyring::parse("[client.admin]\nkye = AQAA\n", "k", why));
  EXPECT_NE(why.find("unknown keyring setting 'kye'"), std::string::npos) << why;
  EXPECT_FALSE(Keyring::parse("[admin]\n", "k", why));
  EXPECT_NE(why.find("not an entity name"), std::string::npos) << why;
  EXPECT_FALSE(Keyring::parse("key = x\n", "k", why));
  EXPECT_FALSE(Keyring::parse("[client.a]\ncaps mon = x\n", "k", why));
  EXPECT_NE(why.find("has no key"), std::string::npos) << why;
  EXPECT_FALSE(Keyring::parse("[client.a\n", "k", why));
}

}  // namespace
}  // namespace siphon::auth
