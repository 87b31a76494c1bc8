// Reading the device facts from a root (facts.h). Every path is built from
// Roots; nothing here looks at the host's own /sys, /proc or /dev when a
// root is given.
#include "tools/doctor/facts.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "rdma/provider/sysfs.h"

namespace siphon::doctor {
namespace {

namespace fs = std::filesystem;

// The file primitives are the shared sysfs reader's (rdma/provider/sysfs.h),
// which the Prometheus endpoint's NIC counters use too.
using rdma::sysfs::entries;
using rdma::sysfs::present;
using rdma::sysfs::read_number;
using rdma::sysfs::read_text;

// "4: ACTIVE" -> 4.
int leading_number(const std::string& s) {
  int v = -1;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

rdma::PortState port_state(int v) {
  switch (v) {
    case 1: return rdma::PortState::down;
    case 2: return rdma::PortState::init;
    case 3: return rdma::PortState::armed;
    case 4: return rdma::PortState::active;
    case 5: return rdma::PortState::active_defer;
    default: return rdma::PortState::nop;
  }
}

PortInfo read_port(const fs::path& dir, const std::string& device, std::uint8_t num,
                   const std::map<std::string, NetdevInfo>& netdevs) {
  PortInfo p;
  p.facts.device = device;
  p.facts.port = num;
  auto& a = p.facts.attr;
  p.state_text = read_text(dir / "state").value_or("");
  p.phys_state_text = read_text(dir / "phys_state").value_or("");
  p.rate = read_text(dir / "rate").value_or("");
  a.state = port_state(leading_number(p.state_text));
  p.phys_link_up = leading_number(p.phys_state_text) == 5;
  const std::string ll = read_text(dir / "link_layer").value_or("");
  a.link_layer = ll == "Ethernet"     ? rdma::LinkLayer::ethernet
                 : ll == "InfiniBand" ? rdma::LinkLayer::infiniband
                                      : rdma::LinkLayer::unspecified;
  if (const auto lid = read_text(dir / "lid"))
    a.lid = static_cast<std::uint16_t>(std::strtoul(lid->c_str(), nullptr, 16));
  const auto slots = entries(dir / "gids");
  a.gid_tbl_len = static_cast<std::uint32_t>(slots.size());
  for (const auto& s : slots) {
    const auto text = read_text(dir / "gids" / s);
    if (!text) continue;
    const auto gid = parse_sysfs_gid(*text);
    if (!gid || std::all_of(gid->begin(), gid->end(), [](std::uint8_t b) { return b == 0; })) continue;
    rdma::GidEntry e;
    e.index = static_cast<std::uint32_t>(std::strtoul(s.c_str(), nullptr, 10));
    e.gid = *gid;
    const std::string type = read_text(dir / "gid_attrs" / "types" / s).value_or("");
    // The provider's rule (gid_type_from_ibv): "IB/RoCE v1" is RoCE v1 on
    // Ethernet and IB on InfiniBand.
    e.type = type == "RoCE v2"                                ? rdma::GidType::roce_v2
             : a.link_layer == rdma::LinkLayer::ethernet ? rdma::GidType::roce_v1
                                                              : rdma::GidType::ib;
    e.netdev = read_text(dir / "gid_attrs" / "ndevs" / s).value_or("");
    p.facts.gids.push_back(std::move(e));
  }
  std::sort(p.facts.gids.begin(), p.facts.gids.end(),
            [](const rdma::GidEntry& x, const rdma::GidEntry& y) { return x.index < y.index; });
  // Sysfs has no MTU for a port. A captured tree may carry active_mtu (from
  // ibv_devinfo); on RoCE the kernel derives it from the netdev's MTU.
  if (const auto m = read_number<std::uint32_t>(dir / "active_mtu"); m && rdma::verbs::mtu_from_bytes(*m)) {
    a.active_mtu = *rdma::verbs::mtu_from_bytes(*m);
    p.mtu_source = "sysfs";
  } else if (a.link_layer == rdma::LinkLayer::ethernet) {
    for (const auto& g : p.facts.gids) {
      const auto it = netdevs.find(g.netdev);
      if (it == netdevs.end() || !it->second.mtu) continue;
      if (const auto mtu = roce_active_mtu(*it->second.mtu)) {
        a.active_mtu = *mtu;
        p.mtu_source = "netdev MTU";
      }
      break;
    }
  }
  a.max_mtu = a.active_mtu;
  return p;
}

std::map<int, bool> read_ecn(const fs::path& dir) {
  std::map<int, bool> out;
  for (const auto& prio : entries(dir)) {
    const auto v = read_number<int>(dir / prio);
    if (v) out[leading_number(prio)] = *v != 0;
  }
  return out;
}

NetdevInfo read_netdev(const fs::path& sys, const std::string& name) {
  NetdevInfo n;
  n.name = name;
  const fs::path dir = sys / "class" / "net" / name;
  n.exists = present(dir);
  if (!n.exists) return n;
  n.mtu = read_number<std::uint32_t>(dir / "mtu");
  n.operstate = read_text(dir / "operstate").value_or("unknown");
  n.ecn_np = read_ecn(dir / "ecn" / "roce_np" / "enable");
  n.ecn_rp = read_ecn(dir / "ecn" / "roce_rp" / "enable");
  return n;
}

std::optional<std::uint64_t> meminfo_value(const std::string& meminfo, std::string_view key) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0 || line.size() <= key.size() || line[key.size()] != ':') continue;
    return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10);
  }
  return std::nullopt;
}

