// Device-free tests of the verbs provider: value mappings (checked against
// rdma-core's own names, so no rdma-core header is needed here), option
// validation, helpers, and the no-device behaviour on the machine the test
// runs on.
#include <gtest/gtest.h>

#include <cerrno>
#include <map>

#include "msgr/base/error.h"
#include "rdma/verbs/verbs_provider.h"

namespace siphon::rdma::verbs {
namespace {

// ------------------------------------------------- work completions

TEST(VerbsMapping, EveryWcStatusMapsByMeaning) {
  // libibverbs' names for enum ibv_wc_status 0..23 (rdma-core 44), and what
  // each means to the stack. Matching by name checks the numbering too.
  const std::map<std::string, WcStatus> by_name = {
      {"success", WcStatus::success},
      {"local length error", WcStatus::local_length_error},
      {"local QP operation error", WcStatus::local_qp_operation_error},
      {"local EE context operation error", WcStatus::local_qp_operation_error},
      {"local protection error", WcStatus::local_protection_error},
      {"Work Request Flushed Error", WcStatus::flushed},
      {"memory management operation error", WcStatus::local_protection_error},
      {"bad response error", WcStatus::bad_response},
      {"local access error", WcStatus::local_protection_error},
      {"remote invalid request error", WcStatus::remote_invalid_request},
      {"remote access error", WcStatus::remote_access_error},
      {"remote operation error", WcStatus::remote_operation_error},
      {"transport retry counter exceeded", WcStatus::retry_exceeded},
      {"RNR retry counter exceeded", WcStatus::rnr_retry_exceeded},
      {"local RDD violation error", WcStatus::local_protection_error},
      {"remote invalid RD request", WcStatus::remote_invalid_request},
      {"aborted error", WcStatus::remote_operation_error},
      {"invalid EE context number", WcStatus::general_error},
      {"invalid EE context state", WcStatus::general_error},
      {"fatal error", WcStatus::general_error},
      {"response timeout error", WcStatus::retry_exceeded},
      {"general error", WcStatus::general_error},
      {"TM error", WcStatus::general_error},
      {"TM software rendezvous", WcStatus::general_error},
  };
  int seen = 0;
  for (int v = 0; v <= 23; ++v) {
    const std::string name(ibv_wc_status_name(v));
    const auto it = by_name.find(name);
    ASSERT_NE(it, by_name.end()) << "status " << v << " is named '" << name << "'";
    EXPECT_EQ(wc_status_from_ibv(v), it->second) << name;
    ++seen;
  }
  EXPECT_EQ(seen, 24);
  EXPECT_EQ(wc_status_from_ibv(0), WcStatus::success);
  EXPECT_EQ(wc_status_from_ibv(5), WcStatus::flushed);            // IBV_WC_WR_FLUSH_ERR
  EXPECT_EQ(wc_status_from_ibv(13), WcStatus::rnr_retry_exceeded);  // IBV_WC_RNR_RETRY_EXC_ERR
  EXPECT_EQ(wc_status_from_ibv(999), WcStatus::general_error);    // future values
  EXPECT_EQ(wc_status_from_ibv(-1), WcStatus::general_error);
}

TEST(VerbsMapping, WcOpcodes) {
  // enum ibv_wc_opcode: SEND 0, RDMA_WRITE 1, RDMA_READ 2, COMP_SWAP 3, ...,
  // RECV 128, RECV_RDMA_WITH_IMM 129, TM_ADD 130, ...
  EXPECT_EQ(wc_opcode_from_ibv(0), WcOpcode::send);
  EXPECT_EQ(wc_opcode_from_ibv(1), WcOpcode::rdma_write);
  EXPECT_EQ(wc_opcode_from_ibv(2), WcOpcode::rdma_read);
  EXPECT_EQ(wc_opcode_from_ibv(128), WcOpcode::recv);
  EXPECT_EQ(wc_opcode_from_ibv(129), WcOpcode::recv_rdma_with_imm);
  EXPECT_EQ(wc_opcode_from_ibv(3), WcOpcode::send);    // atomics: send side
  EXPECT_EQ(wc_opcode_from_ibv(133), WcOpcode::recv);  // tag matching: receive side
}

TEST(VerbsMapping, PostErrnos) {
  EXPECT_FALSE(post_error(0));
  EXPECT_EQ(post_error(ENOMEM), errc::queue_full);
  EXPECT_EQ(post_error(-ENOMEM), errc::queue_full);  // providers returning -errno
  EXPECT_EQ(post_error(EINVAL), errc::invalid_argument);
  EXPECT_EQ(post_error(EAGAIN), errc::resource_exhausted);
  EXPECT_EQ(post_error(EIO), errc::io_error);
}

// ------------------------------------------------------ QP attributes

TEST(VerbsMapping, QpAttrMask) {
  // enum ibv_qp_attr_mask values (rdma-core ABI).
  EXPECT_EQ(ibv_qp_attr_mask(kAttrState), 1 << 0);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrAccessFlags), 1 << 3);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrPkeyIndex), 1 << 4);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrPort), 1 << 5);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrPath), (1 << 7) | (1 << 8));  // AV + PATH_MTU
  EXPECT_EQ(ibv_qp_attr_mask(kAttrTimeout), 1 << 9);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrRetryCnt), 1 << 10);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrRnrRetry), 1 << 11);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrRqPsn), 1 << 12);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrMaxRdAtomic), 1 << 13);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrMinRnrTimer), 1 << 15);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrSqPsn), 1 << 16);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrMaxDestRdAtomic), 1 << 17);
  EXPECT_EQ(ibv_qp_attr_mask(kAttrDestQpn), 1 << 20);
  // The usual INIT->RTR mask.
  EXPECT_EQ(ibv_qp_attr_mask(kAttrState | kAttrPath | kAttrDestQpn | kAttrRqPsn |
                             kAttrMaxDestRdAtomic | kAttrMinRnrTimer),
            (1 << 0) | (1 << 7) | (1 << 8) | (1 << 20) | (1 << 12) | (1 << 17) | (1 << 15));
}

