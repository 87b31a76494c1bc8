// Name and error mappings of rdma/provider.h.
#include "rdma/provider.h"

#include <algorithm>
#include <cstdio>

#include "msgr/base/error.h"

namespace siphon::rdma {

std::string_view to_string(WcStatus s) noexcept {
  switch (s) {
    case WcStatus::success: return "success";
    case WcStatus::local_length_error: return "local length error";
    case WcStatus::local_qp_operation_error: return "local QP operation error";
    case WcStatus::local_protection_error: return "local protection error";
    case WcStatus::flushed: return "work request flushed";
    case WcStatus::bad_response: return "bad response";
    case WcStatus::remote_invalid_request: return "remote invalid request";
    case WcStatus::remote_access_error: return "remote access error";
    case WcStatus::remote_operation_error: return "remote operation error";
    case WcStatus::retry_exceeded: return "transport retry counter exceeded";
    case WcStatus::rnr_retry_exceeded: return "RNR retry counter exceeded";
    case WcStatus::general_error: return "general error";
  }
  return "unknown status";
}

std::error_code to_error(WcStatus s) noexcept {
  switch (s) {
    case WcStatus::success: return {};
    case WcStatus::local_length_error: return errc::local_length_error;
    case WcStatus::local_qp_operation_error: return errc::local_qp_operation_error;
    case WcStatus::local_protection_error: return errc::local_protection_error;
    case WcStatus::flushed: return errc::work_request_flushed;
    case WcStatus::bad_response: return errc::bad_response;
    case WcStatus::remote_invalid_request: return errc::remote_invalid_request;
    case WcStatus::remote_access_error: return errc::remote_access_error;
    case WcStatus::remote_operation_error: return errc::remote_operation_error;
    case WcStatus::retry_exceeded: return errc::retry_exceeded;
    case WcStatus::rnr_retry_exceeded: return errc::rnr_retry_exceeded;
    case WcStatus::general_error: return errc::io_error;
  }
  return errc::io_error;
}

std::string to_string(const Gid& gid) {
  std::string out;
  out.reserve(39);
  char group[5];
  for (std::size_t i = 0; i < gid.size(); i += 2) {
    std::snprintf(group, sizeof(group), "%02x%02x", gid[i], gid[i + 1]);
    if (i != 0) out += ':';
    out += group;
  }
  return out;
}

std::string_view to_string(QpState s) noexcept {
  switch (s) {
    case QpState::reset: return "RESET";
    case QpState::init: return "INIT";
    case QpState::rtr: return "RTR";
    case QpState::rts: return "RTS";
    case QpState::sqd: return "SQD";
    case QpState::sqe: return "SQE";
    case QpState::err: return "ERR";
  }
  return "?";
}

std::string_view to_string(CmEventType t) noexcept {
  switch (t) {
    case CmEventType::addr_resolved: return "ADDR_RESOLVED";
    case CmEventType::addr_error: return "ADDR_ERROR";
    case CmEventType::route_resolved: return "ROUTE_RESOLVED";
    case CmEventType::route_error: return "ROUTE_ERROR";
    case CmEventType::connect_request: return "CONNECT_REQUEST";
    case CmEventType::connect_error: return "CONNECT_ERROR";
    case CmEventType::unreachable: return "UNREACHABLE";
    case CmEventType::rejected: return "REJECTED";
    case CmEventType::established: return "ESTABLISHED";
    case CmEventType::disconnected: return "DISCONNECTED";
    case CmEventType::device_removal: return "DEVICE_REMOVAL";
    case CmEventType::timewait_exit: return "TIMEWAIT_EXIT";
  }
  return "?";
}

std::optional<std::string> choose_device(std::string_view configured, std::span<const std::string> listed) {
  if (configured.empty()) {
    // The smallest name, not the first listed: libibverbs lists devices in
    // sysfs readdir order, which need not be stable, and siphon-doctor reads
    // sysfs itself; both must land on the same device.
    if (listed.empty()) return std::nullopt;
    return *std::min_element(listed.begin(), listed.end());
  }
  if (std::find(listed.begin(), listed.end(), configured) == listed.end()) return std::nullopt;
  return std::string(configured);
}

}  // namespace siphon::rdma
