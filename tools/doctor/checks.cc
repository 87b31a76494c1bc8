// The checks of siphon-doctor (checks.h, docs/doctor.md). The device, port
// and GID the stack would use come from the verbs provider's own selection
// code (choose_device, path_from_facts) run over the facts.
#include "tools/doctor/checks.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "rdma/transport/pinned.h"

namespace siphon::doctor {
namespace {

using rdma::verbs::format_gid;

Check make(std::string name, Status st, std::string summary, std::string fix = {}) {
  Check c;
  c.name = std::move(name);
  c.status = st;
  c.summary = std::move(summary);
  c.fix = std::move(fix);
  return c;
}

const PortInfo* find_port(const DeviceInfo& d, std::uint8_t num) {
  for (const auto& p : d.ports)
    if (p.facts.port == num) return &p;
  return nullptr;
}

const NetdevInfo* find_netdev(const Facts& f, const std::string& name) {
  const auto it = f.host.netdevs.find(name);
  return it == f.host.netdevs.end() ? nullptr : &it->second;
}

std::string gid_line(const rdma::GidEntry& g, const Facts& f) {
  const NetdevInfo* n = g.netdev.empty() ? nullptr : find_netdev(f, g.netdev);
  return fmt::format("GID[{}] {} {}{}{}{}", g.index, format_gid(g.gid), rdma::verbs::to_string(g.type),
                     g.netdev.empty() ? "" : " ", g.netdev,
                     n != nullptr && n->exists ? fmt::format(" ({})", n->operstate) : std::string());
}

// The interface that owns `local` on this port, from the GID table: the
// netdev of the entry whose GID is the address (the facts hold no other
// address list).
std::string netdev_of_local(const PortInfo& p, const NetAddress& local) {
  if (local.is_unspecified() || local.is_any()) return {};
  const rdma::Gid want = rdma::verbs::gid_of(local);
  for (const auto& g : p.facts.gids)
    if (g.gid == want && !g.netdev.empty()) return g.netdev;
  return {};
}

// --------------------------------------------------------------- config

void check_config(const Settings& s, std::vector<Check>& out) {
  if (s.config_problems.empty()) {
    out.push_back(make("config", Status::ok, "the configuration has no problems (siphon-conf --check)"));
    return;
  }
  for (const auto& p : s.config_problems) {
    Check c = make("config", p.error ? Status::error : Status::warning, p.text,
                   "correct the option where the message points (siphon-conf --check lists the same)");
    out.push_back(std::move(c));
  }
}

// ------------------------------------------------- device, port, GID, MTU

struct Choice {
  const DeviceInfo* device = nullptr;
  const PortInfo* port = nullptr;
  bool software = false;  // the software fabric will be used
};

Choice check_device(const Facts& f, const Settings& s, std::vector<Check>& out) {
  Choice ch;
  const std::string& want = s.rdma.device_name;
  const std::vector<std::string> names = f.device_names();
  std::string present;
  for (const auto& n : names) present += (present.empty() ? "" : ", ") + n;
  if (present.empty()) present = "none";
  if (want.rfind("soft", 0) == 0) {
    ch.software = true;
    out.push_back(make("device", Status::ok,
                       fmt::format("ms_async_rdma_device_name = {}: the software RC fabric will be used "
                                   "(RDMA devices present: {})",
                                   want, present)));
    return ch;
  }
  const auto chosen = rdma::verbs::choose_device(want, names);
  if (!chosen) {
    if (want.empty()) {
      ch.software = true;
      Check c = make("device", Status::ok,
                     "no RDMA device: async+rdma will run on the software fabric (soft0), which needs no "
                     "device, memlock or hugepages");
      c.evidence.push_back(fmt::format("{}/class/infiniband is empty or absent", f.roots.sys));
      out.push_back(std::move(c));
      return ch;
    }
    Check c = make("device", s.rdma_stack ? Status::error : Status::warning,
                   fmt::format("RDMA device '{}' (ms_async_rdma_device_name) not found; devices present: {}",
                               want, present),
                   names.empty() ? "set ms_async_rdma_device_name = soft0 to use the software fabric, or load "
                                   "a driver (rdma link add rxe0 type rxe netdev <if> for Soft-RoCE)"
                                 : "set ms_async_rdma_device_name to one of the devices present");
    out.push_back(std::move(c));
    return ch;
  }
  ch.device = f.device(*chosen);
  Check c = make("device", Status::ok,
                 fmt::format("{} will be used ({}; devices present: {})", *chosen,
                             want.empty() ? "the first device by name: ms_async_rdma_device_name is empty"
                                          : "ms_async_rdma_device_name",
                             present));
  if (!ch.device->uverbs.empty()) c.evidence.push_back(fmt::format("verbs device {}", ch.device->uverbs));
  out.push_back(std::move(c));
  return ch;
}

void check_port(const Settings& s, Choice& ch, std::vector<Check>& out) {
  const DeviceInfo& d = *ch.device;
  const std::uint8_t num = s.rdma.port_num;
  ch.port = find_port(d, num);
  if (ch.port == nullptr) {
    out.push_back(make("port", Status::error,
                       fmt::format("{} has no port {} (ms_async_rdma_port_num); it has {}", d.name, num,
                                   d.ports.size()),
                       "set ms_async_rdma_port_num to a port of the device (1-based)"));
    return;
  }
  const PortInfo& p = *ch.port;
  const bool active = p.facts.attr.state == rdma::PortState::active;
  Check c = make("port", active ? Status::ok : Status::error,
                 fmt::format("{} port {}: state {}, physical state {}, link layer {}, rate {}", d.name, num,
                             p.state_text.empty() ? "unknown" : p.state_text,
                             p.phys_state_text.empty() ? "unknown" : p.phys_state_text,
                             p.facts.attr.link_layer == rdma::LinkLayer::ethernet     ? "Ethernet"
                             : p.facts.attr.link_layer == rdma::LinkLayer::infiniband ? "InfiniBand"
                                                                                      : "unknown",
                             p.rate.empty() ? "unknown" : p.rate),
                 active ? std::string()
                        : fmt::format("bring the link up (ip link set {} up, check the cable and the switch "
                                      "port) or choose another port with ms_async_rdma_port_num",
                                      d.netdevs.empty() ? std::string("<netdev>") : d.netdevs.front()));
  if (!active) c.summary += ": the stack refuses a port that is not ACTIVE";
  out.push_back(std::move(c));
}

// The GID the stack would pick, through the provider's own selection.
std::optional<rdma::verbs::VerbsPath> check_gid(const Facts& f, const Settings& s, const Choice& ch,
                                                std::vector<Check>& out) {
  const PortInfo& p = *ch.port;
  const std::string local_netdev = netdev_of_local(p, s.local);
  // A port that is not ACTIVE is the port check's error; here, the GID the
  // stack would use once it is.
  const bool port_up = p.facts.attr.state == rdma::PortState::active;
  rdma::verbs::PortFacts facts = p.facts;
  if (!port_up) facts.attr.state = rdma::PortState::active;
  rdma::verbs::VerbsPath path;
  std::string why;
  const auto ec = rdma::verbs::path_from_facts(facts, s.local, local_netdev, s.path, path, why);
  std::vector<std::string> table;
  for (const auto& g : p.facts.gids) table.push_back(gid_line(g, f));
  if (table.empty()) table.push_back("the GID table is empty");
  if (ec) {
    Check c = make("gid", Status::error, why,
                   s.path.gid_index >= 0 || !s.path.local_gid.empty()
                       ? "set ms_async_rdma_gid_idx / ms_async_rdma_local_gid to a RoCE v2 entry listed above, "
                         "or remove them to select automatically"
                       : "give the port's netdev an IP address and bring it up, or pin a GID with "
                         "ms_async_rdma_gid_idx");
    c.evidence = std::move(table);
    out.push_back(std::move(c));
    return std::nullopt;
  }
  const NetdevInfo* nd = path.sgid.netdev.empty() ? nullptr : find_netdev(f, path.sgid.netdev);
  Status st = path.warnings.empty() ? Status::ok : Status::warning;
  std::string fix;
  std::string summary = fmt::format("the stack would use {} GID[{}] {} {} ({}){}", path.device, path.sgid.index,
                                    format_gid(path.sgid.gid), rdma::verbs::to_string(path.sgid.type), path.how,
                                    port_up ? "" : " once the port is ACTIVE");
  if (!path.warnings.empty()) {
    summary += "; " + path.warnings.front();
    fix = "pin a RoCE v2 GID of the address the daemon binds (or remove the pin to select automatically)";
  }
  if (nd != nullptr && (!nd->exists || nd->operstate == "down")) {
    st = Status::error;
    summary += fmt::format("; its netdev {} is {}", path.sgid.netdev, nd->exists ? "down" : "gone");
    fix = fmt::format("bring {} up (ip link set {} up) or choose a GID on a netdev that is up", path.sgid.netdev,
                      path.sgid.netdev);
  }
  Check c = make("gid", st, std::move(summary), std::move(fix));
  c.evidence = std::move(table);
  if (!s.local.is_unspecified())
    c.evidence.push_back(fmt::format("local address (public_addr) {}", s.local.to_string()));
  out.push_back(std::move(c));
  return path;
}

void check_mtu(const Facts& f, const Settings& s, const Choice& ch, const rdma::verbs::VerbsPath& path,
               std::vector<Check>& out) {
  const PortInfo& p = *ch.port;
  const NetdevInfo* nd = path.sgid.netdev.empty() ? nullptr : find_netdev(f, path.sgid.netdev);
  const std::uint32_t active = rdma::mtu_bytes(p.facts.attr.active_mtu);
  const std::uint32_t path_mtu = rdma::mtu_bytes(path.path_mtu);
  if (p.mtu_source == "unknown") {
    Check c = make("mtu", Status::cannot_tell,
                   fmt::format("the active MTU of {} port {} is not in the tree (no netdev MTU); "
                               "ms_async_rdma_path_mtu = {}",
                               p.facts.device, p.facts.port, s.path.max_path_mtu));
    out.push_back(std::move(c));
    return;
  }
  std::string netdev_text = "unknown";
  if (nd != nullptr && nd->mtu) netdev_text = fmt::format("{} ({})", *nd->mtu, nd->name);
  Check c = make("mtu", Status::ok,
                 fmt::format("path MTU {}: netdev MTU {}, port active MTU {} (from the {}), ms_async_rdma_path_mtu "
                             "{}",
                             path_mtu, netdev_text, active, p.mtu_source,
                             s.path.max_path_mtu == 0 ? std::string("0 (the active MTU)")
                                                      : std::to_string(s.path.max_path_mtu)));
  if (nd != nullptr && nd->mtu && active < 4096 && p.facts.attr.link_layer == rdma::LinkLayer::ethernet) {
    c.status = Status::warning;
    c.summary += fmt::format("; the netdev MTU {} limits RDMA messages to {}-byte packets", *nd->mtu, active);
    c.fix = fmt::format("raise the MTU of {} (and of the switch ports and the peers) to 4200 or more, e.g. "
                        "ip link set {} mtu 9000, for a 4096-byte path MTU",
                        nd->name, nd->name);
  } else if (s.path.max_path_mtu != 0 && s.path.max_path_mtu < active) {
    c.status = Status::warning;
    c.summary += fmt::format("; ms_async_rdma_path_mtu = {} caps the path below the port's {}", s.path.max_path_mtu,
                             active);
    c.fix = "set ms_async_rdma_path_mtu = 0 to use the port's active MTU, unless a peer or a switch needs the cap";
  }
  out.push_back(std::move(c));
}

// -------------------------------------------------------------- memory

void check_memlock(const Settings& s, const Limits& l, std::vector<Check>& out) {
  const std::uint64_t need = memlock_need(s.rdma);
  const rdma::PinnedMemory pm = rdma::pinned_memory(s.rdma);
  Check c;
  c.name = "memlock";
  c.evidence.push_back(fmt::format("send pool {} (ms_async_rdma_send_buffers {} x ms_async_rdma_buffer_size {}), "
                                   "receive pool {} (ms_async_rdma_receive_buffers {}), {} per connection",
                                   human_bytes(pm.send_pool), s.rdma.send_buffers, s.rdma.buffer_size,
                                   human_bytes(pm.receive_pool), s.rdma.receive_buffers,
                                   human_bytes(pm.per_connection)));
  c.evidence.push_back(fmt::format("need {} bytes per RDMA stack (rdma/transport/pinned.h); limit {}", need,
                                   !l.memlock_known ? std::string("unknown")
                                   : l.memlock      ? fmt::format("{} bytes", *l.memlock)
                                                    : std::string("unlimited")));
  if (!l.memlock_known) {
    c.status = Status::cannot_tell;
    c.summary = fmt::format("RLIMIT_MEMLOCK could not be read; this configuration may pin {} per RDMA stack",
                            human_bytes(need));
  } else if (!l.memlock) {
    c.status = Status::ok;
    c.summary = fmt::format("RLIMIT_MEMLOCK is unlimited; this configuration may pin {} per RDMA stack",
                            human_bytes(need));
  } else if (*l.memlock < need) {
    c.status = Status::error;
    c.summary = fmt::format("RLIMIT_MEMLOCK is {} but this configuration may pin {} per RDMA stack: memory "
                            "registration fails once the pools grow past the limit",
                            human_bytes(*l.memlock), human_bytes(need));
    c.fix = "raise the limit where the daemon starts (systemd: LimitMEMLOCK=infinity; shell: ulimit -l unlimited; "
            "/etc/security/limits.conf: memlock unlimited), or lower ms_async_rdma_receive_buffers / "
            "ms_async_rdma_send_buffers";
  } else {
    c.status = Status::ok;
    c.summary = fmt::format("RLIMIT_MEMLOCK {} covers the {} this configuration may pin per RDMA stack",
                            human_bytes(*l.memlock), human_bytes(need));
  }
  out.push_back(std::move(c));
}

void check_hugepages(const Facts& f, const Settings& s, std::vector<Check>& out) {
  const HostInfo& h = f.host;
  const std::uint64_t need = memlock_need(s.rdma);
  if (!s.rdma.enable_hugepage) {
    Check c = make("hugepages", Status::ok, "ms_async_rdma_enable_hugepage is off: pools use 4 KiB pages");
    if (h.hugepages_1g_free.value_or(0) > 0 || h.hugepages_2m_free.value_or(0) > 0)
      c.evidence.push_back(fmt::format("free hugepages: {} x 2 MiB, {} x 1 GiB", h.hugepages_2m_free.value_or(0),
                                       h.hugepages_1g_free.value_or(0)));
    out.push_back(std::move(c));
    return;
  }
  if (!h.hugepages_2m_free) {
    out.push_back(make("hugepages", Status::cannot_tell,
                       "ms_async_rdma_enable_hugepage is on, but the number of free 2 MiB hugepages is not readable"));
    return;
  }
  const std::uint64_t have = *h.hugepages_2m_free * rdma::kHugePageBytes;
  const std::uint64_t pages = (need + rdma::kHugePageBytes - 1) / rdma::kHugePageBytes;
  Check c = make("hugepages", have >= need ? Status::ok : Status::warning,
                 fmt::format("ms_async_rdma_enable_hugepage is on: {} free 2 MiB hugepages ({}) for up to {}",
                             *h.hugepages_2m_free, human_bytes(have), human_bytes(need)));
  if (have < need) {
    c.summary += "; slabs that do not fit fall back to 4 KiB pages (slower registration, more IOTLB misses)";
    c.fix = fmt::format("reserve at least {} 2 MiB pages (sysctl vm.nr_hugepages={}, or hugepages= on the kernel "
                        "command line), or turn ms_async_rdma_enable_hugepage off",
                        pages, pages + h.hugepages_2m_total.value_or(0) - *h.hugepages_2m_free);
  }
  if (h.hugepages_1g_total)
    c.evidence.push_back(fmt::format("1 GiB hugepages: {} free of {} (the pools use 2 MiB pages)",
                                     h.hugepages_1g_free.value_or(0), *h.hugepages_1g_total));
  out.push_back(std::move(c));
}

void check_thp(const Facts& f, std::vector<Check>& out) {
  const std::string& m = f.host.thp_mode;
  if (m.empty()) {
    out.push_back(make("thp", Status::cannot_tell, "transparent hugepage mode is not readable"));
    return;
  }
  out.push_back(make("thp", Status::ok,
                     fmt::format("transparent hugepages: {} (registered pool memory is pinned either way)", m)));
}

// ------------------------------------------------- NUMA, SR-IOV, fabric

void check_numa(const Facts& f, const DeviceInfo& d, std::vector<Check>& out) {
  if (!d.numa_node) {
    out.push_back(make("numa", Status::cannot_tell,
                       fmt::format("{} reports no NUMA node (a virtual device, or a single-node host)", d.name)));
    return;
  }
  const auto it = f.host.node_cpus.find(*d.numa_node);
  if (it == f.host.node_cpus.end() || f.host.cpus_allowed.empty()) {
    out.push_back(make("numa", Status::cannot_tell,
                       fmt::format("{} is on NUMA node {}; the node's CPUs or this process's CPUs are not readable",
                                   d.name, *d.numa_node)));
    return;
  }
  std::size_t near = 0;
  for (unsigned cpu : f.host.cpus_allowed)
    if (std::find(it->second.begin(), it->second.end(), cpu) != it->second.end()) ++near;
  // The memory policy: may this process allocate on the NIC's node?
  const std::vector<unsigned> mems = parse_cpu_list(f.host.mems_allowed);
  const bool mem_near =
      mems.empty() || std::find(mems.begin(), mems.end(), static_cast<unsigned>(*d.numa_node)) != mems.end();
  Check c = make("numa", near > 0 && mem_near ? Status::ok : Status::warning,
                 fmt::format("{} is on NUMA node {}; {} of the {} CPUs this process may use are on that node", d.name,
                             *d.numa_node, near, f.host.cpus_allowed.size()));
  if (!f.host.mems_allowed.empty()) c.evidence.push_back(fmt::format("Mems_allowed_list {}", f.host.mems_allowed));
  if (!mem_near) c.summary += fmt::format("; its memory may not come from node {} (Mems_allowed_list {})",
                                          *d.numa_node, f.host.mems_allowed);
  if (near == 0 || !mem_near)
    c.fix = fmt::format("run the daemon on node {}'s CPUs (numactl --cpunodebind={} --membind={}, or systemd "
                        "CPUAffinity/NUMAPolicy) so completions and buffers stay next to the NIC",
                        *d.numa_node, *d.numa_node, *d.numa_node);
  out.push_back(std::move(c));
}

void check_sriov(const DeviceInfo& d, std::vector<Check>& out) {
  if (d.is_vf) {
    out.push_back(make("sriov", Status::ok,
                       fmt::format("{} is an SR-IOV virtual function: PFC, ECN and DSCP trust are set on the "
                                   "physical function's host",
                                   d.name)));
  } else if (d.sriov_totalvfs) {
    out.push_back(make("sriov", Status::ok,
                       fmt::format("{} is an SR-IOV physical function with {} of {} VFs enabled", d.name,
                                   d.sriov_numvfs.value_or(0), *d.sriov_totalvfs)));
  } else {
    out.push_back(make("sriov", Status::ok, fmt::format("{} is not an SR-IOV device (no sriov_totalvfs, no physfn)",
                                                        d.name)));
  }
}

void check_lossless(const Facts& f, const Settings& s, const Choice& ch, const std::string& netdev,
                    std::vector<Check>& out) {
  if (ch.port->facts.attr.link_layer != rdma::LinkLayer::ethernet) {
    out.push_back(make("lossless", Status::ok, "InfiniBand link: credit-based flow control, no PFC/ECN needed"));
    return;
  }
  const NetdevInfo* nd = netdev.empty() ? nullptr : find_netdev(f, netdev);
  // A VLAN netdev has no ECN settings of its own: they are its parent's,
  // the device's own netdev (device/net).
  if (nd == nullptr || (nd->ecn_np.empty() && nd->ecn_rp.empty()))
    for (const auto& n : ch.device->netdevs)
      if (const NetdevInfo* other = find_netdev(f, n); other && (!other->ecn_np.empty() || !other->ecn_rp.empty())) {
        nd = other;
        break;
      }
  const std::string ecn_netdev = nd != nullptr ? nd->name : netdev;
  const int prio = s.rdma.sl;
  Check c;
  c.name = "lossless";
  c.evidence.push_back(fmt::format("traffic uses priority (ms_async_rdma_sl) {} and DSCP {}", prio, s.path.dscp));
  if (nd != nullptr && (!nd->ecn_np.empty() || !nd->ecn_rp.empty())) {
    const auto np = nd->ecn_np.find(prio), rp = nd->ecn_rp.find(prio);
    const bool np_on = np != nd->ecn_np.end() && np->second;
    const bool rp_on = rp != nd->ecn_rp.end() && rp->second;
    c.status = np_on && rp_on ? Status::ok : Status::warning;
    c.summary = fmt::format("RoCE ECN on {} priority {}: notification point {}, reaction point {}; PFC and DSCP "
                            "trust: cannot tell from sysfs",
                            ecn_netdev, prio, np_on ? "on" : "off", rp_on ? "on" : "off");
    if (c.status == Status::warning)
      c.fix = fmt::format("enable RoCE ECN for priority {} on {} (echo 1 > /sys/class/net/{}/ecn/roce_np/enable/{} "
                          "and roce_rp), or congestion drops and slows RDMA traffic under load",
                          prio, ecn_netdev, ecn_netdev, prio);
  } else {
    c.status = Status::cannot_tell;
    c.summary = fmt::format("PFC, ECN and DSCP trust on {}: cannot tell from sysfs (mlnx_qos -i {} and the switch "
                            "show them)",
                            netdev.empty() ? "the netdev" : netdev, netdev.empty() ? "<if>" : netdev);
  }
  if (const auto it = f.host.pause_counters.find(netdev); it != f.host.pause_counters.end())
    c.evidence.push_back(fmt::format("ethtool -S {} pause counters: {}", netdev, it->second));
  out.push_back(std::move(c));
}

void check_access(const Facts& f, const DeviceInfo& d, std::vector<Check>& out) {
  const HostInfo& h = f.host;
  std::vector<std::string> missing_mods;
  for (const char* m : {"ib_uverbs", "rdma_ucm"})
    if (!h.modules.count(m)) missing_mods.push_back(m);
  auto file = [&](const std::string& name) {
    const auto it = h.dev_files.find(name);
    return it == h.dev_files.end() ? std::pair<bool, bool>{false, false} : it->second;
  };
  std::vector<std::string> problems, fixes;
  const std::string dir = f.roots.dev + "/infiniband";
  for (const std::string& n : {d.uverbs.empty() ? std::string("uverbs0") : d.uverbs, std::string("rdma_cm")}) {
    const auto [there, rw] = file(n);
    if (!there) {
      problems.push_back(fmt::format("{}/{} does not exist", dir, n));
      fixes.push_back(n == "rdma_cm" ? "load rdma_ucm (modprobe rdma_ucm)"
                                     : "load ib_uverbs (modprobe ib_uverbs), and in a container map /dev/infiniband");
    } else if (!rw) {
      problems.push_back(fmt::format("{}/{} is not readable and writable by this user", dir, n));
      fixes.push_back(fmt::format("give the daemon's user access to {}/{} (udev rule, group rdma, or the container's "
                                  "device list)",
                                  dir, n));
    }
  }
  Check c;
  c.name = "access";
  if (h.modules_known && !missing_mods.empty()) {
    std::string m;
    for (const auto& x : missing_mods) m += (m.empty() ? "" : ", ") + x;
    c.evidence.push_back(fmt::format("modules not loaded: {}", m));
  }
  c.evidence.push_back(f.host.rdma_core.empty() ? std::string("rdma-core version: cannot tell")
                                                 : fmt::format("rdma-core: {}", f.host.rdma_core));
  if (problems.empty()) {
    c.status = Status::ok;
    c.summary = fmt::format("{}/{} and rdma_cm are accessible", dir, d.uverbs.empty() ? "uverbs0" : d.uverbs);
  } else {
    c.status = Status::error;
    c.summary = problems.front();
    for (std::size_t i = 1; i < problems.size(); ++i) c.summary += "; " + problems[i];
    c.fix = fixes.front();
    for (std::size_t i = 1; i < fixes.size(); ++i) c.fix += ", and " + fixes[i];
  }
  out.push_back(std::move(c));
}

}  // namespace

std::string_view to_string(Status s) noexcept {
  switch (s) {
    case Status::ok: return "ok";
    case Status::cannot_tell: return "cannot tell";
    case Status::warning: return "warning";
    case Status::error: return "error";
  }
  return "?";
}

std::uint64_t memlock_need(const rdma::RdmaOptions& o) noexcept { return rdma::pinned_memory(o).total(); }

std::string human_bytes(std::uint64_t b) {
  constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u + 1 < kUnits.size()) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", b);
  return v == static_cast<double>(static_cast<std::uint64_t>(v)) ? fmt::format("{} {}", static_cast<std::uint64_t>(v), kUnits[u])
                                                                 : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::vector<Check> run_checks(const Facts& f, const Settings& s, const Limits& l) {
  std::vector<Check> out;
  check_config(s, out);
  Check stack = make("stack", Status::ok, fmt::format("ms_type {}", s.ms_type));
  if (!s.rdma_stack) stack.summary += ": the messengers do not use RDMA (set ms_type = async+rdma to use it)";
  out.push_back(std::move(stack));
  Choice ch = check_device(f, s, out);
  if (ch.device == nullptr) return out;
  check_port(s, ch, out);
  std::string netdev = ch.device->netdevs.empty() ? std::string() : ch.device->netdevs.front();
  if (ch.port != nullptr) {
    if (const auto path = check_gid(f, s, ch, out)) {
      if (!path->sgid.netdev.empty()) netdev = path->sgid.netdev;
      check_mtu(f, s, ch, *path, out);
    }
  }
  // Memory needs apply only where a real device will be used.
  if (s.rdma_stack) {
    check_memlock(s, l, out);
    check_hugepages(f, s, out);
  }
  check_thp(f, out);
  check_numa(f, *ch.device, out);
  check_sriov(*ch.device, out);
  if (ch.port != nullptr) check_lossless(f, s, ch, netdev, out);
  check_access(f, *ch.device, out);
  return out;
}

int exit_status(const std::vector<Check>& checks) noexcept {
  int st = 0;
  for (const auto& c : checks) {
    if (c.status == Status::error) return 2;
    if (c.status == Status::warning) st = 1;
  }
  return st;
}

}  // namespace siphon::doctor
