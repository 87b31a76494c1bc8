// The hash functions placement is built on (rados-client.md §2.2–2.4):
// Ceph's object-name hashes (ceph_str_hash: rjenkins lookup2 and the Linux
// dcache hash), the CRUSH integer hashes (crush_hash32_2/3/4, rjenkins1) and
// crush_ln(), the fixed-point log2 straw2 draws with. All are pure functions
// of their arguments, bit-exact with Ceph 16.2.
#pragma once

#include <cstdint>
#include <string_view>

namespace siphon::osdmap {

// pg_pool_t::object_hash values.
inline constexpr std::uint8_t kStrHashLinux = 1;
inline constexpr std::uint8_t kStrHashRjenkins = 2;

/// ceph_str_hash_rjenkins: Bob Jenkins' lookup2 over the bytes.
std::uint32_t str_hash_rjenkins(std::string_view s) noexcept;
/// ceph_str_hash_linux: the Linux dcache name hash.
std::uint32_t str_hash_linux(std::string_view s) noexcept;
/// ceph_str_hash(type, s): 0xffffffff for an unknown type (as Ceph).
std::uint32_t str_hash(std::uint8_t type, std::string_view s) noexcept;

// CRUSH bucket hash types; rjenkins1 is the only one Ceph defines. The
// functions below return 0 for any other type, as Ceph's crush_hash32_*.
inline constexpr std::uint8_t kCrushHashRjenkins1 = 0;

std::uint32_t crush_hash32_2(std::uint8_t type, std::uint32_t a, std::uint32_t b) noexcept;
std::uint32_t crush_hash32_3(std::uint8_t type, std::uint32_t a, std::uint32_t b,
                             std::uint32_t c) noexcept;
std::uint32_t crush_hash32_4(std::uint8_t type, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                             std::uint32_t d) noexcept;

/// 2^44 * log2(x + 1) in fixed point, for x in [0, 0xffff] (higher bits are
/// ignored, as the caller masks them), computed from Ceph's two tables.
std::uint64_t crush_ln(std::uint32_t x) noexcept;

/// ceph_stable_mod: x mod b such that growing b splits, never reshuffles.
inline std::uint32_t stable_mod(std::uint32_t x, std::uint32_t b, std::uint32_t bmask) noexcept {
  return (x & bmask) < b ? (x & bmask) : (x & (bmask >> 1));
}

}  // namespace siphon::osdmap
