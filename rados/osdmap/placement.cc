#include "placement.h"

#include "hash.h"

namespace siphon::osdmap {
namespace {

// _remove_nonexistent_osds
void remove_nonexistent(const OsdMap& m, const Pool& pool, std::vector<std::int32_t>& osds) {
  if (pool.can_shift_osds()) {
    std::erase_if(osds, [&](std::int32_t o) { return !m.exists(o); });
  } else {
    for (auto& o : osds)
      if (!m.exists(o)) o = kCrushItemNone;
  }
}

// weight 0 ("out") for an OSD id that can index the weights
bool marked_out(const OsdMap& m, std::int32_t osd) {
  return osd != kCrushItemNone && osd >= 0 && osd < m.max_osd && m.weight(osd) == 0;
}

// _apply_upmap: pg_upmap (abandoned entirely, items included, if it names
// an out OSD), then every pg_upmap_items pair in order.
void apply_upmap(const OsdMap& m, PgId pg, std::vector<std::int32_t>& raw) {
  if (const auto p = m.pg_upmap.find(pg); p != m.pg_upmap.end()) {
    for (const std::int32_t osd : p->second)
      if (marked_out(m, osd)) return;
    raw = p->second;
  }
  if (const auto q = m.pg_upmap_items.find(pg); q != m.pg_upmap_items.end()) {
    for (const auto& [from, to] : q->second) {
      bool exists = false;
      std::ptrdiff_t pos = -1;
      for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == to) {
          exists = true;
          break;
        }
        if (raw[i] == from && pos < 0 && !marked_out(m, to)) pos = static_cast<std::ptrdiff_t>(i);
      }
      if (!exists && pos >= 0) raw[static_cast<std::size_t>(pos)] = to;
    }
  }
}

// _raw_to_up_osds
std::vector<std::int32_t> raw_to_up(const OsdMap& m, const Pool& pool,
                                    const std::vector<std::int32_t>& raw) {
  std::vector<std::int32_t> up;
  up.reserve(raw.size());
  for (const std::int32_t o : raw) {
    if (m.is_up(o)) up.push_back(o);
    else if (!pool.can_shift_osds()) up.push_back(kCrushItemNone);
  }
  return up;
}

std::int32_t pick_primary(const std::vector<std::int32_t>& osds) {
  for (const std::int32_t o : osds)
    if (o != kCrushItemNone) return o;
  return -1;
}

// _apply_primary_affinity
void apply_primary_affinity(const OsdMap& m, std::uint32_t pps, const Pool& pool,
                            std::vector<std::int32_t>& osds, std::int32_t& primary) {
  if (m.primary_affinity.empty()) return;
  bool any = false;
  for (const std::int32_t o : osds) {
    if (o != kCrushItemNone && m.affinity(o) != kDefaultPrimaryAffinity) {
      any = true;
      break;
    }
  }
  if (!any) return;
  std::ptrdiff_t pos = -1;
  for (std::size_t i = 0; i < osds.size(); ++i) {
    const std::int32_t o = osds[i];
    if (o == kCrushItemNone) continue;
    const std::uint32_t a = m.affinity(o);
    if (a < kDefaultPrimaryAffinity &&
        (crush_hash32_2(kCrushHashRjenkins1, pps, static_cast<std::uint32_t>(o)) >> 16) >= a) {
      // Rejected as primary; remembered as the fallback if nobody accepts.
      if (pos < 0) pos = static_cast<std::ptrdiff_t>(i);
    } else {
      pos = static_cast<std::ptrdiff_t>(i);
      break;
    }
  }
  if (pos < 0) return;
  primary = osds[static_cast<std::size_t>(pos)];
  if (pool.can_shift_osds() && pos > 0) {
    for (std::ptrdiff_t i = pos; i > 0; --i)
      osds[static_cast<std::size_t>(i)] = osds[static_cast<std::size_t>(i - 1)];
    osds[0] = primary;
  }
}

