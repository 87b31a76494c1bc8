#include "incremental.h"

#include <fmt/format.h>

namespace siphon::osdmap {

using proto::Decoder;

namespace {

void decode_client_part(Decoder& d, OsdMapIncremental& inc) {
  const auto h = d.begin_struct(8, "Incremental client data");
  if (!d.ok()) return;
  if (h.struct_v < 5) {
    d.fail("Incremental client data older than v5 is not supported", "struct_v", h.struct_v, 5);
    return;
  }
  d.get(inc.fsid);
  inc.epoch = d.u32("epoch");
  d.get(inc.modified);
  inc.new_pool_max = d.s64("new_pool_max");
  inc.new_flags = d.s32("new_flags");
  inc.fullmap = d.blob("fullmap");
  inc.crush = d.blob("crush");
  inc.new_max_osd = d.s32("new_max_osd");
  const std::uint32_t npools = d.count(8 + 6, "new_pools count");
  for (std::uint32_t i = 0; i < npools && d.ok(); ++i) {
    const std::int64_t id = d.s64("pool id");
    Pool p;
    decode_pool_value(d, p);
    if (d.ok()) inc.new_pools[id] = p;
  }
  d.get(inc.new_pool_names);
  d.get(inc.old_pools);
  d.get(inc.new_up_client);
  d.get(inc.new_state);
  d.get(inc.new_weight);
  d.get(inc.new_pg_temp);
  d.get(inc.new_primary_temp);
  if (h.struct_v >= 2) d.get(inc.new_primary_affinity);
  if (h.struct_v >= 3) {
    d.get(inc.new_erasure_code_profiles);
    d.get(inc.old_erasure_code_profiles);
  }
  if (h.struct_v >= 4) {
    d.get(inc.new_pg_upmap);
    d.get(inc.old_pg_upmap);
    d.get(inc.new_pg_upmap_items);
    d.get(inc.old_pg_upmap_items);
  }
  // removed/purged snaps, last up/in change and newer fields: skipped.
  d.end_struct(h);
}

}  // namespace

proto::Result<OsdMapIncremental> decode_incremental(const BufferList& bl) {
  Decoder d(bl);
  Decoder::Scope scope(d, "OSDMap::Incremental");
  OsdMapIncremental inc;
  static constexpr MapEnvelope kNames{"Incremental", "pre-firefly (classic) incremental encodings are not supported",
                                      "Incremental osd-only data", "Incremental inc_crc"};
  decode_map_envelope(d, bl, kNames, [&inc](Decoder& dd) { decode_client_part(dd, inc); });
  if (!d.ok()) return d.error();
  return inc;
}

std::string apply_incremental(OsdMap& map, const OsdMapIncremental& inc) {
  if (inc.epoch != map.epoch + 1)
    return fmt::format("incremental epoch {} does not follow the map's epoch {}", inc.epoch, map.epoch);
  if (!inc.fullmap.empty()) {
    auto full = decode_osdmap(inc.fullmap);
    if (!full) return "the incremental's full map does not decode: " + full.error().message();
    if (full->epoch != inc.epoch)
      return fmt::format("the incremental's full map has epoch {}, not {}", full->epoch, inc.epoch);
    map = std::move(*full);
    return {};
  }
  if (inc.fsid != map.fsid)
    return fmt::format("incremental for cluster {}, the map is of {}", inc.fsid.to_string(),
                       map.fsid.to_string());
  // Decode the CRUSH replacement first, so a bad one leaves the map as it was.
  std::optional<CrushMap> crush;
  if (!inc.crush.empty()) {
    auto c = decode_crush(inc.crush);
    if (!c) return "the incremental's CRUSH map does not decode: " + c.error().message();
    crush = std::move(*c);
  }
  OsdMap m = map;  // applied to a copy: all or nothing
  m.epoch = inc.epoch;
  m.modified = inc.modified;
  if (inc.new_flags >= 0) m.flags = static_cast<std::uint32_t>(inc.new_flags);
  if (inc.new_max_osd >= 0) {
    if (inc.new_max_osd > (1 << 20)) return fmt::format("new_max_osd {} out of range", inc.new_max_osd);
    const auto n = static_cast<std::size_t>(inc.new_max_osd);
    m.max_osd = inc.new_max_osd;
    m.osd_state.resize(n, 0);
    m.osd_weight.resize(n, 0);  // new slots are out
    m.client_addrs.resize(n);
    if (!m.primary_affinity.empty()) m.primary_affinity.resize(n, kDefaultPrimaryAffinity);
  }
  if (inc.new_pool_max != -1) m.pool_max = static_cast<std::int32_t>(inc.new_pool_max);
  for (const auto& [id, p] : inc.new_pools) {
    m.pools[id] = p;
    m.pools[id].last_change = inc.epoch;
  }
  for (const auto& [id, name] : inc.new_pool_names) m.pool_names[id] = name;
  for (const std::int64_t id : inc.old_pools) {
    m.pools.erase(id);
    m.pool_names.erase(id);
  }
  auto bad_osd = [&](std::int32_t o) { return o < 0 || o >= m.max_osd; };
  for (const auto& [o, w] : inc.new_weight) {
    if (bad_osd(o)) return fmt::format("new_weight names osd.{} beyond max_osd {}", o, m.max_osd);
    m.osd_weight[static_cast<std::size_t>(o)] = w;
    // OSDMap::set_weight: a non-zero weight makes the OSD exist (the mon's
    // "osd create" relies on it and sends only NEW in new_state); marked in,
    // it is neither auto-out nor new any more.
    if (w) {
      m.osd_state[static_cast<std::size_t>(o)] |= kOsdExists;
      m.osd_state[static_cast<std::size_t>(o)] &= ~(4u | 8u);  // AUTOOUT, NEW
    }
  }
  for (const auto& [o, a] : inc.new_primary_affinity) {
    if (bad_osd(o)) return fmt::format("new_primary_affinity names osd.{} beyond max_osd {}", o, m.max_osd);
    if (m.primary_affinity.empty())
      m.primary_affinity.assign(static_cast<std::size_t>(m.max_osd), kDefaultPrimaryAffinity);
    m.primary_affinity[static_cast<std::size_t>(o)] = a;
  }
  for (const auto& name : inc.old_erasure_code_profiles) m.erasure_code_profiles.erase(name);
  for (const auto& [name, prof] : inc.new_erasure_code_profiles) m.erasure_code_profiles[name] = prof;
  for (const auto& [o, x] : inc.new_state) {
    if (bad_osd(o)) return fmt::format("new_state names osd.{} beyond max_osd {}", o, m.max_osd);
    const auto i = static_cast<std::size_t>(o);
    const std::uint32_t s = x ? x : kOsdUp;  // 0: the legacy "toggle up"
    if ((m.osd_state[i] & kOsdExists) && (s & kOsdExists)) {
      // The OSD was destroyed: forget everything about it.
      m.osd_state[i] = 0;
      m.client_addrs[i] = proto::EntityAddrVec{};
      if (m.primary_affinity.empty())
        m.primary_affinity.assign(static_cast<std::size_t>(m.max_osd), kDefaultPrimaryAffinity);
      m.primary_affinity[i] = kDefaultPrimaryAffinity;
    } else {
      m.osd_state[i] ^= s;
    }
  }
  for (const auto& [o, addrs] : inc.new_up_client) {
    if (bad_osd(o)) return fmt::format("new_up_client names osd.{} beyond max_osd {}", o, m.max_osd);
    const auto i = static_cast<std::size_t>(o);
    m.osd_state[i] |= kOsdExists | kOsdUp;
    m.osd_state[i] &= ~4096u;  // STOP
    m.client_addrs[i] = addrs;
  }
  for (const auto& [pg, osds] : inc.new_pg_temp) {
    if (osds.empty()) m.pg_temp.erase(pg);
    else m.pg_temp[pg] = osds;
  }
  for (const auto& [pg, osd] : inc.new_primary_temp) {
    if (osd == -1) m.primary_temp.erase(pg);
    else m.primary_temp[pg] = osd;
  }
  for (const auto& [pg, osds] : inc.new_pg_upmap) m.pg_upmap[pg] = osds;
  for (const auto& pg : inc.old_pg_upmap) m.pg_upmap.erase(pg);
  for (const auto& [pg, items] : inc.new_pg_upmap_items) m.pg_upmap_items[pg] = items;
  for (const auto& pg : inc.old_pg_upmap_items) m.pg_upmap_items.erase(pg);
  if (crush) m.crush = std::move(*crush);  // last, as Ceph
  map = std::move(m);
  return {};
}

}  // namespace siphon::osdmap
