// siphon-bench's runs: the server (a stateless responder), the client (load
// generation and measurement) and the three ways of putting them together
// (loopback in one process, server, client).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "compat/config.h"
#include "msgr/api/messenger.h"
#include "tools/bench/cli.h"
#include "tools/bench/report.h"

namespace siphon::bench {

struct RunSetup {
  BenchArgs args;
  const compat::Config* cfg = nullptr;
  compat::MsType ms_type;
  // What chose ms_type, for the reports: "ms_public_type from FILE:3
  // [global]" (compat::MsTypeChoice::origin()), "the embedded default", ...
  // Empty: taken from cfg.
  std::string ms_type_origin;
  MessengerOptions options;
  // "crc" or "secure": every connection must negotiate this mode, or the
  // run fails before the load starts (compare --modes). "": any.
  std::string require_con_mode;
  // Informational lines (the caller decides where they go; may be empty).
  std::function<void(const std::string&)> info;
  // The live progress line (called once a second; "" clears it). May be empty.
  std::function<void(const std::string&)> progress;
};

struct RunOutcome {
  bool ran = false;        // false: setup failed (`error` says why)
  bool unavailable = false;  // the stack could not be created (compare reports it)
  std::string error;
  Result result;
  // 0 clean; 1 errors or failed; 3 --verify found damage.
  int exit_code() const noexcept;
};

// Client and server messengers in this process (the server's CPU is the set
// of threads its stack and messenger started).
RunOutcome run_loopback(const RunSetup& setup);
// setup.ms_type_origin, or the configuration's choice when it is empty.
std::string ms_type_origin(const RunSetup& setup);
// Against a `siphon-bench server` at --target.
RunOutcome run_client(const RunSetup& setup);
// Serves until a stop is requested, --duration passes, or (--once) the first
// client run is done. The result holds what was served.
RunOutcome run_server(const RunSetup& setup);

// The stack `setup` names (its ms_type); nullptr with `error` set to one
// sentence and `unavailable` true when this build cannot create it.
std::shared_ptr<transport::Stack> create_run_stack(const RunSetup& setup, std::string& error,
                                                   bool& unavailable);

// Address flags: --target (IP:PORT, port required) and --bind (IP[:PORT]).
// nullopt with `error` set to one sentence when malformed.
std::optional<EntityAddrVec> parse_target(const std::string& text, std::string& error);
std::optional<EntityAddr> parse_bind(const std::string& text, std::string& error);

// Asks a running run to stop early (async-signal-safe: a lock-free store).
void request_stop() noexcept;
bool stop_requested() noexcept;

}  // namespace siphon::bench
