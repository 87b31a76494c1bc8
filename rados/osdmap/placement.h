// Placement exactly as librados computes it (rados-client.md §2.1–2.8):
// object -> raw hash -> PG -> CRUSH -> upmap -> up -> primary affinity ->
// pg_temp/primary_temp -> acting and primary. The order of those steps is
// Ceph's (OSDMap::_pg_to_up_acting_osds); each one is a separate function
// so tests can look at the intermediate sets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "osdmap.h"

namespace siphon::osdmap {

struct PgMapping {
  PgId pg;                          // the actual PG (seed < pg_num)
  std::uint32_t pps = 0;            // the CRUSH input x
  std::vector<std::int32_t> raw;    // CRUSH result without non-existent OSDs, before upmap
  std::vector<std::int32_t> up;
  std::int32_t up_primary = -1;
  std::vector<std::int32_t> acting;
  std::int32_t acting_primary = -1;
  bool crush_gave_up = false;  // the CRUSH map needed unbounded work (corrupt)
};

struct ObjectMapping {
  std::int64_t pool_id = -1;
  std::uint32_t raw_hash = 0;  // ceph_str_hash of [nspace "\x1f"] (key or name)
  PgId raw_pg;                 // (pool, raw_hash), printed "1.7fc1f406"
  PgMapping pg;
};

/// pg_pool_t::hash_key: the raw hash of an object in a pool.
std::uint32_t object_hash(const Pool& pool, std::string_view name, std::string_view nspace = {},
                          std::string_view key = {});
/// pg_pool_t::raw_pg_to_pg: the actual PG of a raw PG.
PgId raw_pg_to_pg(const Pool& pool, PgId raw);
/// pg_pool_t::raw_pg_to_pps: the placement seed (CRUSH input).
std::uint32_t raw_pg_to_pps(const Pool& pool, PgId pg);

/// OSDMap::pg_to_up_acting_osds for a PG of `map` (raw or actual). Empty
/// sets and primaries -1 when the pool does not exist.
PgMapping map_pg(const OsdMap& map, PgId pg);

/// Object -> placement, as `ceph osd map POOL OBJECT [NSPACE]` computes it.
/// nullopt when the pool does not exist.
std::optional<ObjectMapping> map_object(const OsdMap& map, std::int64_t pool_id,
                                        std::string_view name, std::string_view nspace = {},
                                        std::string_view key = {});

}  // namespace siphon::osdmap
