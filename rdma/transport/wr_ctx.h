// A work request's context in the RDMA stack (internal).
#pragma once

#include <cstdint>

#include "rdma/transport/buffer_pool.h"

namespace siphon::rdma {

struct InTransfer;

// Work-request contexts: wr_id is a pointer to one of these, owned by the
// connection, valid until its completion has been seen.
struct WrCtx {
  enum class Kind : std::uint8_t { recv, send, read, drain, bind } kind;
  PoolBuffer* buf = nullptr;
  std::uint32_t len = 0;
  struct InTransfer* transfer = nullptr;  // read: the transfer it fills
};

}  // namespace siphon::rdma
