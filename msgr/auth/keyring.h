// Ceph's text keyring (shared/reference/cephx.md §1.2):
//
//   [client.admin]
//       key = AQAA8VNlAAAAABAAABEiM0RVZneImaq7zN3u/w==
//       caps mon = "allow *"
//
// One section per entity (TYPE.ID, the id may be empty as in [mon.]); keys
// `key`, `caps <service>` and `auid` (ignored); '_' in a key name reads as a
// space; `#` and `;` start comments; a [global] section is skipped. Anything
// else is an error naming the line, as Ceph refuses such a file. Ceph's
// binary keyring form is not supported (cephx.md §1.2 allows that).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "msgr/auth/crypto.h"

namespace siphon::auth {

struct KeyringEntry {
  CryptoKey key;
  std::map<std::string, std::string> caps;  // service -> cap text
};

class Keyring {
 public:
  // Parses `text`; `path` only names the file in errors. On failure returns
  // nullopt and sets `why` to "<path>:<line>: <problem>".
  static std::optional<Keyring> parse(std::string_view text, std::string_view path, std::string& why);

  // The entry for "type.id", or null.
  const KeyringEntry* find(std::string_view entity) const;
  void add(std::string entity, KeyringEntry e) { entries_[std::move(entity)] = std::move(e); }
  const std::map<std::string, KeyringEntry, std::less<>>& entries() const noexcept { return entries_; }
  bool empty() const noexcept { return entries_.empty(); }

 private:
  std::map<std::string, KeyringEntry, std::less<>> entries_;
};

}  // namespace siphon::auth
