// siphon_metrics_endpoint and its neighbours in the Config, and starting the
// endpoint from a Config as siphon-objd and `siphon-bench server` do: a bad
// value is a load error naming the form, a port in use is a message (the
// daemon keeps running), and the NIC ports follow the stack's device rule.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "compat/config.h"
#include "compat/metrics.h"
#include "http_client.h"

namespace siphon::compat {
namespace {

const std::string kSys = SIPHON_METRICS_FIXTURES "/sys";

Config load(std::string_view text, Diagnostics& d, std::string_view name = "osd.3") {
  ConfigRequest req;
  std::string error;
  req.name = *EntityName::parse(name, error);
  return Config::load_text(text, "test.conf", req, d);
}

TEST(MetricsConfig, OffByDefaultWithCephExporterLimits) {
  Diagnostics d;
  const Config cfg = load("", d);
  EXPECT_FALSE(d.has_errors()) << d.to_string();
  EXPECT_EQ(cfg.get<Opt::siphon_metrics_endpoint>(), "");
  EXPECT_EQ(cfg.get<Opt::siphon_metrics_prio_limit>(), 5);
  EXPECT_EQ(cfg.get<Opt::siphon_metrics_msgr_prio_limit>(), 0);
  std::string message = "x";
  EXPECT_FALSE(start_metrics_endpoint(cfg, message));
  EXPECT_EQ(message, "");
}

TEST(MetricsConfig, ABadEndpointIsALoadErrorThatShowsTheForm) {
  for (const char* bad : {"localhost:9926", "9926", "1.2.3.4:70000"}) {
    Diagnostics d;
    (void)load(std::string("[global]\nsiphon_metrics_endpoint = ") + bad + "\n", d);
    ASSERT_TRUE(d.has_errors()) << bad;
    const std::string e = d.to_string(Severity::error);
    EXPECT_NE(e.find("siphon_metrics_endpoint"), std::string::npos) << e;
    EXPECT_NE(e.find("IP:PORT"), std::string::npos) << e;
  }
  Diagnostics d;
  (void)load("[global]\nsiphon_metrics_prio_limit = 11\n", d);
  EXPECT_TRUE(d.has_errors());
}

TEST(MetricsConfig, StartsFromTheConfigAndAPortInUseIsAMessage) {
  Diagnostics d;
  const Config cfg = load("[osd]\nsiphon_metrics_endpoint = 127.0.0.1:0\n", d);
  ASSERT_FALSE(d.has_errors()) << d.to_string();
  std::string message;
  auto s = start_metrics_endpoint(cfg, message);
  ASSERT_TRUE(s) << message;
  EXPECT_NE(message.find("http://127.0.0.1:" + std::to_string(s->port()) + "/metrics"), std::string::npos) << message;
  EXPECT_NE(message.find("ceph_daemon=\"osd.3\""), std::string::npos) << message;
  const std::string r = metrics::test::request(s->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK", 0), 0u) << r;
  // The same port again: no endpoint, a message naming it and the fix.
  Diagnostics d2;
  const Config cfg2 =
      load("[osd]\nsiphon_metrics_endpoint = 127.0.0.1:" + std::to_string(s->port()) + "\n", d2);
  ASSERT_FALSE(d2.has_errors()) << d2.to_string();
  EXPECT_FALSE(start_metrics_endpoint(cfg2, message));
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(s->port())), std::string::npos) << message;
  EXPECT_NE(message.find("in use"), std::string::npos) << message;
  EXPECT_NE(message.find("running without /metrics"), std::string::npos) << message;
}

TEST(MetricsConfig, NicPortsFollowTheStacksDeviceRule) {
  Diagnostics d;
  EXPECT_TRUE(nic_ports_in_use(load("", d), kSys).empty());  // async+posix
  const Config rdma = load("[global]\nms_type = async+rdma\n", d);
  auto p = nic_ports_in_use(rdma, kSys);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].device, "mlx5_0");
  EXPECT_EQ(p[0].port, 1u);
  p = nic_ports_in_use(load("[global]\nms_type = async+rdma\nms_async_rdma_device_name = rxe0\n", d), kSys);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].device, "rxe0");
  EXPECT_TRUE(nic_ports_in_use(load("[global]\nms_type = async+rdma\nms_async_rdma_device_name = soft0\n", d), kSys)
                  .empty());
  // siphon-bench's embedded default: the stack it runs, not the configured one.
  std::string why;
  const MsType r = *parse_ms_type("async+rdma", why);
  EXPECT_EQ(nic_ports_in_use(load("", d), kSys, &r).size(), 1u);
  const metrics::ExpositionOptions o = exposition_options(load("", d, "client.admin"), kSys, &r);
  EXPECT_EQ(o.daemon, "admin");
  EXPECT_EQ(o.nic_ports.size(), 1u);
  // The wiring end to end: the options a daemon gets read the device's sysfs counters.
  const metrics::ExpositionOptions rx =
      exposition_options(load("[global]\nms_type = async+rdma\nms_async_rdma_device_name = rxe0\n", d), kSys);
  const std::string t = metrics::render(perf::Collection{}, rx);
  EXPECT_NE(t.find("\nceph_rdma_hw_sent_pkts_total{ceph_daemon=\"osd.3\",device=\"rxe0\",port=\"1\"} 123\n"),
            std::string::npos) << t;
  EXPECT_NE(t.find("\nceph_rdma_port_state{ceph_daemon=\"osd.3\",device=\"rxe0\",port=\"1\"} 4\n"),
            std::string::npos) << t;
}

}  // namespace
}  // namespace siphon::compat
