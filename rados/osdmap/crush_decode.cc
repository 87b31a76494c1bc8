// CrushWrapper::decode (rados-client.md §1.5): a versionless format extended
// by "if bytes remain", so fields after the rules are read only while the
// map has bytes left; absent ones keep their legacy values.
#include "crush.h"

namespace siphon::osdmap {
namespace {

using proto::Decoder;

// Sanity bounds: far above any real map, low enough that a hostile count
// cannot make us allocate much (counts are also bounded by the bytes left).
constexpr std::int32_t kMaxBuckets = 1 << 16;
constexpr std::uint32_t kMaxRules = 1 << 16;
constexpr std::int32_t kMaxDevices = 1 << 20;

void decode_bucket(Decoder& d, std::int32_t slot, std::optional<CrushBucket>& out) {
  const std::uint32_t alg = d.u32("bucket alg");
  if (!d.ok() || alg == 0) return;  // empty slot
  CrushBucket b;
  const std::size_t at = d.position();
  b.id = d.s32("bucket id");
  b.type = d.u16("bucket type");
  b.alg = d.u8("bucket alg");
  b.hash = d.u8("bucket hash");
  b.weight = d.u32("bucket weight");
  const std::uint32_t size = d.count(4, "bucket size");
  if (!d.ok()) return;
  if (b.id != -1 - slot) {
    d.fail_at(at, "bucket id does not match its slot (id must be -1 - slot)", "bucket id",
              static_cast<std::uint32_t>(b.id), static_cast<std::uint32_t>(-1 - slot));
    return;
  }
  if (b.alg != alg) {
    d.fail_at(at, "bucket alg differs from the slot's alg", "bucket alg", b.alg, alg);
    return;
  }
  b.items.resize(size);
  for (auto& it : b.items) it = d.s32("bucket item");
  switch (static_cast<BucketAlg>(b.alg)) {
    case BucketAlg::uniform: {
      const std::uint32_t w = d.u32("uniform item_weight");
      b.item_weights.assign(size, w);
      break;
    }
    case BucketAlg::list:
      b.item_weights.resize(size);
      b.sum_weights.resize(size);
      for (std::uint32_t i = 0; i < size && d.ok(); ++i) {
        b.item_weights[i] = d.u32("list item_weight");
        b.sum_weights[i] = d.u32("list sum_weight");
      }
      break;
    case BucketAlg::tree: {
      const std::uint8_t n = d.u8("tree num_nodes");
      b.node_weights.resize(n);
      for (auto& w : b.node_weights) w = d.u32("tree node_weight");
      break;
    }
    case BucketAlg::straw:
      b.item_weights.resize(size);
      b.straws.resize(size);
      for (std::uint32_t i = 0; i < size && d.ok(); ++i) {
        b.item_weights[i] = d.u32("straw item_weight");
        b.straws[i] = d.u32("straw straw");
      }
      break;
    case BucketAlg::straw2:
      b.item_weights.resize(size);
      for (auto& w : b.item_weights) w = d.u32("straw2 item_weight");
      break;
    default:
      d.fail_at(at, "unknown bucket algorithm", "bucket alg", b.alg, 5);
      return;
  }
  if (d.ok()) out = std::move(b);
}

// name maps: s32 key + string; very old encoders wrote 64-bit keys, which
// Ceph recognises by a zero string length and then reads the real length.
void decode_name_map(Decoder& d, std::map<std::int32_t, std::string>& m) {
  const std::uint32_t n = d.count(8, "name map count");
  for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
    const std::int32_t key = d.s32("name key");
    std::uint32_t len = d.u32("name length");
    if (len == 0) len = d.u32("name length (64-bit key)");
    if (len > d.remaining()) {
      d.fail("length exceeds remaining bytes", "name", len, d.remaining());
      return;
    }
    std::string s(len, '\0');
    d.raw(s.data(), len, "name");
    m[key] = std::move(s);
  }
}

void decode_choose_args(Decoder& d, CrushMap& m) {
  const std::uint32_t n = d.count(12, "choose_args count");
  for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
    const std::int64_t index = d.s64("choose_args index");
    ChooseArgMap args;
    const std::uint32_t nb = d.count(12, "choose_args bucket count");
    for (std::uint32_t j = 0; j < nb && d.ok(); ++j) {
      const std::size_t at = d.position();
      const std::uint32_t slot = d.u32("choose_args bucket index");
      if (!d.ok()) return;
      if (slot >= m.buckets.size() || !m.buckets[slot]) {
        d.fail_at(at, "choose_args names a bucket the map does not have", "bucket index", slot,
                  m.buckets.size());
        return;
      }
      const std::size_t bsize = m.buckets[slot]->items.size();
      ChooseArg a;
      const std::uint32_t positions = d.count(4, "weight_set positions");
      a.weight_set.resize(positions);
      for (auto& ws : a.weight_set) {
        const std::size_t wat = d.position();
        const std::uint32_t wn = d.count(4, "weight_set size");
        if (d.ok() && wn != bsize) {
          d.fail_at(wat, "weight_set size differs from the bucket size", "weight_set size", wn, bsize);
          return;
        }
        ws.resize(wn);
        for (auto& w : ws) w = d.u32("weight_set weight");
      }
      const std::size_t iat = d.position();
      const std::uint32_t ni = d.count(4, "choose_args ids size");
      if (d.ok() && ni != 0 && ni != bsize) {
        d.fail_at(iat, "choose_args ids size differs from the bucket size", "ids size", ni, bsize);
        return;
      }
      a.ids.resize(ni);
      for (auto& id : a.ids) id = d.s32("choose_args id");
      if (d.ok()) args[slot] = std::move(a);
    }
    if (d.ok()) m.choose_args[index] = std::move(args);
  }
}

}  // namespace

