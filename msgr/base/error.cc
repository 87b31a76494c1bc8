#include "msgr/base/error.h"

#include <cerrno>

namespace siphon {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "siphon"; }
  std::string message(int v) const override {
    return std::string(describe(static_cast<errc>(v)));
  }
  std::error_condition default_error_condition(int v) const noexcept override {
    switch (static_cast<errc>(v)) {
      case errc::connection_refused: return std::errc::connection_refused;
      case errc::connection_reset: return std::errc::connection_reset;
      case errc::timed_out: return std::errc::timed_out;
      case errc::not_connected: return std::errc::not_connected;
      case errc::address_in_use: return std::errc::address_in_use;
      case errc::invalid_argument: return std::errc::invalid_argument;
      case errc::out_of_memory: return std::errc::not_enough_memory;
      case errc::not_supported: return std::errc::not_supported;
      case errc::no_device:
      case errc::device_not_found: return std::errc::no_such_device;
      default: return {v, *this};
    }
  }

  static std::string_view describe(errc e) {
    switch (e) {
      case errc::ok: return "success";
      case errc::bad_banner: return "bad msgr2 banner";
      case errc::unsupported_protocol: return "no common protocol revision or required feature";
      case errc::malformed_frame: return "malformed frame";
      case errc::bad_crc: return "CRC mismatch";
      case errc::frame_too_large: return "frame or segment larger than the configured limit";
      case errc::unknown_tag: return "unknown frame tag";
      case errc::unexpected_frame: return "frame not valid in the current state";
      case errc::truncated: return "stream ended inside a frame";
      case errc::frame_aborted: return "frame aborted by the peer";
      case errc::decode_error: return "payload failed to decode";
      case errc::auth_unsupported: return "peer requires an unsupported auth method";
      case errc::feature_mismatch: return "peer lacks required features";
      case errc::connection_refused: return "connection refused";
      case errc::connection_reset: return "connection reset";
      case errc::timed_out: return "timed out";
      case errc::not_connected: return "not connected";
      case errc::shutting_down: return "shutting down";
      case errc::session_reset: return "session reset by peer";
      case errc::address_in_use: return "address in use";
      case errc::address_invalid: return "invalid address";
      case errc::too_many_connections: return "too many connections";
      case errc::injected_fault: return "injected fault";
      case errc::no_device: return "no RDMA device found";
      case errc::device_not_found: return "RDMA device not found";
      case errc::invalid_qp_state: return "operation not valid in the queue pair's state";
      case errc::queue_full: return "work queue full";
      case errc::out_of_credits: return "out of flow-control credits";
      case errc::rnr_retry_exceeded: return "receiver not ready: retries exceeded";
      case errc::retry_exceeded: return "transport retries exceeded";
      case errc::remote_access_error: return "remote access error";
      case errc::remote_operation_error: return "remote operation error";
      case errc::remote_invalid_request: return "remote invalid request";
      case errc::local_protection_error: return "local protection error";
      case errc::local_length_error: return "local length error";
      case errc::local_qp_operation_error: return "local QP operation error";
      case errc::work_request_flushed: return "work request flushed";
      case errc::bad_response: return "bad response";
      case errc::memory_registration_failed: return "memory registration failed";
      case errc::rdma_cm_error: return "RDMA connection manager error";
      case errc::invalid_argument: return "invalid argument";
      case errc::out_of_memory: return "out of memory";
      case errc::resource_exhausted: return "resource limit reached";
      case errc::not_supported: return "not supported";
      case errc::config_error: return "configuration error";
      case errc::io_error: return "I/O error";
      case errc::internal_error: return "internal error";
    }
    return "unknown siphon error";
  }
};

}  // namespace

const std::error_category& siphon_category() noexcept {
  static const Category category;
  return category;
}

