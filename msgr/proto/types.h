// Ceph names and addresses as msgr2 carries them (msgr2-wire.md §1.2, §6).
//
//   EntityName     auth identity "client.admin": u32 type + string id
//   EntityNameT    Ceph entity_name_t "client.4099": u8 type + s64 num
//   EntityAddr     Ceph entity_addr_t (type, nonce, socket address), in the
//                  msgr2 "ADDR2" encoding (marker 1, versioned struct v1) and
//                  the legacy 136-byte encoding (marker 0) for old peers
//   EntityAddrVec  Ceph entity_addrvec_t (marker 2 + count + addresses)
//
// Text forms follow Ceph: "v2:127.0.0.1:3300/0", "[v2:...,v1:...]",
// "127.0.0.1:6789" (no prefix = type ANY until resolved, see
// resolve_mon_addr), "[::1]:3300/7", "-" (type NONE).
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "msgr/base/address.h"
#include "msgr/proto/encoding.h"
#include "msgr/proto/features.h"

namespace siphon::proto {

// ---------------------------------------------------------------------------
// Constants (§1.2)

// CEPH_ENTITY_TYPE_*
inline constexpr std::uint8_t kEntityTypeMon = 0x01;
inline constexpr std::uint8_t kEntityTypeMds = 0x02;
inline constexpr std::uint8_t kEntityTypeOsd = 0x04;
inline constexpr std::uint8_t kEntityTypeClient = 0x08;
inline constexpr std::uint8_t kEntityTypeMgr = 0x10;
inline constexpr std::uint8_t kEntityTypeAuth = 0x20;
inline constexpr std::uint8_t kEntityTypeAny = 0xff;
/// "mon", "mds", "osd", "client", "mgr", "auth", "any"; "unknown" otherwise.
std::string_view entity_type_name(std::uint32_t type) noexcept;
/// The inverse of entity_type_name (not "unknown").
std::optional<std::uint8_t> entity_type_from_name(std::string_view name) noexcept;

// CEPH_AUTH_* (auth methods)
inline constexpr std::uint32_t kAuthMethodUnknown = 0;
inline constexpr std::uint32_t kAuthMethodNone = 1;
inline constexpr std::uint32_t kAuthMethodCephx = 2;
inline constexpr std::uint32_t kAuthMethodGss = 4;

// CEPH_CON_MODE_* (connection modes)
inline constexpr std::uint32_t kConModeUnknown = 0;
inline constexpr std::uint32_t kConModeCrc = 1;
inline constexpr std::uint32_t kConModeSecure = 2;

// AUTH_MODE_* (first byte of an auth payload)
inline constexpr std::uint8_t kAuthModeNone = 0;
inline constexpr std::uint8_t kAuthModeAuthorizer = 1;
inline constexpr std::uint8_t kAuthModeAuthorizerMax = 9;
inline constexpr std::uint8_t kAuthModeMon = 10;
inline constexpr std::uint8_t kAuthModeMonMax = 19;

/// CEPH_MSG_CONNECT_LOSSY: the `flags` bit of CLIENT_IDENT / SERVER_IDENT.
inline constexpr std::uint64_t kMsgConnectLossy = 1;

inline constexpr std::uint16_t kMonPortIana = 3300;   // msgr2
inline constexpr std::uint16_t kMonPortLegacy = 6789; // msgr1

// ---------------------------------------------------------------------------
// Names

/// Ceph EntityName: the auth identity, e.g. client.admin.
struct EntityName {
  std::uint32_t type = kEntityTypeClient;
  std::string id;

  friend bool operator==(const EntityName&, const EntityName&) = default;
  /// "client.admin"
  std::string to_string() const;
  /// "client.admin" (the type must be a known name, the id may be empty).
  static std::optional<EntityName> parse(std::string_view text);
};
void encode(Encoder& e, const EntityName& n);
void decode(Decoder& d, EntityName& n);
template <>
struct MinEncodedSize<EntityName> : std::integral_constant<std::size_t, 8> {};

/// Ceph entity_name_t: a type and a number (client.4099, mon.0). A negative
/// number means "not assigned yet" and prints as "client.?".
struct EntityNameT {
  std::uint8_t type = kEntityTypeClient;
  std::int64_t num = -1;

  friend bool operator==(const EntityNameT&, const EntityNameT&) = default;
  std::string to_string() const;
  static std::optional<EntityNameT> parse(std::string_view text);
};
void encode(Encoder& e, const EntityNameT& n);
void decode(Decoder& d, EntityNameT& n);
template <>
struct MinEncodedSize<EntityNameT> : std::integral_constant<std::size_t, 9> {};

// ---------------------------------------------------------------------------
// Addresses

/// entity_addr_t::type. Values outside the enumerators decode and re-encode
/// unchanged (Ceph does not validate the field either).
enum class AddrType : std::uint32_t { none = 0, legacy = 1, msgr2 = 2, any = 3, cidr = 4 };
/// "none", "v1", "v2", "any", "cidr"; "???" otherwise.
std::string_view to_string(AddrType t) noexcept;

struct EntityAddr {
  AddrType type = AddrType::none;
  std::uint32_t nonce = 0;
  NetAddress addr;  // AF_UNSPEC = the blank address

