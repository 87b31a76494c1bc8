// OSDMap::Incremental, the client part (rados-client.md §1.6), and its
// application to the map a client keeps (OSDMap::apply_incremental, in
// Ceph's order). MOSDMap carries these after a client's first full map.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "osdmap.h"

namespace siphon::osdmap {

struct OsdMapIncremental {
  proto::Uuid fsid;
  std::uint32_t epoch = 0;
  proto::UTime modified;
  std::int64_t new_pool_max = -1;
  std::int32_t new_flags = -1;
  BufferList fullmap;  // non-empty: a whole map for this epoch
  BufferList crush;    // non-empty: a replacement CRUSH map
  std::int32_t new_max_osd = -1;
  std::map<std::int64_t, Pool> new_pools;
  std::map<std::int64_t, std::string> new_pool_names;
  std::set<std::int64_t> old_pools;
  std::map<std::int32_t, proto::EntityAddrVec> new_up_client;
  std::map<std::int32_t, std::uint32_t> new_state;  // XOR masks (0 = toggle UP)
  std::map<std::int32_t, std::uint32_t> new_weight;
  std::map<PgId, std::vector<std::int32_t>> new_pg_temp;  // empty vector = remove
  std::map<PgId, std::int32_t> new_primary_temp;          // -1 = remove
  std::map<std::int32_t, std::uint32_t> new_primary_affinity;
  std::map<std::string, std::map<std::string, std::string>> new_erasure_code_profiles;
  std::vector<std::string> old_erasure_code_profiles;
  std::map<PgId, std::vector<std::int32_t>> new_pg_upmap;
  std::set<PgId> old_pg_upmap;
  std::map<PgId, std::vector<std::pair<std::int32_t, std::int32_t>>> new_pg_upmap_items;
  std::set<PgId> old_pg_upmap_items;
};

/// Decodes an incremental (one value of MOSDMap's incremental_maps); its
/// crc (inc_crc) is checked. The OSD-only part is skipped by its length.
proto::Result<OsdMapIncremental> decode_incremental(const BufferList& bl);

/// Applies `inc` to `map` (which must be at inc.epoch - 1, same fsid). On
/// success returns an empty string; otherwise why not, and `map` is left
/// unchanged.
std::string apply_incremental(OsdMap& map, const OsdMapIncremental& inc);

}  // namespace siphon::osdmap
