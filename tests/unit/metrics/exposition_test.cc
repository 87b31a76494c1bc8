// The Prometheus exposition (msgr/metrics/exposition.h) of a Collection
// built here with each counter type, Ceph's naming rules, the priority
// limits, escaping, one family per name, and the NIC counters read from a
// captured sysfs tree (fixtures/sys) with the shared sysfs reader, through
// the reader compat hands a daemon's endpoint.
#include "msgr/metrics/exposition.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "compat/metrics.h"
#include "rdma/provider/sysfs.h"

namespace siphon::metrics {
namespace {

const std::string kSys = SIPHON_METRICS_FIXTURES "/sys";

enum { w_recv, w_active, w_run, w_lat, w_size, w_hist, w_quiet, w_last };

std::shared_ptr<perf::Logger> worker(const std::string& name,
                                     std::vector<std::pair<std::string, std::string>> labels = {}) {
  perf::LoggerBuilder b(name, w_recv, w_last);
  if (!labels.empty()) b.labels(std::move(labels));
  b.add_u64_counter(w_recv, "msgr_recv_messages", "Network received messages");
  b.add_u64(w_active, "msgr_active_connections", "Active connection number");
  b.add_time(w_run, "msgr_running_total_time", "The total time of thread running");
  b.add_time_avg(w_lat, "msgr_send_messages_queue_lat", "Network sent messages lat");
  b.add_u64_avg(w_size, "msgr_msg_size", "Sizes", {}, perf::kDebugOnly, perf::Unit::bytes);
  perf::HistogramAxis x{"lat", perf::HistogramAxis::Scale::log2, 0, 1000, 8};
  perf::HistogramAxis y{"size", perf::HistogramAxis::Scale::log2, 0, 512, 8};
  b.add_u64_counter_histogram(w_hist, "msgr_hist", x, y, "A histogram");
  b.add_u64_counter(w_quiet, "msgr_quiet", "Never incremented");
  return b.create();
}

// Structure promtool enforces: each family's HELP then TYPE once, before its
// samples, all its samples contiguous; every sample line parses.
void expect_well_formed(const std::string& text) {
  std::istringstream in(text);
  std::string line, current;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(seen.insert(name).second) << "second HELP for " << name;
      current = name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      EXPECT_EQ(line.substr(7, line.find(' ', 7) - 7), current) << line;
      continue;
    }
    const std::string name = line.substr(0, line.find_first_of("{ "));
    EXPECT_EQ(name, current) << "sample outside its family: " << line;
    for (char c : name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':') << line;
    EXPECT_NE(line.rfind(' '), std::string::npos) << line;
  }
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(MetricsNames, CephPromethizeRules) {
  EXPECT_EQ(promethize("AsyncMessenger::Worker-0_msgr_send_bytes"), "AsyncMessenger_Worker_0_msgr_send_bytes");
  EXPECT_EQ(promethize("osd.op_latency"), "osd_op_latency");
  EXPECT_EQ(promethize("prioritycache:kv_pri9_bytes"), "prioritycache:kv_pri9_bytes");
  EXPECT_EQ(promethize("a+b"), "a_plusb");
  EXPECT_EQ(promethize("ops-"), "ops_minus");
  EXPECT_EQ(promethize("a/b c\td"), "a_b_c_d");
  EXPECT_EQ(promethize("throttle-msgr_dispatch_throttler-client"), "throttle_msgr_dispatch_throttler_client");
  EXPECT_EQ(promethize("w\xc3\xa9ird\"name"), "w__ird_name");  // not valid in a name: '_'
  EXPECT_EQ(promethize("0x"), "_0x");
  EXPECT_EQ(label_name("id"), "id");
  EXPECT_EQ(label_name("dev.name"), "dev_name");
  EXPECT_EQ(label_name("1st"), "l1st");
  EXPECT_EQ(label_name("__name__"), "l__name__");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(escape_help("a\"b\\c\nd"), "a\"b\\\\c\\nd");
  EXPECT_EQ(daemon_label("osd.0"), "osd.0");
  EXPECT_EQ(daemon_label("client.admin"), "admin");
  EXPECT_EQ(daemon_label("ceph-client.siphon"), "siphon");
  EXPECT_TRUE(is_messenger_logger("AsyncMessenger::Worker-2"));
  EXPECT_TRUE(is_messenger_logger("Siphon::RDMAStack"));
  EXPECT_TRUE(is_messenger_logger("siphon-messenger-osd.0"));
  EXPECT_FALSE(is_messenger_logger("osd"));
}

TEST(MetricsExposition, EveryCounterTypeAsCephsExportersWriteIt) {
  perf::Collection c;
  auto w = worker("AsyncMessenger::Worker-0");
  c.add(w);
  w->inc(w_recv, 7);
  w->set(w_active, 3);
  w->tinc(w_run, std::chrono::milliseconds(1500));
  w->tinc(w_lat, std::chrono::milliseconds(2));
  w->tinc(w_lat, std::chrono::microseconds(2500));
  w->inc(w_size, 100);
  w->inc(w_size, 300);
  w->hinc(w_hist, 10, 10);
  ExpositionOptions o;
  o.daemon = "osd.0";
  const std::string t = render(c, o);
  expect_well_formed(t);
  const std::string p = "ceph_AsyncMessenger_Worker_0_";
  const std::string l = "{ceph_daemon=\"osd.0\"}";
  // u64 counter -> counter.
  EXPECT_TRUE(has_line(t, "# HELP " + p + "msgr_recv_messages Network received messages")) << t;
  EXPECT_TRUE(has_line(t, "# TYPE " + p + "msgr_recv_messages counter")) << t;
  EXPECT_TRUE(has_line(t, p + "msgr_recv_messages" + l + " 7")) << t;
  // u64 level -> gauge.
  EXPECT_TRUE(has_line(t, "# TYPE " + p + "msgr_active_connections gauge")) << t;
  EXPECT_TRUE(has_line(t, p + "msgr_active_connections" + l + " 3")) << t;
  // time -> seconds, exactly, as the schema's metric_type (gauge).
  EXPECT_TRUE(has_line(t, "# TYPE " + p + "msgr_running_total_time gauge")) << t;
  EXPECT_TRUE(has_line(t, p + "msgr_running_total_time" + l + " 1.500000000")) << t;
  // time average -> _sum (seconds) and _count, both counters, Ceph's HELP suffixes.
  EXPECT_TRUE(has_line(t, "# HELP " + p + "msgr_send_messages_queue_lat_sum Network sent messages lat Total")) << t;
  EXPECT_TRUE(has_line(t, "# TYPE " + p + "msgr_send_messages_queue_lat_sum counter")) << t;
  EXPECT_TRUE(has_line(t, p + "msgr_send_messages_queue_lat_sum" + l + " 0.004500000")) << t;
  EXPECT_TRUE(has_line(t, "# HELP " + p + "msgr_send_messages_queue_lat_count Network sent messages lat Count")) << t;
  EXPECT_TRUE(has_line(t, p + "msgr_send_messages_queue_lat_count" + l + " 2")) << t;
  // u64 average -> _sum in its unit, _count.
  EXPECT_TRUE(has_line(t, p + "msgr_msg_size_sum" + l + " 400")) << t;
  EXPECT_TRUE(has_line(t, p + "msgr_msg_size_count" + l + " 2")) << t;
  // A zero counter is still a series; histograms are left out.
  EXPECT_TRUE(has_line(t, p + "msgr_quiet" + l + " 0")) << t;
  EXPECT_EQ(t.find("msgr_hist"), std::string::npos) << t;
  // No bare family for an average.
  EXPECT_EQ(t.find("# TYPE " + p + "msgr_send_messages_queue_lat "), std::string::npos) << t;
}

TEST(MetricsExposition, PriorityLimitsForOtherLoggersAndTheMessengers) {
  perf::Collection c;
  enum { o_a, o_b, o_last };
  perf::LoggerBuilder b("osd", o_a, o_last);
  b.add_u64_counter(o_a, "op", "Client operations", "ops", perf::kCritical);
  b.add_u64_counter(o_b, "op_debug", "Debug", {}, perf::kUninteresting);
  c.add(b.create());
  c.add(worker("AsyncMessenger::Worker-0"));  // priority 0 everywhere, as Ceph's
  c.add(worker("Siphon::RDMAWorker-0"));
  ExpositionOptions o;
  o.daemon = "osd.0";
  std::string t = render(c, o);  // defaults: 5 for others, 0 for the messenger's loggers
  expect_well_formed(t);
  EXPECT_NE(t.find("\nceph_osd_op{"), std::string::npos) << t;
  EXPECT_EQ(t.find("ceph_osd_op_debug"), std::string::npos) << t;
  EXPECT_NE(t.find("\nceph_AsyncMessenger_Worker_0_msgr_recv_messages{"), std::string::npos) << t;
  EXPECT_NE(t.find("\nceph_Siphon_RDMAWorker_0_msgr_recv_messages{"), std::string::npos) << t;
  // Ceph's exporters' view: the messenger's loggers at 5 too.
  o.msgr_prio_limit = perf::kUseful;
  t = render(c, o);
  EXPECT_EQ(t.find("AsyncMessenger"), std::string::npos) << t;
  EXPECT_EQ(t.find("Siphon_"), std::string::npos) << t;
  EXPECT_NE(t.find("\nceph_osd_op{"), std::string::npos) << t;
  // Everything.
  o.prio_limit = 0;
  o.msgr_prio_limit = 0;
  EXPECT_NE(render(c, o).find("ceph_osd_op_debug{"), std::string::npos);
}

TEST(MetricsExposition, LabeledLoggersAndManyWorkersMakeOneFamilyPerName) {
  perf::Collection c;
  auto a = worker("AsyncMessenger::Worker", {{"id", "0"}});
  auto b = worker("AsyncMessenger::Worker", {{"id", "1"}});
  c.add(a);
  c.add(b);
  a->inc(w_recv, 5);
  b->inc(w_recv, 6);
  ExpositionOptions o;
  o.daemon = "client \"x\"\\y";
  const std::string t = render(c, o);
  expect_well_formed(t);
  const std::string n = "ceph_AsyncMessenger_Worker_msgr_recv_messages";
  EXPECT_TRUE(has_line(t, n + "{ceph_daemon=\"client \\\"x\\\"\\\\y\",id=\"0\"} 5")) << t;
  EXPECT_TRUE(has_line(t, n + "{ceph_daemon=\"client \\\"x\\\"\\\\y\",id=\"1\"} 6")) << t;
}

TEST(MetricsExposition, HelpIsEscapedAndCollidingNamesStayOneValidFamily) {
  perf::Collection c;
  enum { x_a, x_last };
  perf::LoggerBuilder b1("a-b", x_a, x_last);
  b1.add_u64_counter(x_a, "c", "line one\nback\\slash", {}, perf::kCritical);
  perf::LoggerBuilder b2("a.b", x_a, x_last);  // promethizes to the same name
  b2.add_u64(x_a, "c", "a gauge", {}, perf::kCritical);
  c.add(b1.create());
  c.add(b2.create());
  const std::string t = render(c, ExpositionOptions{});
  expect_well_formed(t);
  EXPECT_TRUE(has_line(t, "# HELP ceph_a_b_c line one\\nback\\\\slash")) << t;
  EXPECT_EQ(t.find("# TYPE ceph_a_b_c gauge"), std::string::npos) << t;  // the first source wins
}

TEST(MetricsSysfs, TheSharedReaderListsDevicesAndPortCounters) {
  EXPECT_EQ(rdma::sysfs::list_devices(kSys), (std::vector<std::string>{"mlx5_0", "rxe0"}));
  EXPECT_EQ(rdma::sysfs::device_in_use(kSys, ""), "mlx5_0");  // the first, as the stack picks
  EXPECT_EQ(rdma::sysfs::device_in_use(kSys, "rxe0"), "rxe0");
  EXPECT_EQ(rdma::sysfs::device_in_use(kSys, "mlx5_9"), std::nullopt);
  EXPECT_EQ(rdma::sysfs::device_in_use(kSys, "soft0"), std::nullopt);
  EXPECT_EQ(rdma::sysfs::device_in_use("/nonexistent", ""), std::nullopt);
  const auto cs = rdma::sysfs::read_port_counters(kSys, "mlx5_0", 1);
  std::map<std::string, std::uint64_t> m;
  for (const auto& c : cs) m[c.group + "/" + c.name] = c.value;
  EXPECT_EQ(m.size(), 20u);  // 11 counters, 9 numeric hw_counters (not_a_number left out)
  EXPECT_EQ(m["counters/port_xmit_data"], 1000u);
  EXPECT_EQ(m["hw_counters/rnr_nak_retry_err"], 3u);
  EXPECT_FALSE(m.count("hw_counters/not_a_number"));
  EXPECT_EQ(cs.front().group, "counters");
  EXPECT_EQ(cs.back().group, "hw_counters");
  EXPECT_TRUE(rdma::sysfs::read_port_counters(kSys, "mlx5_0", 2).empty());
  EXPECT_TRUE(rdma::sysfs::read_port_counters(kSys, "../infiniband/mlx5_0", 1).empty());
  EXPECT_TRUE(rdma::sysfs::read_port_counters(kSys, "..", 1).empty());
  EXPECT_EQ(rdma::sysfs::read_port_state(kSys, "mlx5_0", 1), 4u);
  EXPECT_EQ(rdma::sysfs::read_port_state(kSys, "mlx5_0", 2), std::nullopt);
  EXPECT_EQ(rdma::sysfs::read_port_state(kSys, "../infiniband/mlx5_0", 1), std::nullopt);
}

TEST(MetricsExposition, NicPortAndHardwareCountersOfTheDevicesInUse) {
  perf::Collection c;
  ExpositionOptions o;
  o.daemon = "osd.0";
  o.nic_reader = compat::sysfs_nic_reader(kSys);  // what a daemon gets
  o.nic_ports = {{"mlx5_0", 1}, {"rxe0", 1}, {"gone0", 1}};
  const std::string t = render(c, o);
  expect_well_formed(t);
  const std::string m = "{ceph_daemon=\"osd.0\",device=\"mlx5_0\",port=\"1\"}";
  const std::string r = "{ceph_daemon=\"osd.0\",device=\"rxe0\",port=\"1\"}";
  // Data in bytes (the file counts 4-byte words), packets, errors.
  EXPECT_TRUE(has_line(t, "# TYPE ceph_rdma_port_xmit_data_bytes_total counter")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_port_xmit_data_bytes_total" + m + " 4000")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_port_rcv_data_bytes_total" + m + " 10000")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_port_xmit_packets_total" + m + " 40")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_port_rcv_packets_total" + m + " 60")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_port_link_downed_total" + m + " 1")) << t;
  // The driver's: RNR NAK retries, out of sequence, CNPs both ways, out_of_buffer.
  EXPECT_TRUE(has_line(t, "ceph_rdma_hw_rnr_nak_retry_err_total" + m + " 3")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_hw_out_of_sequence_total" + m + " 5")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_hw_np_cnp_sent_total" + m + " 11")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_hw_rp_cnp_handled_total" + m + " 13")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_hw_out_of_buffer_total" + m + " 17")) << t;
  EXPECT_EQ(t.find("lifespan"), std::string::npos) << t;  // a setting, not a counter
  EXPECT_TRUE(has_line(t, "ceph_rdma_port_state" + m + " 4")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_port_sysfs_files" + m + " 20")) << t;
  // rxe: hw_counters only; the same family holds both devices.
  EXPECT_TRUE(has_line(t, "ceph_rdma_hw_sent_pkts_total" + r + " 123")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_hw_link_downed_total" + r + " 0")) << t;
  EXPECT_TRUE(has_line(t, "ceph_rdma_port_sysfs_files" + r + " 8")) << t;
  // A device that is not there: said plainly, nothing else.
  EXPECT_TRUE(has_line(t, "ceph_rdma_port_sysfs_files{ceph_daemon=\"osd.0\",device=\"gone0\",port=\"1\"} 0")) << t;
  EXPECT_EQ(t.find("device=\"gone0\",port=\"1\"} 4"), std::string::npos);
}

}  // namespace
}  // namespace siphon::metrics
