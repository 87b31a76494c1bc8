// Device-free logic of the verbs provider: option validation, RoCE v2 GID
// selection, path derivation and the messages for what goes wrong. No
// rdma-core here; everything works on provider.h types, so it is tested on
// hosts without RDMA (tests/unit/rdma/verbs) and works for any provider.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "msgr/base/error.h"
#include "rdma/verbs/verbs_provider.h"

namespace siphon::rdma::verbs {
namespace {

constexpr std::string_view kPinRemedy = "set ms_async_rdma_gid_idx or ms_async_rdma_local_gid";

bool is_zero(const Gid& g) noexcept {
  return std::all_of(g.begin(), g.end(), [](std::uint8_t b) { return b == 0; });
}

bool is_v4_mapped(const Gid& g) noexcept {
  return std::all_of(g.begin(), g.begin() + 10, [](std::uint8_t b) { return b == 0; }) &&
         g[10] == 0xff && g[11] == 0xff;
}

bool is_link_local(const Gid& g) noexcept { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

// The IP part of an address, without port: "192.0.2.1", "2001:db8::1".
std::string ip_text(const NetAddress& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.is_ipv4()) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr());
    ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
  } else if (a.is_ipv6()) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr());
    ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
  } else {
    return "(no address)";
  }
  return buf;
}

std::string_view port_state_name(PortState s) noexcept {
  switch (s) {
    case PortState::nop: return "NOP";
    case PortState::down: return "DOWN";
    case PortState::init: return "INIT";
    case PortState::armed: return "ARMED";
    case PortState::active: return "ACTIVE";
    case PortState::active_defer: return "ACTIVE_DEFER";
  }
  return "unknown";
}

std::string where(const GidQuery& q) { return fmt::format("{} port {}", q.device, q.port); }

std::string gid_list(const GidQuery& q) {
  return q.gids.empty() ? std::string("none") : describe_gids(q.gids);
}

// The netdevs that carry GIDs, for "use an address of ..." hints.
std::string netdevs_of(const GidQuery& q) {
  std::set<std::string> names;
  for (const auto& e : q.gids)
    if (!e.netdev.empty()) names.insert(e.netdev);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string entry_text(const GidEntry& e) {
  return fmt::format("GID[{}] {} {}{}{}", e.index, format_gid(e.gid), to_string(e.type),
                     e.netdev.empty() ? "" : " ", e.netdev);
}

// The type a port's connections should use: RoCE v2 on Ethernet, IB on IB.
GidType wanted_type(const GidQuery& q) noexcept {
  return q.link_layer == LinkLayer::infiniband ? GidType::ib : GidType::roce_v2;
}

bool have_local(const GidQuery& q) noexcept {
  return !q.local.is_unspecified() && !q.local.is_any();
}

// Among `candidates` (indexes into q.gids): the preferred type, then the
// entry on the interface owning the address, then the lowest index.
const GidEntry* best_of(const GidQuery& q, const std::vector<const GidEntry*>& candidates) {
  const GidEntry* best = nullptr;
  auto rank = [&](const GidEntry* e) {
    int r = 0;
    if (e->type == wanted_type(q)) r += 2;
    if (!q.local_netdev.empty() && e->netdev == q.local_netdev) r += 1;
    return r;
  };
  for (const GidEntry* e : candidates) {
    if (best == nullptr || rank(e) > rank(best) || (rank(e) == rank(best) && e->index < best->index))
      best = e;
  }
  return best;
}

// Warnings for a pinned entry that is accepted but probably not intended.
void pinned_warnings(const GidQuery& q, const GidEntry& e, GidSelection& out) {
  if (q.link_layer != LinkLayer::infiniband && e.type != GidType::roce_v2)
    out.warnings.push_back(fmt::format(
        "{} on {} is {}, not RoCE v2: the peer must use the same RoCE version, and RoCE v1 "
        "is not routable",
        entry_text(e), where(q), to_string(e.type)));
  if (have_local(q) && e.gid != gid_of(q.local) && !is_link_local(e.gid))
    out.warnings.push_back(fmt::format(
        "{} is not the GID of the local address {}: packets will carry {} as their source",
        entry_text(e), ip_text(q.local), format_gid(e.gid)));
}

std::error_code fail(std::error_code ec, std::string& why, std::string text) {
  why = std::move(text);
  return ec;
}

std::error_code select_pinned_index(const GidQuery& q, const std::optional<Gid>& pinned_gid,
                                    const VerbsPathOptions& o, GidSelection& out,
                                    std::string& why) {
  const auto idx = static_cast<std::uint32_t>(o.gid_index);
  if (q.gid_tbl_len != 0 && idx >= q.gid_tbl_len)
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_gid_idx = {} is out of range for {}: its GID table has "
                            "{} slots (0-{}); GIDs: [{}]; set ms_async_rdma_gid_idx to one of the "
                            "listed indexes, or -1 to select automatically",
                            idx, where(q), q.gid_tbl_len, q.gid_tbl_len - 1, gid_list(q)));
  const auto it = std::find_if(q.gids.begin(), q.gids.end(),
                               [&](const GidEntry& e) { return e.index == idx; });
  if (it == q.gids.end())
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_gid_idx = {}: {} has no GID at index {} (the slot is "
                            "empty); GIDs: [{}]; set ms_async_rdma_gid_idx to one of the listed "
                            "indexes, or -1 to select automatically",
                            idx, where(q), idx, gid_list(q)));
  if (pinned_gid && *pinned_gid != it->gid)
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_gid_idx = {} ({}) and ms_async_rdma_local_gid = {} "
                            "disagree on {}: set only one of them",
                            idx, format_gid(it->gid), o.local_gid, where(q)));
  out.entry = *it;
  out.how = fmt::format("pinned by ms_async_rdma_gid_idx = {}", idx);
  pinned_warnings(q, *it, out);
  return {};
}

