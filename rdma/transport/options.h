// Typed options of the RDMA stack (ms_type = async+rdma), filled by compat/
// from ceph.conf. Every ms_async_rdma_* option of Ceph is here with Ceph's
// meaning and default, or is listed in docs/rdma-transport.md with the reason
// Siphon rejects it; fields marked "Siphon extension" have no Ceph
// counterpart.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "msgr/transport/options.h"
#include "rdma/transport/credits.h"
#include "rdma/transport/rdma_wire.h"

namespace siphon::rdma {

// --- The accepted ranges of RdmaOptions (inclusive). RdmaStack refuses a
// value outside them when it is constructed (SetupError naming the option and
// the range). compat/options.def writes the same ranges as the options'
// min/max, and compat/options.cc static_asserts that the two agree, so
// `siphon-conf --check` refuses exactly what the stack would (the test:
// tests/unit/compat/bounds_test.cc).
struct Range {
  std::uint64_t min;
  std::uint64_t max;  // UINT64_MAX: no maximum
  constexpr bool contains(std::uint64_t v) const noexcept { return v >= min && v <= max; }
};
inline constexpr std::uint64_t kNoMax = UINT64_MAX;
namespace ranges {
inline constexpr Range port_num{1, 255};
inline constexpr Range roce_ver{1, 1};  // RoCEv2 only
inline constexpr Range sl{0, 15};
inline constexpr Range dscp{0, 255};
inline constexpr Range buffer_size{4096, 16u << 20};
inline constexpr Range send_buffers{1, kNoMax};
inline constexpr Range receive_buffers{1, kNoMax};  // Ceph's 0 = no limit is refused
inline constexpr Range receive_queue_len{1, kNoMax};
inline constexpr Range credits{2, 4096};
inline constexpr Range send_queue_depth{2, 65536};
inline constexpr Range cq_depth{0, 16777216};
inline constexpr Range rnr_retry{0, 7};
inline constexpr Range retry_count{0, 7};
inline constexpr Range ack_timeout{1, 31};
inline constexpr Range cm_timeout_ms{1, 600000};
inline constexpr Range max_connections{1, kNoMax};
}  // namespace ranges
// What the configuration ranges promise the wire format (rdma_wire.h): our buffers
// and credits are always ones a peer accepts.
static_assert(ranges::buffer_size.min >= kMinRecvBufferSize && ranges::buffer_size.max <= kMaxRecvBufferSize);
static_assert(ranges::credits.min >= kMinWireCredits && ranges::credits.max <= kMaxWireCredits);
static_assert(ranges::credits.max + kUpdateSlots <= UINT32_MAX);

struct RdmaOptions {
  transport::TransportOptions common{};

  // ms_async_rdma_device_name (Ceph, default ""): the device to use; empty =
  // the first device the provider lists (verbs first, then the software
  // fabric when no hardware exists: compat/ decides the provider).
  std::string device_name;
  // ms_async_rdma_port_num (Ceph, default 1).
  std::uint8_t port_num = 1;
  // ms_async_rdma_gid_idx (Ceph, default 0): a pinned GID index. Ceph uses
  // index 0 unconditionally; Siphon treats "not set" as "choose the RoCEv2 GID
  // of the address in use" and only honours an explicit value. compat/ hands
  // this and local_gid to the verbs provider, which applies them to every
  // connection's QP (docs/rdma-verbs.md).
  std::optional<int> gid_idx;
  // ms_async_rdma_local_gid (Ceph, default ""): pins a GID by value.
  std::string local_gid;
  // ms_async_rdma_roce_ver (Ceph, default 1 = RoCEv2): Siphon supports RoCEv2
  // only; other values are rejected by compat/.
  int roce_ver = 1;
  // ms_async_rdma_sl (Ceph, default 3) and ms_async_rdma_dscp (Ceph, default
  // 96, written as the full traffic-class byte).
  std::uint8_t sl = 3;
  std::uint8_t dscp = 96;
  // ms_async_rdma_buffer_size (Ceph, default 128 KiB): size of every send and
  // receive buffer and of each RDMA READ target chunk.
  std::size_t buffer_size = 128 * 1024;
  // ms_async_rdma_send_buffers (Ceph, default 1024): cap of the send pool.
  std::size_t send_buffers = 1024;
  // ms_async_rdma_receive_buffers (Ceph, default 32768): cap of the receive
  // pool (receive queues plus RDMA READ targets). Ceph's 0 = unlimited is
  // rejected: Siphon always has a hard cap.
  std::size_t receive_buffers = 32768;
  // ms_async_rdma_receive_queue_len (Ceph, default 4096): the SRQ depth per
  // worker when support_srq is set.
  std::size_t receive_queue_len = 4096;
  // ms_async_rdma_support_srq (Ceph, default true; compat/ sets this only
  // when the option is set explicitly). With it, each worker has one SRQ of
  // receive_queue_len receives (capped by the device's max_srq_wr), filled
  // from the receive pool up front; a connection's credits plus update slots
  // are a reservation in it, and a connection that does not fit is refused
  // with a reason. Without it, receives are posted per QP.
  bool support_srq = false;
  // ms_async_rdma_polling_us (Ceph, default 1000): how long a worker spins on
  // its CQ before arming it and sleeping on the channel fd. Set: honoured as
  // given (logged at startup when the spinning workers oversubscribe the
  // CPUs). Unset (compat/ leaves it unset when the option is at its default):
  // "auto", resolved by plan_polling() (rdma_stack.h) when the stack starts.
  std::optional<std::chrono::microseconds> polling;
  // ms_async_rdma_enable_hugepage (Ceph, default false).
  bool enable_hugepage = false;
  // ms_async_rdma_cm (Ceph, default false): not a field. Siphon always uses
  // the rdma-cm shaped connection manager of the provider; compat/ warns when
  // a configuration sets it to false explicitly.

