// siphon-bench's command line: the mode, then flags. Configuration flags
// (-c/--conf, --name, --ms-type, --set KEY=VALUE and every --<ceph option>)
// go to the compat Config; this parser sees only what is left: the workload
// and output flags. Pure parsing, no I/O; every error is one sentence.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tools/bench/workload.h"

namespace siphon::bench {

enum class Mode { loopback, server, client, compare, objd };
enum class Pattern { echo, sink, source };
std::string_view to_string(Mode m) noexcept;
std::string_view to_string(Pattern p) noexcept;
std::optional<Mode> parse_mode(std::string_view s) noexcept;

struct BenchArgs {
  Mode mode = Mode::loopback;

  // --- endpoints ---
  std::string target;  // client: the server's address (ADDR[:PORT][/NONCE])
  std::string bind;    // server / loopback: the address to listen on

  // --- workload (client side; loopback and compare too) ---
  unsigned conns = 1;       // connections (one client messenger each, one shared stack)
  unsigned threads = 1;     // load threads; connections are divided among them
  unsigned inflight = 16;   // requests outstanding per connection (open loop: a cap, default 1024)
  SizeDist sizes = SizeDist::fixed(4096);
  std::string size_spec = "4K";  // as given (for reports)
  std::optional<std::uint64_t> count;  // total requests, or:
  double duration = 4;      // measured seconds (server: lifetime, 0 = until signalled)
  double warmup = 1;        // seconds before the measured window (--duration only)
  std::uint32_t think_us = 0;  // server busy time per request
  Pattern pattern = Pattern::echo;
  double rate = 0;          // requests/s over all connections; 0 = closed loop
  bool verify = false;

  // --- session and dispatch ---
  bool lossy = false;        // --policy lossy: lossy_client / stateless_server
  bool queue_dispatch = false;  // --dispatch queue: the messenger's dispatch thread, not fast dispatch

  // --- output ---
  std::string json;          // "" none, "-" stdout, else a file
  std::string plot;          // SVG file
  bool quiet = false;
  bool perf_dump = false;    // --perf-dump: the run's perf counter delta

  // --- server ---
  bool once = false;         // exit when the first client run is done

  // --- compare ---
  std::vector<std::string> ms_types;
  // --modes crc,secure: each stack once per connection mode (ms_client_mode
  // and ms_service_mode set to it); empty: the configured modes, once.
  std::vector<std::string> con_modes;

  // --- limits ---
  double connect_timeout = 10;  // seconds to wait for every connection to be READY
  double drain_timeout = 10;    // seconds to wait for outstanding replies at the end
  std::uint64_t seed = 1;       // size sampling

  // --- test hook (hidden from --help; docs/benchmarking.md) ---
  // Every Nth request's payload is damaged after its CRC was computed and
  // before it is sent (source: the server damages every Nth reply), so that
  // --verify must report exactly count/N corrupted messages.
  std::uint64_t inject_corruption_every = 0;
  // --soft-link-down AT:FOR: the software fabric's links of this process are
  // pulled AT seconds after the load starts, for FOR seconds (RDMA failover
  // runs with siphon_ms_fallback_type; docs/benchmarking.md). AT < 0: never.
  double soft_link_down_at = -1;
  double soft_link_down_for = 0;

  // Which flags were given (for checks that depend on the config later).
  bool size_given = false;
  bool duration_given = false;
  bool inflight_given = false;
};

// Parses the arguments after the mode (configuration flags already removed).
// On error returns nullopt and sets `error` to one sentence naming the flag.
std::optional<BenchArgs> parse_bench_args(Mode mode, std::span<const std::string> args, std::string& error);

// The --help text.
std::string usage();

}  // namespace siphon::bench