std::error_code select_pinned_gid(const GidQuery& q, const Gid& pinned, const VerbsPathOptions& o,
                                  GidSelection& out, std::string& why) {
  std::vector<const GidEntry*> candidates;
  for (const auto& e : q.gids)
    if (e.gid == pinned) candidates.push_back(&e);
  if (candidates.empty())
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_local_gid = {} ({}) is not in the GID table of {}; "
                            "GIDs: [{}]; set ms_async_rdma_local_gid to one of the listed GIDs, or "
                            "leave it empty to select automatically",
                            o.local_gid, format_gid(pinned), where(q), gid_list(q)));
  const GidEntry* e = best_of(q, candidates);
  out.entry = *e;
  out.how = fmt::format("pinned by ms_async_rdma_local_gid = {}", o.local_gid);
  pinned_warnings(q, *e, out);
  return {};
}

std::error_code select_for_address(const GidQuery& q, GidSelection& out, std::string& why) {
  const Gid target = gid_of(q.local);
  const std::string addr = ip_text(q.local);
  std::vector<const GidEntry*> v2;
  std::vector<const GidEntry*> other;
  for (const auto& e : q.gids) {
    if (e.gid != target) continue;
    (e.type == GidType::roce_v2 ? v2 : other).push_back(&e);
  }
  if (!v2.empty()) {
    const GidEntry* e = best_of(q, v2);
    out.entry = *e;
    out.how = fmt::format("the RoCE v2 GID of the local address {}{}{}", addr,
                          e->netdev.empty() ? "" : " on ", e->netdev);
    if (!q.local_netdev.empty() && !e->netdev.empty() && e->netdev != q.local_netdev)
      out.warnings.push_back(fmt::format(
          "{} belongs to {}, but the RoCE v2 GID for it is on {}; using {}", addr,
          q.local_netdev, e->netdev, entry_text(*e)));
    return {};
  }
  if (!other.empty())
    return fail(errc::address_invalid, why,
                fmt::format("no RoCE v2 GID for {} on {}: the address has only a {} GID "
                            "(index {}); enable RoCE v2 on the device (Linux: the rdma_cm "
                            "default_roce_mode in configfs, or the NIC's firmware setting), or {} "
                            "to use it anyway; GIDs: [{}]",
                            addr, where(q), to_string(other.front()->type), other.front()->index,
                            kPinRemedy, gid_list(q)));
  const std::string netdevs = netdevs_of(q);
  return fail(errc::address_invalid, why,
              fmt::format("no RoCE v2 GID for {} on {}; GIDs: [{}]; {}{}", addr, where(q),
                          gid_list(q), kPinRemedy,
                          netdevs.empty() ? std::string()
                                          : fmt::format(", or use an address of {}", netdevs)));
}

