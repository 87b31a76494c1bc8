// Finding the entity's key as Ceph does (compat/keyring.h): the keyring
// search list with $cluster/$name, key and keyfile, -k on the command line,
// the permission warning, and the errors that name entity and file.
#include "compat/keyring.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "msgr/base/error.h"

namespace siphon::compat {
namespace {

constexpr const char* kAdmin = "AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w==";
constexpr const char* kOsd0 = "AQAA8VNlAAAAABAAoKGio6SlpqeoqaqrrK2urw==";

struct KeyringFiles : ::testing::Test {
  std::filesystem::path dir;
  void SetUp() override {
    char tmpl[] = "/tmp/siphon-keyring-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string p = (dir / name).string();
    std::ofstream(p) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }
  Config load(const std::string& conf_text, const std::string& name = "client.admin",
              std::vector<std::string> argv = {}) {
    Diagnostics d;
    argv.insert(argv.begin(), {"-n", name});
    ConfigRequest req = ConfigRequest::from_args(argv, nullptr, nullptr, d);
    req.pid = "1";
    req.hostname = "h";
    req.home = "/nonexistent";
    Config cfg = Config::load_text(conf_text, (dir / "prod.conf").string(), req, d);
    EXPECT_FALSE(d.has_errors()) << d.to_string(Severity::error);
    return cfg;
  }
};

TEST_F(KeyringFiles, TheDefaultListIsCephs) {
  const Config cfg = load("");
  EXPECT_EQ(cfg.get<Opt::keyring>(),
            "/etc/ceph/prod.client.admin.keyring,/etc/ceph/prod.keyring,/etc/ceph/keyring,/etc/ceph/keyring.bin,");
}

TEST_F(KeyringFiles, SearchesTheListWithClusterAndNameExpanded) {
  write("prod.osd.0.keyring", std::string("[osd.0]\n\tkey = ") + kOsd0 + "\n");
  const std::string conf = "[global]\nkeyring = " + dir.string() + "/missing," + dir.string() +
                           "/$cluster.$name.keyring\n";
  const KeyLookup k = find_key(load(conf, "osd.0"));
  ASSERT_TRUE(k.key);
  EXPECT_EQ(k.key->to_base64(), kOsd0);
  EXPECT_EQ(k.source, "keyring " + dir.string() + "/prod.osd.0.keyring");
  EXPECT_TRUE(k.warnings.empty());
}

TEST_F(KeyringFiles, DashKOnTheCommandLine) {
  const std::string p = write("k", std::string("[client.admin]\nkey = ") + kAdmin + "\n");
  const ClientAuth a = client_auth(load("", "client.admin", {"-k", p}));
  EXPECT_EQ(a.methods, (std::vector<std::uint32_t>{proto::kAuthMethodCephx, proto::kAuthMethodNone}));
  EXPECT_EQ(a.secret.size(), 16u);
  EXPECT_EQ(a.key_source, "keyring " + p);
  // Ceph's ms_mon_client_mode default, "secure crc", in its order.
  EXPECT_EQ(a.mon_modes, (std::vector<std::uint32_t>{proto::kConModeSecure, proto::kConModeCrc}));
}

TEST_F(KeyringFiles, KeyAndKeyfileWin) {
  const std::string p = write("k", std::string("[client.admin]\nkey = ") + kOsd0 + "\n");
  const std::string kf = write("kf", std::string(kAdmin) + "\n");
  KeyLookup k = find_key(load("[global]\nkeyring = " + p + "\nkeyfile = " + kf + "\n"));
  ASSERT_TRUE(k.key);
  EXPECT_EQ(k.key->to_base64(), kAdmin);
  EXPECT_EQ(k.source, "keyfile " + kf);
  k = find_key(load(std::string("[global]\nkeyring = ") + p + "\nkey = " + kAdmin + "\n"));
  EXPECT_EQ(k.source, "option key");
}

TEST_F(KeyringFiles, NoKeyringDropsCephxAndNoMethodLeftIsAnError) {
  const std::string missing = (dir / "none").string();
  ClientAuth a = client_auth(load("[global]\nkeyring = " + missing + "\n"));
  EXPECT_EQ(a.methods, (std::vector<std::uint32_t>{proto::kAuthMethodNone}));
  EXPECT_NE(a.key_source.find("no keyring found at " + missing), std::string::npos);
  try {
    client_auth(load("[global]\nkeyring = " + missing + "\nauth_client_required = cephx\n"));
    FAIL() << "no method left must throw";
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find("client.admin"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

TEST_F(KeyringFiles, AKeyringWithoutTheEntityOrUnparsableNamesBoth) {
  const std::string p = write("k", std::string("[client.admin]\nkey = ") + kAdmin + "\n");
  try {
    find_key(load("[global]\nkeyring = " + p + "\n", "client.bob"));
    FAIL();
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find("keyring " + p + " has no key for client.bob (it holds: client.admin)"),
              std::string::npos)
        << e.what();
  }
  const std::string bad = write("bad", "[client.admin]\nkey = nope\n");
  try {
    find_key(load("[global]\nkeyring = " + bad + "\n"));
    FAIL();
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find(bad + ":2: bad key for client.admin"), std::string::npos) << e.what();
  }
  try {
    find_key(load("[global]\nkey = AQAA\n"));
    FAIL();
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find("option key"), std::string::npos) << e.what();
  }
}

TEST_F(KeyringFiles, AReadableKeyringIsWarnedAbout) {
  const std::string p = write("k", std::string("[client.admin]\nkey = ") + kAdmin + "\n", 0644);
  const KeyLookup k = find_key(load("[global]\nkeyring = " + p + "\n"));
  ASSERT_TRUE(k.key);
  ASSERT_EQ(k.warnings.size(), 1u);
  EXPECT_NE(k.warnings[0].find(p + " holds secret keys but is readable by everyone (mode 0644)"), std::string::npos)
      << k.warnings[0];
  const std::string g = write("g", std::string("[client.admin]\nkey = ") + kAdmin + "\n", 0640);
  EXPECT_NE(find_key(load("[global]\nkeyring = " + g + "\n")).warnings.at(0).find("by its group"),
            std::string::npos);
}

}  // namespace
}  // namespace siphon::compat
