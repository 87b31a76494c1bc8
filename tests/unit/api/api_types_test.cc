// The value types of the public API: messages, the registry, policies,
// throttles.
#include <gtest/gtest.h>

#include "msgr/api/messenger.h"
#include "msgr/transport/options.h"

namespace siphon {
namespace {

struct MTest : Message {
  static constexpr std::uint16_t kType = 0x4242;
  MTest() : Message(kType, 3, 2) {}
  std::uint32_t value = 0;
};

TEST(Message, GenericHeaderDefaults) {
  MessageRef m = make_message<Message>(7, 4);
  EXPECT_EQ(m->get_type(), 7);
  EXPECT_EQ(m->get_version(), 4);
  EXPECT_EQ(m->get_compat_version(), 4);  // compat 0 means "= version"
  EXPECT_EQ(m->get_priority(), msg_priority::normal);
  EXPECT_EQ(m->get_seq(), 0u);
  EXPECT_FALSE(m->get_connection());
  m->front().append("abc");
  m->data().append("defg");
  EXPECT_EQ(m->payload_length(), 7u);
}

TEST(MessageRegistry, CreatesRegisteredTypesOnly) {
  MessageRegistry r;
  r.add<MTest>();
  EXPECT_TRUE(r.contains(MTest::kType));
  MessageRef m = r.create(MTest::kType);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->get_version(), 3);
  EXPECT_EQ(m->get_compat_version(), 2);
  EXPECT_NE(dynamic_cast<MTest*>(m.get()), nullptr);
  EXPECT_FALSE(r.create(1));
}

TEST(Policy, NamedPoliciesMatchCeph) {
  const Policy lc = Policy::lossy_client();
  EXPECT_TRUE(lc.lossy);
  EXPECT_FALSE(lc.server);
  const Policy ss = Policy::stateless_server();
  EXPECT_TRUE(ss.lossy && ss.server && !ss.standby && !ss.resetcheck && !ss.register_lossy_clients);
  const Policy sf = Policy::stateful_server();
  EXPECT_TRUE(!sf.lossy && sf.server && sf.standby && sf.resetcheck);
  const Policy lp = Policy::lossless_peer();
  EXPECT_TRUE(!lp.lossy && !lp.server && lp.standby && !lp.resetcheck);
  const Policy lpr = Policy::lossless_peer_reuse();
  EXPECT_TRUE(!lpr.lossy && !lpr.server && lpr.standby && lpr.resetcheck);
  const Policy lcl = Policy::lossless_client(kFeatureMsgAddr2);
  EXPECT_TRUE(!lcl.lossy && !lcl.server && !lcl.standby && lcl.resetcheck);
  EXPECT_EQ(lcl.features_required, kFeatureMsgAddr2);
  EXPECT_EQ(lcl.features_supported, kFeaturesAllPacific);
}

TEST(Throttle, TakesUpToMaxButLetsALoneOversizedItemThrough) {
  Throttle t("bytes", 100);
  EXPECT_TRUE(t.try_take(60));
  EXPECT_FALSE(t.try_take(50));
  EXPECT_TRUE(t.try_take(40));
  EXPECT_EQ(t.current(), 100u);
  t.put(100);
  EXPECT_TRUE(t.try_take(500));  // alone: passes
  EXPECT_FALSE(t.try_take(1));
  t.put(500);
  EXPECT_EQ(t.current(), 0u);
  EXPECT_EQ(t.peak(), 500u);
}

TEST(MessengerOptions, CephDefaults) {
  const MessengerOptions o;
  EXPECT_EQ(o.ms_connection_ready_timeout, std::chrono::seconds(10));
  EXPECT_EQ(o.ms_connection_idle_timeout, std::chrono::seconds(900));
  EXPECT_EQ(o.ms_initial_backoff, std::chrono::milliseconds(200));
  EXPECT_EQ(o.ms_max_backoff, std::chrono::seconds(15));
  EXPECT_EQ(o.ms_dispatch_throttle_bytes, 100u << 20);
  // ms_async_op_threads is the stack's (transport::TransportOptions), not the
  // messenger's: MessengerOptions carries no transport settings.
  EXPECT_EQ(transport::TransportOptions{}.async_op_threads, 3u);
}

}  // namespace
}  // namespace siphon
