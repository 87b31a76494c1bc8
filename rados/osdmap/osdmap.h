// The OSDMap as a client keeps it (rados-client.md §1.3–1.7): the client
// section of a full map (pools, OSD state/weights/addresses, temp and upmap
// exceptions, primary affinity, the CRUSH map) decoded from Ceph's encoding.
// The OSD-only section and any field a newer struct version adds are skipped
// by their encoded lengths; the map's crc32c is checked.
//
//   auto m = osdmap::decode_osdmap(bl);          // Result<OsdMap>
//   if (!m) log(m.error().message());
//   auto p = osdmap::map_object(*m, "rep3", "foo");   // placement.h
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crush.h"
#include "msgr/base/buffer.h"
#include "msgr/proto/encoding.h"
#include "msgr/proto/types.h"

namespace siphon::osdmap {

// pg_t: the pool and the placement seed (the "actual" seed < pg_num in maps
// and messages; the raw object hash where a raw pg is meant).
struct PgId {
  std::uint64_t pool = 0;
  std::uint32_t seed = 0;
  friend auto operator<=>(const PgId&, const PgId&) = default;
  /// "1.7fc1f406": pool in decimal, seed in hex (Ceph's pg_t printing).
  std::string to_string() const;
};
void decode(proto::Decoder& d, PgId& pg);
void encode(proto::Encoder& e, const PgId& pg);

}  // namespace siphon::osdmap

namespace siphon::proto {
// A PgId's smallest encoding (bounds a vector's declared count against what
// is left), for every decoder of the library.
template <>
struct MinEncodedSize<osdmap::PgId> : std::integral_constant<std::size_t, 17> {};
}  // namespace siphon::proto

namespace siphon::osdmap {

// pg_pool_t::type
inline constexpr std::uint8_t kPoolReplicated = 1;
inline constexpr std::uint8_t kPoolErasure = 3;
// pg_pool_t::flags
inline constexpr std::uint64_t kPoolFlagHashPsPool = 1u << 0;
inline constexpr std::uint64_t kPoolFlagFull = 1u << 1;        // no writes: the pool is full
inline constexpr std::uint64_t kPoolFlagFullQuota = 1u << 10;  // ... because of its quota

// pg_pool_t, the fields a client uses (decoding stops after write_tier; the
// rest of the struct is skipped by its length).
struct Pool {
  std::uint8_t type = 0;
  std::uint8_t size = 0;
  std::uint8_t crush_rule = 0;
  std::uint8_t object_hash = 0;
  std::uint32_t pg_num = 0;
  std::uint32_t pgp_num = 0;
  std::uint32_t last_change = 0;
  std::uint64_t snap_seq = 0;
  std::uint64_t flags = 0;
  std::uint8_t min_size = 0;
  std::int64_t tier_of = -1;
  std::int64_t read_tier = -1;
  std::int64_t write_tier = -1;
  // Derived (calc_pg_masks).
  std::uint32_t pg_num_mask = 0;
  std::uint32_t pgp_num_mask = 0;

