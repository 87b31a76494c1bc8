// Starting the Prometheus /metrics endpoint from the configuration
// (siphon_metrics_endpoint; docs/observability.md, "Prometheus"): what
// siphon-objd and `siphon-bench server` call after loading their Config.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compat/config.h"
#include "compat/ms_type.h"
#include "msgr/metrics/exposition.h"
#include "msgr/metrics/http_server.h"

namespace siphon::compat {

// The RDMA ports whose counters the endpoint shows: with an async+rdma
// messenger (public or cluster), the device the stack uses --
// rdma::choose_device(ms_async_rdma_device_name, the devices in
// <sysfs_root>/class/infiniband), the rule siphon-doctor checks too -- and
// port ms_async_rdma_port_num. None for TCP, the software fabric (soft*), or
// no device. `stack`, when given, is the stack the program really runs
// (siphon-bench's embedded default) instead of the configured ones.
std::vector<metrics::NicPort> nic_ports_in_use(const Config& cfg, const std::string& sysfs_root = "/sys",
                                               const MsType* stack = nullptr);

// The NIC reader over <sysfs_root> with the shared sysfs reader
// (rdma/provider/sysfs.h): each scrape reads the port's counters/,
// hw_counters/ and state.
metrics::NicReader sysfs_nic_reader(const std::string& sysfs_root = "/sys");

// The exposition options the configuration gives (daemon label from the
// entity name, the two priority limits, the NIC ports).
metrics::ExpositionOptions exposition_options(const Config& cfg, const std::string& sysfs_root = "/sys",
                                              const MsType* stack = nullptr);

// Starts the endpoint over perf::process_collection() when
// siphon_metrics_endpoint is set. Returns nullptr when it is empty (then
// `message` is empty) or when it cannot listen (then `message` names the
// address, the cause and the fix: the caller prints it and keeps running).
// On success `message` says where it listens and which NIC ports it shows.
std::unique_ptr<metrics::MetricsServer> start_metrics_endpoint(const Config& cfg, std::string& message,
                                                               const MsType* stack = nullptr);

}  // namespace siphon::compat
