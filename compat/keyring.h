// The entity's key and the client's auth settings, found the way Ceph finds
// them (KeyRing::from_ceph_context, AuthRegistry):
//
//   key = <base64>        the key itself                    (wins)
//   keyfile = <file>      a file holding the base64 key
//   keyring = <list>      files searched in order; the first that exists is
//                         read (default /etc/ceph/$cluster.$name.keyring,
//                         /etc/ceph/$cluster.keyring, /etc/ceph/keyring,
//                         /etc/ceph/keyring.bin); -k/--keyring sets it
//
// When none of them gives a file, cephx is dropped from
// auth_client_required ("no keyring found, disabling cephx", as Ceph does);
// a file that exists but cannot be read, does not parse, or has no key for
// the entity is an error naming the entity and the file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compat/config.h"
#include "msgr/api/messenger.h"
#include "msgr/auth/crypto.h"

namespace siphon::compat {

struct KeyLookup {
  std::optional<auth::CryptoKey> key;  // absent: nothing configured or found
  std::string source;                  // "keyring /etc/ceph/ceph.client.admin.keyring", "option key", ...
  std::string searched;                // the keyring list, expanded
  std::vector<std::string> warnings;   // e.g. a keyring readable by others
};

/// Finds the key of cfg.name(). Throws SetupError (errc::config_error) for a
/// file that exists but is unusable, naming the entity and the file.
KeyLookup find_key(const Config& cfg);

/// A ms_*_mode value (checked by the option schema) as mode numbers, in order.
std::vector<std::uint32_t> mode_list(std::string_view text);

/// The auth settings for a client messenger: methods from
/// auth_client_required (cephx only with a key), the key, and the
/// connection modes of ms_mon_client_mode / ms_client_mode (a daemon's
/// name: ms_mon_cluster_mode / ms_cluster_mode). Warnings are logged (subsystem compat, level 0).
/// Throws SetupError as find_key does, and when no method is left.
ClientAuth client_auth(const Config& cfg);

}  // namespace siphon::compat