void read_host(const Roots& r, HostInfo& h) {
  const fs::path sys(r.sys), proc(r.proc), dev(r.dev);
  // Hugepages: per size under /sys/kernel/mm/hugepages; /proc/meminfo for the
  // default size when that directory is absent.
  const fs::path hp = sys / "kernel" / "mm" / "hugepages";
  h.hugepages_2m_free = read_number<std::uint64_t>(hp / "hugepages-2048kB" / "free_hugepages");
  h.hugepages_2m_total = read_number<std::uint64_t>(hp / "hugepages-2048kB" / "nr_hugepages");
  h.hugepages_1g_free = read_number<std::uint64_t>(hp / "hugepages-1048576kB" / "free_hugepages");
  h.hugepages_1g_total = read_number<std::uint64_t>(hp / "hugepages-1048576kB" / "nr_hugepages");
  if (!h.hugepages_2m_free) {
    if (const auto mi = read_text(proc / "meminfo")) {
      if (meminfo_value(*mi, "Hugepagesize").value_or(0) == 2048) {
        h.hugepages_2m_free = meminfo_value(*mi, "HugePages_Free");
        h.hugepages_2m_total = meminfo_value(*mi, "HugePages_Total");
      }
    }
  }
  if (const auto thp = read_text(sys / "kernel" / "mm" / "transparent_hugepage" / "enabled")) {
    const auto open = thp->find('['), close = thp->find(']');
    if (open != std::string::npos && close > open) h.thp_mode = thp->substr(open + 1, close - open - 1);
  }
  if (const auto mods = read_text(proc / "modules")) {
    h.modules_known = true;
    std::istringstream in(*mods);
    std::string line;
    while (std::getline(in, line)) h.modules[line.substr(0, line.find(' '))] = true;
  }
  // Built-in modules are not in /proc/modules but have /sys/module/<name>.
  for (const char* m : {"ib_core", "ib_uverbs", "rdma_ucm", "rdma_cm", "rdma_rxe", "mlx5_ib"})
    if (present(sys / "module" / m)) h.modules[m] = true;
  if (const auto status = read_text(proc / "self" / "status")) {
    std::istringstream in(*status);
    std::string line;
    while (std::getline(in, line)) {
      auto value = [&](std::string_view key) -> std::optional<std::string> {
        if (line.rfind(key, 0) != 0) return std::nullopt;
        std::string v = line.substr(key.size());
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      };
      if (auto v = value("Cpus_allowed_list:")) h.cpus_allowed = parse_cpu_list(*v);
      if (auto v = value("Mems_allowed_list:")) h.mems_allowed = *v;
    }
  }
  for (const auto& n : entries(sys / "devices" / "system" / "node")) {
    if (n.rfind("node", 0) != 0) continue;
    if (const auto list = read_text(sys / "devices" / "system" / "node" / n / "cpulist"))
      h.node_cpus[leading_number(n.substr(4))] = parse_cpu_list(*list);
  }
  const fs::path ib = dev / "infiniband";
  h.dev_dir_exists = present(ib);
  for (const auto& f : entries(ib)) {
    const std::string p = (ib / f).string();
    h.dev_files[f] = {true, ::access(p.c_str(), R_OK | W_OK) == 0};
  }
}

}  // namespace

