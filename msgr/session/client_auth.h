// How the connecting side of a handshake authenticates (shared/reference/
// cephx.md §3, §7). compat/ fills it from auth_client_required, the keyring
// (key, keyfile) and ms_mon_client_mode / ms_client_mode; the messenger
// hands it to every handshake it starts (Messenger::set_client_auth).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "msgr/proto/types.h"

namespace siphon::session {

// How the connecting side authenticates (cephx.md §3, §7). compat/ fills
// it from auth_client_required, the keyring and ms_*_mode.
struct ClientAuth {
  // Methods to try, in order (auth_client_required; cephx only when a key
  // was found, as Ceph drops cephx when it finds no keyring).
  std::vector<std::uint32_t> methods{proto::kAuthMethodNone};
  std::vector<std::uint8_t> secret;  // the entity's key (needed for cephx)
  std::string key_source;          // where the key came from, for errors ("keyring /etc/ceph/...")
  // Connection modes offered, in order: to monitors and managers
  // (ms_mon_client_mode) and to everyone else (ms_client_mode).
  std::vector<std::uint32_t> mon_modes{proto::kConModeCrc};
  std::vector<std::uint32_t> modes{proto::kConModeCrc};
  // Service tickets asked for with the AUTH ticket (other_keys; must not be
  // 0, or the mon sends no connection secret).
  std::uint32_t want_keys = 0x35;
};

}  // namespace siphon::session
