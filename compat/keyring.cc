#include "compat/keyring.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "compat/values.h"
#include "msgr/auth/keyring.h"
#include "msgr/base/error.h"
#include "msgr/base/log.h"

namespace siphon::compat {
namespace {

[[noreturn]] void fail(std::string cause, std::string remedy) {
  throw SetupError(make_error_code(errc::config_error), std::move(cause), std::move(remedy));
}

// Reads a whole file; nullopt with errno's text when it cannot.
std::optional<std::string> read_file(const std::string& path, std::string& why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    why = "read error";
    return std::nullopt;
  }
  return ss.str();
}

// Secrets belong to their owner: say so when group or others may read one
// (ceph-authtool creates keyrings 0600).
void check_mode(const std::string& path, std::vector<std::string>& warnings) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0)
    warnings.push_back(fmt::format("{} holds secret keys but is readable by {} (mode {:04o}); "
                                   "chmod 600 it", path,
                                   (st.st_mode & S_IROTH) != 0 ? "everyone" : "its group",
                                   st.st_mode & 07777));
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace

KeyLookup find_key(const Config& cfg) {
  KeyLookup out;
  const std::string entity = cfg.name().to_string();
  const std::string& key = cfg.get<Opt::key>();
  const std::string& keyfile = cfg.get<Opt::keyfile>();
  out.searched = cfg.get<Opt::keyring>();
  std::string why;
  if (!key.empty()) {
    auto k = auth::CryptoKey::from_base64(trim(key), why);
    if (!k) fail(fmt::format("option key ({}) is not a Ceph key for {}: {}", cfg.source(Opt::key).to_string(),
                             entity, why),
                 "give the base64 key `ceph auth get-key` prints");
    out.key = std::move(*k);
    out.source = "option key";
    return out;
  }
  if (!keyfile.empty()) {
    auto text = read_file(keyfile, why);
    if (!text) fail(fmt::format("cannot read keyfile {} for {}: {}", keyfile, entity, why),
                    "fix the keyfile option or the file's permissions");
    auto k = auth::CryptoKey::from_base64(trim(*text), why);
    if (!k) fail(fmt::format("keyfile {} does not hold a Ceph key for {}: {}", keyfile, entity, why),
                 "put the base64 key `ceph auth get-key` prints in it");
    check_mode(keyfile, out.warnings);
    out.key = std::move(*k);
    out.source = "keyfile " + keyfile;
    return out;
  }
  for (const std::string& path : split_list(out.searched)) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) continue;  // Ceph: the first file that exists
    auto text = read_file(path, why);
    if (!text) fail(fmt::format("cannot read keyring {} for {}: {}", path, entity, why),
                    "fix the file's permissions, or give another with -k/--keyring");
    auto kr = auth::Keyring::parse(*text, path, why);
    if (!kr) fail(fmt::format("keyring {} cannot be read: {}", path, why),
                  "Siphon reads Ceph's text keyring format (ceph-authtool writes it); fix or replace the file");
    check_mode(path, out.warnings);
    const auth::KeyringEntry* e = kr->find(entity);
    if (e == nullptr) {
      std::string held;
      for (const auto& [name, _] : kr->entries()) held += (held.empty() ? "" : ", ") + name;
      fail(fmt::format("keyring {} has no key for {} (it holds: {})", path, entity, held.empty() ? "nothing" : held),
           fmt::format("use -n/--name for one of those, or add the key: ceph auth get {} >> {}", entity, path));
    }
    out.key = e->key;
    out.source = "keyring " + path;
    return out;
  }
  return out;
}

std::vector<std::uint32_t> mode_list(std::string_view text) {
  std::vector<std::uint32_t> out;
  for (const std::string& m : split_list(text)) {
    const std::uint32_t mode = m == "secure" ? proto::kConModeSecure : proto::kConModeCrc;
    if (std::find(out.begin(), out.end(), mode) == out.end()) out.push_back(mode);
  }
  return out;
}

ClientAuth client_auth(const Config& cfg) {
  ClientAuth a;
  KeyLookup k = find_key(cfg);
  for (const auto& w : k.warnings) SIPHON_LOG(compat, 0, "warning: {}", w);
  a.methods.clear();
  for (const std::string& m : split_list(cfg.get<Opt::auth_client_required>())) {
    if (m == "cephx") {
      if (!k.key) {
        SIPHON_LOG(compat, 1, "no keyring found at {}, disabling cephx", k.searched);
        continue;
      }
      a.methods.push_back(proto::kAuthMethodCephx);
    } else if (m == "none") {
      a.methods.push_back(proto::kAuthMethodNone);
    }
  }
  if (k.key) {
    a.secret = k.key->secret;
    a.key_source = k.source;
  } else {
    a.key_source = fmt::format("no keyring found at {}", k.searched);
  }
  if (a.methods.empty())
    fail(fmt::format("no authentication method left for {}: auth_client_required = {}, and cephx needs a key "
                     "(unable to find a keyring on {})",
                     cfg.name().to_string(), cfg.get<Opt::auth_client_required>(), k.searched),
         "give the keyring with -k/--keyring FILE (or the key option), or add none to auth_client_required");
  // The modes offered, in order, as Ceph's AuthRegistry picks them: a
  // client uses ms_mon_client_mode towards monitors (and managers) and
  // ms_client_mode towards the rest; a daemon ms_mon_cluster_mode towards
  // monitors and ms_cluster_mode towards other daemons.
  const bool client = cfg.name().type == "client";
  a.mon_modes = mode_list(client ? cfg.get<Opt::ms_mon_client_mode>() : cfg.get<Opt::ms_mon_cluster_mode>());
  a.modes = mode_list(client ? cfg.get<Opt::ms_client_mode>() : cfg.get<Opt::ms_cluster_mode>());
  return a;
}

}  // namespace siphon::compat
