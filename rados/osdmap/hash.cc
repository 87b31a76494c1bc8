#include "hash.h"

#include <bit>

#include "crush_ln_table.h"

namespace siphon::osdmap {
namespace {

// Jenkins' 96-bit mix, in place (later mixes see the modified values).
inline void mix(std::uint32_t& a, std::uint32_t& b, std::uint32_t& c) noexcept {
  a -= b; a -= c; a ^= c >> 13;
  b -= c; b -= a; b ^= a << 8;
  c -= a; c -= b; c ^= b >> 13;
  a -= b; a -= c; a ^= c >> 12;
  b -= c; b -= a; b ^= a << 16;
  c -= a; c -= b; c ^= b >> 5;
  a -= b; a -= c; a ^= c >> 3;
  b -= c; b -= a; b ^= a << 10;
  c -= a; c -= b; c ^= b >> 15;
}

inline std::uint32_t le32(const unsigned char* p) noexcept {
  return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
         std::uint32_t{p[3]} << 24;
}

constexpr std::uint32_t kCrushSeed = 1315423911u;
constexpr std::uint32_t kX = 231232u;
constexpr std::uint32_t kY = 1232u;

}  // namespace

std::uint32_t str_hash_rjenkins(std::string_view s) noexcept {
  const auto* k = reinterpret_cast<const unsigned char*>(s.data());
  const std::uint32_t length = static_cast<std::uint32_t>(s.size());
  std::uint32_t a = 0x9e3779b9u, b = 0x9e3779b9u, c = 0;
  std::size_t len = s.size();
  while (len >= 12) {
    a += le32(k);
    b += le32(k + 4);
    c += le32(k + 8);
    mix(a, b, c);
    k += 12;
    len -= 12;
  }
  c += length;
  // The tail: bytes 0..3 into a, 4..7 into b, 8..10 into c above its low
  // byte (which holds the length).
  switch (len) {
    case 11: c += std::uint32_t{k[10]} << 24; [[fallthrough]];
    case 10: c += std::uint32_t{k[9]} << 16; [[fallthrough]];
    case 9: c += std::uint32_t{k[8]} << 8; [[fallthrough]];
    case 8: b += std::uint32_t{k[7]} << 24; [[fallthrough]];
    case 7: b += std::uint32_t{k[6]} << 16; [[fallthrough]];
    case 6: b += std::uint32_t{k[5]} << 8; [[fallthrough]];
    case 5: b += k[4]; [[fallthrough]];
    case 4: a += std::uint32_t{k[3]} << 24; [[fallthrough]];
    case 3: a += std::uint32_t{k[2]} << 16; [[fallthrough]];
    case 2: a += std::uint32_t{k[1]} << 8; [[fallthrough]];
    case 1: a += k[0]; [[fallthrough]];
    default: break;
  }
  mix(a, b, c);
  return c;
}

std::uint32_t str_hash_linux(std::string_view s) noexcept {
  std::uint32_t h = 0;
  for (const char ch : s) {
    const std::uint32_t c = static_cast<unsigned char>(ch);
    h = (h + (c << 4) + (c >> 4)) * 11;
  }
  return h;
}

std::uint32_t str_hash(std::uint8_t type, std::string_view s) noexcept {
  switch (type) {
    case kStrHashLinux: return str_hash_linux(s);
    case kStrHashRjenkins: return str_hash_rjenkins(s);
    default: return 0xffffffffu;
  }
}

std::uint32_t crush_hash32_2(std::uint8_t type, std::uint32_t a, std::uint32_t b) noexcept {
  if (type != kCrushHashRjenkins1) return 0;
  std::uint32_t h = kCrushSeed ^ a ^ b, x = kX, y = kY;
  mix(a, b, h);
  mix(x, a, h);
  mix(b, y, h);
  return h;
}

std::uint32_t crush_hash32_3(std::uint8_t type, std::uint32_t a, std::uint32_t b,
                             std::uint32_t c) noexcept {
  if (type != kCrushHashRjenkins1) return 0;
  std::uint32_t h = kCrushSeed ^ a ^ b ^ c, x = kX, y = kY;
  mix(a, b, h);
  mix(c, x, h);
  mix(y, a, h);
  mix(b, x, h);
  mix(y, c, h);
  return h;
}

std::uint32_t crush_hash32_4(std::uint8_t type, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                             std::uint32_t d) noexcept {
  if (type != kCrushHashRjenkins1) return 0;
  std::uint32_t h = kCrushSeed ^ a ^ b ^ c ^ d, x = kX, y = kY;
  mix(a, b, h);
  mix(c, d, h);
  mix(a, x, h);
  mix(y, b, h);
  mix(c, x, h);
  mix(y, d, h);
  return h;
}

std::uint64_t crush_ln(std::uint32_t xin) noexcept {
  std::uint32_t x = (xin & 0xffffu) + 1;
  int iexpon = 15;
  // Normalise small inputs so the table index uses the top bits.
  if ((x & 0x18000u) == 0) {
    const int bits = std::countl_zero(x & 0x1ffffu) - 16;
    x <<= bits;
    iexpon = 15 - bits;
  }
  const std::uint32_t index1 = (x >> 8) << 1;
  const std::uint64_t rh = static_cast<std::uint64_t>(kCrushRhLh[index1 - 256]);
  std::uint64_t lh = static_cast<std::uint64_t>(kCrushRhLh[index1 + 1 - 256]);
  const std::uint64_t xl64 = (static_cast<std::uint64_t>(x) * rh) >> 48;
  std::uint64_t result = static_cast<std::uint64_t>(iexpon) << 44;
  const std::uint32_t index2 = static_cast<std::uint32_t>(xl64 & 0xff);
  lh = (lh + static_cast<std::uint64_t>(kCrushLl[index2])) >> 4;
  return result + lh;
}

}  // namespace siphon::osdmap
