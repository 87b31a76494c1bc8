// siphon-bench results: the data model, and its three renderings (a table for
// people, one JSON document for machines, an SVG plot). The JSON schema is
// documented in docs/benchmarking.md and checked by tests/unit/tools.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "tools/bench/histogram.h"

namespace siphon::bench {

inline constexpr int kJsonSchemaVersion = 1;

struct SideCpu {
  double user_s = 0;
  double system_s = 0;
  double total() const noexcept { return user_s + system_s; }
};

struct VerifyCounts {
  std::uint64_t checked = 0;
  std::uint64_t lost = 0;
  std::uint64_t duplicated = 0;
  std::uint64_t reordered = 0;
  std::uint64_t corrupted = 0;
  bool clean() const noexcept { return lost + duplicated + reordered + corrupted == 0; }
};

// Process and transport resources at one instant (leak checks, tests/soak).
struct ResourceSample {
  double t = 0;               // seconds since the measured window opened (<0: before it)
  std::uint64_t fds = 0;      // open file descriptors of the process
  std::uint64_t rss_kib = 0;  // resident set size of the process
  // Transport counters summed over this process's stacks (async+rdma:
  // qps_active, connections, memory_regions, registered_bytes,
  // buffers_in_use; empty for async+posix, whose sockets are fds).
  std::map<std::string, std::uint64_t> stack;
};

struct Resources {
  bool present = false;
  bool have_before = false, have_after = false;
  ResourceSample before;                 // loopback: before any stack existed
  std::vector<ResourceSample> per_second;  // one per second of the window
  ResourceSample after;                  // loopback: every messenger shut down, stacks stopped
};

// One phase of a multi-phase run (siphon-bench objd: put, stat, get, delete).
struct PhaseResult {
  std::string name;
  std::uint64_t ops = 0;     // replies received
  std::uint64_t bytes = 0;   // object bytes moved (put: sent, get: received)
  std::uint64_t errors = 0;  // error replies and mismatches
  double seconds = 0;
  Histogram latency;         // request sent -> reply received, ns
};

// One perf counter a --perf-dump run moved (perf_counters.h's model, in
// plain values so the report needs no perf library): `type` is Ceph's bitmask
// (0x1 time in ns, 0x2 integer, 0x4 average, 0x8 counter); value is the
// delta (a pure gauge, type 2: its value at the end), count an average's.
struct PerfDeltaEntry {
  std::string logger;
  std::string counter;
  std::uint8_t type = 0;
  std::uint64_t value = 0;
  std::uint64_t count = 0;
};

// How one connection authenticated, read from its session
// (Connection::auth_info once READY): "none"/"cephx", "crc"/"secure".
struct SessionAuth {
  std::string method;
  std::string con_mode;
  bool operator==(const SessionAuth&) const = default;
};

struct Result {
  // Configuration as run (flags and the effective messenger options).
  std::string mode;            // loopback | client | server
  std::string pattern;         // echo | sink | source
  std::string ms_type;
  std::map<std::string, std::string> config;   // workload flags
  std::map<std::string, std::string> options;  // effective ms_* options
  // Measured window (after warm-up).
  double seconds = 0;
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;        // payload bytes (both directions for echo)
  std::uint64_t errors = 0;
  // Messenger faults and lossless reconnects during the window (MessengerStats;
  // both sides when they share the process, else this side's).
  std::uint64_t faults = 0;
  std::uint64_t reconnects = 0;
  // Of the faults, frames the messenger rejected for a bad CRC: bytes damaged
  // below it (e.g. ms_inject_corruption_probability), never dispatched.
  std::uint64_t crc_errors = 0;
  // Sessions moved to the fallback stack and back (siphon_ms_fallback_type).
  std::uint64_t fallback_switches = 0;
  std::uint64_t primary_switches = 0;
  SideCpu client_cpu, server_cpu;
  Histogram latency;              // per message (echo: round trip), ns
  std::vector<double> msgs_per_second;  // one entry per second of the window
  bool verify = false;
  VerifyCounts verified;
  Resources resources;
  // This process's stack counters at the end of the run (async+rdma: the
  // RdmaCounters of docs/rdma-transport.md, e.g. zero_copy_transfers,
  // rnr_events; empty for stacks without counters). Whole run, not the window.
  std::map<std::string, std::uint64_t> stack_counters;
  // --perf-dump: the perf counters the run moved (whole run), in `perf
  // dump` order.
  bool perf_dump = false;
  std::vector<PerfDeltaEntry> perf_delta;
  // objd mode: each phase (the totals above cover them all).
  std::vector<PhaseResult> phases;
  // What each connection negotiated (client side: one per connection, in
  // order; server mode: one per session accepted). Empty: not recorded.
  std::vector<SessionAuth> sessions;
  // The one method/mode every connection negotiated, or "mixed" ("" when
  // `sessions` is empty).
  SessionAuth auth_summary() const;

  double msgs_per_s() const noexcept { return seconds > 0 ? static_cast<double>(messages) / seconds : 0; }
  double mib_per_s() const noexcept {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / (1024.0 * 1024.0) : 0;
  }
  double gbit_per_s() const noexcept { return seconds > 0 ? static_cast<double>(bytes) * 8 / seconds / 1e9 : 0; }
  // CPU microseconds per message, both sides together.
  double cpu_us_per_msg() const noexcept {
    return messages ? (client_cpu.total() + server_cpu.total()) * 1e6 / static_cast<double>(messages) : 0;
  }
};

void write_table(std::ostream& os, const Result& r);

// `siphon-bench compare`: the same workload on several stacks. A stack that
// could not be created has ran = false and says why in `error`.
struct CompareEntry {
  std::string ms_type;
  std::string con_mode;  // --modes: the mode asked for ("" without --modes)
  bool ran = false;
  const Result* result = nullptr;  // always set (configuration; measurements when ran)
  std::string error;
};
// One table, a column per stack (per stack and mode with --modes);
// unavailable stacks are listed with the reason.
void write_compare_table(std::ostream& os, const std::vector<CompareEntry>& runs);
// A JSON array of siphon-bench documents; an unavailable stack's document has
// "results": null and "error".
void write_compare_json(std::ostream& os, const std::vector<CompareEntry>& runs);
void write_json(std::ostream& os, const Result& r);
void write_svg(std::ostream& os, const Result& r);

// Escapes a string for JSON (quotes included).
std::string json_quote(std::string_view s);

}  // namespace siphon::bench
