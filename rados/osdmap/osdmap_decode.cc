// OSDMap::decode, the client part (rados-client.md §1.3, §1.4).
#include <bit>
#include <string>

#include <fmt/format.h>

#include "msgr/base/crc32c.h"
#include "osdmap.h"

namespace siphon::osdmap {

using proto::Decoder;

namespace {
constexpr std::int32_t kMaxOsd = 1 << 20;  // far above any cluster; bounds allocation
}

std::string PgId::to_string() const { return fmt::format("{}.{:x}", pool, seed); }

void decode(Decoder& d, PgId& pg) {
  const std::size_t at = d.position();
  const std::uint8_t v = d.u8("pg_t version");
  if (d.ok() && v != 1) {
    d.fail_at(at, "unknown pg_t version", "pg_t version", v, 1);
    return;
  }
  pg.pool = d.u64("pg_t pool");
  pg.seed = d.u32("pg_t seed");
  d.skip(4, "pg_t preferred");
}

void encode(proto::Encoder& e, const PgId& pg) {
  e.u8(1);
  e.u64(pg.pool);
  e.u32(pg.seed);
  e.s32(-1);
}

void Pool::calc_masks() noexcept {
  auto mask = [](std::uint32_t n) {
    const int bits = n == 0 ? 32 : std::bit_width(n - 1);  // cbits(n - 1)
    return static_cast<std::uint32_t>((std::uint64_t{1} << bits) - 1);
  };
  pg_num_mask = mask(pg_num);
  pgp_num_mask = mask(pgp_num);
}

std::int64_t OsdMap::lookup_pool(std::string_view name) const noexcept {
  for (const auto& [id, n] : pool_names)
    if (n == name) return id;
  return -1;
}

namespace {

// pg_pool_t: DECODE_START_LEGACY_COMPAT_LEN(29, 5, 5). Fields up to
// write_tier are read; everything after (hit sets, cache tiering tuning,
// pool options, application metadata, ...) is skipped by the length.
void decode_pool(Decoder& d, Pool& p) {
  const auto h = d.begin_struct_legacy(29, 5, 5, 0, "pg_pool_t");
  if (d.ok() && h.struct_v < 5) {
    d.fail("pg_pool_t encodings older than v5 are not supported", "pg_pool_t struct_v", h.struct_v, 5);
  }
  if (d.ok()) {
    p.type = d.u8("pool type");
    p.size = d.u8("pool size");
    p.crush_rule = d.u8("pool crush_rule");
    p.object_hash = d.u8("pool object_hash");
    p.pg_num = d.u32("pool pg_num");
    p.pgp_num = d.u32("pool pgp_num");
    d.skip(8, "pool lpg_num/lpgp_num");
    p.last_change = d.u32("pool last_change");
    p.snap_seq = d.u64("pool snap_seq");
    d.u32("pool snap_epoch");
    // snaps: map<u64, pool_snap_info_t>, each a versioned struct.
    const std::uint32_t nsnaps = d.count(14, "pool snaps count");
    for (std::uint32_t i = 0; i < nsnaps && d.ok(); ++i) {
      d.u64("pool snap id");
      const auto sh = d.begin_struct(255, "pool_snap_info_t");
      d.end_struct(sh);
    }
    const std::uint32_t nremoved = d.count(16, "pool removed_snaps count");
    d.skip(std::size_t{nremoved} * 16, "pool removed_snaps");
    d.u64("pool auid");
    p.flags = d.u64("pool flags");
    d.u32("pool crash_replay_interval");
    if (h.struct_v >= 7) p.min_size = d.u8("pool min_size");
    if (h.struct_v >= 8) d.skip(16, "pool quotas");
    if (h.struct_v >= 9) {
      std::set<std::uint64_t> tiers;
      d.get(tiers);
      p.tier_of = d.s64("pool tier_of");
      d.u8("pool cache_mode");
      p.read_tier = d.s64("pool read_tier");
      p.write_tier = d.s64("pool write_tier");
    }
  }
  d.end_struct(h);
  p.calc_masks();
}

}  // namespace

void decode_pool_value(Decoder& d, Pool& p) { decode_pool(d, p); }

namespace {

void decode_pools(Decoder& d, std::map<std::int64_t, Pool>& pools) {
  const std::uint32_t n = d.count(8 + 6, "pools count");
  for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
    const std::int64_t id = d.s64("pool id");
    Pool p;
    decode_pool(d, p);
    if (d.ok()) pools[id] = p;
  }
}

void decode_client_data(Decoder& d, OsdMap& m) {
  const auto h = d.begin_struct(9, "OSDMap client data");
  if (!d.ok()) return;
  d.raw(m.fsid.bytes.data(), m.fsid.bytes.size(), "fsid");
  m.epoch = d.u32("epoch");
  d.get(m.created);
  d.get(m.modified);
  decode_pools(d, m.pools);
  d.get(m.pool_names);
  m.pool_max = d.s32("pool_max");
  m.flags = d.u32("flags");
  const std::size_t max_osd_at = d.position();
  m.max_osd = d.s32("max_osd");
  if (d.ok() && (m.max_osd < 0 || m.max_osd > kMaxOsd)) {
    d.fail_at(max_osd_at, "max_osd out of range", "max_osd", static_cast<std::uint32_t>(m.max_osd),
              kMaxOsd);
    return;
  }
  if (h.struct_v >= 5) {
    d.get(m.osd_state);
  } else {
    std::vector<std::uint8_t> s;
    d.get(s);
    m.osd_state.assign(s.begin(), s.end());
  }
  d.get(m.osd_weight);
  d.get(m.client_addrs);
  d.get(m.pg_temp);
  d.get(m.primary_temp);
  if (h.struct_v >= 2) d.get(m.primary_affinity);
  const BufferList crush = d.blob("crush");
  if (h.struct_v >= 3) d.get(m.erasure_code_profiles);
  if (h.struct_v >= 4) {
    d.get(m.pg_upmap);
    d.get(m.pg_upmap_items);
  }
  if (h.struct_v >= 6) m.crush_version = d.s32("crush_version");
  // new_removed_snaps, new_purged_snaps (v7), last_up/in_change (v9) and
  // anything newer: not needed by a client, skipped by end_struct.
  d.end_struct(h);
  if (!d.ok()) return;
  const auto size = static_cast<std::size_t>(m.max_osd);
  if (m.osd_state.size() != size || m.osd_weight.size() != size ||
      (!m.primary_affinity.empty() && m.primary_affinity.size() != size)) {
    d.fail("a per-OSD vector does not have max_osd entries", "osd_state/osd_weight/primary_affinity",
           m.osd_state.size(), size);
    return;
  }
  auto c = decode_crush(crush);
  if (!c) {
    d.fail("the CRUSH map does not decode", "crush");
    return;
  }
  m.crush = std::move(*c);
}

}  // namespace

