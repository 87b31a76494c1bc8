// Ceph's MonMap (the monitor map a mon sends in MMonMap), decoded from every
// encoding a mon may send (struct versions 1..9; a Pacific mon sends v9 to a
// client with the full feature set) and encoded as v9 (msgr2-wire.md §9.3).
//
//   v9: ENCODE_START(9, 6) (legacy 16-bit version for v < 3)
//       uuid fsid, u32 epoch, [v<6: map<string, entity_addr_t> mon_addr
//       (v1: vector<entity_inst_t>)], utime last_changed, utime created,
//       [v>=4: mon_feature_t persistent, optional], [v>=5: map<string,
//       mon_info_t>], [v>=6: vector<string> ranks], [v>=7: u8
//       min_mon_release], [v>=8: set<s32> removed_ranks, u8
//       election_strategy, set<string> disallowed_leaders], [v>=9: bool
//       stretch_mode_enabled, string tiebreaker_mon, set<string>
//       stretch_marked_down_mons]
//   mon_info_t: ENCODE_START(5, 1) string name, entity_addrvec_t
//       public_addrs, [v>=2 u16 priority], [v>=4 u16 weight], [v>=5
//       map<string,string> crush_loc]
//   mon_feature_t: ENCODE_START(1, 1) u64 features
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "msgr/proto/encoding.h"
#include "msgr/proto/types.h"

namespace siphon::mon {

struct MonInfo {
  std::string name;
  proto::EntityAddrVec public_addrs;
  std::uint16_t priority = 0;
  std::uint16_t weight = 0;
  std::map<std::string, std::string> crush_loc;
  friend bool operator==(const MonInfo&, const MonInfo&) = default;
};

struct MonMap {
  proto::Uuid fsid;
  std::uint32_t epoch = 0;
  proto::UTime last_changed;
  proto::UTime created;
  std::uint64_t persistent_features = 0;  // ceph::features::mon bits
  std::uint64_t optional_features = 0;
  std::map<std::string, MonInfo> mon_info;  // by name
  std::vector<std::string> ranks;           // rank -> name
  std::uint8_t min_mon_release = 0;         // ceph_release_t (16 = pacific)
  std::set<std::int32_t> removed_ranks;
  std::uint8_t election_strategy = 1;       // 1 classic, 2 disallow, 3 connectivity
  std::set<std::string> disallowed_leaders;
  bool stretch_mode_enabled = false;
  std::string tiebreaker_mon;
  std::set<std::string> stretch_marked_down_mons;
  // The struct version it was decoded from (9 for what encode() writes).
  std::uint8_t decoded_version = 9;

  friend bool operator==(const MonMap&, const MonMap&) = default;

  std::size_t size() const noexcept { return ranks.size(); }
  // The mon of `rank`, or nullptr.
  const MonInfo* by_rank(std::size_t rank) const;
};

// Names of the mon feature bits, lowest first ("kraken", "luminous", ...,
// "pacific", "elector-pinging"), as `ceph mon dump -f json` lists them.
std::vector<std::string> mon_feature_names(std::uint64_t features);
// "luminous" (12) ... "pacific" (16), "quincy" (17), "reef" (18); "unknown".
std::string release_name(std::uint8_t release);

void encode(proto::Encoder& e, const MonMap& m);
void decode(proto::Decoder& d, MonMap& m);

}  // namespace siphon::mon