TEST(VerbsMapping, Access) {
  EXPECT_EQ(ibv_access(0), 0);
  EXPECT_EQ(ibv_access(kLocalWrite), 1);
  EXPECT_EQ(ibv_access(kLocalWrite | kRemoteWrite | kRemoteRead), 7);
  EXPECT_EQ(ibv_access(kRemoteRead), 4);
  EXPECT_FALSE(ibv_access(kRemoteWrite));  // verbs requires local write with it
  EXPECT_FALSE(ibv_access(1u << 5));
}

TEST(VerbsMapping, QpStateTransitions) {
  using S = QpState;
  EXPECT_TRUE(is_valid_transition(S::reset, S::init));
  EXPECT_TRUE(is_valid_transition(S::init, S::init));
  EXPECT_TRUE(is_valid_transition(S::init, S::rtr));
  EXPECT_TRUE(is_valid_transition(S::rtr, S::rts));
  EXPECT_TRUE(is_valid_transition(S::rts, S::rts));
  EXPECT_TRUE(is_valid_transition(S::rts, S::sqd));
  EXPECT_TRUE(is_valid_transition(S::sqd, S::rts));
  EXPECT_TRUE(is_valid_transition(S::sqe, S::rts));
  for (S s : {S::reset, S::init, S::rtr, S::rts, S::sqd, S::sqe, S::err}) {
    EXPECT_TRUE(is_valid_transition(s, S::reset));
    EXPECT_TRUE(is_valid_transition(s, S::err));
  }
  EXPECT_FALSE(is_valid_transition(S::reset, S::rtr));
  EXPECT_FALSE(is_valid_transition(S::reset, S::rts));
  EXPECT_FALSE(is_valid_transition(S::init, S::rts));
  EXPECT_FALSE(is_valid_transition(S::rtr, S::init));
  EXPECT_FALSE(is_valid_transition(S::err, S::rts));
  EXPECT_FALSE(is_valid_transition(S::err, S::init));
}