  // --- Siphon extensions
  // ms_async_rdma_credits (default 16): receive credits granted per
  // connection (receive buffers posted for it, plus two for credit updates).
  std::uint32_t credits = 16;
  // ms_async_rdma_zero_copy_threshold (default 64 KiB): message data segments
  // at least this large are pulled by the receiver with RDMA READ from the
  // sender's memory instead of being copied through SENDs. 0: never
  // (zero_copy_applies() below).
  std::size_t zero_copy_threshold = 64 * 1024;
  // ms_async_rdma_inline_threshold (default 128): SENDs up to this many bytes
  // are posted inline; the QP asks for it as max_inline_data (a device that
  // refuses gets 0, i.e. never inline). 0: never.
  std::size_t inline_threshold = 128;
  // ms_async_rdma_send_queue_depth (default 256): send queue depth per QP
  // (SENDs and RDMA READs), capped by the device.
  std::uint32_t send_queue_depth = 256;
  // ms_async_rdma_cq_depth (default 0 = sized for max_connections): entries
  // of each worker's completion queue. Each connection reserves its send
  // queue depth plus its receives (none with an SRQ, which reserves its own
  // depth once per worker), so 0 sizes the CQ for ceil(max_connections /
  // workers) connections; either way it is capped by the device's max_cqe
  // (read back) and a connection that does not fit fails with a reason.
  std::uint32_t cq_depth = 0;
  // ms_async_rdma_rnr_retry (default 1): RNR retries; with credits an RNR
  // never happens in normal operation, so a credit bug shows as an error.
  std::uint8_t rnr_retry = 1;
  // ms_async_rdma_retry_count (default 7) and ms_async_rdma_timeout (default
  // 14, i.e. 4.096 us * 2^14 = 67 ms per try): transport retries before a
  // silent peer's QP goes to error (retry_exceeded).
  std::uint8_t retry_count = 7;
  std::uint8_t ack_timeout = 14;
  // ms_async_rdma_cm_timeout (default 2000 ms): address and route resolution.
  std::chrono::milliseconds cm_timeout{2000};
  // ms_async_rdma_max_connections (default 1024): per stack.
  std::size_t max_connections = 1024;
  // ms_async_rdma_transfer_timeout (default 30 s): how long a zero-copy
  // transfer may take -- from our read_request to the peer's read_done, and
  // from our first RDMA READ of the peer's data to the last one's completion;
  // past it the connection faults (docs/rdma-transport.md). 0: no limit.
  std::chrono::milliseconds transfer_timeout{30000};
  // ms_async_rdma_device_check_interval (default 1 s): how often worker 0
  // checks that the device is still listed (the stack releases it when it is
  // not, as on DEVICE_REMOVAL) and, once released, tries to reopen it.
  // 0: no check and no reopening (docs/rdma-transport.md, Device removal).
  std::chrono::milliseconds device_check_interval{1000};
};

// ms_async_rdma_zero_copy_threshold's rule for a MESSAGE with `data_len`
// bytes of data: pulled by RDMA READ when the threshold is set (0 = never) and
// the data reaches it. A frame without data never is: a read_request with no
// descriptors is malformed on the wire.
constexpr bool zero_copy_applies(std::size_t threshold, std::size_t data_len) noexcept {
  return threshold != 0 && data_len != 0 && data_len >= threshold;
}

}  // namespace siphon::rdma
