// RoCE v2 GID selection and path derivation over the captured rxe0 table and
// the documented ConnectX shape (data/). Device-free.
#include <gtest/gtest.h>

#include "msgr/base/error.h"
#include "rdma/verbs/verbs_provider.h"
#include "verbs_fixtures.h"

namespace siphon::rdma::verbs {
namespace {

using testing::DeviceSample;
using testing::load_sample;

NetAddress addr(const char* text) {
  auto a = NetAddress::parse(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(NetAddress{});
}

class GidSelection : public ::testing::Test {
 protected:
  GidQuery query(const DeviceSample& s, const char* local, const char* netdev = "") {
    GidQuery q;
    q.device = s.name;
    q.port = 1;
    q.link_layer = s.port.link_layer;
    q.gids = s.gids;
    q.gid_tbl_len = s.port.gid_tbl_len;
    q.local = local != nullptr ? addr(local) : NetAddress{};
    q.local_netdev = netdev;
    return q;
  }

  // Selects and returns the index, failing the test on error.
  std::uint32_t pick(const GidQuery& q, const VerbsPathOptions& o = {}) {
    std::string why;
    const std::error_code ec = select_gid(q, o, sel, why);
    EXPECT_FALSE(ec) << why;
    return ec ? 9999u : sel.entry.index;
  }

  // Expects an error and returns its message.
  std::string error(const GidQuery& q, const VerbsPathOptions& o, std::error_code expected) {
    std::string why;
    const std::error_code ec = select_gid(q, o, sel, why);
    EXPECT_EQ(ec, expected) << why;
    return why;
  }

  DeviceSample rxe = load_sample("rxe0-devinfo.txt");
  DeviceSample cx = load_sample("connectx-roce-gids.txt");
  verbs::GidSelection sel;
};

// ----------------------------------------------------------- the fixtures

TEST_F(GidSelection, FixturesLoad) {
  EXPECT_EQ(rxe.name, "rxe0");
  ASSERT_EQ(rxe.gids.size(), 3u);
  EXPECT_EQ(format_gid(rxe.gids[1].gid), "::ffff:192.0.2.1");
  EXPECT_EQ(rxe.gids[1].type, GidType::roce_v2);
  EXPECT_EQ(rxe.gids[1].netdev, "dummy0");
  EXPECT_EQ(rxe.port.active_mtu, Mtu::mtu4096);
  EXPECT_EQ(rxe.port.state, PortState::active);
  EXPECT_EQ(rxe.port.link_layer, LinkLayer::ethernet);
  EXPECT_EQ(rxe.port.gid_tbl_len, 1024u);

  EXPECT_EQ(cx.name, "mlx5_0");
  ASSERT_EQ(cx.gids.size(), 10u);
  EXPECT_EQ(cx.gids[2].type, GidType::roce_v1);
  EXPECT_EQ(cx.gids[3].type, GidType::roce_v2);
  EXPECT_EQ(format_gid(cx.gids[3].gid), "::ffff:10.0.0.11");
  EXPECT_EQ(cx.port.active_mtu, Mtu::mtu1024);
}

// ------------------------------------------------------------ rxe (real)

TEST_F(GidSelection, RxeIpv4PicksTheIpv4MappedRoceV2Gid) {
  EXPECT_EQ(pick(query(rxe, "192.0.2.1", "dummy0")), 1u);
  EXPECT_EQ(sel.entry.type, GidType::roce_v2);
  EXPECT_EQ(sel.how, "the RoCE v2 GID of the local address 192.0.2.1 on dummy0");
  EXPECT_TRUE(sel.warnings.empty());
  // The port of the address is irrelevant; the owner is a preference only.
  EXPECT_EQ(pick(query(rxe, "192.0.2.1:6800")), 1u);
}

TEST_F(GidSelection, RxeIpv6AndLinkLocal) {
  EXPECT_EQ(pick(query(rxe, "2001:db8::1", "dummy0")), 2u);
  EXPECT_EQ(pick(query(rxe, "fe80::c86:96ff:fef7:9a0e", "dummy0")), 0u);
}

TEST_F(GidSelection, RxeUnknownAddressNamesTheTableAndTheRemedy) {
  const std::string why =
      error(query(rxe, "192.0.2.9"), {}, make_error_code(errc::address_invalid));
  EXPECT_EQ(why,
            "no RoCE v2 GID for 192.0.2.9 on rxe0 port 1; GIDs: [0: fe80::c86:96ff:fef7:9a0e "
            "RoCE v2 dummy0, 1: ::ffff:192.0.2.1 RoCE v2 dummy0, 2: 2001:db8::1 RoCE v2 dummy0]; "
            "set ms_async_rdma_gid_idx or ms_async_rdma_local_gid, or use an address of dummy0");
}

TEST_F(GidSelection, RxeWildcardAddressPrefersIpv4ThenGlobalIpv6) {
  EXPECT_EQ(pick(query(rxe, "0.0.0.0")), 1u);
  EXPECT_EQ(sel.how, "no local address given: the first RoCE v2 IPv4 GID");
  EXPECT_EQ(pick(query(rxe, nullptr)), 1u);
  EXPECT_EQ(pick(query(rxe, "::")), 2u);
  EXPECT_EQ(sel.how, "no local address given: the first RoCE v2 global IPv6 GID");
}

TEST_F(GidSelection, RxePinnedIndex) {
  VerbsPathOptions o;
  o.gid_index = 2;
  EXPECT_EQ(pick(query(rxe, "192.0.2.1"), o), 2u);
  EXPECT_EQ(sel.how, "pinned by ms_async_rdma_gid_idx = 2");
  ASSERT_EQ(sel.warnings.size(), 1u);  // not the local address's GID
  EXPECT_EQ(sel.warnings[0],
            "GID[2] 2001:db8::1 RoCE v2 dummy0 is not the GID of the local address 192.0.2.1: "
            "packets will carry 2001:db8::1 as their source");

  o.gid_index = 1;
  EXPECT_EQ(pick(query(rxe, "192.0.2.1"), o), 1u);
  EXPECT_TRUE(sel.warnings.empty());
}

TEST_F(GidSelection, RxePinnedIndexOutOfRangeOrEmpty) {
  VerbsPathOptions o;
  o.gid_index = 1024;
  EXPECT_EQ(error(query(rxe, "192.0.2.1"), o, make_error_code(errc::config_error)),
            "ms_async_rdma_gid_idx = 1024 is out of range for rxe0 port 1: its GID table has "
            "1024 slots (0-1023); GIDs: [0: fe80::c86:96ff:fef7:9a0e RoCE v2 dummy0, 1: "
            "::ffff:192.0.2.1 RoCE v2 dummy0, 2: 2001:db8::1 RoCE v2 dummy0]; set "
            "ms_async_rdma_gid_idx to one of the listed indexes, or -1 to select automatically");
  o.gid_index = 3;
  EXPECT_NE(error(query(rxe, "192.0.2.1"), o, make_error_code(errc::config_error))
                .find("ms_async_rdma_gid_idx = 3: rxe0 port 1 has no GID at index 3 (the slot is "
                      "empty)"),
            std::string::npos);
  o.gid_index = -2;
  EXPECT_NE(error(query(rxe, "192.0.2.1"), o, make_error_code(errc::config_error))
                .find("ms_async_rdma_gid_idx = -2 is invalid"),
            std::string::npos);
}

TEST_F(GidSelection, RxePinnedGidInEveryNotation) {
  VerbsPathOptions o;
  for (const char* text : {"::ffff:192.0.2.1", "192.0.2.1", "0000:0000:0000:0000:0000:ffff:c000:0201",
                           "::FFFF:C000:201"}) {
    o.local_gid = text;
    EXPECT_EQ(pick(query(rxe, nullptr), o), 1u) << text;
  }
  o.local_gid = "2001:db8::1";
  EXPECT_EQ(pick(query(rxe, "2001:db8::1"), o), 2u);
  EXPECT_TRUE(sel.warnings.empty());
}

TEST_F(GidSelection, RxePinnedGidAbsentOrMalformed) {
  VerbsPathOptions o;
  o.local_gid = "2001:db8::2";
  EXPECT_NE(error(query(rxe, nullptr), o, make_error_code(errc::config_error))
                .find("ms_async_rdma_local_gid = 2001:db8::2 (2001:db8::2) is not in the GID "
                      "table of rxe0 port 1; GIDs: [0: fe80::"),
            std::string::npos);
  o.local_gid = "fe80::zz";
  EXPECT_NE(error(query(rxe, nullptr), o, make_error_code(errc::config_error))
                .find("ms_async_rdma_local_gid = 'fe80::zz' is not a GID"),
            std::string::npos);
}

TEST_F(GidSelection, RxePinnedIndexAndGidMustAgree) {
  VerbsPathOptions o;
  o.gid_index = 1;
  o.local_gid = "192.0.2.1";
  EXPECT_EQ(pick(query(rxe, nullptr), o), 1u);
  o.local_gid = "2001:db8::1";
  EXPECT_EQ(error(query(rxe, nullptr), o, make_error_code(errc::config_error)),
            "ms_async_rdma_gid_idx = 1 (::ffff:192.0.2.1) and ms_async_rdma_local_gid = "
            "2001:db8::1 disagree on rxe0 port 1: set only one of them");
}

// ------------------------------------------------- ConnectX (documented)

TEST_F(GidSelection, ConnectXPrefersRoceV2OverTheV1EntryOfTheSameAddress) {
  EXPECT_EQ(pick(query(cx, "10.0.0.11", "enp3s0f0")), 3u);
  EXPECT_EQ(pick(query(cx, "10.0.100.11", "enp3s0f0.100")), 7u);
  EXPECT_EQ(pick(query(cx, "2001:db8:100::11", "enp3s0f0.100")), 9u);
}

TEST_F(GidSelection, ConnectXLinkLocalGoesByTheOwningInterface) {
  // The VLAN shares its parent's link-local address: the owner decides.
  EXPECT_EQ(pick(query(cx, "fe80::a2b:3cff:fe4d:5e6f", "enp3s0f0.100")), 5u);
  EXPECT_EQ(pick(query(cx, "fe80::a2b:3cff:fe4d:5e6f", "enp3s0f0")), 1u);
  EXPECT_EQ(pick(query(cx, "fe80::a2b:3cff:fe4d:5e6f")), 1u);  // unknown owner: lowest index
}

TEST_F(GidSelection, ConnectXCephDefaultIndexZeroIsRoceV1LinkLocal) {
  // Ceph's ms_async_rdma_gid_idx default: accepted when pinned, with warnings.
  VerbsPathOptions o;
  o.gid_index = 0;
  EXPECT_EQ(pick(query(cx, "10.0.0.11", "enp3s0f0"), o), 0u);
  ASSERT_EQ(sel.warnings.size(), 1u);
  EXPECT_EQ(sel.warnings[0],
            "GID[0] fe80::a2b:3cff:fe4d:5e6f RoCE v1 enp3s0f0 on mlx5_0 port 1 is RoCE v1, not "
            "RoCE v2: the peer must use the same RoCE version, and RoCE v1 is not routable");
}

TEST_F(GidSelection, ConnectXPinnedGidPrefersTheRoceV2Entry) {
  VerbsPathOptions o;
  o.local_gid = "::ffff:10.0.0.11";
  EXPECT_EQ(pick(query(cx, nullptr), o), 3u);
  EXPECT_TRUE(sel.warnings.empty());
}

TEST_F(GidSelection, ConnectXWildcardWarnsAboutTheChoice) {
  EXPECT_EQ(pick(query(cx, "0.0.0.0")), 3u);
  ASSERT_EQ(sel.warnings.size(), 1u);
  EXPECT_EQ(sel.warnings[0],
            "mlx5_0 port 1 has 2 RoCE v2 IPv4 GIDs and no local address was given; chose GID[3] "
            "::ffff:10.0.0.11 RoCE v2 enp3s0f0: bind to a specific address or set "
            "ms_async_rdma_gid_idx or ms_async_rdma_local_gid to choose");
  EXPECT_EQ(pick(query(cx, "::")), 9u);
}

TEST_F(GidSelection, OnlyRoceV1ForTheAddressIsAnErrorWithTheRemedy) {
  DeviceSample v1only = cx;
  std::erase_if(v1only.gids, [](const GidEntry& e) { return e.type == GidType::roce_v2; });
  const std::string why =
      error(query(v1only, "10.0.0.11", "enp3s0f0"), {}, make_error_code(errc::address_invalid));
  EXPECT_NE(why.find("no RoCE v2 GID for 10.0.0.11 on mlx5_0 port 1: the address has only a "
                     "RoCE v1 GID (index 2); enable RoCE v2"),
            std::string::npos)
      << why;
  // A wildcard finds no RoCE v2 entry at all.
  EXPECT_NE(error(query(v1only, nullptr), {}, make_error_code(errc::not_supported))
                .find("no RoCE v2 GID on mlx5_0 port 1"),
            std::string::npos);
}

TEST_F(GidSelection, TheSameAddressOnTwoNetdevsGoesToItsOwner) {
  DeviceSample s = rxe;
  GidEntry other = s.gids[1];
  other.index = 7;
  other.netdev = "eth1";
  s.gids.push_back(other);
  EXPECT_EQ(pick(query(s, "192.0.2.1", "eth1")), 7u);
  EXPECT_EQ(pick(query(s, "192.0.2.1", "dummy0")), 1u);
  // Owned by an interface without a GID for it: used, with a warning.
  EXPECT_EQ(pick(query(rxe, "192.0.2.1", "bond0")), 1u);
  ASSERT_EQ(sel.warnings.size(), 1u);
  EXPECT_EQ(sel.warnings[0],
            "192.0.2.1 belongs to bond0, but the RoCE v2 GID for it is on dummy0; using GID[1] "
            "::ffff:192.0.2.1 RoCE v2 dummy0");
}

TEST_F(GidSelection, EmptyTableAndInfiniBand) {
  DeviceSample empty = rxe;
  empty.gids.clear();
  EXPECT_NE(error(query(empty, "192.0.2.1"), {}, make_error_code(errc::not_supported))
                .find("rxe0 port 1 has no GIDs"),
            std::string::npos);

  DeviceSample ib;
  ib.name = "mlx5_1";
  ib.port.link_layer = LinkLayer::infiniband;
  ib.port.state = PortState::active;
  GidEntry port_gid;
  port_gid.index = 0;
  port_gid.gid = *parse_gid("fe80::248a:703:49:d4f0");
  port_gid.type = GidType::ib;
  ib.gids.push_back(port_gid);
  EXPECT_EQ(pick(query(ib, "10.1.0.5")), 0u);  // IPoIB addresses are not GIDs
  EXPECT_EQ(sel.how, "InfiniBand port: the port GID");
}

// ------------------------------------------------------------------ paths

TEST_F(GidSelection, PathFromTheRxePort) {
  VerbsPath p;
  std::string why;
  ASSERT_FALSE(derive_path(query(rxe, "192.0.2.1", "dummy0"), rxe.port, {}, p, why)) << why;
  EXPECT_EQ(p.sgid.index, 1u);
  EXPECT_EQ(p.path_mtu, Mtu::mtu4096);  // active MTU (netdev MTU 4500)
  EXPECT_EQ(p.traffic_class, 96);       // DSCP 24 << 2: Ceph's default traffic class
  EXPECT_EQ(p.sl, 3);
  EXPECT_EQ(p.hop_limit, 64);
  EXPECT_EQ(p.description,
            "rxe0 port 1 GID[1] ::ffff:192.0.2.1 RoCE v2 dummy0: the RoCE v2 GID of the local "
            "address 192.0.2.1 on dummy0; path MTU 4096 (active 4096), traffic class 96 (DSCP "
            "24), SL 3");

  const Gid peer = *parse_gid("::ffff:192.0.2.2");
  const AddressVector av = p.address_vector(peer, 5);
  EXPECT_EQ(av.dgid, peer);
  EXPECT_EQ(av.sgid_index, 1);
  EXPECT_EQ(av.traffic_class, 96);
  EXPECT_EQ(av.sl, 3);
  EXPECT_EQ(av.hop_limit, 64);
  EXPECT_EQ(av.flow_label, 5u);
  EXPECT_EQ(av.port_num, 1);
}

TEST_F(GidSelection, PathOptionsCapMtuAndSetTrafficClassAndSl) {
  VerbsPathOptions o;
  o.max_path_mtu = 1024;
  o.dscp = 46;  // EF
  o.sl = 5;
  VerbsPath p;
  std::string why;
  ASSERT_FALSE(derive_path(query(rxe, "192.0.2.1"), rxe.port, o, p, why)) << why;
  EXPECT_EQ(p.path_mtu, Mtu::mtu1024);
  EXPECT_EQ(p.traffic_class, 184);
  EXPECT_EQ(p.sl, 5);
  EXPECT_NE(p.description.find("path MTU 1024 (active 4096, cap 1024)"), std::string::npos);

  // A cap above the active MTU changes nothing (ConnectX at netdev MTU 1500).
  o.max_path_mtu = 4096;
  ASSERT_FALSE(derive_path(query(cx, "10.0.0.11"), cx.port, o, p, why)) << why;
  EXPECT_EQ(p.path_mtu, Mtu::mtu1024);
  EXPECT_EQ(p.sgid.index, 3u);
}

TEST_F(GidSelection, PathErrors) {
  VerbsPath p;
  std::string why;
  VerbsPathOptions o;
  o.sl = 9;  // valid on InfiniBand, not on RoCE
  EXPECT_EQ(derive_path(query(rxe, "192.0.2.1"), rxe.port, o, p, why), errc::config_error);
  EXPECT_EQ(why, "ms_async_rdma_sl = 9 is out of range for RoCE on rxe0 port 1 (0-7: the 802.1p "
                 "priority)");

  PortAttr down = rxe.port;
  down.state = PortState::down;
  EXPECT_EQ(derive_path(query(rxe, "192.0.2.1"), down, {}, p, why), errc::not_connected);
  EXPECT_NE(why.find("rxe0 port 1 is DOWN, not ACTIVE"), std::string::npos) << why;

  EXPECT_EQ(derive_path(query(rxe, "192.0.2.9"), rxe.port, {}, p, why), errc::address_invalid);
}

TEST_F(GidSelection, ResolvePathAgainstADevice) {
  testing::SampleDevice dev(rxe);
  VerbsPath p;
  std::string why;
  // 192.0.2.1 is not an address of this host: the owner is unknown, and the
  // GID is still found by value.
  ASSERT_FALSE(resolve_path(dev, 1, addr("192.0.2.1"), {}, p, why)) << why;
  EXPECT_EQ(p.sgid.index, 1u);
  EXPECT_EQ(resolve_path(dev, 2, addr("192.0.2.1"), {}, p, why), errc::invalid_argument);
  EXPECT_EQ(why, "cannot query port 2 of rxe0: invalid argument (the device has 1 port(s); set "
                 "ms_async_rdma_port_num)");
}

// ------------------------------------- what rdma_cm connections get at RTR

// rdma_init_qp_attr's proposal for RTR as the kernel makes it for a port:
// the GID of its default RoCE mode for the address, SL from the TOS mapping
// (0 without one), the path MTU from the netdev, the id's TOS.
CmPathAttr proposal(std::uint32_t sgid_index, Mtu mtu) {
  CmPathAttr a;
  a.sgid_index = sgid_index;
  a.sl = 0;
  a.path_mtu = mtu;
  a.traffic_class = 96;
  a.hop_limit = 64;
  return a;
}

TEST_F(GidSelection, RdmaCmProposalGetsTheSelection) {
  // ConnectX with rdma_cm's default_roce_mode at RoCE v1: rdma-cm proposes
  // GID[2] (v1, ::ffff:10.0.0.11); the auto selection is GID[3] (v2).
  VerbsPath p;
  std::string why;
  ASSERT_FALSE(derive_path(query(cx, "10.0.0.11", "enp3s0f0"), cx.port, {}, p, why)) << why;
  const CmPathAttr cm = proposal(2, Mtu::mtu1024);
  CmPathAttr a = apply_selected_path(cm, p);
  EXPECT_EQ(a.sgid_index, 3u);
  EXPECT_EQ(a.sl, 3);                     // ms_async_rdma_sl's default, not rdma-cm's 0
  EXPECT_EQ(a.path_mtu, Mtu::mtu1024);    // active 1024, no cap
  EXPECT_EQ(a.traffic_class, 96);         // the id's TOS is kept
  EXPECT_EQ(a.hop_limit, 64);
  EXPECT_EQ(describe_applied(cm, a, p),
            "mlx5_0 port 1 GID[3] ::ffff:10.0.0.11 RoCE v2 enp3s0f0 (the RoCE v2 GID of the "
            "local address 10.0.0.11 on enp3s0f0), path MTU 1024 (rdma-cm 1024, selection 1024), "
            "SL 3, traffic class 96; rdma-cm proposed GID[2] SL 0");

  // The VLAN's address: GID[7], whatever rdma-cm proposed.
  ASSERT_FALSE(derive_path(query(cx, "10.0.100.11", "enp3s0f0.100"), cx.port, {}, p, why)) << why;
  EXPECT_EQ(apply_selected_path(proposal(6, Mtu::mtu1024), p).sgid_index, 7u);
}

TEST_F(GidSelection, RdmaCmProposalGetsThePins) {
  // Ceph-style pin of the v1 entry, an SL and an MTU cap below rdma-cm's.
  VerbsPathOptions o;
  o.gid_index = 2;
  o.sl = 5;
  o.max_path_mtu = 1024;
  VerbsPath p;
  std::string why;
  ASSERT_FALSE(derive_path(query(rxe, "192.0.2.1", "dummy0"), rxe.port, o, p, why)) << why;
  const CmPathAttr cm = proposal(1, Mtu::mtu4096);
  const CmPathAttr a = apply_selected_path(cm, p);
  EXPECT_EQ(a.sgid_index, 2u);
  EXPECT_EQ(a.sl, 5);
  EXPECT_EQ(a.path_mtu, Mtu::mtu1024);
  EXPECT_NE(describe_applied(cm, a, p).find("(pinned by ms_async_rdma_gid_idx = 2)"),
            std::string::npos)
      << describe_applied(cm, a, p);

  // The path MTU is never raised above rdma-cm's (the netdev's) value.
  o = VerbsPathOptions{};
  ASSERT_FALSE(derive_path(query(rxe, "192.0.2.1"), rxe.port, o, p, why)) << why;
  EXPECT_EQ(p.path_mtu, Mtu::mtu4096);
  EXPECT_EQ(apply_selected_path(proposal(1, Mtu::mtu1024), p).path_mtu, Mtu::mtu1024);
  EXPECT_EQ(apply_selected_path(proposal(1, Mtu::mtu4096), p).path_mtu, Mtu::mtu4096);

  // ms_async_rdma_local_gid pins by value: the v1 entry of 10.0.0.11 is
  // chosen only if named by index; by value the v2 entry wins.
  o.local_gid = "10.0.0.11";
  ASSERT_FALSE(derive_path(query(cx, "10.0.0.11"), cx.port, o, p, why)) << why;
  EXPECT_EQ(apply_selected_path(proposal(2, Mtu::mtu1024), p).sgid_index, 3u);
}

}  // namespace
}  // namespace siphon::rdma::verbs