// ------------------------------------------------------------- rdma_cm

TEST(VerbsMapping, EveryCmEventType) {
  // enum rdma_cm_event_type 0..15, checked by librdmacm's names.
  const std::map<std::string, std::optional<CmEventType>> by_name = {
      {"RDMA_CM_EVENT_ADDR_RESOLVED", CmEventType::addr_resolved},
      {"RDMA_CM_EVENT_ADDR_ERROR", CmEventType::addr_error},
      {"RDMA_CM_EVENT_ROUTE_RESOLVED", CmEventType::route_resolved},
      {"RDMA_CM_EVENT_ROUTE_ERROR", CmEventType::route_error},
      {"RDMA_CM_EVENT_CONNECT_REQUEST", CmEventType::connect_request},
      {"RDMA_CM_EVENT_CONNECT_RESPONSE", std::nullopt},  // completed by the provider
      {"RDMA_CM_EVENT_CONNECT_ERROR", CmEventType::connect_error},
      {"RDMA_CM_EVENT_UNREACHABLE", CmEventType::unreachable},
      {"RDMA_CM_EVENT_REJECTED", CmEventType::rejected},
      {"RDMA_CM_EVENT_ESTABLISHED", CmEventType::established},
      {"RDMA_CM_EVENT_DISCONNECTED", CmEventType::disconnected},
      {"RDMA_CM_EVENT_DEVICE_REMOVAL", CmEventType::device_removal},
      {"RDMA_CM_EVENT_MULTICAST_JOIN", std::nullopt},
      {"RDMA_CM_EVENT_MULTICAST_ERROR", std::nullopt},
      {"RDMA_CM_EVENT_ADDR_CHANGE", std::nullopt},
      {"RDMA_CM_EVENT_TIMEWAIT_EXIT", CmEventType::timewait_exit},
  };
  for (int v = 0; v <= 15; ++v) {
    const std::string name(rdma_cm_event_name(v));
    const auto it = by_name.find(name);
    ASSERT_NE(it, by_name.end()) << "event " << v << " is named '" << name << "'";
    EXPECT_EQ(cm_event_from_rdma(v), it->second) << name;
  }
  EXPECT_FALSE(cm_event_from_rdma(99));
}

TEST(VerbsMapping, CmEventStatus) {
  // REJECTED carries an IB CM reject reason: 28 consumer reject, 8 no listener.
  EXPECT_EQ(cm_event_error(CmEventType::rejected, 28), errc::connection_refused);
  EXPECT_EQ(cm_event_error(CmEventType::rejected, 8), errc::connection_refused);
  EXPECT_EQ(cm_event_error(CmEventType::addr_error, -ETIMEDOUT), errc::timed_out);
  EXPECT_EQ(cm_event_error(CmEventType::addr_error, -EADDRNOTAVAIL), errc::address_invalid);
  EXPECT_EQ(cm_event_error(CmEventType::route_error, -ENODEV), errc::device_not_found);
  EXPECT_EQ(cm_event_error(CmEventType::unreachable, -ETIMEDOUT), errc::timed_out);
  EXPECT_EQ(cm_event_error(CmEventType::connect_error, -ENETUNREACH), errc::rdma_cm_error);
  EXPECT_EQ(cm_event_error(CmEventType::connect_error, 0), errc::rdma_cm_error);  // never empty
  EXPECT_EQ(cm_event_error(CmEventType::unreachable, 3), errc::rdma_cm_error);
  EXPECT_FALSE(cm_event_error(CmEventType::established, 0));
  EXPECT_FALSE(cm_event_error(CmEventType::disconnected, 0));
  EXPECT_FALSE(cm_event_error(CmEventType::connect_request, 0));
}

TEST(VerbsMapping, PrivateDataLimits) {
  EXPECT_EQ(max_private_data(CmPrivateData::connect), 56u);
  EXPECT_EQ(max_private_data(CmPrivateData::accept), 196u);
  EXPECT_EQ(max_private_data(CmPrivateData::reject), 148u);
}