  EntityAddr() = default;
  EntityAddr(AddrType t, const NetAddress& a, std::uint32_t n = 0) : type(t), nonce(n), addr(a) {}

  bool is_blank() const noexcept { return addr.is_unspecified(); }
  bool is_msgr2() const noexcept { return type == AddrType::msgr2; }
  bool is_legacy() const noexcept { return type == AddrType::legacy; }
  std::uint16_t port() const noexcept { return addr.port(); }

  /// Ceph's text form: "v2:127.0.0.1:3300/0", "[::1]:6800/12" (type ANY has
  /// no prefix), "-" for type NONE.
  std::string to_string() const;
  /// Parses the whole of `text`. Without a "v1:"/"v2:"/"any:" prefix the
  /// address gets `default_type`. Port and "/nonce" are optional (0).
  static std::optional<EntityAddr> parse(std::string_view text,
                                         AddrType default_type = AddrType::any);
  /// Parses an address at the front of `text` and advances it past it.
  static std::optional<EntityAddr> parse_prefix(std::string_view& text,
                                                AddrType default_type = AddrType::any);

  /// Ceph's equality: type, nonce and the socket address bytes
  /// (memcmp semantics, §6.1).
  friend bool operator==(const EntityAddr& a, const EntityAddr& b) noexcept {
    return a.type == b.type && a.nonce == b.nonce && a.addr == b.addr;
  }
  /// Ceph's ordering (memcmp of the in-memory entity_addr_t on a
  /// little-endian host: type, nonce, then the 28-byte sockaddr union). Used
  /// for the "higher address waits" rule of reconnect races (§8.2/§8.3).
  friend std::strong_ordering operator<=>(const EntityAddr& a, const EntityAddr& b) noexcept;

  /// ADDR2 encoding when `features` has MSG_ADDR2 (always, inside msgr2
  /// frames), else the legacy 136-byte form. Without SERVER_NAUTILUS, type
  /// ANY is written as LEGACY (Ceph does the same for old peers).
  void encode(Encoder& e, std::uint64_t features = features::kSupported) const;
  /// The legacy (marker 0, 136-byte) form.
  void encode_legacy(Encoder& e) const;
};
void encode(Encoder& e, const EntityAddr& a);
/// Accepts the ADDR2 form (marker 1) and the legacy form (marker 0).
void decode(Decoder& d, EntityAddr& a);
template <>
struct MinEncodedSize<EntityAddr> : std::integral_constant<std::size_t, 19> {};

/// Encoded size of an ADDR2 IPv4 address (the mon address of §4.6).
inline constexpr std::size_t kEntityAddrIpv4Size = 35;
inline constexpr std::size_t kEntityAddrLegacySize = 136;

struct EntityAddrVec {
  std::vector<EntityAddr> addrs;

  EntityAddrVec() = default;
  explicit EntityAddrVec(EntityAddr a) { addrs.push_back(std::move(a)); }
  explicit EntityAddrVec(std::vector<EntityAddr> v) : addrs(std::move(v)) {}

  bool empty() const noexcept { return addrs.empty(); }
  std::size_t size() const noexcept { return addrs.size(); }
  const EntityAddr& front() const { return addrs.front(); }
  /// The first address of that type, or nullptr.
  const EntityAddr* find(AddrType t) const noexcept;
  /// Exact (Ceph-equality) membership, as SERVER_IDENT's check needs.
  bool contains(const EntityAddr& a) const noexcept;
  /// The first LEGACY address, or a blank one (what old peers are sent).
  EntityAddr legacy_addr() const;

  friend bool operator==(const EntityAddrVec&, const EntityAddrVec&) = default;

  /// One address prints bare, several as "[a,b]", none as "".
  std::string to_string() const;
  /// "[v2:1.2.3.4:3300/0,v1:1.2.3.4:6789/0]" or one address; whole text.
  static std::optional<EntityAddrVec> parse(std::string_view text,
                                            AddrType default_type = AddrType::any);

  /// marker 2 + u32 count + ADDR2 addresses (MSG_ADDR2 set), else a single
  /// legacy address (legacy_addr()).
  void encode(Encoder& e, std::uint64_t features = features::kSupported) const;
};
void encode(Encoder& e, const EntityAddrVec& v);
/// Accepts marker 2 (vector), marker 1 (one ADDR2 address) and marker 0 (one
/// legacy address); anything else is an error.
void decode(Decoder& d, EntityAddrVec& v);
template <>
struct MinEncodedSize<EntityAddrVec> : std::integral_constant<std::size_t, 5> {};

/// How Ceph reads a monitor address given without an explicit vector
/// (MonMap's "ambiguous address" rules): with a v1:/v2: prefix and port 0
/// the type's default port is used; without a prefix, port 6789 means v1,
/// port 3300 means v2, port 0 means both [v2:ip:3300, v1:ip:6789], and any
/// other port is tried as v2 first and then v1.
EntityAddrVec resolve_mon_addr(const EntityAddr& parsed);
/// Parses a `mon_host` value: entries separated by ',' ';' or spaces, each an
/// address vector in brackets (taken as given) or one address (resolved with
/// resolve_mon_addr). nullopt if any entry does not parse or none is found.
std::optional<std::vector<EntityAddrVec>> parse_mon_host(std::string_view text);

}  // namespace siphon::proto
