#include "tools/bench/auth.h"

#include <fmt/format.h>

#include <algorithm>

#include "compat/keyring.h"

namespace siphon::bench {

BenchClientAuth bench_client_auth(const compat::Config& cfg, bool key_based) {
  BenchClientAuth a;
  a.auth = compat::client_auth(cfg);
  a.cephx = std::find(a.auth.methods.begin(), a.auth.methods.end(), proto::kAuthMethodCephx) != a.auth.methods.end();
  a.auth.key_based_everywhere = a.cephx && key_based;
  a.name = proto::EntityName::parse(cfg.name().to_string());
  return a;
}

ServerAuth bench_server_auth(const compat::Config& cfg) {
  const auto is_default = [&](compat::Opt o) {
    return cfg.source(o).kind == compat::ValueSource::Kind::default_value;
  };
  if (is_default(compat::Opt::auth_service_required) && is_default(compat::Opt::auth_cluster_required) &&
      !compat::find_keyring(cfg).keyring)
    return ServerAuth{};
  return compat::server_auth(cfg);
}

std::string describe_client_auth(const compat::Config& cfg, const BenchClientAuth& a) {
  std::string modes;
  for (const std::uint32_t m : a.auth.modes) modes += (modes.empty() ? "" : " ") + con_mode_name(m);
  return fmt::format("authenticating as {} with {}, offering mode {}", cfg.name().to_string(),
                     a.cephx ? "cephx (" + a.auth.key_source + ")" : std::string("auth none"), modes);
}

std::string auth_method_name(std::uint32_t method) {
  switch (method) {
    case 0: return "-";
    case proto::kAuthMethodNone: return "none";
    case proto::kAuthMethodCephx: return "cephx";
    default: return std::to_string(method);
  }
}

std::string con_mode_name(std::uint32_t mode) {
  switch (mode) {
    case 0: return "-";
    case proto::kConModeCrc: return "crc";
    case proto::kConModeSecure: return "secure";
    default: return std::to_string(mode);
  }
}

SessionAuth session_auth(const Connection::AuthInfo& info) {
  return {auth_method_name(info.method), con_mode_name(info.con_mode)};
}

}  // namespace siphon::bench