// ------------------------------------------------------------- helpers

TEST(VerbsHelpers, GidsOfAddresses) {
  EXPECT_EQ(format_gid(gid_of(*NetAddress::parse("192.0.2.1:6800"))), "::ffff:192.0.2.1");
  EXPECT_EQ(format_gid(gid_of(*NetAddress::parse("[2001:db8::1]:6800"))), "2001:db8::1");
  EXPECT_EQ(gid_of(NetAddress{}), Gid{});
  EXPECT_EQ(parse_gid("192.0.2.1"), parse_gid("::ffff:192.0.2.1"));
  EXPECT_EQ(parse_gid("0000:0000:0000:0000:0000:ffff:c000:0201"), parse_gid("::ffff:c000:201"));
  EXPECT_FALSE(parse_gid(""));
  EXPECT_FALSE(parse_gid("fe80::1%eth0"));
  EXPECT_FALSE(parse_gid("not a gid"));
  EXPECT_EQ(format_gid(*parse_gid("FE80:0000:0000:0000:0C86:96FF:FEF7:9A0E")),
            "fe80::c86:96ff:fef7:9a0e");
  EXPECT_EQ(to_string(GidType::roce_v2), "RoCE v2");
  EXPECT_EQ(to_string(GidType::roce_v1), "RoCE v1");
  EXPECT_EQ(to_string(GidType::ib), "IB");
}

TEST(VerbsHelpers, Mtus) {
  EXPECT_EQ(mtu_from_bytes(4096), Mtu::mtu4096);
  EXPECT_EQ(mtu_from_bytes(256), Mtu::mtu256);
  EXPECT_FALSE(mtu_from_bytes(1500));
  EXPECT_FALSE(mtu_from_bytes(0));
  EXPECT_EQ(cap_mtu(Mtu::mtu4096, 1024), Mtu::mtu1024);
  EXPECT_EQ(cap_mtu(Mtu::mtu1024, 4096), Mtu::mtu1024);
  EXPECT_EQ(cap_mtu(Mtu::mtu2048, 0), Mtu::mtu2048);
}

TEST(VerbsPorts, PortNumbersAreCheckedAgainstTheDevicesCount) {
  // Decided before any command reaches the device: the same answer at every
  // optimisation level, whatever a device leaves in its responses.
  EXPECT_EQ(check_port_number(0, 2), errc::invalid_argument);
  EXPECT_FALSE(check_port_number(1, 2));
  EXPECT_FALSE(check_port_number(2, 2));
  EXPECT_EQ(check_port_number(3, 2), errc::invalid_argument);
  EXPECT_EQ(check_port_number(255, 254), errc::invalid_argument);
  EXPECT_FALSE(check_port_number(255, 255));
  // A device that reports no ports is refused for every port number.
  for (unsigned p = 0; p <= 255; ++p)
    EXPECT_EQ(check_port_number(static_cast<std::uint8_t>(p), 0), errc::invalid_argument) << p;
}

