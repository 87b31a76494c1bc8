// The composition root: ms_type selects the stack, options reach the typed
// structs, and errors name the cause and the remedy. The end-to-end cases run
// a ping through two messengers built only from a ceph.conf.
#include <gtest/gtest.h>

#include <future>
#include <string>

#include "compat/factory.h"
#include "messenger_conf_util.h"
#include "msgr/base/error.h"
#include "rdma/transport/rdma_stack.h"

namespace siphon::compat {
namespace {

using test::ConfPair;
using test::load;

TEST(Factory, TypedOptionsFollowTheConfig) {
  const Config c = load(
      "[global]\n ms async op threads = 2\n ms connection ready timeout = 7\n"
      " ms initial backoff = 0.5\n ms async rdma buffer size = 64K\n ms async rdma dscp = 104\n"
      " ms async rdma credits = 12\n ms bind port min = 7000\n");
  const MessengerOptions m = messenger_options(c);
  EXPECT_EQ(transport_options(c).async_op_threads, 2u);
  EXPECT_EQ(tcp_options(c).common.async_op_threads, 2u);
  EXPECT_EQ(rdma_options(c).common.async_op_threads, 2u);
  EXPECT_EQ(m.ms_connection_ready_timeout, std::chrono::seconds(7));
  EXPECT_EQ(m.ms_initial_backoff, std::chrono::milliseconds(500));
  EXPECT_EQ(tcp_options(c).bind_port_min, 7000);
  const rdma::RdmaOptions r = rdma_options(c);
  EXPECT_EQ(r.buffer_size, 64u * 1024);
  EXPECT_EQ(r.dscp, 104) << "Ceph's meaning: the traffic-class byte";
  EXPECT_EQ(r.credits, 12u);
  EXPECT_FALSE(r.gid_idx.has_value()) << "an unset gid index means: choose automatically";
  EXPECT_EQ(rdma_options(load("[global]\nms async rdma gid idx = 3\n")).gid_idx, 3);
  // SRQ mode only when asked for explicitly (Ceph's default true is not).
  EXPECT_FALSE(r.support_srq);
  EXPECT_TRUE(rdma_options(load("[global]\nms async rdma support srq = true\n")).support_srq);
  EXPECT_FALSE(rdma_options(load("[global]\nms async rdma support srq = false\n")).support_srq);
  EXPECT_EQ(rdma_options(load("[global]\nms async rdma receive queue len = 512\n")).receive_queue_len, 512u);
  // Polling: left at Ceph's default it is "auto" (the stack decides); set,
  // it is honoured, 0 and Ceph's 1000 included.
  EXPECT_FALSE(r.polling.has_value());
  EXPECT_EQ(rdma_options(load("[global]\nms async rdma polling us = 250\n")).polling, std::chrono::microseconds(250));
  EXPECT_EQ(rdma_options(load("[global]\nms async rdma polling us = 0\n")).polling, std::chrono::microseconds(0));
  EXPECT_EQ(rdma_options(load("[global]\nms async rdma polling us = 1000\n")).polling, std::chrono::microseconds(1000));
  EXPECT_EQ(messenger_name(c).type, entity_type::osd);
  EXPECT_EQ(messenger_name(c).num, 3);
  EXPECT_EQ(messenger_name(load("", "client.admin")).num, -1);
}

// Every limit of docs/security.md reaches the struct its enforcer reads, on
// both stacks (the RDMA stack takes frame limits from RdmaOptions::common).
TEST(Factory, LimitOptionsReachTheMessengerAndBothStacks) {
  const Config c = load(
      "[global]\n ms max connections = 7\n ms max undispatched bytes per connection = 3M\n"
      " ms max queued send bytes per connection = 5M\n ms dispatch throttle bytes = 9M\n"
      " ms max frame size = 2M\n ms max segment size = 1M\n ms max control frame size = 8K\n"
      " ms connection ready timeout = 4\n ms connection idle timeout = 60\n");
  const MessengerOptions m = messenger_options(c);
  EXPECT_EQ(m.ms_max_connections, 7u);
  EXPECT_EQ(m.ms_max_undispatched_bytes_per_connection, 3u << 20);
  EXPECT_EQ(m.ms_max_queued_send_bytes_per_connection, 5u << 20);
  EXPECT_EQ(m.ms_dispatch_throttle_bytes, 9u << 20);
  EXPECT_EQ(m.ms_connection_ready_timeout, std::chrono::seconds(4));
  EXPECT_EQ(m.ms_connection_idle_timeout, std::chrono::seconds(60));
  for (const proto::FrameLimits& l : {transport_options(c).frame_limits, tcp_options(c).common.frame_limits,
                                      rdma_options(c).common.frame_limits}) {
    EXPECT_EQ(l.max_frame, 2u << 20);
    EXPECT_EQ(l.max_segment, 1u << 20);
    EXPECT_EQ(l.max_control_payload, 8u << 10);
  }
  // The defaults are the documented ones (docs/security.md).
  const MessengerOptions d = messenger_options(load(""));
  EXPECT_EQ(d.ms_max_connections, 0u);
  EXPECT_EQ(d.ms_max_undispatched_bytes_per_connection, 32u << 20);
  EXPECT_EQ(d.ms_max_queued_send_bytes_per_connection, 0u) << "off: Ceph callers ignore send_message()'s result";
  EXPECT_EQ(d.ms_dispatch_throttle_bytes, 100u << 20);
}

// The Siphon extensions docs/{transport,messenger,rdma-transport}.md list
// reach the structs the stacks and the messenger read; the defaults are the
// structs' own (so the schema cannot drift from the code).
TEST(Factory, ExtensionOptionsReachTheStacks) {
  const Config c = load(
      "[global]\n ms tcp keepalive = false\n ms tcp read chunk = 16K\n ms send queue high water = 8M\n"
      " ms send queue low water = 2M\n ms inject seed = 42\n ms keepalive interval = 2.5\n"
      " ms msgr2 rev1 = false\n ms bind prefer ipv4 = true\n ms bind before connect = true\n"
      " ms max accept failures = 9\n ms tcp busy poll us = 50\n"
      " ms async rdma send queue depth = 64\n ms async rdma cq depth = 5000\n ms async rdma rnr retry = 7\n"
      " ms async rdma retry count = 3\n ms async rdma timeout = 18\n ms async rdma cm timeout = 750\n"
      " ms async rdma max connections = 77\n ms async rdma inline threshold = 0\n");
  const MessengerOptions m = messenger_options(c);
  const transport::TcpOptions t = tcp_options(c);
  EXPECT_FALSE(t.tcp_keepalive);
  EXPECT_EQ(t.tcp_read_chunk, 16u << 10);
  EXPECT_TRUE(t.bind_prefer_ipv4);
  EXPECT_TRUE(t.bind_before_connect);
  EXPECT_EQ(t.max_accept_failures, 9);
  EXPECT_EQ(t.busy_poll, std::chrono::microseconds(50));
  EXPECT_EQ(m.ms_keepalive_interval, std::chrono::milliseconds(2500));
  EXPECT_FALSE(m.ms_msgr2_rev1);
  const rdma::RdmaOptions r = rdma_options(c);
  for (const transport::TransportOptions& common : {t.common, r.common}) {
    EXPECT_EQ(common.send_queue_high_water, 8u << 20);
    EXPECT_EQ(common.send_queue_low_water, 2u << 20);
    EXPECT_EQ(common.inject.seed, 42u);
  }
  EXPECT_EQ(r.send_queue_depth, 64u);
  EXPECT_EQ(r.cq_depth, 5000u);
  EXPECT_EQ(r.rnr_retry, 7);
  EXPECT_EQ(r.retry_count, 3);
  EXPECT_EQ(r.ack_timeout, 18);
  EXPECT_EQ(r.cm_timeout, std::chrono::milliseconds(750));
  EXPECT_EQ(r.max_connections, 77u);
  EXPECT_EQ(r.inline_threshold, 0u);

  const MessengerOptions dm = messenger_options(load(""));
  const MessengerOptions code_m;
  const transport::TcpOptions dt = tcp_options(load(""));
  const transport::TcpOptions code_t;
  EXPECT_EQ(dt.tcp_keepalive, code_t.tcp_keepalive);
  EXPECT_EQ(dt.tcp_read_chunk, code_t.tcp_read_chunk);
  EXPECT_EQ(dt.bind_prefer_ipv4, code_t.bind_prefer_ipv4);
  EXPECT_EQ(dt.bind_before_connect, code_t.bind_before_connect);
  EXPECT_EQ(dt.max_accept_failures, code_t.max_accept_failures);
  EXPECT_EQ(dt.busy_poll, code_t.busy_poll);
  EXPECT_EQ(dt.common.send_queue_high_water, code_t.common.send_queue_high_water);
  EXPECT_EQ(dt.common.send_queue_low_water, code_t.common.send_queue_low_water);
  EXPECT_EQ(dt.common.inject.seed, code_t.common.inject.seed);
  EXPECT_EQ(dm.ms_keepalive_interval, code_m.ms_keepalive_interval);
  EXPECT_EQ(dm.ms_msgr2_rev1, code_m.ms_msgr2_rev1);
  const rdma::RdmaOptions dr = rdma_options(load(""));
  const rdma::RdmaOptions code_r;
  EXPECT_EQ(dr.send_queue_depth, code_r.send_queue_depth);
  EXPECT_EQ(dr.cq_depth, code_r.cq_depth);
  EXPECT_EQ(dr.rnr_retry, code_r.rnr_retry);
  EXPECT_EQ(dr.retry_count, code_r.retry_count);
  EXPECT_EQ(dr.ack_timeout, code_r.ack_timeout);
  EXPECT_EQ(dr.cm_timeout, code_r.cm_timeout);
  EXPECT_EQ(dr.max_connections, code_r.max_connections);
  EXPECT_EQ(dr.inline_threshold, code_r.inline_threshold);
}

// The remedies the RDMA stack's errors name are ceph.conf lines: a value set
// in a file is what the stack built from it runs with.
TEST(Factory, RdmaExtensionOptionsReachTheBuiltStack) {
  const Config c = load("[global]\nms type = async+rdma\nms async rdma device name = soft0\n"
                        "ms async rdma max connections = 1\nms async op threads = 1\n");
  auto stack = create_stack(c, Purpose::public_network);
  ASSERT_TRUE(stack);
  auto* rs = dynamic_cast<rdma::RdmaStack*>(stack.get());
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(rs->options().max_connections, 1u);
}

// The session's backpressure mark comes from the stack it runs on
// (Stack::send_queue_marks), so each stack compat builds must report the
// marks of the configuration, TCP and RDMA alike.
TEST(Factory, EveryStackReportsTheConfiguredSendQueueMarks) {
  const std::string marks = "ms send queue high water = 8M\nms send queue low water = 2M\nms async op threads = 1\n";
  for (const std::string type : {"async+posix", "async+rdma"}) {
    auto stack = create_stack(load("[global]\nms type = " + type + "\nms async rdma device name = soft0\n" + marks),
                              Purpose::public_network);
    ASSERT_TRUE(stack) << type;
    EXPECT_EQ(stack->type(), type);
    EXPECT_EQ(stack->send_queue_marks().high_water, 8u << 20) << type;
    EXPECT_EQ(stack->send_queue_marks().low_water, 2u << 20) << type;
  }
  // The mon client's stack is TCP whatever ms_type says, with the same options.
  auto tcp = create_tcp_stack(load("[global]\nms type = async+rdma\n" + marks));
  EXPECT_EQ(tcp->type(), "async+posix");
  EXPECT_EQ(tcp->send_queue_marks().high_water, 8u << 20);
}

TEST(Factory, MsTypeSelectsTheStack) {
  EXPECT_EQ(create_stack(load("[global]\nms type = async+posix\n"), Purpose::public_network)->type(),
            "async+posix");
  EXPECT_EQ(create_stack(load("[global]\nms type = async\n"), Purpose::public_network)->type(), "async+posix");
  const Config split = load("[global]\nms type = async+posix\nms cluster type = async+rdma\n"
                            "ms async rdma device name = soft0\n");
  EXPECT_EQ(create_stack(split, Purpose::public_network)->type(), "async+posix");
  auto cluster = create_stack(split, Purpose::cluster_network);
  EXPECT_EQ(cluster->type(), "async+rdma");
  EXPECT_EQ(static_cast<rdma::RdmaStack&>(*cluster).device_attr().name, "soft0");
}

TEST(Factory, RdmaWithoutHardwareRunsOnTheSoftwareFabric) {
  // This machine has no RDMA device: an unset device name falls back to soft0.
  auto s = create_stack(load("[global]\nms type = async+rdma\n"), Purpose::public_network);
  EXPECT_EQ(s->type(), "async+rdma");
  EXPECT_EQ(static_cast<rdma::RdmaStack&>(*s).device_attr().name, "soft0");
}

TEST(Factory, AMissingDeviceIsAClearError) {
  try {
    create_stack(load("[global]\nms type = async+rdma\nms async rdma device name = mlx5_0\n"),
                 Purpose::public_network);
    FAIL() << "no error for a device that does not exist";
  } catch (const SetupError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("mlx5_0"), std::string::npos) << what;
    EXPECT_NE(what.find("soft0"), std::string::npos) << "names the remedy: " << what;
  }
}

TEST(Factory, AnUnknownStackListsTheAvailableOnes) {
  try {
    create_stack(load("[global]\nms type = async+nosuchstack\n"), Purpose::public_network);
    FAIL() << "no error for an unknown stack";
  } catch (const SetupError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("async+nosuchstack"), std::string::npos) << what;
    EXPECT_NE(what.find("async+posix"), std::string::npos) << what;
    EXPECT_NE(what.find("async+rdma"), std::string::npos) << what;
  }
}