std::string_view to_string(errc e) noexcept {
  switch (e) {
#define SIPHON_ERRC_NAME(n) case errc::n: return #n;
    SIPHON_ERRC_NAME(ok) SIPHON_ERRC_NAME(bad_banner) SIPHON_ERRC_NAME(unsupported_protocol)
    SIPHON_ERRC_NAME(malformed_frame) SIPHON_ERRC_NAME(bad_crc) SIPHON_ERRC_NAME(frame_too_large)
    SIPHON_ERRC_NAME(unknown_tag) SIPHON_ERRC_NAME(unexpected_frame) SIPHON_ERRC_NAME(truncated)
    SIPHON_ERRC_NAME(frame_aborted) SIPHON_ERRC_NAME(decode_error)
    SIPHON_ERRC_NAME(auth_unsupported) SIPHON_ERRC_NAME(feature_mismatch)
    SIPHON_ERRC_NAME(connection_refused) SIPHON_ERRC_NAME(connection_reset)
    SIPHON_ERRC_NAME(timed_out) SIPHON_ERRC_NAME(not_connected) SIPHON_ERRC_NAME(shutting_down)
    SIPHON_ERRC_NAME(session_reset) SIPHON_ERRC_NAME(address_in_use)
    SIPHON_ERRC_NAME(address_invalid) SIPHON_ERRC_NAME(too_many_connections)
    SIPHON_ERRC_NAME(injected_fault) SIPHON_ERRC_NAME(no_device)
    SIPHON_ERRC_NAME(device_not_found) SIPHON_ERRC_NAME(invalid_qp_state)
    SIPHON_ERRC_NAME(queue_full) SIPHON_ERRC_NAME(out_of_credits)
    SIPHON_ERRC_NAME(rnr_retry_exceeded) SIPHON_ERRC_NAME(retry_exceeded)
    SIPHON_ERRC_NAME(remote_access_error) SIPHON_ERRC_NAME(remote_operation_error)
    SIPHON_ERRC_NAME(remote_invalid_request) SIPHON_ERRC_NAME(local_protection_error)
    SIPHON_ERRC_NAME(local_length_error) SIPHON_ERRC_NAME(local_qp_operation_error)
    SIPHON_ERRC_NAME(work_request_flushed) SIPHON_ERRC_NAME(bad_response)
    SIPHON_ERRC_NAME(memory_registration_failed) SIPHON_ERRC_NAME(rdma_cm_error)
    SIPHON_ERRC_NAME(invalid_argument) SIPHON_ERRC_NAME(out_of_memory)
    SIPHON_ERRC_NAME(resource_exhausted) SIPHON_ERRC_NAME(not_supported)
    SIPHON_ERRC_NAME(config_error) SIPHON_ERRC_NAME(io_error) SIPHON_ERRC_NAME(internal_error)
#undef SIPHON_ERRC_NAME
  }
  return "unknown";
}

std::error_code from_errno(int err) noexcept {
  switch (err) {
    case 0: return {};
    case ECONNREFUSED: return errc::connection_refused;
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED: return errc::connection_reset;
    case ETIMEDOUT: return errc::timed_out;
    case ENOTCONN: return errc::not_connected;
    case EADDRINUSE: return errc::address_in_use;
    case EADDRNOTAVAIL:
    case EAFNOSUPPORT: return errc::address_invalid;
    case EINVAL: return errc::invalid_argument;
    case ENOMEM: return errc::out_of_memory;
    case ENOBUFS:
    case EMFILE:
    case ENFILE:
    case EAGAIN: return errc::resource_exhausted;
    case ENODEV:
    case ENXIO: return errc::device_not_found;
    case EOPNOTSUPP: return errc::not_supported;
    case EACCES:
    case EPERM:
    case EFAULT: return errc::local_protection_error;
    default: return errc::io_error;
  }
}

SetupError::SetupError(std::error_code code, std::string cause, std::string remedy)
    : std::runtime_error(remedy.empty() ? cause : cause + ": " + remedy),
      code_(code),
      cause_(std::move(cause)),
      remedy_(std::move(remedy)) {}

}  // namespace siphon
