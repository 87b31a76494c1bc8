#include "msgr/base/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace siphon {

std::uint32_t crc32c(std::uint32_t seed, const void* data, std::size_t len) noexcept {
  // ISA-L's crc32_iscsi is the raw update Ceph uses; it takes an int length,
  // so feed it in chunks.
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  std::uint32_t crc = seed;
  while (len > 0) {
    const std::size_t n = std::min<std::size_t>(len, std::size_t{1} << 30);
    crc = crc32_iscsi(p, static_cast<int>(n), crc);
    p += n;
    len -= n;
  }
  return crc;
}

std::uint32_t crc32c_zeros(std::uint32_t seed, std::size_t len) noexcept {
  static constexpr unsigned char kZeros[4096] = {};
  std::uint32_t crc = seed;
  while (len > 0) {
    const std::size_t n = std::min(len, sizeof(kZeros));
    crc = crc32c(crc, kZeros, n);
    len -= n;
  }
  return crc;
}

}  // namespace siphon