struct Catch : Dispatcher {
  std::promise<std::string> got;
  bool ms_dispatch(MessageRef m) override {
    got.set_value(m->front().to_string());
    return true;
  }
};

// Two messengers built only from a ceph.conf exchange a message.
void ping_over(const std::string& conf) {
  Catch catcher;  // outlives the messengers
  ConfPair p;
  ASSERT_NO_FATAL_FAILURE(test::start_conf_pair(p, conf, conf, catcher));
  MessageRef m = make_message<Message>(0x7000);
  m->front().append("through " + conf);
  p.con->send_message(m);
  auto f = catcher.got.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(f.get(), "through " + conf);
  p.stop();
}

TEST(Factory, MessengersFromAConfigTalkOverTcp) { ping_over("[global]\nms type = async+posix\n"); }

TEST(Factory, MessengersFromAConfigTalkOverRdma) {
  ping_over("[global]\nms type = async+rdma\nms async rdma device name = soft0\n"
            "ms async rdma buffer size = 16K\n");
}

// siphon_ms_fallback_type (docs/rdma-transport.md §12): off by default (one
// address per bind, as before); set, the messenger binds on both stacks and
// advertises the fallback last; the timing options reach MessengerOptions;
// naming the messenger's own stack or no stack is an error that says so.
TEST(Factory, FallbackStackIsOffByDefaultAndBindsBothWhenSet) {
  const std::string rdma = "[global]\nms type = async+rdma\nms async rdma device name = soft0\n"
                           "ms async rdma buffer size = 16K\n";
  const auto any = proto::EntityAddrVec(proto::EntityAddr(proto::AddrType::msgr2, *NetAddress::parse("127.0.0.1:0")));
  EXPECT_EQ(create_fallback_stack(load(rdma), MsType{MsType::Stack::rdma, "rdma"}), nullptr);
  {
    auto m = create_messenger(load(rdma, "osd.0"), Purpose::public_network);
    ASSERT_FALSE(m->bind(any));
    EXPECT_EQ(m->get_myaddrs().addrs.size(), 1u) << m->get_myaddrs().to_string();
  }
  const Config c = load(rdma + "siphon ms fallback type = async+posix\nsiphon ms fallback after = 2.5\n"
                               "siphon ms fallback retry interval = 7\n", "osd.0");
  EXPECT_EQ(messenger_options(c).siphon_ms_fallback_after, std::chrono::milliseconds(2500));
  EXPECT_EQ(messenger_options(c).siphon_ms_fallback_retry_interval, std::chrono::seconds(7));
  auto m = create_messenger(c, Purpose::public_network);
  ASSERT_FALSE(m->bind(any));
  const auto addrs = m->get_myaddrs();
  ASSERT_EQ(addrs.addrs.size(), 2u) << addrs.to_string();
  EXPECT_NE(addrs.addrs[0].addr.port(), addrs.addrs[1].addr.port());
  EXPECT_EQ(addrs.addrs[1].type, proto::AddrType::msgr2);
  m->shutdown();
  m->wait();
  try {
    create_messenger(load(rdma + "siphon ms fallback type = async+rdma\n"), Purpose::public_network);
    FAIL() << "no error for a fallback equal to the primary";
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find("siphon_ms_fallback_type"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace siphon::compat