  bool hashpspool() const noexcept { return flags & kPoolFlagHashPsPool; }
  /// Replicated pools drop missing OSDs (shift left); EC pools keep holes.
  bool can_shift_osds() const noexcept { return type == kPoolReplicated; }
  void calc_masks() noexcept;
};

// OsdMap::flags (CEPH_OSDMAP_*) a client honours
inline constexpr std::uint32_t kMapFlagFull = 1u << 1;     // deprecated since Mimic (pools carry it)
inline constexpr std::uint32_t kMapFlagPauseRd = 1u << 2;  // ceph osd set pauserd
inline constexpr std::uint32_t kMapFlagPauseWr = 1u << 3;  // ceph osd set pausewr

// osd_state bits
inline constexpr std::uint32_t kOsdExists = 1;
inline constexpr std::uint32_t kOsdUp = 2;
// weights (16.16)
inline constexpr std::uint32_t kOsdIn = 0x10000;
inline constexpr std::uint32_t kDefaultPrimaryAffinity = 0x10000;

struct OsdMap {
  proto::Uuid fsid;
  std::uint32_t epoch = 0;
  proto::UTime created, modified;
  std::map<std::int64_t, Pool> pools;
  std::map<std::int64_t, std::string> pool_names;
  std::int32_t pool_max = -1;
  std::uint32_t flags = 0;
  std::int32_t max_osd = 0;
  std::vector<std::uint32_t> osd_state;   // max_osd entries
  std::vector<std::uint32_t> osd_weight;  // max_osd entries
  std::vector<proto::EntityAddrVec> client_addrs;
  std::map<PgId, std::vector<std::int32_t>> pg_temp;
  std::map<PgId, std::int32_t> primary_temp;
  std::vector<std::uint32_t> primary_affinity;  // empty: all default
  CrushMap crush;
  std::map<std::string, std::map<std::string, std::string>> erasure_code_profiles;
  std::map<PgId, std::vector<std::int32_t>> pg_upmap;
  std::map<PgId, std::vector<std::pair<std::int32_t, std::int32_t>>> pg_upmap_items;
  std::int32_t crush_version = 0;

  bool exists(std::int32_t osd) const noexcept {
    return osd >= 0 && osd < max_osd && static_cast<std::size_t>(osd) < osd_state.size() &&
           (osd_state[static_cast<std::size_t>(osd)] & kOsdExists);
  }
  bool is_up(std::int32_t osd) const noexcept {
    return exists(osd) && (osd_state[static_cast<std::size_t>(osd)] & kOsdUp);
  }
  std::uint32_t weight(std::int32_t osd) const noexcept {
    return osd >= 0 && static_cast<std::size_t>(osd) < osd_weight.size()
               ? osd_weight[static_cast<std::size_t>(osd)]
               : 0;
  }
  std::uint32_t affinity(std::int32_t osd) const noexcept {
    return osd >= 0 && static_cast<std::size_t>(osd) < primary_affinity.size()
               ? primary_affinity[static_cast<std::size_t>(osd)]
               : kDefaultPrimaryAffinity;
  }
  const Pool* pool(std::int64_t id) const noexcept {
    const auto it = pools.find(id);
    return it == pools.end() ? nullptr : &it->second;
  }
  /// The pool id with that name, or -1.
  std::int64_t lookup_pool(std::string_view name) const noexcept;
};

/// pg_pool_t (v5 and later; fields after write_tier are skipped by length).
void decode_pool_value(proto::Decoder& d, Pool& p);

/// Decodes a full OSDMap (the bytes of `ceph osd getmap`, or one value of
/// MOSDMap's `maps`). Fails on pre-firefly ("classic") encodings, on a crc
/// mismatch and on anything inconsistent (vectors shorter than max_osd).
proto::Result<OsdMap> decode_osdmap(const BufferList& bl);

/// The envelope a full OSDMap and an incremental share: a u16 version of 7
/// or more at the front (the pre-firefly "classic" encodings are refused), a
/// struct holding the client part (decoded by `client`), then the OSD-only
/// part (skipped by its length), then from struct version 8 a crc32c(-1)
/// over the struct up to the crc field, continued over whatever follows it
/// in the wrapper. The names (static strings, as Decoder::fail wants them)
/// say which of the two failed. On return, d.ok() tells.
struct MapEnvelope {
  std::string_view what;           // "OSDMap"
  std::string_view classic;        // the refusal of a classic encoding
  std::string_view osd_part;       // the OSD-only struct's name
  std::string_view crc_field;      // the crc's name
};
void decode_map_envelope(proto::Decoder& d, const BufferList& bl, const MapEnvelope& names,
                         const std::function<void(proto::Decoder&)>& client);

}  // namespace siphon::osdmap