std::error_code select_without_address(const GidQuery& q, GidSelection& out, std::string& why) {
  // Classes of RoCE v2 GIDs in order of preference. An IPv6 wildcard prefers
  // IPv6 entries; everything else prefers IPv4 (the common RoCE deployment).
  enum Class { v4 = 0, v6_global = 1, v6_link_local = 2 };
  auto class_of = [](const Gid& g) {
    return is_v4_mapped(g) ? v4 : is_link_local(g) ? v6_link_local : v6_global;
  };
  const bool prefer_v6 = q.local.is_ipv6();
  const std::array<Class, 3> order = prefer_v6 ? std::array<Class, 3>{v6_global, v4, v6_link_local}
                                               : std::array<Class, 3>{v4, v6_global, v6_link_local};
  for (const Class c : order) {
    std::vector<const GidEntry*> in_class;
    for (const auto& e : q.gids)
      if (e.type == GidType::roce_v2 && !is_zero(e.gid) && class_of(e.gid) == c)
        in_class.push_back(&e);
    if (in_class.empty()) continue;
    const GidEntry* e = best_of(q, in_class);
    static constexpr std::array<std::string_view, 3> kNames = {"IPv4", "global IPv6",
                                                               "link-local IPv6"};
    out.entry = *e;
    out.how = fmt::format("no local address given: the first RoCE v2 {} GID", kNames[c]);
    if (in_class.size() > 1)
      out.warnings.push_back(fmt::format(
          "{} has {} RoCE v2 {} GIDs and no local address was given; chose {}: bind to a "
          "specific address or {} to choose",
          where(q), in_class.size(), kNames[c], entry_text(*e), kPinRemedy));
    return {};
  }
  return fail(errc::not_supported, why,
              fmt::format("no RoCE v2 GID on {}; GIDs: [{}]; give the port's netdev an IP "
                          "address, or {}",
                          where(q), gid_list(q), kPinRemedy));
}

}  // namespace

// ------------------------------------------------------------- validation

std::error_code validate(const VerbsPathOptions& o, std::string& why) {
  if (o.gid_index < -1)
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_gid_idx = {} is invalid: use -1 (select "
                            "automatically) or the index of a GID (0, 1, ...)",
                            o.gid_index));
  if (!o.local_gid.empty() && !parse_gid(o.local_gid))
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_local_gid = '{}' is not a GID: use IPv6 notation "
                            "(fe80::1, ::ffff:192.0.2.1, "
                            "0000:0000:0000:0000:0000:ffff:c000:0201) or an IPv4 address",
                            o.local_gid));
  if (o.dscp < 0 || o.dscp > 63)
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_dscp = {} is out of range (0-63): Siphon takes a DSCP "
                            "and sets the traffic class to DSCP << 2; Ceph wrote the value into "
                            "the traffic class unchanged, so Ceph's default 96 is DSCP 24",
                            o.dscp));
  if (o.sl < 0 || o.sl > 15)
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_sl = {} is out of range (0-7 on RoCE, 0-15 on "
                            "InfiniBand)",
                            o.sl));
  if (o.max_path_mtu != 0 && !mtu_from_bytes(o.max_path_mtu))
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_path_mtu = {} is invalid: use 256, 512, 1024, 2048, "
                            "4096, or 0 for the port's active MTU",
                            o.max_path_mtu));
  if (o.hop_limit < 1 || o.hop_limit > 255)
    return fail(errc::config_error, why,
                fmt::format("the GRH hop limit {} is out of range (1-255)", o.hop_limit));
  return {};
}

// ------------------------------------------------------------ selection

