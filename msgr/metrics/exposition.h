// The Prometheus text exposition (format 0.0.4) of a perf counter
// Collection plus the RDMA NIC's port counters (docs/observability.md,
// "Prometheus"). Names follow Ceph's exporters so an operator's Ceph
// dashboards find them: `ceph_` + promethize(<logger>_<counter>), the label
// `ceph_daemon`, a labeled logger's labels as labels, averages as two
// families `_sum` and `_count`, times in seconds. Histograms are left out,
// as both of Ceph's exporters leave them out.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "msgr/perf/perf_counters.h"

namespace siphon::metrics {

// An RDMA port whose sysfs counters a scrape shows.
struct NicPort {
  std::string device;  // "mlx5_0", "rxe0"
  unsigned port = 1;
};

// What one port's counters read as: the NIC reader is given by the caller
// (compat wires the shared sysfs reader, rdma/provider/sysfs.h, which
// siphon-doctor uses too; msgr/ does not include rdma/).
struct NicCounter {
  std::string group;  // "counters" (the IB port counters) or "hw_counters" (the driver's)
  std::string name;   // the sysfs file name
  std::uint64_t value = 0;
};
struct NicReading {
  std::optional<unsigned> state;  // the port's state number (4 = ACTIVE); nullopt = unknown
  std::vector<NicCounter> counters;
};
using NicReader = std::function<NicReading(const NicPort&)>;

struct ExpositionOptions {
  // The ceph_daemon label's value (see daemon_label()).
  std::string daemon;
  // Counters of priority below this are left out (ceph-exporter's
  // exporter_prio_limit, default 5) ...
  int prio_limit = perf::kUseful;
  // ... except in the messenger's loggers (is_messenger_logger()), which use
  // this limit: Ceph gives its messenger counters priority 0, so at Ceph's
  // default no messenger counter would ever be exported.
  int msgr_prio_limit = perf::kDebugOnly;
  // The NIC ports whose counters each scrape reads, and the reader (none:
  // no NIC part).
  std::vector<NicPort> nic_ports;
  NicReader nic_reader;
};

// Ceph's promethize(): `.`, `/`, whitespace and `::` become `_`, `+` becomes
// `_plus`, `-` becomes `_` (a trailing `-` becomes `_minus`); then every
// character Prometheus does not allow in a metric name (outside
// [a-zA-Z0-9_:]) becomes `_`, and a leading digit gets a `_` in front. Ceph
// keeps `:`, and so does this.
std::string promethize(std::string_view path);

// A label name: characters outside [a-zA-Z0-9_] become `_`, a leading digit
// gets a `_` in front, and an empty name or one starting with `__`
// (reserved) gets a leading `l`.
std::string label_name(std::string_view name);

// Escapes a label value (\ " and newline) and a HELP text (\ and newline).
std::string escape_label_value(std::string_view v);
std::string escape_help(std::string_view v);

// ceph-exporter's daemon name: the entity name with a leading "ceph-" and
// then a leading "client." removed ("osd.0" -> "osd.0", "client.admin" ->
// "admin").
std::string daemon_label(std::string_view entity_name);

// The messenger's loggers: AsyncMessenger::* (Ceph's per-worker names),
// Siphon::* (the RDMA workers and stacks) and siphon-messenger-<entity>
// (each messenger's sessions: faults, reconnects, ...).
bool is_messenger_logger(std::string_view logger_name);

// The whole /metrics body.
std::string render(const perf::Collection& c, const ExpositionOptions& o);

}  // namespace siphon::metrics
