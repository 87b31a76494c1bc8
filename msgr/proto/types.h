// PROVISIONAL (branch msgr): the minimum of Ceph's naming types the session
// and API layers need until branch `proto` lands its msgr/proto/types.h, which
// replaces this file at merge time (msgr2-wire.md §6).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "msgr/base/address.h"

namespace siphon::proto {

// CEPH_ENTITY_TYPE_* (msgr2-wire.md §1.2).
inline constexpr std::uint8_t kEntityTypeMon = 0x01;
inline constexpr std::uint8_t kEntityTypeMds = 0x02;
inline constexpr std::uint8_t kEntityTypeOsd = 0x04;
inline constexpr std::uint8_t kEntityTypeClient = 0x08;
inline constexpr std::uint8_t kEntityTypeMgr = 0x10;
inline constexpr std::uint8_t kEntityTypeAuth = 0x20;
inline constexpr std::uint8_t kEntityTypeAny = 0xff;

// entity_name_t: type + number, e.g. client.4099, osd.0.
struct entity_name_t {
  std::uint8_t type = 0;
  std::int64_t num = -1;
  friend bool operator==(const entity_name_t&, const entity_name_t&) = default;
};

// EntityName: the auth identity, e.g. client.admin.
struct EntityName {
  std::uint32_t type = 0;
  std::string id;
  friend bool operator==(const EntityName&, const EntityName&) = default;
};

// entity_addr_t (ADDR2 form).
struct EntityAddr {
  enum Type : std::uint32_t { kNone = 0, kLegacy = 1, kMsgr2 = 2, kAny = 3 };
  std::uint32_t type = kNone;
  std::uint32_t nonce = 0;
  NetAddress addr;
  friend bool operator==(const EntityAddr&, const EntityAddr&) = default;
};

struct EntityAddrVec {
  std::vector<EntityAddr> v;
  friend bool operator==(const EntityAddrVec&, const EntityAddrVec&) = default;
};

}  // namespace siphon::proto
