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
  EXPECT_EQ(m.transport.common.async_op_threads, 2u);
  EXPECT_EQ(m.ms_connection_ready_timeout, std::chrono::seconds(7));
  EXPECT_EQ(m.ms_initial_backoff, std::chrono::milliseconds(500));
  EXPECT_EQ(m.transport.bind_port_min, 7000);
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
  for (const proto::FrameLimits& l : {m.transport.common.frame_limits, tcp_options(c).common.frame_limits,
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

}  // namespace
}  // namespace siphon::compat
