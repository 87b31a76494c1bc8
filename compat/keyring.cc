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

KeyringLookup find_keyring(const Config& cfg) {
  KeyringLookup out;
  const std::string entity = cfg.name().to_string();
  const std::string& key = cfg.get<Opt::key>();
  const std::string& keyfile = cfg.get<Opt::keyfile>();
  out.searched = cfg.get<Opt::keyring>();
  std::string why;
  // key and keyfile give a keyring of one entry, the entity's own (Ceph's
  // KeyRing::from_ceph_context does the same).
  const auto own = [&](auth::CryptoKey k, std::string source) {
    out.keyring.emplace();
    out.keyring->add(entity, auth::KeyringEntry{std::move(k), {}});
    out.source = std::move(source);
    return out;
  };
  if (!key.empty()) {
    auto k = auth::CryptoKey::from_base64(trim(key), why);
    if (!k) fail(fmt::format("option key ({}) is not a Ceph key for {}: {}", cfg.source(Opt::key).to_string(),
                             entity, why),
                 "give the base64 key `ceph auth get-key` prints");
    return own(std::move(*k), "option key");
  }
  if (!keyfile.empty()) {
    auto text = read_file(keyfile, why);
    if (!text) fail(fmt::format("cannot read keyfile {} for {}: {}", keyfile, entity, why),
                    "fix the keyfile option or the file's permissions");
    auto k = auth::CryptoKey::from_base64(trim(*text), why);
    if (!k) fail(fmt::format("keyfile {} does not hold a Ceph key for {}: {}", keyfile, entity, why),
                 "put the base64 key `ceph auth get-key` prints in it");
    check_mode(keyfile, out.warnings);
    return own(std::move(*k), "keyfile " + keyfile);
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
    out.keyring = std::move(*kr);
    out.source = "keyring " + path;
    out.path = path;
    return out;
  }
  return out;
}

KeyLookup find_key(const Config& cfg) {
  KeyringLookup kr = find_keyring(cfg);
  KeyLookup out;
  out.searched = std::move(kr.searched);
  out.warnings = std::move(kr.warnings);
  if (!kr.keyring) return out;
  const std::string entity = cfg.name().to_string();
  const auth::KeyringEntry* e = kr.keyring->find(entity);
  if (e == nullptr) {
    std::string held;
    for (const auto& [name, _] : kr.keyring->entries()) held += (held.empty() ? "" : ", ") + name;
    fail(fmt::format("keyring {} has no key for {} (it holds: {})", kr.path, entity, held.empty() ? "nothing" : held),
         fmt::format("use -n/--name for one of those, or add the key: ceph auth get {} >> {}", entity, kr.path));
  }
  out.key = e->key;
  out.source = std::move(kr.source);
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
    a.key_type = k.key->type;
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

namespace {

std::string join_methods(const std::vector<std::uint32_t>& v) {
  std::string out;
  for (const std::uint32_t m : v)
    out += (out.empty() ? "" : ", ") + std::string(m == proto::kAuthMethodCephx ? "cephx" : "none");
  return out.empty() ? "nothing" : out;
}
std::string join_modes(const std::vector<std::uint32_t>& v) {
  std::string out;
  for (const std::uint32_t m : v) out += " " + std::string(m == proto::kConModeSecure ? "secure" : "crc");
  return out;
}

}  // namespace

ServerAuth server_auth(const Config& cfg) {
  ServerAuth a;
  const std::string me = cfg.name().to_string();
  KeyringLookup kr = find_keyring(cfg);
  for (const auto& w : kr.warnings) SIPHON_LOG(compat, 0, "warning: {}", w);
  // Ceph's AuthRegistry: the methods as listed, cephx dropped when no
  // keyring exists ("no keyring found at ..., disabling cephx").
  const auto methods = [&](Opt o) {
    std::vector<std::uint32_t> out;
    bool dropped = false;
    for (const std::string& m : split_list(std::get<std::string>(cfg.value(o)))) {
      const std::uint32_t id = m == "cephx" ? proto::kAuthMethodCephx : proto::kAuthMethodNone;
      if (id == proto::kAuthMethodCephx && !kr.keyring) {
        dropped = true;
        continue;
      }
      if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    }
    if (!out.empty()) {
      if (dropped) SIPHON_LOG(compat, 1, "no keyring found at {}, disabling cephx for {}", kr.searched,
                              schema(o).name);
      return out;
    }
    const std::string name(schema(o).name);
    const std::string value = std::get<std::string>(cfg.value(o));
    if (cfg.source(o).kind != ValueSource::Kind::default_value)
      fail(fmt::format("{} = {} ({}): {} requires cephx of its peers, but no keyring was found (searched {}), so "
                       "it could let no one in",
                       name, value, cfg.source(o).to_string(), me, kr.searched),
           fmt::format("give the keyring of the entities allowed in with -k/--keyring FILE (or the keyring "
                       "option), or add none to {}",
                       name));
    // Left at Ceph's default (cephx) with no keyring anywhere: Siphon's
    // daemons served such setups unauthenticated before cephx existed here,
    // and keep doing so -- loudly.
    SIPHON_LOG(compat, 0,
               "warning: {} is at its default ({}) but no keyring was found (searched {}): {} lets its peers in "
               "without authentication (auth none); give a keyring with -k/--keyring to require cephx, or set "
               "{} = none to say that this is meant",
               name, value, kr.searched, me, name);
    return std::vector<std::uint32_t>{proto::kAuthMethodNone};
  };
  a.service_methods = methods(Opt::auth_service_required);
  a.cluster_methods = methods(Opt::auth_cluster_required);
  // Modes a daemon allows, as Ceph's AuthRegistry picks them: a monitor's
  // from ms_mon_service_mode / ms_mon_cluster_mode, any other daemon's from
  // ms_service_mode / ms_cluster_mode.
  const bool mon = cfg.name().type == "mon";
  a.service_modes = mode_list(mon ? cfg.get<Opt::ms_mon_service_mode>() : cfg.get<Opt::ms_service_mode>());
  a.cluster_modes = mode_list(mon ? cfg.get<Opt::ms_mon_cluster_mode>() : cfg.get<Opt::ms_cluster_mode>());
  if (kr.keyring) {
    for (const auto& [name, e] : kr.keyring->entries()) {
      a.keys[name] = e.key.secret;
      if (e.key.type != auth::kCryptoAes) a.key_types[name] = e.key.type;
    }
    a.keyring_source = kr.source;
  }
  // Whole seconds, at least 1 (a NaN or a value below 1 from the file too).
  const double ttl = cfg.get<Opt::auth_mon_ticket_ttl>();
  a.ticket_ttl_sec = ttl >= 1.0 ? static_cast<std::uint32_t>(std::min(ttl, 4294967295.0)) : 1u;
  return a;
}

std::string describe(const ServerAuth& a) {
  std::string out = fmt::format("auth from clients {} (modes{}), from daemons {} (modes{})",
                                join_methods(a.service_methods), join_modes(a.service_modes),
                                join_methods(a.cluster_methods), join_modes(a.cluster_modes));
  const bool cephx = std::find(a.service_methods.begin(), a.service_methods.end(), proto::kAuthMethodCephx) !=
                         a.service_methods.end() ||
                     std::find(a.cluster_methods.begin(), a.cluster_methods.end(), proto::kAuthMethodCephx) !=
                         a.cluster_methods.end();
  if (cephx) out += fmt::format("; cephx keys of {} entit{} from {}", a.keys.size(), a.keys.size() == 1 ? "y" : "ies",
                                a.keyring_source);
  return out;
}

}  // namespace siphon::compat
