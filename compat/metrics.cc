// The /metrics endpoint from a Config (metrics.h).
#include "compat/metrics.h"

#include <fmt/format.h>

#include "rdma/provider/sysfs.h"

namespace siphon::compat {

std::vector<metrics::NicPort> nic_ports_in_use(const Config& cfg, const std::string& sysfs_root,
                                               const MsType* stack) {
  const MsTypes t = cfg.ms_types();
  const bool rdma = stack ? stack->stack == MsType::Stack::rdma
                          : t.public_type.stack == MsType::Stack::rdma || t.cluster_type.stack == MsType::Stack::rdma;
  if (!rdma) return {};
  const auto dev = rdma::sysfs::device_in_use(sysfs_root, cfg.get<Opt::ms_async_rdma_device_name>());
  if (!dev) return {};
  return {metrics::NicPort{*dev, static_cast<unsigned>(cfg.get<Opt::ms_async_rdma_port_num>())}};
}

metrics::NicReader sysfs_nic_reader(const std::string& sysfs_root) {
  return [sysfs_root](const metrics::NicPort& p) {
    metrics::NicReading r;
    r.state = rdma::sysfs::read_port_state(sysfs_root, p.device, p.port);
    for (auto& c : rdma::sysfs::read_port_counters(sysfs_root, p.device, p.port))
      r.counters.push_back({std::move(c.group), std::move(c.name), c.value});
    return r;
  };
}

metrics::ExpositionOptions exposition_options(const Config& cfg, const std::string& sysfs_root,
                                              const MsType* stack) {
  metrics::ExpositionOptions o;
  o.daemon = metrics::daemon_label(cfg.name().to_string());
  o.prio_limit = static_cast<int>(cfg.get<Opt::siphon_metrics_prio_limit>());
  o.msgr_prio_limit = static_cast<int>(cfg.get<Opt::siphon_metrics_msgr_prio_limit>());
  o.nic_ports = nic_ports_in_use(cfg, sysfs_root, stack);
  o.nic_reader = sysfs_nic_reader(sysfs_root);
  return o;
}

std::unique_ptr<metrics::MetricsServer> start_metrics_endpoint(const Config& cfg, std::string& message,
                                                               const MsType* stack) {
  message.clear();
  const std::string& text = cfg.get<Opt::siphon_metrics_endpoint>();
  if (text.empty()) return nullptr;
  std::string why;
  const auto ep = metrics::parse_endpoint(text, why);
  if (!ep) {  // Config::load validated it already; kept for a Config built otherwise
    message = "siphon_metrics_endpoint " + why + "; running without /metrics";
    return nullptr;
  }
  const metrics::ExpositionOptions opts = exposition_options(cfg, "/sys", stack);
  auto server = metrics::MetricsServer::start(
      *ep, [opts] { return metrics::render(perf::process_collection(), opts); }, {}, why);
  if (!server) {
    message = why + "; running without /metrics";
    return nullptr;
  }
  std::string nics;
  for (const auto& p : opts.nic_ports) nics += fmt::format("{}{} port {}", nics.empty() ? "" : ", ", p.device, p.port);
  message = fmt::format("Prometheus metrics at http://{}/metrics (ceph_daemon=\"{}\"; NIC counters: {})",
                        metrics::Endpoint{ep->ip, server->port()}.to_string(), opts.daemon,
                        nics.empty() ? "none" : nics);
  return server;
}

}  // namespace siphon::compat
