#include "msgr/base/error.h"

#include <cerrno>

namespace siphon {
namespace {

// Each error's name and description, in one table.
struct ErrcInfo {
  std::string_view name;
  std::string_view text;
};

constexpr ErrcInfo info(errc e) noexcept {
  switch (e) {
#define SIPHON_ERRC(n, text) \
  case errc::n:              \
    return {#n, text};
    SIPHON_ERRC(ok, "success")
    SIPHON_ERRC(bad_banner, "bad msgr2 banner")
    SIPHON_ERRC(unsupported_protocol, "no common protocol revision or required feature")
    SIPHON_ERRC(malformed_frame, "malformed frame")
    SIPHON_ERRC(bad_crc, "CRC mismatch")
    SIPHON_ERRC(frame_too_large, "frame or segment larger than the configured limit")
    SIPHON_ERRC(unknown_tag, "unknown frame tag")
    SIPHON_ERRC(unexpected_frame, "frame not valid in the current state")
    SIPHON_ERRC(truncated, "stream ended inside a frame")
    SIPHON_ERRC(frame_aborted, "frame aborted by the peer")
    SIPHON_ERRC(decode_error, "payload failed to decode")
    SIPHON_ERRC(auth_unsupported, "peer requires an unsupported auth method")
    SIPHON_ERRC(feature_mismatch, "peer lacks required features")
    SIPHON_ERRC(auth_failed, "authentication failed")
    SIPHON_ERRC(bad_signature, "AUTH_SIGNATURE mismatch")
    SIPHON_ERRC(decrypt_failed, "decryption or authentication tag check failed")
    SIPHON_ERRC(connection_refused, "connection refused")
    SIPHON_ERRC(connection_reset, "connection reset")
    SIPHON_ERRC(timed_out, "timed out")
    SIPHON_ERRC(not_connected, "not connected")
    SIPHON_ERRC(shutting_down, "shutting down")
    SIPHON_ERRC(session_reset, "session reset by peer")
    SIPHON_ERRC(address_in_use, "address in use")
    SIPHON_ERRC(address_invalid, "invalid address")
    SIPHON_ERRC(too_many_connections, "too many connections")
    SIPHON_ERRC(injected_fault, "injected fault")
    SIPHON_ERRC(no_device, "no RDMA device found")
    SIPHON_ERRC(device_not_found, "RDMA device not found")
    SIPHON_ERRC(invalid_qp_state, "operation not valid in the queue pair's state")
    SIPHON_ERRC(queue_full, "work queue full")
    SIPHON_ERRC(out_of_credits, "out of flow-control credits")
    SIPHON_ERRC(rnr_retry_exceeded, "receiver not ready: retries exceeded")
    SIPHON_ERRC(retry_exceeded, "transport retries exceeded")
    SIPHON_ERRC(remote_access_error, "remote access error")
    SIPHON_ERRC(remote_operation_error, "remote operation error")
    SIPHON_ERRC(remote_invalid_request, "remote invalid request")
    SIPHON_ERRC(local_protection_error, "local protection error")
    SIPHON_ERRC(local_length_error, "local length error")
    SIPHON_ERRC(local_qp_operation_error, "local QP operation error")
    SIPHON_ERRC(work_request_flushed, "work request flushed")
    SIPHON_ERRC(bad_response, "bad response")
    SIPHON_ERRC(memory_registration_failed, "memory registration failed")
    SIPHON_ERRC(rdma_cm_error, "RDMA connection manager error")
    SIPHON_ERRC(invalid_argument, "invalid argument")
    SIPHON_ERRC(out_of_memory, "out of memory")
    SIPHON_ERRC(resource_exhausted, "resource limit reached")
    SIPHON_ERRC(not_supported, "not supported")
    SIPHON_ERRC(config_error, "configuration error")
    SIPHON_ERRC(io_error, "I/O error")
    SIPHON_ERRC(internal_error, "internal error")
#undef SIPHON_ERRC
  }
  return {"unknown", "unknown siphon error"};
}

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "siphon"; }
  std::string message(int v) const override {
    return std::string(info(static_cast<errc>(v)).text);
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
};

}  // namespace

const std::error_category& siphon_category() noexcept {
  static const Category category;
  return category;
}

std::string_view to_string(errc e) noexcept { return info(e).name; }

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