TEST(VerbsPorts, AnswersNoDeviceGivesAreRefused) {
  // rdma-core's numbering: IBV_PORT_DOWN 1 .. IBV_PORT_ACTIVE_DEFER 5,
  // IBV_MTU_256 1 .. IBV_MTU_4096 5, link layer 0 unspecified, 1 IB, 2 Ethernet.
  const RawPortAnswer rxe{4, 5, 3, 2, 1024};  // rxe0 as captured (rdma-samples/)
  EXPECT_EQ(port_answer_problem(rxe), nullptr);
  const RawPortAnswer ib{4, 5, 5, 1, 128};
  EXPECT_EQ(port_answer_problem(ib), nullptr);
  const RawPortAnswer down{1, 5, 1, 2, 256};  // a down port is a real answer
  EXPECT_EQ(port_answer_problem(down), nullptr);

  // What a device that never wrote its response can leave behind.
  const RawPortAnswer zeros{};
  EXPECT_STREQ(port_answer_problem(zeros), "undefined port state");
  RawPortAnswer a = rxe;
  a.state = 6;
  EXPECT_STREQ(port_answer_problem(a), "undefined port state");
  a = rxe;
  a.max_mtu = 0;
  EXPECT_STREQ(port_answer_problem(a), "max MTU out of range");
  a = rxe;
  a.active_mtu = 6;
  EXPECT_STREQ(port_answer_problem(a), "active MTU out of range");
  a = rxe;
  a.link_layer = 3;
  EXPECT_STREQ(port_answer_problem(a), "unknown link layer");
  a = rxe;
  a.gid_tbl_len = 0;
  EXPECT_STREQ(port_answer_problem(a), "empty GID table");
  a.gid_tbl_len = -7;
  EXPECT_STREQ(port_answer_problem(a), "empty GID table");
}

TEST(VerbsHelpers, DescribeGidsIsBounded) {
  std::vector<GidEntry> many(20);
  for (std::uint32_t i = 0; i < many.size(); ++i) {
    many[i].index = i;
    many[i].gid = *parse_gid("::ffff:10.0.0.1");
  }
  const std::string text = describe_gids(many, 2);
  EXPECT_EQ(text, "0: ::ffff:10.0.0.1 RoCE v2, 1: ::ffff:10.0.0.1 RoCE v2, ... 18 more");
}

TEST(VerbsHelpers, LoopbackOwnerAndSourceAddress) {
  EXPECT_EQ(netdev_for_address(*NetAddress::parse("127.0.0.1")), "lo");
  EXPECT_EQ(netdev_for_address(*NetAddress::parse("::ffff:127.0.0.1")), "lo");
  EXPECT_EQ(netdev_for_address(*NetAddress::parse("192.0.2.254")), "");  // TEST-NET-1
  EXPECT_EQ(netdev_for_address(NetAddress{}), "");
  const auto src = source_address_for(*NetAddress::parse("127.0.0.1:3300"));
  ASSERT_TRUE(src.has_value());
  EXPECT_EQ(src->to_string(), "127.0.0.1:0");
  EXPECT_FALSE(source_address_for(NetAddress{}));
}

// ------------------------------------------------------------- options

TEST(VerbsOptions, DefaultsAreValid) {
  std::string why;
  EXPECT_FALSE(validate(VerbsPathOptions{}, why)) << why;
}

TEST(VerbsOptions, EachBadValueIsNamed) {
  auto check = [](VerbsPathOptions o, const std::string& expected_start) {
    std::string why;
    EXPECT_EQ(validate(o, why), errc::config_error);
    EXPECT_EQ(why.rfind(expected_start, 0), 0u) << why;
  };
  VerbsPathOptions o;
  o.dscp = 96;  // Ceph's default written as a traffic class
  check(o, "ms_async_rdma_dscp = 96 is out of range (0-63): Siphon takes a DSCP and sets the "
           "traffic class to DSCP << 2; Ceph wrote the value into the traffic class unchanged, "
           "so Ceph's default 96 is DSCP 24");
  o = {};
  o.dscp = -1;
  check(o, "ms_async_rdma_dscp = -1 is out of range");
  o = {};
  o.sl = 16;
  check(o, "ms_async_rdma_sl = 16 is out of range (0-7 on RoCE, 0-15 on InfiniBand)");
  o = {};
  o.max_path_mtu = 1500;
  check(o, "ms_async_rdma_path_mtu = 1500 is invalid: use 256, 512, 1024, 2048, 4096, or 0");
  o = {};
  o.gid_index = -5;
  check(o, "ms_async_rdma_gid_idx = -5 is invalid");
  o = {};
  o.local_gid = "fe80::1::2";
  check(o, "ms_async_rdma_local_gid = 'fe80::1::2' is not a GID");
  o = {};
  o.hop_limit = 0;
  check(o, "the GRH hop limit 0 is out of range (1-255)");
}

