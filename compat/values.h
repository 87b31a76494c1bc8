// Typed option values and their text forms, with Ceph's exact parsing rules
// (src/common/strtol.cc, options.cc, ceph_time.cc, msg_types.cc, checked
// against Ceph 16.2). Where Ceph silently ignores a bad value and keeps the
// default, these parsers return an error that says what Ceph accepts.
//
//   bool    true / false (any case) or an integer (0 = false). Ceph does NOT
//           accept yes/no/on/off: it would ignore them.
//   int     decimal, optional sign, optional SI suffix K M G T P E (x1000^n):
//   uint      "5K" = 5000. No 'B', no lowercase, no hex, no "1.5K".
//   size    decimal bytes with an IEC suffix K M G T P E (x1024^n), written
//           K, Ki, KB or KiB (also a bare B): "128K" = 131072. Ceph's C++
//           source writes 128_K; that form is not valid in a file.
//   float   strtod: 0.2, .5, 1e2, 0x10; Siphon rejects nan and inf.
//   secs    "30", "30s", "1m 30s", "2 hours", "1h30m" (units s sec second
//           seconds m min minute minutes h hr hour hours d day days w wk week
//           weeks mo month months y yr year years; a bare number is seconds).
//   addr    [v1:|v2:|any:]IP[:port][/nonce], IPv6 in brackets; "-" or
//           empty = unset. Host names are not resolved.
//   addrvec an addr, or [addr,addr,...].
//   uuid    8-4-4-4-12 hex digits, or 32 hex digits, optionally in braces.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "msgr/base/address.h"

namespace siphon::compat {

/// Ceph's entity_addr_t as configuration sees it.
struct EntityAddr {
  enum class Type : unsigned char { none, legacy, msgr2, any };
  Type type = Type::none;
  NetAddress ip;
  std::uint32_t nonce = 0;

  bool is_set() const noexcept { return type != Type::none; }
  /// Ceph's form: "v2:1.2.3.4:3300/0", "v1:[::1]:6789/7", "1.2.3.4:0/0"
  /// (any), "-" (unset).
  std::string to_string() const;
  friend bool operator==(const EntityAddr&, const EntityAddr&) = default;
};

struct EntityAddrVec {
  std::vector<EntityAddr> addrs;
  /// "" (empty), one address as EntityAddr::to_string, else "[a,b]".
  std::string to_string() const;
  friend bool operator==(const EntityAddrVec&, const EntityAddrVec&) = default;
};

struct Uuid {
  std::array<std::uint8_t, 16> bytes{};
  bool is_zero() const noexcept;
  std::string to_string() const;  // lowercase 8-4-4-4-12
  friend bool operator==(const Uuid&, const Uuid&) = default;
};

// Each parser returns nullopt and sets `error` (one sentence, no location)
// when `text` is not valid. `text` is used as is: callers trim.
std::optional<bool> parse_bool(std::string_view text, std::string& error);
std::optional<std::int64_t> parse_int(std::string_view text, std::string& error);
std::optional<std::uint64_t> parse_uint(std::string_view text, std::string& error);
std::optional<std::uint64_t> parse_size(std::string_view text, std::string& error);
std::optional<double> parse_float(std::string_view text, std::string& error);
std::optional<std::chrono::seconds> parse_secs(std::string_view text, std::string& error);
std::optional<EntityAddr> parse_addr(std::string_view text, std::string& error);
std::optional<EntityAddrVec> parse_addrvec(std::string_view text, std::string& error);
std::optional<Uuid> parse_uuid(std::string_view text, std::string& error);

/// Ceph's text for a float option: fixed, six decimals ("0.200000").
std::string format_float(double v);

/// A `debug_<subsys>` value, Ceph's "N" or "N/M" (0..99 each; "N" = "N/N").
struct DebugLevel {
  int log = 0;     // written to the log
  int gather = 0;  // kept in memory (Siphon: unused)
  std::string to_string() const;  // "N/M"
};
std::optional<DebugLevel> parse_debug_level(std::string_view text, std::string& error);

/// An RDMA GID written as an IPv6 address (any IPv6 notation, e.g.
/// "fe80::5054:ff:fe12:3456" or the full "fe80:0000:...:3456").
std::optional<std::array<std::uint8_t, 16>> parse_gid(std::string_view text, std::string& error);

/// Splits on any of `separators`, dropping empty items (Ceph's get_str_list).
std::vector<std::string> split_list(std::string_view text, std::string_view separators = ", ;\t");

}  // namespace siphon::compat
