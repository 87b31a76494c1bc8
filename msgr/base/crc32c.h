// CRC32-C exactly as Ceph computes it (ceph_crc32c): the raw Castagnoli update
// with the register initialised to `seed`, no input inversion and no final
// XOR. msgr2 uses seed 0 for preambles and seed 0xFFFFFFFF for segments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace siphon {

std::uint32_t crc32c(std::uint32_t seed, const void* data, std::size_t len) noexcept;

inline std::uint32_t crc32c(std::uint32_t seed, std::span<const std::byte> bytes) noexcept {
  return crc32c(seed, bytes.data(), bytes.size());
}

// The CRC of `len` zero bytes; used where Ceph computes crc32c(seed, NULL, len).
std::uint32_t crc32c_zeros(std::uint32_t seed, std::size_t len) noexcept;

}  // namespace siphon
