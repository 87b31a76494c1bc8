// Counters of the RDMA stack (docs/rdma-transport.md §Counters), named after
// Ceph's perf counters where one exists. Updated on the workers with relaxed
// atomics, read from anywhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace siphon::rdma {

struct RdmaCounters {
  using C = std::atomic<std::uint64_t>;
  C connections_created{0}, connections_active{0}, connections_rejected{0};
  C qps_created{0}, qps_active{0};
  C tx_messages{0}, tx_bytes{0}, rx_messages{0}, rx_bytes{0};  // msgr2 frames and stream bytes
  C tx_sends{0}, rx_sends{0};                                  // RDMA SENDs
  C credits_granted{0}, credits_spent{0}, credits_returned{0}, credit_updates_sent{0};
  C credit_stalls{0}, credit_stall_ns{0};
  C rnr_events{0};
  C wc_errors{0}, wc_flushed{0}, wc_retry_exceeded{0}, wc_remote_access{0}, wc_other_errors{0};
  C zero_copy_transfers{0}, zero_copy_bytes{0}, tx_copied_bytes{0};
  C rdma_reads{0}, transfer_registrations{0};
  C transfer_windows{0};  // memory windows bound for zero-copy sends (connection-scoped rkeys)
  C send_buffer_stalls{0};
  C srq_refusals{0};  // connections refused: their worker's SRQ was fully reserved
  // Connections faulted because the peer broke the credit protocol: a data
  // SEND without a credit, or more explicit updates than its update slots.
  C credit_violations{0};
  // SENDs whose header (or read_request descriptors) failed their CRC32C.
  C header_crc_errors{0};
  C transfer_timeouts{0};  // connections faulted by ms_async_rdma_transfer_timeout

  // name -> value, for logging and tests.
  std::map<std::string, std::uint64_t> snapshot() const;
};

}  // namespace siphon::rdma