std::error_code select_gid(const GidQuery& q, const VerbsPathOptions& o, GidSelection& out,
                           std::string& why) {
  out = GidSelection{};
  if (auto ec = validate(o, why)) return ec;
  std::optional<Gid> pinned_gid;
  if (!o.local_gid.empty()) pinned_gid = parse_gid(o.local_gid);
  if (o.gid_index >= 0) return select_pinned_index(q, pinned_gid, o, out, why);
  if (pinned_gid) return select_pinned_gid(q, *pinned_gid, o, out, why);

  if (q.gids.empty())
    return fail(errc::not_supported, why,
                fmt::format("{} has no GIDs: on RoCE the port has a GID for each IP address of "
                            "its netdev, so give the netdev an address and bring it up (rdma link "
                            "show names the netdev)",
                            where(q)));
  if (q.link_layer == LinkLayer::infiniband) {
    std::vector<const GidEntry*> ib;
    for (const auto& e : q.gids)
      if (e.type == GidType::ib) ib.push_back(&e);
    if (ib.empty())
      return fail(errc::not_supported, why,
                  fmt::format("InfiniBand {} has no IB GID; GIDs: [{}]; {}", where(q),
                              gid_list(q), kPinRemedy));
    const GidEntry* e = best_of(q, ib);
    out.entry = *e;
    out.how = "InfiniBand port: the port GID";
    return {};
  }
  return have_local(q) ? select_for_address(q, out, why) : select_without_address(q, out, why);
}

// ------------------------------------------------------------------ paths

AddressVector VerbsPath::address_vector(const Gid& dgid, std::uint32_t flow_label) const noexcept {
  AddressVector av;
  av.dgid = dgid;
  av.sgid_index = static_cast<std::uint8_t>(sgid.index);
  av.hop_limit = hop_limit;
  av.traffic_class = traffic_class;
  av.sl = sl;
  av.flow_label = flow_label;
  av.port_num = port_num;
  return av;
}

std::error_code derive_path(const GidQuery& q, const PortAttr& port, const VerbsPathOptions& o,
                            VerbsPath& out, std::string& why) {
  out = VerbsPath{};
  if (auto ec = validate(o, why)) return ec;
  if (q.link_layer != LinkLayer::infiniband && o.sl > 7)
    return fail(errc::config_error, why,
                fmt::format("ms_async_rdma_sl = {} is out of range for RoCE on {} (0-7: the "
                            "802.1p priority)",
                            o.sl, where(q)));
  if (port.state != PortState::active && port.state != PortState::active_defer)
    return fail(errc::not_connected, why,
                fmt::format("{} is {}, not ACTIVE: bring its link up (rdma link show names the "
                            "netdev; ip link set <netdev> up) or choose another port with "
                            "ms_async_rdma_port_num",
                            where(q), port_state_name(port.state)));
  GidSelection sel;
  if (auto ec = select_gid(q, o, sel, why)) return ec;
  if (sel.entry.index > 255)
    return fail(errc::not_supported, why,
                fmt::format("{} is at an index above 255, which an address vector cannot carry; "
                            "{} to a lower entry",
                            entry_text(sel.entry), kPinRemedy));
  out.port_num = q.port;
  out.device = std::string(q.device);
  out.how = sel.how;
  out.sgid = sel.entry;
  out.path_mtu = cap_mtu(port.active_mtu, o.max_path_mtu);
  out.traffic_class = static_cast<std::uint8_t>(o.dscp << 2);
  out.sl = static_cast<std::uint8_t>(o.sl);
  out.hop_limit = static_cast<std::uint8_t>(o.hop_limit);
  out.warnings = std::move(sel.warnings);
  out.description = fmt::format(
      "{} {}: {}; path MTU {} (active {}{}), traffic class {} (DSCP {}), SL {}", where(q),
      entry_text(sel.entry), sel.how, mtu_bytes(out.path_mtu), mtu_bytes(port.active_mtu),
      o.max_path_mtu != 0 ? fmt::format(", cap {}", o.max_path_mtu) : std::string(),
      out.traffic_class, o.dscp, out.sl);
  return {};
}

