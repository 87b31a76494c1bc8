// siphon-doctor's device facts (docs/doctor.md): everything the checks look
// at, read from a root directory -- `/sys`, `/proc` and `/dev` of this host by
// default, or a captured tree (--sysfs-root, --proc-root, --dev-root). Each
// file is read from its root only, so a fixture decides every fact.
//
// Device, port and GID facts come out as provider.h types (PortAttr,
// GidEntry) so that the verbs provider's own selection code
// (rdma/verbs: choose_device, path_from_facts) runs over them unchanged.
// A fact the tree does not hold is "unknown" (nullopt), never guessed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rdma/provider.h"
#include "rdma/verbs/verbs_provider.h"

namespace siphon::doctor {

struct Roots {
  std::string sys = "/sys";
  std::string proc = "/proc";
  std::string dev = "/dev";
};

struct PortInfo {
  rdma::verbs::PortFacts facts;   // attr (state, link layer, MTU, table size) and the GIDs
  std::string state_text;         // "4: ACTIVE"
  std::string phys_state_text;    // "5: LinkUp"
  std::string rate;               // "2.5 Gb/sec (1X SDR)"
  bool phys_link_up = false;
  // Where attr.active_mtu came from: "sysfs" (a captured ports/N/active_mtu),
  // "netdev MTU" (RoCE: the kernel's rule from the netdev's MTU), or
  // "unknown" (then attr.active_mtu is only a placeholder).
  std::string mtu_source = "unknown";
};

struct NetdevInfo {
  std::string name;
  std::optional<std::uint32_t> mtu;
  std::string operstate;  // "up", "down", "unknown", "" = not found
  bool exists = false;
  // ECN for RoCE (mlx5: class/net/<if>/ecn/roce_{np,rp}/enable/<prio>):
  // priority -> enabled; empty when the netdev does not expose it.
  std::map<int, bool> ecn_np, ecn_rp;
};

struct DeviceInfo {
  std::string name;
  std::vector<PortInfo> ports;
  std::vector<std::string> netdevs;    // from GID ndevs and device/net
  std::optional<int> numa_node;        // nullopt: no device/numa_node (virtual devices) or -1
  std::optional<unsigned> sriov_numvfs, sriov_totalvfs;
  bool is_vf = false;                  // device/physfn exists
  std::string uverbs;                  // "uverbs0" (class/infiniband_verbs), "" = none found
};

struct HostInfo {
  std::map<std::string, NetdevInfo> netdevs;
  // /proc/meminfo and /sys/kernel/mm/hugepages.
  std::optional<std::uint64_t> hugepages_2m_free, hugepages_2m_total, hugepages_1g_free, hugepages_1g_total;
  std::string thp_mode;                            // "always", "madvise", "never", "" = unknown
  std::map<std::string, bool> modules;             // ib_uverbs, rdma_ucm, ... -> loaded
  bool modules_known = false;                      // /proc/modules was readable
  std::vector<unsigned> cpus_allowed;              // <proc>/self/status Cpus_allowed_list
  std::string mems_allowed;                        // Mems_allowed_list as written
  std::map<int, std::vector<unsigned>> node_cpus;  // /sys/devices/system/node/nodeN/cpulist
  // /dev/infiniband: name -> (exists, readable and writable by this process).
  std::map<std::string, std::pair<bool, bool>> dev_files;
  bool dev_dir_exists = false;
  // Host-only facts (never read from a captured tree): `ethtool -S` pause
  // counters per netdev, and the libibverbs this binary loaded.
  std::map<std::string, std::string> pause_counters;
  std::string rdma_core;  // "libibverbs.so.1.14.44.0 (rdma-core 44)"
};

struct Facts {
  Roots roots;
  std::vector<DeviceInfo> devices;  // sorted by name
  HostInfo host;
  std::vector<std::string> device_names() const;
  const DeviceInfo* device(const std::string& name) const;
};

// Reads everything; never fails (a missing file is an unknown fact).
Facts read_facts(const Roots& roots);

// The kernel's IB MTU for a RoCE port whose netdev has `netdev_mtu` bytes:
// the largest of 256..4096 that fits with the RoCE headers (iboe_get_mtu:
// netdev MTU minus 88 bytes of GRH, BTH, extended headers and ICRC).
std::optional<rdma::Mtu> roce_active_mtu(std::uint32_t netdev_mtu) noexcept;

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; malformed parts are skipped.
std::vector<unsigned> parse_cpu_list(const std::string& text);

// Sysfs's GID text "fe80:0000:...:9a0e" (eight groups) -> a GID.
std::optional<rdma::Gid> parse_sysfs_gid(const std::string& text);

}  // namespace siphon::doctor
