// CEPH_FEATURE_* bits of Ceph Pacific (msgr2-wire.md §11): the 64-bit
// feature masks carried in CLIENT_IDENT / SERVER_IDENT. They are distinct
// from the msgr2 banner bits (frame.h, Banner).
//
// Some bits were reused over Ceph's history. A reused bit only counts when
// its "incarnation" marker bits are set as well: incarnation 2 adds bit 57
// (SERVER_JEWEL), incarnation 3 adds bits 57 and 28 (SERVER_MIMIC). So each
// feature has a bit (kBit...) and a mask (kMask... = bit | incarnation) and
// has_feature() tests the mask, as Ceph's HAVE_FEATURE does.
#pragma once

#include <cstdint>

namespace siphon::proto::features {

constexpr std::uint64_t bit(unsigned n) { return std::uint64_t{1} << n; }

// Incarnation markers.
inline constexpr std::uint64_t kIncarnation1 = 0;
inline constexpr std::uint64_t kIncarnation2 = bit(57);             // SERVER_JEWEL
inline constexpr std::uint64_t kIncarnation3 = bit(57) | bit(28);   // + SERVER_MIMIC

// Feature bits (value = the bit alone, as on the wire).
inline constexpr std::uint64_t kUid = bit(0);
inline constexpr std::uint64_t kNoSrcAddr = bit(1);
inline constexpr std::uint64_t kServerNautilus = bit(2);      // incarnation 3
inline constexpr std::uint64_t kFlock = bit(3);
inline constexpr std::uint64_t kSubscribe2 = bit(4);
inline constexpr std::uint64_t kMonNames = bit(5);
inline constexpr std::uint64_t kReconnectSeq = bit(6);
inline constexpr std::uint64_t kDirLayoutHash = bit(7);
inline constexpr std::uint64_t kObjectLocator = bit(8);
inline constexpr std::uint64_t kPgid64 = bit(9);
inline constexpr std::uint64_t kIncSubOsdMap = bit(10);
inline constexpr std::uint64_t kPgPool3 = bit(11);
inline constexpr std::uint64_t kOsdReplyMux = bit(12);
inline constexpr std::uint64_t kOsdEnc = bit(13);
inline constexpr std::uint64_t kServerKraken = bit(14);       // incarnation 2
inline constexpr std::uint64_t kMonEnc = bit(15);
inline constexpr std::uint64_t kServerOctopus = bit(16);      // incarnation 3
inline constexpr std::uint64_t kOsPerfStatNs = bit(17);       // not in ALL
inline constexpr std::uint64_t kCrushTunables = bit(18);
inline constexpr std::uint64_t kOsdPglogHardlimit = bit(19);  // incarnation 2
inline constexpr std::uint64_t kServerPacific = bit(20);      // incarnation 3
inline constexpr std::uint64_t kServerLuminous = bit(21);     // incarnation 2
inline constexpr std::uint64_t kOsdFixedCollectionList = bit(22);  // incarnation 2
inline constexpr std::uint64_t kMsgAuth = bit(23);
inline constexpr std::uint64_t kRecoveryReservation2 = bit(24);
inline constexpr std::uint64_t kCrushTunables2 = bit(25);
inline constexpr std::uint64_t kCreatePoolId = bit(26);
inline constexpr std::uint64_t kReplyCreateInode = bit(27);
inline constexpr std::uint64_t kServerMimic = bit(28);
inline constexpr std::uint64_t kMdsEnc = bit(29);
inline constexpr std::uint64_t kOsdHashPsPool = bit(30);
inline constexpr std::uint64_t kMonSinglePaxos = bit(31);
inline constexpr std::uint64_t kStretchMode = bit(32);        // incarnation 3
inline constexpr std::uint64_t kRangeBlocklist = bit(34);     // set by 16.2.15 mons
inline constexpr std::uint64_t kOsdCachePool = bit(35);
inline constexpr std::uint64_t kCrushV2 = bit(36);
inline constexpr std::uint64_t kExportPeer = bit(37);
inline constexpr std::uint64_t kOsdMapEnc = bit(39);
inline constexpr std::uint64_t kMdsInlineData = bit(40);
inline constexpr std::uint64_t kCrushTunables3 = bit(41);
inline constexpr std::uint64_t kMsgrKeepalive2 = bit(42);
inline constexpr std::uint64_t kOsdPoolResend = bit(43);
inline constexpr std::uint64_t kOsdFadviseFlags = bit(46);
inline constexpr std::uint64_t kMdsQuota = bit(47);
inline constexpr std::uint64_t kCrushV4 = bit(48);
inline constexpr std::uint64_t kNewOsdOpEncoding = bit(56);
inline constexpr std::uint64_t kMonStatefulSub = bit(57);     // = SERVER_JEWEL
inline constexpr std::uint64_t kServerJewel = bit(57);
inline constexpr std::uint64_t kCrushTunables5 = bit(58);
inline constexpr std::uint64_t kMsgAddr2 = bit(59);
inline constexpr std::uint64_t kOsdRecoveryDeletes = bit(60);
inline constexpr std::uint64_t kCephxV2 = bit(61);
/// Bits 62 and 63 are reserved sentinels and must never be set.
inline constexpr std::uint64_t kReserved = bit(62) | bit(63);

// Masks for has_feature() (bit | incarnation).
inline constexpr std::uint64_t kMaskServerNautilus = kServerNautilus | kIncarnation3;
inline constexpr std::uint64_t kMaskServerOctopus = kServerOctopus | kIncarnation3;
inline constexpr std::uint64_t kMaskServerPacific = kServerPacific | kIncarnation3;
inline constexpr std::uint64_t kMaskStretchMode = kStretchMode | kIncarnation3;
inline constexpr std::uint64_t kMaskServerLuminous = kServerLuminous | kIncarnation2;
inline constexpr std::uint64_t kMaskServerKraken = kServerKraken | kIncarnation2;
inline constexpr std::uint64_t kMaskServerMimic = kServerMimic | kIncarnation2;
inline constexpr std::uint64_t kMaskMsgAddr2 = kMsgAddr2;

/// True when every bit of `mask` (a feature bit plus its incarnation) is set.
constexpr bool has_feature(std::uint64_t features, std::uint64_t mask) {
  return (features & mask) == mask;
}

/// CEPH_FEATURES_ALL of the Pacific 16.2.10 sources.
inline constexpr std::uint64_t kPacific1610All = 0x3f01cfb9fffdffffull;
/// What a 16.2.15 mon advertises (16.2.10's set plus bit 34). This is the
/// set Siphon advertises in CLIENT_IDENT / SERVER_IDENT (§11, pitfall 18):
/// the mon's required mask grows with cluster state, so a smaller mask can
/// fail later with IDENT_MISSING_FEATURES.
inline constexpr std::uint64_t kSupported = 0x3f01cfbdfffdffffull;
/// What Siphon requires of a peer: MSG_ADDR2 (as Ceph sends in
/// features_required; a server also always adds it to its policy's mask).
inline constexpr std::uint64_t kRequired = kMsgAddr2;
/// A fresh Pacific cluster's required mask for clients, as observed in
/// IDENT_MISSING_FEATURES / SERVER_IDENT (CRUSH_TUNABLES, _TUNABLES2,
/// _TUNABLES3, CRUSH_V4, CRUSH_TUNABLES5, MSG_ADDR2).
inline constexpr std::uint64_t kObservedMonClientRequired = 0x0c01020002040000ull;

static_assert((kSupported & kReserved) == 0);
static_assert((kSupported & kPacific1610All) == kPacific1610All);
static_assert((kSupported & ~kPacific1610All) == kRangeBlocklist);
static_assert((kSupported & kObservedMonClientRequired) == kObservedMonClientRequired);
static_assert(has_feature(kSupported, kMaskServerNautilus));
static_assert(has_feature(kSupported, kMaskServerPacific));

/// The features `required` asks for that `supported` lacks (0 = none).
constexpr std::uint64_t missing(std::uint64_t required, std::uint64_t supported) {
  return required & ~supported;
}

}  // namespace siphon::proto::features
