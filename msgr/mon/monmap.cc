// MonMap decode (v1..v9) and encode (v9). Layout in monmap.h.
#include "msgr/mon/monmap.h"

#include <algorithm>
#include <array>

namespace siphon::mon {

using proto::Decoder;
using proto::Encoder;

const MonInfo* MonMap::by_rank(std::size_t rank) const {
  if (rank >= ranks.size()) return nullptr;
  const auto it = mon_info.find(ranks[rank]);
  return it == mon_info.end() ? nullptr : &it->second;
}

std::vector<std::string> mon_feature_names(std::uint64_t features) {
  static constexpr std::array<const char*, 8> kNames = {
      "kraken", "luminous", "mimic", "osdmap-prune", "nautilus", "octopus", "pacific",
      "elector-pinging"};
  std::vector<std::string> out;
  for (std::size_t bit = 0; bit < 64; ++bit) {
    if ((features & (1ull << bit)) == 0) continue;
    out.push_back(bit < kNames.size() ? kNames[bit] : "unknown-" + std::to_string(bit));
  }
  return out;
}

std::string release_name(std::uint8_t release) {
  static constexpr std::array<const char*, 9> kNames = {
      "luminous", "mimic", "nautilus", "octopus", "pacific", "quincy", "reef", "squid", "tentacle"};
  if (release >= 12 && release < 12 + kNames.size()) return kNames[release - 12];
  return "unknown";
}

namespace {

// mon_feature_t
void encode_feature(Encoder& e, std::uint64_t f) {
  e.versioned(1, 1, [&](Encoder& b) { b.u64(f); });
}
std::uint64_t decode_feature(Decoder& d) {
  std::uint64_t f = 0;
  d.versioned(1, "mon_feature_t", [&](const Decoder::StructHeader&) { f = d.u64("features"); });
  return f;
}

void encode_info(Encoder& e, const MonInfo& m) {
  e.versioned(5, 1, [&](Encoder& b) {
    b.string(m.name);
    m.public_addrs.encode(b);
    b.u16(m.priority);
    b.u16(m.weight);
    proto::encode(b, m.crush_loc);
  });
}
void decode_info(Decoder& d, MonInfo& m) {
  d.versioned(5, "mon_info_t", [&](const Decoder::StructHeader& h) {
    m.name = d.string("mon name");
    proto::decode(d, m.public_addrs);
    if (h.struct_v >= 2) m.priority = d.u16("priority");
    if (h.struct_v >= 4) m.weight = d.u16("weight");
    if (h.struct_v >= 5) proto::decode(d, m.crush_loc);
  });
}

// Ceph's ceph_release_from_features for persistent mon features (v < 7).
std::uint8_t infer_release(std::uint64_t f) {
  if (f & (1ull << 6)) return 16;
  if (f & (1ull << 5)) return 15;
  if (f & (1ull << 4)) return 14;
  if (f & (1ull << 2)) return 13;
  if (f & (1ull << 1)) return 12;
  if (f & (1ull << 0)) return 11;
  return 0;
}

// The first legacy address, else the first one (Ceph's legacy_or_front_addr).
proto::EntityAddr legacy_or_front(const proto::EntityAddrVec& v) {
  if (const proto::EntityAddr* a = v.find(proto::AddrType::legacy)) return *a;
  return v.empty() ? proto::EntityAddr{} : v.front();
}

// Ranks of maps older than v6: ordered by address, then name.
void calc_legacy_ranks(MonMap& m) {
  std::vector<const MonInfo*> v;
  for (const auto& [name, info] : m.mon_info) v.push_back(&info);
  std::stable_sort(v.begin(), v.end(), [](const MonInfo* a, const MonInfo* b) {
    const auto aa = legacy_or_front(a->public_addrs), ba = legacy_or_front(b->public_addrs);
    if (aa == ba) return a->name < b->name;
    return aa < ba;
  });
  m.ranks.clear();
  for (const MonInfo* i : v) m.ranks.push_back(i->name);
}

}  // namespace

void encode(Encoder& e, const MonMap& m) {
  e.versioned(9, 6, [&](Encoder& b) {
    proto::encode(b, m.fsid);
    b.u32(m.epoch);
    proto::encode(b, m.last_changed);
    proto::encode(b, m.created);
    encode_feature(b, m.persistent_features);
    encode_feature(b, m.optional_features);
    b.u32(static_cast<std::uint32_t>(m.mon_info.size()));
    for (const auto& [name, info] : m.mon_info) {
      b.string(name);
      encode_info(b, info);
    }
    proto::encode(b, m.ranks);
    b.u8(m.min_mon_release);
    proto::encode(b, m.removed_ranks);
    b.u8(m.election_strategy);
    proto::encode(b, m.disallowed_leaders);
    b.boolean(m.stretch_mode_enabled);
    b.string(m.tiebreaker_mon);
    proto::encode(b, m.stretch_marked_down_mons);
  });
}

void decode(Decoder& d, MonMap& m) {
  m = MonMap{};
  const Decoder::StructHeader h = d.begin_struct_legacy(9, 3, 3, 1, "MonMap");
  if (!d.ok()) {
    d.end_struct(h);
    return;
  }
  const std::uint8_t v = h.struct_v;
  m.decoded_version = v;
  proto::decode(d, m.fsid);
  m.epoch = d.u32("epoch");
  std::map<std::string, proto::EntityAddr> mon_addr;
  if (v == 1) {
    // vector<entity_inst_t>: entity_name_t + entity_addr_t, named "0", "1", ...
    const std::uint32_t n = d.count(9 + 19, "mon_inst count");
    for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
      proto::EntityNameT name;
      proto::EntityAddr addr;
      proto::decode(d, name);
      proto::decode(d, addr);
      mon_addr[std::to_string(i)] = addr;
    }
  } else if (v < 6) {
    proto::decode(d, mon_addr);
  }
  proto::decode(d, m.last_changed);
  proto::decode(d, m.created);
  if (v >= 4) {
    m.persistent_features = decode_feature(d);
    m.optional_features = decode_feature(d);
  }
  if (v < 5) {
    for (const auto& [name, addr] : mon_addr) {
      MonInfo& info = m.mon_info[name];
      info.name = name;
      info.public_addrs = proto::EntityAddrVec(addr);
    }
  } else {
    const std::uint32_t n = d.count(4 + 6, "mon_info count");
    for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
      std::string name = d.string("mon_info key");
      MonInfo info;
      decode_info(d, info);
      if (d.ok()) m.mon_info.insert_or_assign(std::move(name), std::move(info));
    }
  }
  if (v < 6) {
    calc_legacy_ranks(m);
  } else {
    proto::decode(d, m.ranks);
  }
  m.min_mon_release = v >= 7 ? d.u8("min_mon_release") : infer_release(m.persistent_features);
  if (v >= 8) {
    proto::decode(d, m.removed_ranks);
    m.election_strategy = d.u8("election_strategy");
    proto::decode(d, m.disallowed_leaders);
  }
  if (v >= 9) {
    m.stretch_mode_enabled = d.boolean("stretch_mode_enabled");
    m.tiebreaker_mon = d.string("tiebreaker_mon");
    proto::decode(d, m.stretch_marked_down_mons);
  }
  // Every rank must name a mon of the map (Ceph asserts this when printing).
  for (const std::string& r : m.ranks) {
    if (d.ok() && m.mon_info.find(r) == m.mon_info.end()) {
      d.fail("rank names a mon that is not in the map", "ranks");
    }
  }
  d.end_struct(h);
}

}  // namespace siphon::mon