std::optional<rdma::Mtu> roce_active_mtu(std::uint32_t netdev_mtu) noexcept {
  constexpr std::uint32_t kRoceOverhead = 40 + 12 + 4 + 28 + 4;  // GRH, BTH, XRC, AtomicETH, ICRC
  if (netdev_mtu < kRoceOverhead + 256) return std::nullopt;
  const std::uint32_t room = netdev_mtu - kRoceOverhead;
  for (std::uint32_t b = 4096; b >= 256; b /= 2)
    if (room >= b) return rdma::verbs::mtu_from_bytes(b);
  return std::nullopt;
}

std::vector<unsigned> parse_cpu_list(const std::string& text) {
  std::vector<unsigned> out;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    unsigned lo = 0, hi = 0;
    const char* b = part.data();
    const char* e = part.data() + part.size();
    auto [p, ec] = std::from_chars(b, e, lo);
    if (ec != std::errc()) continue;
    hi = lo;
    if (p != e && *p == '-') {
      auto [p2, ec2] = std::from_chars(p + 1, e, hi);
      if (ec2 != std::errc() || hi < lo || hi - lo > 65536) continue;
    }
    for (unsigned c = lo; c <= hi; ++c) out.push_back(c);
  }
  return out;
}

std::optional<rdma::Gid> parse_sysfs_gid(const std::string& text) {
  rdma::Gid g{};
  if (::inet_pton(AF_INET6, text.c_str(), g.data()) != 1) return std::nullopt;
  return g;
}

std::vector<std::string> Facts::device_names() const {
  std::vector<std::string> out;
  for (const auto& d : devices) out.push_back(d.name);
  return out;
}

const DeviceInfo* Facts::device(const std::string& name) const {
  for (const auto& d : devices)
    if (d.name == name) return &d;
  return nullptr;
}

Facts read_facts(const Roots& roots) {
  Facts f;
  f.roots = roots;
  const fs::path sys(roots.sys);
  read_host(roots, f.host);
  // Netdevs first: a RoCE port's MTU comes from its netdev's.
  for (const auto& n : entries(sys / "class" / "net")) f.host.netdevs[n] = read_netdev(sys, n);
  std::map<std::string, std::string> uverbs;  // ibdev -> uverbsN
  for (const auto& u : entries(sys / "class" / "infiniband_verbs"))
    if (const auto ib = read_text(sys / "class" / "infiniband_verbs" / u / "ibdev")) uverbs[*ib] = u;
  for (const auto& name : rdma::sysfs::list_devices(roots.sys)) {
    const fs::path dir = sys / "class" / "infiniband" / name;
    DeviceInfo d;
    d.name = name;
    if (const auto it = uverbs.find(name); it != uverbs.end()) d.uverbs = it->second;
    for (const auto& n : entries(dir / "device" / "net")) d.netdevs.push_back(n);
    for (const auto& p : entries(dir / "ports")) {
      const int num = leading_number(p);
      if (num < 1 || num > 255) continue;
      d.ports.push_back(read_port(dir / "ports" / p, name, static_cast<std::uint8_t>(num), f.host.netdevs));
    }
    for (const auto& p : d.ports)
      for (const auto& g : p.facts.gids)
        if (!g.netdev.empty() && std::find(d.netdevs.begin(), d.netdevs.end(), g.netdev) == d.netdevs.end())
          d.netdevs.push_back(g.netdev);
    if (const auto node = read_number<int>(dir / "device" / "numa_node"); node && *node >= 0) d.numa_node = node;
    d.sriov_numvfs = read_number<unsigned>(dir / "device" / "sriov_numvfs");
    d.sriov_totalvfs = read_number<unsigned>(dir / "device" / "sriov_totalvfs");
    d.is_vf = present(dir / "device" / "physfn");
    f.devices.push_back(std::move(d));
  }
  // Netdevs that did not appear under class/net (a GID naming one that is gone).
  for (const auto& d : f.devices)
    for (const auto& n : d.netdevs)
      if (!f.host.netdevs.count(n)) f.host.netdevs[n] = read_netdev(sys, n);
  return f;
}

}  // namespace siphon::doctor
