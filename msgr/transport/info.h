// What a stack can tell about one of its connections, for operators
// (`messenger dump`, docs/observability.md): plain values, filled by
// transport::Connection::info() on the connection's worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace siphon::transport {

// A stack's view of one connection, for `messenger dump`
// (Connection::info(), on the connection's worker).
struct RdmaInfo {
  std::uint32_t local_qpn = 0, remote_qpn = 0;
  std::string local_gid, remote_gid;  // "fe80:0000:...", as ibv_devinfo prints GIDs
  std::uint32_t path_mtu = 0;         // bytes
  std::uint32_t send_credits = 0;     // receives the peer has granted us and we have not used
  std::uint32_t peer_window = 0;      // the peer's grant
  std::uint32_t credits_owed = 0;     // receives of ours re-posted, not yet returned to the peer
  std::uint32_t my_window = 0;        // our grant to the peer
  std::uint64_t outstanding_transfers_out = 0;  // bulk transfers the peer has yet to READ
  std::uint64_t outstanding_transfers_in = 0;   // bulk transfers we are READing
  std::uint32_t send_wrs_in_flight = 0;         // WRs on the send queue
  std::uint32_t posted_recvs = 0;               // receives posted for this QP
  bool srq_reserved = false;                    // holds its share of the worker's SRQ
  bool stalled = false;                         // waiting for credits
};

struct TransportInfo {
  std::string local_address, peer_address;
  std::size_t queued_bytes = 0;     // queued, not yet handed to the network (in flight, from above)
  std::optional<RdmaInfo> rdma;     // async+rdma connections
};

}  // namespace siphon::transport
