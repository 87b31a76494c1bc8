// siphon-doctor's checks (docs/doctor.md): each turns facts and the
// configuration into one result -- OK, cannot tell, warning or error -- with
// its evidence and a one-sentence fix. Pure: the facts come from facts.h,
// the configuration from compat/, the limits from the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "msgr/base/address.h"
#include "rdma/transport/options.h"
#include "rdma/verbs/verbs_provider.h"
#include "tools/doctor/facts.h"

namespace siphon::doctor {

// "Cannot tell" is information, not a warning (exit status 0).
enum class Status : std::uint8_t { ok, cannot_tell, warning, error };
std::string_view to_string(Status s) noexcept;

struct Check {
  std::string name;  // "device", "port", "gid", "mtu", "memlock", ...
  Status status = Status::ok;
  std::string summary;                // one line
  std::vector<std::string> evidence;  // what was read, where
  std::string fix;                    // one sentence; empty when nothing to fix
};

// What the configuration says, as the daemon would read it.
struct Settings {
  bool rdma_stack = false;   // ms_public_type or ms_cluster_type is async+rdma
  std::string ms_type;       // "async+posix", "async+rdma", for the report
  rdma::RdmaOptions rdma;    // compat::rdma_options()
  rdma::verbs::VerbsPathOptions path;  // compat::verbs_path_options()
  NetAddress local;          // public_addr (unspecified when not set)
  // Every problem compat's checker found (siphon-conf --check).
  struct Problem {
    bool error = false;
    std::string text;
  };
  std::vector<Problem> config_problems;
};

struct Limits {
  std::optional<std::uint64_t> memlock;  // bytes; nullopt = unlimited
  bool memlock_known = true;
};

// The pinned memory one RDMA stack of this configuration may register
// (rdma/transport/pinned.h, the stack's own formula).
std::uint64_t memlock_need(const rdma::RdmaOptions& o) noexcept;

// All checks, in a fixed order (the report sorts problems first).
std::vector<Check> run_checks(const Facts& facts, const Settings& settings, const Limits& limits);

// 0 nothing to fix, 1 warnings, 2 errors.
int exit_status(const std::vector<Check>& checks) noexcept;

// "4 GiB", "128 MiB", "64 KiB", "512 B".
std::string human_bytes(std::uint64_t b);

}  // namespace siphon::doctor
