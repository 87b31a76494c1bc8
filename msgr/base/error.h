// Siphon's error model: one std::error_code category for the whole project.
//
// The data path returns errors (std::error_code, never exceptions). Setup code
// may throw SetupError, whose message names the cause and the remedy.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace siphon {

enum class errc : int {
  ok = 0,
  // Wire protocol (msgr2) errors: the peer sent something we reject.
  bad_banner = 1,
  unsupported_protocol,   // no common msgr2 revision / required feature
  malformed_frame,        // lengths, alignment or layout inconsistent
  bad_crc,                // preamble, segment or epilogue CRC mismatch
  frame_too_large,        // a length over the configured limit
  unknown_tag,
  unexpected_frame,       // a valid frame in a state that does not accept it
  truncated,              // stream ended inside a frame
  frame_aborted,          // the peer aborted the frame (late status)
  decode_error,           // a payload did not decode (Ceph encodings)
  auth_unsupported,       // the peer requires an auth method we do not have
  feature_mismatch,       // IDENT_MISSING_FEATURES
  auth_failed,            // cephx: the peer refused our key, or a proof/ticket did not check
  bad_signature,          // AUTH_SIGNATURE did not match the transcript
  decrypt_failed,         // a cephx envelope or a secure-mode frame did not decrypt
  // Connection and session.
  connection_refused = 40,
  connection_reset,
  timed_out,
  not_connected,
  shutting_down,
  session_reset,          // the peer reset our session (SESSION_RESET)
  address_in_use,
  address_invalid,
  too_many_connections,
  injected_fault,         // a fault injected by ms_inject_* options
  // RDMA.
  no_device = 80,
  device_not_found,
  invalid_qp_state,
  queue_full,
  out_of_credits,
  rnr_retry_exceeded,
  retry_exceeded,
  remote_access_error,
  remote_operation_error,
  remote_invalid_request,
  local_protection_error,
  local_length_error,
  local_qp_operation_error,
  work_request_flushed,
  bad_response,
  memory_registration_failed,
  rdma_cm_error,
  // General.
  invalid_argument = 120,
  out_of_memory,
  resource_exhausted,
  not_supported,
  config_error,
  io_error,
  internal_error,
};

const std::error_category& siphon_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), siphon_category()};
}

// The short name of an error value, e.g. "bad_crc".
std::string_view to_string(errc e) noexcept;

// Maps an errno value (as set by system calls and libibverbs) to a siphon
// error code. Unknown values become errc::io_error.
std::error_code from_errno(int err) noexcept;

// Thrown by setup code (configuration, device opening, binding). what() is a
// single line of the form "<cause>: <remedy>".
class SetupError : public std::runtime_error {
 public:
  SetupError(std::error_code code, std::string cause, std::string remedy);
  std::error_code code() const noexcept { return code_; }
  const std::string& cause() const noexcept { return cause_; }
  const std::string& remedy() const noexcept { return remedy_; }

 private:
  std::error_code code_;
  std::string cause_;
  std::string remedy_;
};

}  // namespace siphon

template <>
struct std::is_error_code_enum<siphon::errc> : std::true_type {};