TEST(VerbsOptions, ProviderRejectsInvalidOptions) {
  VerbsPathOptions o;
  o.dscp = 64;
  std::error_code ec;
  EXPECT_EQ(make_provider(o, ec), nullptr);
  EXPECT_EQ(ec, errc::config_error);
  o.dscp = 63;
  EXPECT_NE(make_provider(o, ec), nullptr);
  EXPECT_FALSE(ec);
}

// ------------------------------------------------- opening and no device

TEST(VerbsOpen, DescribeOpenFailure) {
  const std::vector<std::string> none;
  EXPECT_EQ(describe_open_failure("mlx5_0", none, errc::no_device),
            "RDMA device 'mlx5_0' not found (devices present: none): set "
            "ms_async_rdma_device_name = soft0 to use the software fabric, or load a driver "
            "(rdma link add rxe0 type rxe netdev eth0 for Soft-RoCE)");
  const std::vector<std::string> two = {"rxe0", "mlx5_1"};
  EXPECT_EQ(describe_open_failure("mlx5_0", two, errc::device_not_found),
            "RDMA device 'mlx5_0' not found (devices present: rxe0, mlx5_1): set "
            "ms_async_rdma_device_name to one of the devices present, or to soft0 to use the "
            "software fabric");
  EXPECT_EQ(describe_open_failure("", none, errc::no_device).rfind(
                "RDMA device (first available; ms_async_rdma_device_name is empty) not found "
                "(devices present: none)",
                0),
            0u);
  const std::string denied =
      describe_open_failure("rxe0", std::vector<std::string>{"rxe0"}, errc::local_protection_error);
  EXPECT_EQ(denied.rfind("RDMA device 'rxe0' could not be opened (local protection error; "
                         "devices present: rxe0): check that this user may open "
                         "/dev/infiniband/uverbs*",
                         0),
            0u)
      << denied;
}

// Runs for real: on hosts without RDMA (this project's dev and CI machines)
// it checks the no-device path; inside the rxe guest, the not-found path.
TEST(VerbsOpen, MissingDeviceIsAnErrorNeverAnAbort) {
  auto provider = make_provider();
  ASSERT_NE(provider, nullptr);
  EXPECT_EQ(provider->name(), "verbs");
  const std::vector<std::string> devices = provider->list_devices();
  std::error_code ec;
  const std::string name = "siphon_no_such_device";
  EXPECT_EQ(provider->open_device(name, ec), nullptr);
  if (devices.empty()) {
    EXPECT_EQ(ec, errc::no_device);
    EXPECT_EQ(describe_open_failure(name, devices, ec),
              "RDMA device 'siphon_no_such_device' not found (devices present: none): set "
              "ms_async_rdma_device_name = soft0 to use the software fabric, or load a driver "
              "(rdma link add rxe0 type rxe netdev eth0 for Soft-RoCE)");
    // An empty name (Ceph's "first device") finds nothing either.
    EXPECT_EQ(provider->open_device("", ec), nullptr);
    EXPECT_EQ(ec, errc::no_device);
  } else {
    EXPECT_EQ(ec, errc::device_not_found);
    EXPECT_NE(describe_open_failure(name, devices, ec).find(devices.front()), std::string::npos);
  }
}

TEST(VerbsOpen, EventChannelWithoutRdmaCmIsAnError) {
  auto provider = make_provider();
  ASSERT_NE(provider, nullptr);
  std::error_code ec;
  auto channel = provider->create_event_channel(ec);
  if (!provider->list_devices().empty()) GTEST_SKIP() << "this host has RDMA devices";
  // No devices: rdma_cm is unavailable (or has nothing to offer); either way
  // the provider answers, it does not abort.
  if (channel == nullptr) {
    EXPECT_TRUE(ec);
  } else {
    EXPECT_FALSE(ec);
    EXPECT_GE(channel->fd(), 0);
  }
}

}  // namespace
}  // namespace siphon::rdma::verbs
