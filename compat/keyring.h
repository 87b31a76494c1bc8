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
//
// A daemon's accepting side (server_auth) takes the whole keyring found the
// same way as the entities allowed in and their keys (cephx.md §8.4a).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compat/config.h"
#include "msgr/api/messenger.h"
#include "msgr/auth/crypto.h"
#include "msgr/auth/keyring.h"

namespace siphon::compat {

struct KeyLookup {
  std::optional<auth::CryptoKey> key;  // absent: nothing configured or found
  std::string source;                  // "keyring /etc/ceph/ceph.client.admin.keyring", "option key", ...
  std::string searched;                // the keyring list, expanded
  std::vector<std::string> warnings;   // e.g. a keyring readable by others
};

struct KeyringLookup {
  std::optional<auth::Keyring> keyring;  // absent: nothing configured or found
  std::string source;                    // as KeyLookup::source
  std::string path;                      // the keyring file read ("" for key / keyfile)
  std::string searched;                  // the keyring list, expanded
  std::vector<std::string> warnings;
};

/// The keyring, found as Ceph's KeyRing::from_ceph_context finds it: key or
/// keyfile give a keyring holding only cfg.name()'s key; otherwise the first
/// file of the keyring list that exists, whole. Throws SetupError for a file
/// that exists but is unusable, naming the entity and the file.
KeyringLookup find_keyring(const Config& cfg);

/// Finds the key of cfg.name() (in find_keyring's keyring). Throws SetupError (errc::config_error) for a
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

/// The auth settings for a daemon's accepting messengers (public and
/// cluster; docs/security.md §5b): methods from auth_service_required (peers
/// whose HELLO says client) and auth_cluster_required (mon, osd, mds, mgr),
/// modes from ms_service_mode / ms_cluster_mode (a mon's name:
/// ms_mon_service_mode / ms_mon_cluster_mode), the entities allowed in and
/// their keys from find_keyring(), session validity from
/// auth_mon_ticket_ttl. With no keyring, cephx is dropped from the lists as
/// in Ceph; a list left empty is a SetupError when the option was set, and
/// auth none with a logged warning when it is at its default. Throws
/// SetupError as find_keyring does.
ServerAuth server_auth(const Config& cfg);
/// One line for a daemon's startup output: methods and modes per peer kind,
/// and how many cephx keys from where.
std::string describe(const ServerAuth& a);

}  // namespace siphon::compat
