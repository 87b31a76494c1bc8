// How the RDMA stack sizes its registered pools, and so how much memory one
// stack of a configuration may pin (docs/rdma-transport.md §6, "Pinned
// memory"). RdmaStack builds its pools from pool_geometry(), and
// siphon-doctor compares pinned_memory() with RLIMIT_MEMLOCK: one formula,
// so the doctor's "need" is what the stack would register.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "rdma/transport/options.h"

namespace siphon::rdma {

inline constexpr std::size_t kSendSlabBytes = 4u << 20;  // send slabs: 4 MiB of buffers
inline constexpr std::size_t kHugePageBytes = 2u << 20;  // ms_async_rdma_enable_hugepage
inline constexpr std::size_t kPoolPageBytes = 4096;      // slabs without hugepages

// Buffers per registered slab of each pool (the pool's growth step).
struct PoolGeometry {
  std::size_t send_per_slab = 1;
  std::size_t recv_per_slab = 1;  // one connection's receive set, rounded to whole hugepages
};

constexpr std::size_t round_up_to(std::size_t v, std::size_t to) noexcept { return (v + to - 1) / to * to; }

constexpr PoolGeometry pool_geometry(const RdmaOptions& o) noexcept {
  PoolGeometry g;
  const std::size_t b = std::max<std::size_t>(o.buffer_size, 1);
  g.send_per_slab = std::max<std::size_t>(1, kSendSlabBytes / b);
  g.recv_per_slab = std::size_t{o.credits} + kUpdateSlots;
  if (o.enable_hugepage) g.recv_per_slab = std::max<std::size_t>(1, round_up_to(g.recv_per_slab * b, kHugePageBytes) / b);
  return g;
}

// Bytes a pool of `cap` buffers of `buffer` bytes registers when full, in
// slabs of `per_slab` buffers, each rounded to its page size (BufferPool).
constexpr std::uint64_t pool_bytes(std::size_t buffer, std::size_t cap, std::size_t per_slab, bool huge) noexcept {
  const std::size_t b = round_up_to(std::max<std::size_t>(buffer, 64), 64);  // BufferPool's rounding
  const std::size_t page = huge ? kHugePageBytes : kPoolPageBytes;
  const std::size_t full = cap / per_slab, rest = cap % per_slab;
  return std::uint64_t{full} * round_up_to(per_slab * b, page) + (rest != 0 ? round_up_to(rest * b, page) : 0);
}

struct PinnedMemory {
  std::uint64_t send_pool = 0;       // ms_async_rdma_send_buffers x buffer_size, slab-rounded
  std::uint64_t receive_pool = 0;    // ms_async_rdma_receive_buffers x buffer_size (receives and READ targets)
  std::uint64_t per_connection = 0;  // (credits + update slots) x buffer_size of receives
  std::uint64_t srq_at_start = 0;    // SRQ mode: workers x receive_queue_len x buffer_size, pinned up front
  // The most one stack's pools can pin: both pools at their caps. Zero-copy
  // senders also register the message data in place (not pool memory).
  std::uint64_t total() const noexcept { return send_pool + receive_pool; }
};

constexpr PinnedMemory pinned_memory(const RdmaOptions& o) noexcept {
  const PoolGeometry g = pool_geometry(o);
  PinnedMemory p;
  p.send_pool = pool_bytes(o.buffer_size, o.send_buffers, g.send_per_slab, o.enable_hugepage);
  p.receive_pool = pool_bytes(o.buffer_size, o.receive_buffers, g.recv_per_slab, o.enable_hugepage);
  p.per_connection = (std::uint64_t{o.credits} + kUpdateSlots) * o.buffer_size;
  if (o.support_srq)
    p.srq_at_start = std::uint64_t{o.common.async_op_threads} * o.receive_queue_len * o.buffer_size;
  return p;
}

}  // namespace siphon::rdma
