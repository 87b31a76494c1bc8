// The two halves of a zero-copy transfer (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "msgr/base/buffer.h"
#include "msgr/base/clock.h"
#include "rdma/provider.h"
#include "rdma/transport/buffer_pool.h"
#include "rdma/transport/rdma_wire.h"

namespace siphon::rdma {

// A bulk transfer we are pulling from the peer with RDMA READs. Its receive
// buffers are reserved all at once before the first READ (chunks), one per
// buffer_size piece of each region, in order.
struct InTransfer {
  std::uint64_t id = 0;
  std::uint64_t length = 0;
  std::vector<ReadDescriptor> regions;
  std::size_t next_region = 0;       // first region not fully issued
  std::uint64_t next_offset = 0;     // offset inside it
  std::size_t next_chunk = 0;        // first chunk not yet read
  std::size_t reads_outstanding = 0;
  std::vector<std::pair<PoolBuffer*, std::uint32_t>> chunks;  // in order
  bool reserved = false;
  bool issued_all = false;
  bool done_queued = false;  // our read_done is queued: the peer may let its data go
  // When its buffers were reserved and the first READ went out (unset
  // before): ms_async_rdma_transfer_timeout counts from here.
  MonoClock::time_point since{};
  bool ready() const noexcept { return issued_all && reads_outstanding == 0; }
};

// A bulk transfer the peer is pulling from us: the data stays referenced and
// its regions registered for remote read until the peer's read_done.
// A zero-copy send's registrations. With memory windows (scoped_rkeys) each
// region's MR grants no remote access itself and the peer gets the rkey of a
// type-2 window bound to this connection's QP; the windows are declared
// after the MRs so they are deallocated (revoked) first, as rxe requires.
struct OutTransfer {
  BufferList data;
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  // When its read_request was posted (unset before): the peer's read_done is
  // due within ms_async_rdma_transfer_timeout of it.
  MonoClock::time_point since{};
  std::vector<std::unique_ptr<MemoryWindow>> mws;  // empty without scoped_rkeys
  bool bound = false;                               // the binds were posted
};

}  // namespace siphon::rdma
