// `config set` through the admin socket's request path: the TCP stack's
// fault injection changes on running messengers (faults start, and stop
// again at 0), and the options that cannot change live are refused with
// the reason and the fix.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "compat/admin.h"
#include "messenger_conf_util.h"
#include "msgr/base/log.h"
#include "msgr/transport/tcp_stack.h"
#include "msgr_test_util.h"

namespace siphon::compat {
namespace {

std::string set_request(const std::string& var, const std::string& val) {
  return nlohmann::json({{"prefix", "config set"}, {"var", var}, {"val", {val}}}).dump();
}

std::uint64_t injected(const transport::TcpStack& a, const transport::TcpStack& b) {
  return a.injection_counters().socket_failures.load() + b.injection_counters().socket_failures.load();
}
std::uint64_t rolled(const transport::TcpStack& a, const transport::TcpStack& b) {
  return a.injection_counters().socket_ops.load() + b.injection_counters().socket_ops.load();
}

TEST(ConfigSetLive, InjectedSocketFailuresStartAndStopOnRunningMessengers) {
  const siphon::test::QuietLogs quiet{log::Subsys::session, log::Subsys::transport};  // faults by design
  admin::AdminSocket sock;
  auto rc = std::make_shared<RuntimeConfig>(test::load("[global]\n", "osd.0"));
  register_config_commands(sock, rc);

  {
    // Two TCP stacks started without injection, a lossless session between
    // them (all in this scope: the dispatchers keep connections, which keep
    // their stacks, until they go).
    auto server_stack = transport::make_tcp_stack(siphon::test::test_stack_options(1));
    auto client_stack = transport::make_tcp_stack(siphon::test::test_stack_options(1));
    const auto& st = dynamic_cast<const transport::TcpStack&>(*server_stack);
    const auto& ct = dynamic_cast<const transport::TcpStack&>(*client_stack);
    siphon::test::RecordingDispatcher sd, cd;
    auto server = Messenger::create(server_stack, {entity_type::osd, 0}, siphon::test::test_options());
    auto client = Messenger::create(client_stack, {entity_type::osd, 1}, siphon::test::test_options());
    server->set_policy(entity_type::osd, Policy::stateful_server());
    client->set_policy(entity_type::osd, Policy::lossless_client());
    ASSERT_NO_FATAL_FAILURE(siphon::test::start_pair(*server, sd, *client, cd));
    ConnectionRef conn = client->connect_to(entity_type::osd, server->get_myaddrs());
    std::uint64_t sent = 0;
    auto send = [&](int n) {
      for (int i = 0; i < n; ++i, ++sent) ASSERT_FALSE(conn->send_message(make_message<Message>(0x7001)));
    };
    auto all_arrived = [&] {
      return siphon::test::eventually([&] {
        std::lock_guard l(sd.w.mu);
        return sd.messages == sent;
      }, std::chrono::seconds(60));
    };
    ASSERT_NO_FATAL_FAILURE(send(50));
    ASSERT_TRUE(all_arrived());
    EXPECT_EQ(rolled(st, ct), 0u);  // off: no socket operation is even rolled for

    // On: one socket operation in 10 fails, on both stacks, from now on.
    EXPECT_EQ(nlohmann::json::parse(sock.execute(set_request("ms_inject_socket_failures", "10"))),
              nlohmann::json::parse(R"({"success": ""})"));
    EXPECT_EQ(rc->value_string(Opt::ms_inject_socket_failures), "10");
    const std::uint64_t faults_before = client->stats().faults + server->stats().faults;
    ASSERT_TRUE(siphon::test::eventually([&] {
      send(5);
      return injected(st, ct) >= 3;
    }, std::chrono::seconds(60)))
        << "no injected failure after " << sent << " messages";
    EXPECT_GT(client->stats().faults + server->stats().faults, faults_before);

    // Off again: the lossless session delivers everything, and no socket
    // operation is rolled for any more.
    EXPECT_EQ(nlohmann::json::parse(sock.execute(set_request("ms_inject_socket_failures", "0"))),
              nlohmann::json::parse(R"({"success": ""})"));
    ASSERT_TRUE(all_arrived()) << sd.messages << " of " << sent;
    const std::uint64_t rolled_after = rolled(st, ct), injected_after = injected(st, ct);
    ASSERT_NO_FATAL_FAILURE(send(100));
    ASSERT_TRUE(all_arrived());
    EXPECT_EQ(rolled(st, ct), rolled_after);
    EXPECT_EQ(injected(st, ct), injected_after);

    client->shutdown();
    server->shutdown();
    client->wait();
    server->wait();
  }
  // No TCP stack left in the process: accepted, and the reply says so.
  const auto none = nlohmann::json::parse(sock.execute(set_request("ms_inject_delay_probability", "0.5")));
  EXPECT_NE(none["success"].get<std::string>().find("no TCP stack is running"), std::string::npos) << none;
  EXPECT_EQ(rc->value_string(Opt::ms_inject_delay_probability), "0.500000");
}

TEST(ConfigSetLive, OptionsThatCannotChangeAreRefusedWithTheReason) {
  admin::AdminSocket sock;
  auto rc = std::make_shared<RuntimeConfig>(test::load("[global]\n", "osd.0"));
  register_config_commands(sock, rc);
  const struct {
    const char* var;
    const char* val;
    const char* why;
  } cases[] = {
      {"ms_inject_seed", "7", "fault stream from the seed when it starts"},
      {"ms_inject_internal_delays", "1", "no internal race points"},
      {"ms_async_rdma_soft_inject_link_drop_probability", "0.1", "software fabric reads its fault plan"},
      {"ms_type", "async+rdma", "cannot change while the daemon runs"},
  };
  for (const auto& c : cases) {
    const std::string r = sock.execute(set_request(c.var, c.val));
    EXPECT_EQ(r.rfind("ERROR: (1) Operation not permitted", 0), 0u) << r;
    EXPECT_NE(r.find(c.why), std::string::npos) << r;
    EXPECT_NE(r.find("restart the daemon"), std::string::npos) << r;
    EXPECT_FALSE(rc->overridden(*find_option(c.var))) << c.var;
  }
  // Out of range for the transport: refused, not truncated.
  const std::string big = sock.execute(set_request("ms_inject_socket_failures", "4294967296"));
  EXPECT_EQ(big.rfind("ERROR: (22) Invalid argument", 0), 0u) << big;
  // A malformed value: the option's own parse error.
  const std::string bad = sock.execute(set_request("ms_inject_delay_probability", "often"));
  EXPECT_EQ(bad.rfind("ERROR: (22) Invalid argument", 0), 0u) << bad;
}

}  // namespace
}  // namespace siphon::compat
