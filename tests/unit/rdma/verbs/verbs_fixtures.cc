#include "verbs_fixtures.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "msgr/base/error.h"
#include "rdma/verbs/verbs_provider.h"

#ifndef SIPHON_VERBS_TEST_DATA
#error "SIPHON_VERBS_TEST_DATA must name tests/unit/rdma/verbs/data"
#endif

namespace siphon::rdma::verbs::testing {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// "4096 (5)" -> 5; "PORT_ACTIVE (4)" -> 4.
int paren_value(const std::string& v) {
  const auto open = v.find('(');
  return open == std::string::npos ? -1 : std::stoi(v.substr(open + 1));
}

}  // namespace

DeviceSample load_sample(const std::string& file) {
  DeviceSample s;
  std::ifstream in(std::string(SIPHON_VERBS_TEST_DATA) + "/" + file);
  if (!in) {
    ADD_FAILURE() << "cannot read test data " << file;
    return s;
  }
  std::string section;
  std::string line;
  bool in_port1 = false;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) continue;
    if (line.rfind("== ", 0) == 0) {
      section = line.substr(3);
      continue;
    }
    if (section == "ibv_devinfo -v") {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = trim(line.substr(0, colon));
      const std::string value = trim(line.substr(colon + 1));
      if (key == "hca_id") s.name = value;
      if (key == "port") in_port1 = value == "1";
      if (!in_port1) continue;
      if (key == "state") s.port.state = static_cast<PortState>(paren_value(value));
      if (key == "max_mtu") s.port.max_mtu = static_cast<Mtu>(paren_value(value));
      if (key == "active_mtu") s.port.active_mtu = static_cast<Mtu>(paren_value(value));
      if (key == "gid_tbl_len") s.port.gid_tbl_len = static_cast<std::uint32_t>(std::stoul(value));
      if (key == "link_layer")
        s.port.link_layer = value == "Ethernet"     ? LinkLayer::ethernet
                            : value == "InfiniBand" ? LinkLayer::infiniband
                                                    : LinkLayer::unspecified;
    } else if (section == "gids") {
      // "<index> <gid> RoCE v2 <netdev>" or "<index> <gid> IB/RoCE v1 <netdev>"
      std::istringstream fields(line);
      std::string index, gid, type1, type2, netdev;
      if (!(fields >> index >> gid >> type1 >> type2)) continue;
      fields >> netdev;
      GidEntry e;
      e.index = static_cast<std::uint32_t>(std::stoul(index));
      const auto parsed = parse_gid(gid);
      if (!parsed) {
        ADD_FAILURE() << file << ": bad GID " << gid;
        continue;
      }
      e.gid = *parsed;
      const std::string type = type1 + " " + type2;
      if (type == "RoCE v2")
        e.type = GidType::roce_v2;
      else if (type == "IB/RoCE v1")
        e.type = s.port.link_layer == LinkLayer::ethernet ? GidType::roce_v1 : GidType::ib;
      else
        ADD_FAILURE() << file << ": unknown GID type " << type;
      e.netdev = netdev;
      s.gids.push_back(e);
    }
  }
  return s;
}

SampleDevice::SampleDevice(DeviceSample s) : sample_(std::move(s)) {
  attr_.name = sample_.name;
  attr_.phys_port_cnt = 1;
}

std::error_code SampleDevice::query_port(std::uint8_t port, PortAttr& out) const {
  if (port != 1) return errc::invalid_argument;
  out = sample_.port;
  return {};
}

std::error_code SampleDevice::query_gids(std::uint8_t port, std::vector<GidEntry>& out) const {
  if (port != 1) return errc::invalid_argument;
  out = sample_.gids;
  return {};
}

std::unique_ptr<ProtectionDomain> SampleDevice::alloc_pd(std::error_code& ec) {
  ec = errc::not_supported;
  return nullptr;
}

std::unique_ptr<CompletionQueue> SampleDevice::create_cq(std::uint32_t, std::error_code& ec) {
  ec = errc::not_supported;
  return nullptr;
}

}  // namespace siphon::rdma::verbs::testing
