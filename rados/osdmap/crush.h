// The CRUSH map as a client needs it (rados-client.md §1.5, §2.5–2.7): the
// bucket hierarchy, the rules, the tunables and the choose_args weight sets,
// decoded from CrushWrapper's encoding, and crush_do_rule over them.
//
// Decoding never trusts the input: every count is bounded by the bytes that
// remain, bucket ids must match their slots, alg-specific arrays must match
// the bucket size, choose_args must fit their buckets. A map Ceph's own
// decoder would accept but then read out of bounds with is rejected here
// with a message saying why; do_rule never reads outside the map whatever
// the rules say (unknown items are skipped, as a missing bucket would be).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/proto/encoding.h"

namespace siphon::osdmap {

inline constexpr std::int32_t kCrushItemNone = 0x7fffffff;  // CRUSH_ITEM_NONE: a hole
inline constexpr std::uint32_t kCrushMagic = 0x00010000;

enum class BucketAlg : std::uint8_t { uniform = 1, list = 2, tree = 3, straw = 4, straw2 = 5 };

struct CrushBucket {
  std::int32_t id = 0;  // -1 - slot index
  std::uint16_t type = 0;
  std::uint8_t alg = 0;  // BucketAlg
  std::uint8_t hash = 0;
  std::uint32_t weight = 0;  // 16.16
  std::vector<std::int32_t> items;
  // straw2, straw, list: one per item; uniform: one value repeated per item.
  std::vector<std::uint32_t> item_weights;
  std::vector<std::uint32_t> sum_weights;   // list
  std::vector<std::uint32_t> node_weights;  // tree (num_nodes entries)
  std::vector<std::uint32_t> straws;        // straw
};

enum class RuleOp : std::uint32_t {
  noop = 0,
  take = 1,
  choose_firstn = 2,
  choose_indep = 3,
  emit = 4,
  chooseleaf_firstn = 6,
  chooseleaf_indep = 7,
  set_choose_tries = 8,
  set_chooseleaf_tries = 9,
  set_choose_local_tries = 10,
  set_choose_local_fallback_tries = 11,
  set_chooseleaf_vary_r = 12,
  set_chooseleaf_stable = 13,
};

struct CrushStep {
  std::uint32_t op = 0;  // RuleOp (unknown ops are ignored, as Ceph)
  std::int32_t arg1 = 0;
  std::int32_t arg2 = 0;
};

struct CrushRule {
  std::uint8_t ruleset = 0;
  std::uint8_t type = 0;  // 1 replicated, 3 erasure
  std::uint8_t min_size = 0;
  std::uint8_t max_size = 0;
  std::vector<CrushStep> steps;
};

// Tunables. The defaults are the legacy values Ceph assumes when an old
// encoding stops before a field.
struct CrushTunables {
  std::uint32_t choose_local_tries = 2;
  std::uint32_t choose_local_fallback_tries = 5;
  std::uint32_t choose_total_tries = 19;
  std::uint32_t chooseleaf_descend_once = 0;
  std::uint8_t chooseleaf_vary_r = 0;
  std::uint8_t straw_calc_version = 0;
  std::uint32_t allowed_bucket_algs = 22;
  std::uint8_t chooseleaf_stable = 0;
};

// One bucket's balancer override: weight sets by position, substitute ids.
struct ChooseArg {
  std::vector<std::vector<std::uint32_t>> weight_set;
  std::vector<std::int32_t> ids;
};
// Per bucket slot (index -1 - bucket id); absent slots have no override.
using ChooseArgMap = std::map<std::uint32_t, ChooseArg>;

struct CrushMap {
  std::vector<std::optional<CrushBucket>> buckets;  // slot i holds bucket id -1-i
  std::vector<std::optional<CrushRule>> rules;
  std::int32_t max_devices = 0;
  CrushTunables tunables;
  std::map<std::int32_t, std::string> type_names;
  std::map<std::int32_t, std::string> item_names;
  std::map<std::int32_t, std::string> rule_names;
  std::map<std::int32_t, std::int32_t> class_map;
  std::map<std::int32_t, std::string> class_names;
  std::map<std::int32_t, std::map<std::int32_t, std::int32_t>> class_buckets;
  // choose_args index (a pool id, or -1 for the default set) -> overrides.
  std::map<std::int64_t, ChooseArgMap> choose_args;

  const CrushBucket* bucket(std::int32_t id) const noexcept {
    if (id >= 0) return nullptr;
    const auto slot = static_cast<std::size_t>(-1 - static_cast<std::int64_t>(id));
    return slot < buckets.size() && buckets[slot] ? &*buckets[slot] : nullptr;
  }

  /// crush_find_rule: the lowest rule index whose mask matches, or -1.
  int find_rule(int ruleset, int type, int size) const noexcept;

  /// The choose_args for a pool: its own set, else the default (-1), else
  /// none (CrushWrapper::choose_args_get_with_fallback).
  const ChooseArgMap* choose_args_for(std::int64_t pool) const noexcept;

  /// crush_do_rule: up to result_max items for input x. `weights` are the
  /// OSDMap's reweights (16.16, index = device id) used by is_out. The work
  /// is bounded: a map that would keep Ceph's mapper looping (a corrupt
  /// replica count or tries value, a cycle) gives an empty result and sets
  /// *gave_up.
  std::vector<std::int32_t> do_rule(int ruleno, std::uint32_t x, int result_max,
                                    const std::vector<std::uint32_t>& weights,
                                    const ChooseArgMap* args, bool* gave_up = nullptr) const;
};

/// CrushWrapper::decode of a whole CRUSH bufferlist.
proto::Result<CrushMap> decode_crush(const BufferList& bl);
/// The same, reading from (and advancing) a decoder bounded to the map.
void decode(proto::Decoder& d, CrushMap& m);

}  // namespace siphon::osdmap