void decode_map_envelope(Decoder& d, const BufferList& bl, const MapEnvelope& names,
                         const std::function<void(Decoder&)>& client) {
  if (bl.length() >= 2) {
    std::uint8_t head[2];
    bl.copy_out(0, 2, head);
    const unsigned v = head[0] | unsigned{head[1]} << 8;
    if (v < 7) return d.fail(names.classic, names.what, v, 7);
  }
  const std::size_t start = d.position();
  const auto h = d.begin_struct(8, names.what);
  client(d);
  if (d.ok()) {
    const auto osd = d.begin_struct(255, names.osd_part);
    d.end_struct(osd);
  }
  std::size_t crc_at = 0;
  std::uint32_t crc = 0;
  const bool has_crc = h.struct_v >= 8;
  if (has_crc && d.ok()) {
    crc_at = d.position();
    crc = d.u32(names.crc_field);
  }
  d.end_struct(h);
  if (!d.ok() || !has_crc) return;
  const std::string flat = bl.to_string();
  std::uint32_t actual = crc32c(0xffffffffu, flat.data() + start, crc_at - start);
  if (h.end > crc_at + 4) actual = crc32c(actual, flat.data() + crc_at + 4, h.end - crc_at - 4);
  if (actual != crc) d.fail_at(crc_at, "crc mismatch", names.crc_field, crc, actual);
}

proto::Result<OsdMap> decode_osdmap(const BufferList& bl) {
  Decoder d(bl);
  Decoder::Scope scope(d, "OSDMap");
  OsdMap m;
  static constexpr MapEnvelope kNames{"OSDMap", "pre-firefly (classic) OSDMap encodings are not supported",
                                      "OSDMap osd-only data", "OSDMap crc"};
  decode_map_envelope(d, bl, kNames, [&m](Decoder& dd) { decode_client_data(dd, m); });
  if (!d.ok()) return d.error();
  return m;
}

}  // namespace siphon::osdmap