std::error_code path_from_facts(const PortFacts& facts, const NetAddress& local, std::string_view local_netdev,
                                const VerbsPathOptions& options, VerbsPath& out, std::string& why) {
  GidQuery q;
  q.device = facts.device;
  q.port = facts.port;
  q.link_layer = facts.attr.link_layer;
  q.gids = facts.gids;
  q.gid_tbl_len = facts.attr.gid_tbl_len;
  q.local = local;
  q.local_netdev = local_netdev;
  return derive_path(q, facts.attr, options, out, why);
}

std::error_code resolve_path(const Device& device, std::uint8_t port, const NetAddress& local,
                             const VerbsPathOptions& options, VerbsPath& out, std::string& why) {
  PortFacts facts;
  facts.device = device.attr().name;
  facts.port = port;
  const std::string& name = facts.device;
  if (auto ec = device.query_port(port, facts.attr))
    return fail(ec, why,
                fmt::format("cannot query port {} of {}: {} (the device has {} port(s); set "
                            "ms_async_rdma_port_num)",
                            port, name, ec.message(), device.attr().phys_port_cnt));
  if (auto ec = device.query_gids(port, facts.gids))
    return fail(ec, why,
                fmt::format("cannot read the GID table of {} port {}: {}", name, port, ec.message()));
  const std::string netdev =
      local.is_unspecified() || local.is_any() ? std::string() : netdev_for_address(local);
  return path_from_facts(facts, local, netdev, options, out, why);
}

// ---------------------------------------------------- rdma-cm connections

CmPathAttr apply_selected_path(const CmPathAttr& proposed, const VerbsPath& path) noexcept {
  CmPathAttr out = proposed;
  out.sgid_index = path.sgid.index;
  out.sl = path.sl;
  if (static_cast<std::uint8_t>(path.path_mtu) < static_cast<std::uint8_t>(proposed.path_mtu))
    out.path_mtu = path.path_mtu;
  return out;
}

std::string describe_applied(const CmPathAttr& proposed, const CmPathAttr& applied,
                             const VerbsPath& path) {
  return fmt::format(
      "{} port {} GID[{}] {} {}{}{} ({}), path MTU {} (rdma-cm {}, selection {}), SL {}, "
      "traffic class {}; rdma-cm proposed GID[{}] SL {}",
      path.device, path.port_num, applied.sgid_index, format_gid(path.sgid.gid),
      to_string(path.sgid.type), path.sgid.netdev.empty() ? "" : " ", path.sgid.netdev, path.how,
      mtu_bytes(applied.path_mtu), mtu_bytes(proposed.path_mtu), mtu_bytes(path.path_mtu),
      applied.sl, applied.traffic_class, proposed.sgid_index, proposed.sl);
}

// ---------------------------------------------------------------- helpers

Gid gid_of(const NetAddress& a) noexcept {
  Gid g{};
  if (a.is_ipv4()) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a.sockaddr_ptr());
    g[10] = 0xff;
    g[11] = 0xff;
    std::memcpy(&g[12], &in->sin_addr, 4);
  } else if (a.is_ipv6()) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr());
    std::memcpy(g.data(), &in6->sin6_addr, 16);
  }
  return g;
}

std::optional<Gid> parse_gid(std::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  const std::string s(text);
  Gid g{};
  if (::inet_pton(AF_INET6, s.c_str(), g.data()) == 1) return g;
  in_addr v4{};
  if (::inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    g[10] = 0xff;
    g[11] = 0xff;
    std::memcpy(&g[12], &v4, 4);
    return g;
  }
  return std::nullopt;
}

std::string format_gid(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(AF_INET6, gid.data(), buf, sizeof(buf)) == nullptr) return "?";
  return buf;
}

std::string_view to_string(GidType type) noexcept {
  switch (type) {
    case GidType::ib: return "IB";
    case GidType::roce_v1: return "RoCE v1";
    case GidType::roce_v2: return "RoCE v2";
  }
  return "unknown";
}

