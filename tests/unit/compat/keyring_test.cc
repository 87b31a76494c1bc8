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

std::vector<std::uint8_t> secret_of(const char* base64) {
  std::string why;
  const auto k = auth::CryptoKey::from_base64(base64, why);
  return k ? k->secret : std::vector<std::uint8_t>{};
}

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

// A daemon's accepting side from ceph.conf: the whole keyring found by the
// client's search (here -k) is the set of entities allowed in; methods and
// modes split by peer kind as Ceph's AuthRegistry splits them.
TEST_F(KeyringFiles, ServerAuthFromTheKeyringAndTheOptions) {
  const std::string p = write("k", std::string("[client.admin]\nkey = ") + kAdmin + "\n[client.bench]\nkey = " +
                                       kOsd0 + "\n");
  const ServerAuth a =
      server_auth(load("[global]\nauth_service_required = cephx\nauth_cluster_required = cephx, none\n"
                       "ms_service_mode = secure\nauth_mon_ticket_ttl = 600\n",
                       "osd.0", {"-k", p}));
  EXPECT_EQ(a.service_methods, (std::vector<std::uint32_t>{proto::kAuthMethodCephx}));
  EXPECT_EQ(a.cluster_methods, (std::vector<std::uint32_t>{proto::kAuthMethodCephx, proto::kAuthMethodNone}));
  EXPECT_EQ(a.service_modes, (std::vector<std::uint32_t>{proto::kConModeSecure}));
  EXPECT_EQ(a.cluster_modes, (std::vector<std::uint32_t>{proto::kConModeCrc, proto::kConModeSecure}));  // default
  ASSERT_EQ(a.keys.size(), 2u);
  EXPECT_EQ(a.keys.at("client.admin"), secret_of(kAdmin));
  EXPECT_EQ(a.keys.at("client.bench"), secret_of(kOsd0));
  EXPECT_EQ(a.keyring_source, "keyring " + p);
  EXPECT_EQ(a.ticket_ttl_sec, 600u);
  EXPECT_EQ(describe(a), "auth from clients cephx (modes secure), from daemons cephx, none (modes crc secure); "
                         "cephx keys of 2 entities from keyring " + p);
  // A monitor's name takes the mon modes (defaults: secure crc).
  const ServerAuth mon = server_auth(load("", "mon.a", {"-k", p}));
  EXPECT_EQ(mon.service_modes, (std::vector<std::uint32_t>{proto::kConModeSecure, proto::kConModeCrc}));
  EXPECT_EQ(mon.cluster_modes, (std::vector<std::uint32_t>{proto::kConModeSecure, proto::kConModeCrc}));
  // Ceph's defaults with a keyring: cephx only, from everyone; 72 h.
  EXPECT_EQ(mon.service_methods, (std::vector<std::uint32_t>{proto::kAuthMethodCephx}));
  EXPECT_EQ(mon.cluster_methods, (std::vector<std::uint32_t>{proto::kAuthMethodCephx}));
  EXPECT_EQ(mon.ticket_ttl_sec, 259200u);
  EXPECT_EQ(server_auth(load("[global]\nauth_mon_ticket_ttl = 0\n", "osd.0", {"-k", p})).ticket_ttl_sec, 1u);
  // key (or keyfile) is a keyring of one: the daemon's own entry.
  const ServerAuth own = server_auth(load(std::string("[global]\nkey = ") + kAdmin + "\n", "osd.3"));
  ASSERT_EQ(own.keys.size(), 1u);
  EXPECT_EQ(own.keys.count("osd.3"), 1u);
  EXPECT_EQ(own.keyring_source, "option key");
}

// No keyring: cephx is dropped as in Ceph. A list left empty is an error
// when it was set (naming option, entity and the files searched), and auth
// none with a warning at Ceph's default.
TEST_F(KeyringFiles, ServerAuthWithoutAKeyring) {
  const std::string missing = (dir / "none").string();
  const ServerAuth dflt = server_auth(load("[global]\nkeyring = " + missing + "\n", "osd.0"));
  EXPECT_EQ(dflt.service_methods, (std::vector<std::uint32_t>{proto::kAuthMethodNone}));
  EXPECT_EQ(dflt.cluster_methods, (std::vector<std::uint32_t>{proto::kAuthMethodNone}));
  EXPECT_TRUE(dflt.keys.empty());
  const ServerAuth with_none =
      server_auth(load("[global]\nkeyring = " + missing + "\nauth_service_required = cephx, none\n", "osd.0"));
  EXPECT_EQ(with_none.service_methods, (std::vector<std::uint32_t>{proto::kAuthMethodNone}));
  try {
    server_auth(load("[global]\nkeyring = " + missing + "\nauth_service_required = cephx\n", "osd.0"));
    FAIL() << "cephx required with no keyring must throw";
  } catch (const SetupError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("auth_service_required = cephx"), std::string::npos) << what;
    EXPECT_NE(what.find("osd.0 requires cephx of its peers, but no keyring was found (searched " + missing + ")"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("-k/--keyring"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace siphon::compat
