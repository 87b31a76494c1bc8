// Names and addresses as the public API spells them: aliases of the Ceph
// encodings in msgr/proto/types.h, plus the entity type numbers.
#pragma once

#include <cstdint>

#include "msgr/proto/types.h"

namespace siphon {

using EntityName = proto::EntityName;        // auth identity, e.g. client.admin
using entity_name_t = proto::EntityNameT;  // type + number, e.g. osd.3
using EntityAddr = proto::EntityAddr;        // entity_addr_t
using AddrType = proto::AddrType;
using EntityAddrVec = proto::EntityAddrVec;  // entity_addrvec_t

// CEPH_ENTITY_TYPE_* (msgr2-wire.md §1.2); peer_type arguments take these.
namespace entity_type {
inline constexpr std::uint8_t mon = 0x01;
inline constexpr std::uint8_t mds = 0x02;
inline constexpr std::uint8_t osd = 0x04;
inline constexpr std::uint8_t client = 0x08;
inline constexpr std::uint8_t mgr = 0x10;
inline constexpr std::uint8_t auth = 0x20;
inline constexpr std::uint8_t any = 0xff;
}  // namespace entity_type

}  // namespace siphon