std::string describe_gids(std::span<const GidEntry> gids, std::size_t limit) {
  std::string out;
  std::size_t n = 0;
  for (const auto& e : gids) {
    if (n == limit) {
      out += fmt::format(", ... {} more", gids.size() - limit);
      break;
    }
    out += fmt::format("{}{}: {} {}{}{}", n == 0 ? "" : ", ", e.index, format_gid(e.gid),
                       to_string(e.type), e.netdev.empty() ? "" : " ", e.netdev);
    ++n;
  }
  return out;
}

std::optional<Mtu> mtu_from_bytes(std::uint32_t bytes) noexcept {
  switch (bytes) {
    case 256: return Mtu::mtu256;
    case 512: return Mtu::mtu512;
    case 1024: return Mtu::mtu1024;
    case 2048: return Mtu::mtu2048;
    case 4096: return Mtu::mtu4096;
    default: return std::nullopt;
  }
}

Mtu cap_mtu(Mtu active, std::uint32_t cap_bytes) noexcept {
  const auto cap = mtu_from_bytes(cap_bytes);
  if (!cap) return active;
  return static_cast<std::uint8_t>(*cap) < static_cast<std::uint8_t>(active) ? *cap : active;
}

std::string netdev_for_address(const NetAddress& address) {
  // An IPv4-mapped IPv6 address is owned by whoever owns the IPv4 address.
  const Gid want = gid_of(address);
  if (is_zero(want)) return {};
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::string found;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    const NetAddress have = NetAddress::from_sockaddr(i->ifa_addr, len);
    if (gid_of(have) != want) continue;
    if (address.is_ipv6() && is_link_local(want)) {
      // A link-local address is ambiguous without its scope.
      const auto* a6 = reinterpret_cast<const sockaddr_in6*>(address.sockaddr_ptr());
      const auto* h6 = reinterpret_cast<const sockaddr_in6*>(have.sockaddr_ptr());
      if (a6->sin6_scope_id != 0 && a6->sin6_scope_id != h6->sin6_scope_id) continue;
    }
    found = i->ifa_name;
    break;
  }
  ::freeifaddrs(list);
  return found;
}

std::optional<NetAddress> source_address_for(const NetAddress& peer) {
  if (!peer.is_ipv4() && !peer.is_ipv6()) return std::nullopt;
  const int fd = ::socket(peer.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  NetAddress target = peer;
  if (target.port() == 0) target.set_port(9);  // any port: connect() sends nothing
  std::optional<NetAddress> result;
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (::connect(fd, target.sockaddr_ptr(), target.sockaddr_len()) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    NetAddress a = NetAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&local), len);
    a.set_port(0);
    result = a;
  }
  ::close(fd);
  return result;
}

// ------------------------------------------------------- device opening

std::string describe_open_failure(std::string_view name, std::span<const std::string> found,
                                  std::error_code ec) {
  std::string present;
  for (const auto& d : found) present += (present.empty() ? "" : ", ") + d;
  if (present.empty()) present = "none";
  const std::string subject =
      name.empty() ? std::string("RDMA device (first available; ms_async_rdma_device_name is "
                                 "empty)")
                   : fmt::format("RDMA device '{}'", name);
  if (!ec) return fmt::format("{} opened", subject);
  if (ec == errc::no_device || (ec == errc::device_not_found && found.empty()))
    return fmt::format(
        "{} not found (devices present: none): set ms_async_rdma_device_name = soft0 to use the "
        "software fabric, or load a driver (rdma link add rxe0 type rxe netdev eth0 for "
        "Soft-RoCE)",
        subject);
  if (ec == errc::device_not_found)
    return fmt::format(
        "{} not found (devices present: {}): set ms_async_rdma_device_name to one of the devices "
        "present, or to soft0 to use the software fabric",
        subject, present);
  return fmt::format(
      "{} could not be opened ({}; devices present: {}): check that this user may open "
      "/dev/infiniband/uverbs* and /dev/infiniband/rdma_cm (permissions, container device "
      "mounts) and that RLIMIT_MEMLOCK allows pinning memory, or set "
      "ms_async_rdma_device_name = soft0 to use the software fabric",
      subject, ec.message(), present);
}

}  // namespace siphon::rdma::verbs