void decode(Decoder& d, CrushMap& m) {
  Decoder::Scope scope(d, "CrushWrapper");
  m = CrushMap{};
  const std::size_t at = d.position();
  const std::uint32_t magic = d.u32("crush magic");
  if (d.ok() && magic != kCrushMagic) {
    d.fail_at(at, "bad CRUSH magic", "crush magic", magic, kCrushMagic);
    return;
  }
  const std::int32_t max_buckets = d.s32("max_buckets");
  const std::uint32_t max_rules = d.u32("max_rules");
  m.max_devices = d.s32("max_devices");
  if (!d.ok()) return;
  if (max_buckets < 0 || max_buckets > kMaxBuckets || max_rules > kMaxRules ||
      m.max_devices < 0 || m.max_devices > kMaxDevices) {
    d.fail_at(at, "CRUSH map sizes out of range", "max_buckets/max_rules/max_devices",
              static_cast<std::uint32_t>(max_buckets), kMaxBuckets);
    return;
  }
  // Each slot takes at least 4 bytes: a count the input cannot hold fails
  // before anything is allocated.
  if (static_cast<std::uint64_t>(max_buckets) * 4 + std::uint64_t{max_rules} * 4 > d.remaining()) {
    d.fail("bucket and rule slots exceed the remaining bytes", "max_buckets",
           static_cast<std::uint32_t>(max_buckets), d.remaining());
    return;
  }
  m.buckets.resize(static_cast<std::size_t>(max_buckets));
  for (std::int32_t i = 0; i < max_buckets && d.ok(); ++i) decode_bucket(d, i, m.buckets[i]);
  m.rules.resize(max_rules);
  for (std::uint32_t i = 0; i < max_rules && d.ok(); ++i) {
    if (d.u32("rule exists") == 0) continue;
    CrushRule r;
    const std::uint32_t len = d.count(12, "rule length");
    r.ruleset = d.u8("rule ruleset");
    r.type = d.u8("rule type");
    r.min_size = d.u8("rule min_size");
    r.max_size = d.u8("rule max_size");
    r.steps.resize(len);
    for (auto& s : r.steps) {
      s.op = d.u32("step op");
      s.arg1 = d.s32("step arg1");
      s.arg2 = d.s32("step arg2");
    }
    if (d.ok()) m.rules[i] = std::move(r);
  }
  decode_name_map(d, m.type_names);
  decode_name_map(d, m.item_names);
  decode_name_map(d, m.rule_names);
  if (!d.ok()) return;
  auto& t = m.tunables;
  if (d.remaining() > 0) {
    t.choose_local_tries = d.u32("choose_local_tries");
    t.choose_local_fallback_tries = d.u32("choose_local_fallback_tries");
    t.choose_total_tries = d.u32("choose_total_tries");
  }
  if (d.ok() && d.remaining() > 0) t.chooseleaf_descend_once = d.u32("chooseleaf_descend_once");
  if (d.ok() && d.remaining() > 0) t.chooseleaf_vary_r = d.u8("chooseleaf_vary_r");
  if (d.ok() && d.remaining() > 0) t.straw_calc_version = d.u8("straw_calc_version");
  if (d.ok() && d.remaining() > 0) t.allowed_bucket_algs = d.u32("allowed_bucket_algs");
  if (d.ok() && d.remaining() > 0) t.chooseleaf_stable = d.u8("chooseleaf_stable");
  if (d.ok() && d.remaining() > 0) {
    d.get(m.class_map);
    d.get(m.class_names);
    d.get(m.class_buckets);
  }
  if (d.ok() && d.remaining() > 0) decode_choose_args(d, m);
}

proto::Result<CrushMap> decode_crush(const BufferList& bl) {
  Decoder d(bl);
  CrushMap m;
  decode(d, m);
  if (!d.ok()) return d.error();
  return m;
}

}  // namespace siphon::osdmap