// _get_temp_osds
void get_temp(const OsdMap& m, const Pool& pool, PgId pg, std::vector<std::int32_t>& temp,
              std::int32_t& temp_primary) {
  temp.clear();
  if (const auto p = m.pg_temp.find(pg); p != m.pg_temp.end()) {
    for (const std::int32_t o : p->second) {
      if (m.is_up(o)) temp.push_back(o);
      else if (!pool.can_shift_osds()) temp.push_back(kCrushItemNone);
    }
  }
  temp_primary = -1;
  if (const auto q = m.primary_temp.find(pg); q != m.primary_temp.end())
    temp_primary = q->second;
  else
    temp_primary = pick_primary(temp);
}

}  // namespace

std::uint32_t object_hash(const Pool& pool, std::string_view name, std::string_view nspace,
                          std::string_view key) {
  const std::string_view k = key.empty() ? name : key;
  if (nspace.empty()) return str_hash(pool.object_hash, k);
  std::string s;
  s.reserve(nspace.size() + 1 + k.size());
  s.append(nspace).push_back('\x1f');
  s.append(k);
  return str_hash(pool.object_hash, s);
}

PgId raw_pg_to_pg(const Pool& pool, PgId raw) {
  return PgId{raw.pool, stable_mod(raw.seed, pool.pg_num, pool.pg_num_mask)};
}

std::uint32_t raw_pg_to_pps(const Pool& pool, PgId pg) {
  const std::uint32_t ps = stable_mod(pg.seed, pool.pgp_num, pool.pgp_num_mask);
  if (pool.hashpspool())
    return crush_hash32_2(kCrushHashRjenkins1, ps, static_cast<std::uint32_t>(pg.pool));
  return ps + static_cast<std::uint32_t>(pg.pool);  // legacy: pools overlap
}

PgMapping map_pg(const OsdMap& m, PgId raw_pg) {
  PgMapping r;
  const Pool* pool = m.pool(static_cast<std::int64_t>(raw_pg.pool));
  if (!pool) return r;
  const PgId pg = raw_pg_to_pg(*pool, raw_pg);
  r.pg = pg;
  std::vector<std::int32_t> temp;
  std::int32_t temp_primary = -1;
  get_temp(m, *pool, pg, temp, temp_primary);

  // _pg_to_raw_osds
  r.pps = raw_pg_to_pps(*pool, pg);
  const int ruleno = m.crush.find_rule(pool->crush_rule, pool->type, pool->size);
  if (ruleno >= 0)
    r.raw = m.crush.do_rule(ruleno, r.pps, pool->size, m.osd_weight,
                            m.crush.choose_args_for(static_cast<std::int64_t>(pg.pool)),
                            &r.crush_gave_up);
  remove_nonexistent(m, *pool, r.raw);

  std::vector<std::int32_t> upmapped = r.raw;
  apply_upmap(m, pg, upmapped);
  r.up = raw_to_up(m, *pool, upmapped);
  r.up_primary = pick_primary(r.up);
  apply_primary_affinity(m, r.pps, *pool, r.up, r.up_primary);
  if (temp.empty()) {
    r.acting = r.up;
    r.acting_primary = temp_primary == -1 ? r.up_primary : temp_primary;
  } else {
    r.acting = std::move(temp);
    r.acting_primary = temp_primary;
  }
  return r;
}

std::optional<ObjectMapping> map_object(const OsdMap& m, std::int64_t pool_id,
                                        std::string_view name, std::string_view nspace,
                                        std::string_view key) {
  const Pool* pool = m.pool(pool_id);
  if (!pool) return std::nullopt;
  ObjectMapping o;
  o.pool_id = pool_id;
  o.raw_hash = object_hash(*pool, name, nspace, key);
  o.raw_pg = PgId{static_cast<std::uint64_t>(pool_id), o.raw_hash};
  o.pg = map_pg(m, o.raw_pg);
  return o;
}

}  // namespace siphon::osdmap
