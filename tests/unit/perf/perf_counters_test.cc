// The perf counter library against Ceph's observed shapes
// (../shared/reference/observability.md §2.4, §2.5, §3.2, §3.3, §3.6, §3.8).
#include "msgr/perf/perf_counters.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace siphon::perf {
namespace {

using ojson = nlohmann::ordered_json;

enum { l_first = 100, l_msgs, l_bytes, l_conns, l_time, l_lat, l_keys, l_hist, l_last };

std::shared_ptr<Logger> make_logger(const std::string& name, bool shared = false) {
  LoggerBuilder b(name, l_first + 1, l_last);
  if (shared) b.shared();
  b.add_u64_counter(l_msgs, "msgr_recv_messages", "Network received messages");
  b.add_u64_counter(l_bytes, "msgr_recv_bytes", "Network received bytes", "rb", kUseful, Unit::bytes);
  b.add_u64(l_conns, "msgr_active_connections", "Active connection number");
  b.add_time(l_time, "msgr_running_total_time", "The total time of thread running");
  b.add_time_avg(l_lat, "msgr_send_messages_queue_lat", "Network sent messages lat", "lat", kInteresting);
  b.add_u64_avg(l_keys, "begin_keys", "Keys in transaction on begin");
  b.add_u64_counter_histogram(l_hist, "op_latency_in_bytes_histogram",
                              {"Latency (usec)", HistogramAxis::Scale::log2, 0, 100000, 32},
                              {"Request size (bytes)", HistogramAxis::Scale::log2, 0, 512, 32},
                              "Histogram of operation latency");
  return b.create();
}

TEST(PerfSchema, SevenKeysInCephsOrderWithCephsTypes) {
  Collection c;
  c.add(make_logger("AsyncMessenger::Worker-0"));
  const auto s = ojson::parse(c.perf_schema());
  const auto& w = s.at("AsyncMessenger::Worker-0");
  ASSERT_EQ(w.size(), 6u) << "histograms appear only in `perf histogram schema`";
  std::vector<std::string> keys;
  for (const auto& [k, v] : w.at("msgr_recv_bytes").items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"type", "metric_type", "value_type", "description", "nick",
                                            "priority", "units"}));
  struct Want {
    const char* name;
    int type;
    const char* metric;
    const char* value;
  };
  for (const Want& want : {Want{"msgr_recv_messages", 10, "counter", "integer"},
                           Want{"msgr_active_connections", 2, "gauge", "integer"},
                           Want{"msgr_running_total_time", 1, "gauge", "real"},
                           Want{"msgr_send_messages_queue_lat", 5, "gauge", "real-integer-pair"},
                           Want{"begin_keys", 6, "gauge", "integer-integer-pair"}}) {
    SCOPED_TRACE(want.name);
    const auto& e = w.at(want.name);
    EXPECT_EQ(e.at("type"), want.type);
    EXPECT_EQ(e.at("metric_type"), want.metric);
    EXPECT_EQ(e.at("value_type"), want.value);
  }
  EXPECT_EQ(w.at("msgr_recv_bytes").at("units"), "bytes");
  EXPECT_EQ(w.at("msgr_recv_bytes").at("priority"), 5);
  EXPECT_EQ(w.at("msgr_recv_bytes").at("nick"), "rb");
  EXPECT_EQ(w.at("msgr_recv_messages").at("nick"), "");
  EXPECT_EQ(w.at("msgr_recv_messages").at("units"), "none");

  const auto hs = ojson::parse(c.histogram_schema());
  const auto& h = hs.at("AsyncMessenger::Worker-0").at("op_latency_in_bytes_histogram");
  EXPECT_EQ(h.at("type"), 26);
  EXPECT_EQ(h.at("metric_type"), "counter");
  EXPECT_EQ(h.at("value_type"), "integer-2d-histogram");
}

TEST(PerfDump, ValuesFormattedAsCephPrintsThem) {
  Collection c;
  auto l = make_logger("w");
  c.add(l);
  l->inc(l_msgs, 3);
  l->inc(l_bytes, 4096);
  l->inc(l_conns);
  l->inc(l_conns);
  l->dec(l_conns);
  l->tinc(l_time, std::chrono::nanoseconds(4'692'512'899));
  l->tinc(l_lat, std::chrono::microseconds(100));
  l->tinc(l_lat, std::chrono::microseconds(300));
  l->inc(l_keys, 120);
  l->inc(l_keys, 243);
  const std::string raw = c.perf_dump();
  // Times are unquoted <sec>.<9 digits> (Python would re-print 0.0).
  EXPECT_NE(raw.find("\"msgr_running_total_time\":4.692512899"), std::string::npos) << raw;
  EXPECT_NE(raw.find("{\"avgcount\":2,\"sum\":0.000400000,\"avgtime\":0.000200000}"), std::string::npos) << raw;
  EXPECT_NE(raw.find("\"begin_keys\":{\"avgcount\":2,\"sum\":363}"), std::string::npos) << raw;
  const auto d = ojson::parse(raw).at("w");
  EXPECT_EQ(d.at("msgr_recv_messages"), 3);
  EXPECT_EQ(d.at("msgr_recv_bytes"), 4096);
  EXPECT_EQ(d.at("msgr_active_connections"), 1);
  // Registration order, not alphabetical.
  std::vector<std::string> keys;
  for (const auto& [k, v] : d.items()) keys.push_back(k);
  EXPECT_EQ(keys.front(), "msgr_recv_messages");
  EXPECT_EQ(keys.back(), "begin_keys");
}

TEST(PerfDump, FiltersAndUnknownNamesAsCeph) {
  Collection c;
  auto b = make_logger("b");
  auto a = make_logger("a");
  c.add(b);
  c.add(a);
  a->inc(l_msgs, 7);
  EXPECT_EQ(c.perf_dump().substr(0, 6), "{\"a\":{") << "loggers sorted by name";
  EXPECT_EQ(c.perf_dump({"a", "msgr_recv_messages"}), "{\"a\":{\"msgr_recv_messages\":7}}");
  EXPECT_EQ(c.perf_dump({"nosuch", std::nullopt}), "{}");
  EXPECT_EQ(c.perf_dump({"a", "nosuch"}), "{\"a\":{}}");
  DumpFilter useful;
  useful.min_priority = kUseful;
  const auto d = ojson::parse(c.perf_dump(useful)).at("a");
  EXPECT_EQ(d.size(), 2u);  // msgr_recv_bytes (5) and the latency (8)
}

TEST(PerfReset, ZeroesAllButPureGaugesAndLevelsNeverWrap) {
  Collection c;
  auto l = make_logger("w");
  c.add(l);
  l->inc(l_msgs, 5);
  l->inc(l_conns, 2);
  l->tinc(l_lat, std::chrono::milliseconds(1));
  l->tinc(l_time, std::chrono::seconds(1));
  l->hinc(l_hist, 150000, 600);
  EXPECT_FALSE(c.reset(std::string("nosuch")));
  ASSERT_TRUE(c.reset(std::nullopt));
  EXPECT_EQ(l->get(l_msgs).u64, 0u);
  EXPECT_EQ(l->get(l_conns).u64, 2u) << "a level (type 2) survives reset";
  EXPECT_EQ(l->get(l_lat).u64, 0u);
  EXPECT_EQ(l->get(l_lat).count, 0u);
  EXPECT_EQ(l->get(l_time).u64, 0u);
  EXPECT_EQ(l->get(l_hist).histogram[2][2], 0u);
  // Both connections close after the reset: the level goes to 0, not 2^64-2.
  l->dec(l_conns);
  l->dec(l_conns);
  l->dec(l_conns);
  EXPECT_EQ(l->get(l_conns).u64, 0u);
  l->inc(l_msgs);
  l->tinc(l_lat, std::chrono::microseconds(5));
  EXPECT_EQ(l->get(l_msgs).u64, 1u);
  EXPECT_EQ(l->get(l_lat).count, 1u);
  EXPECT_EQ(l->get(l_lat).u64, 5000u);
  ASSERT_TRUE(c.reset(std::string("w")));
  EXPECT_EQ(l->get(l_msgs).u64, 0u);
}

TEST(PerfCollection, SecondInstanceOfANameGetsAStableSuffix) {
  Collection c;
  auto one = make_logger("objecter");
  auto two = make_logger("objecter");
  auto three = make_logger("objecter");
  c.add(one);
  c.add(two);
  c.add(two);  // adding twice is a no-op
  c.add(three);
  // The first keeps Ceph's name; the others are numbered, never addressed.
  EXPECT_EQ(one->name(), "objecter");
  EXPECT_EQ(two->name(), "objecter-2");
  EXPECT_EQ(three->name(), "objecter-3");
  EXPECT_EQ(ojson::parse(c.perf_dump()).size(), 3u);
  c.remove(one.get());
  EXPECT_EQ(ojson::parse(c.perf_dump()).size(), 2u);
}

TEST(PerfCollection, SecondInstanceOfANameIsToldApartByItsRole) {
  Collection c;
  auto pub = make_logger("siphon-messenger-osd.0");
  auto cluster = make_logger("siphon-messenger-osd.0");
  auto again = make_logger("siphon-messenger-osd.0");
  auto unique = make_logger("siphon-messenger-osd.1");
  c.add(pub, "public");
  c.add(cluster, "cluster");
  c.add(again, "cluster");  // the role's name is taken: numbered instead
  c.add(unique, "cluster");
  EXPECT_EQ(pub->name(), "siphon-messenger-osd.0");  // alone with its name: exactly Ceph's
  EXPECT_EQ(cluster->name(), "siphon-messenger-osd.0-cluster");
  EXPECT_EQ(again->name(), "siphon-messenger-osd.0-2");
  EXPECT_EQ(unique->name(), "siphon-messenger-osd.1");
}

TEST(PerfCollection, LabeledLoggersOnlyInCounterDumpWithSchemaInLockstep) {
  Collection c;
  for (const char* id : {"1", "0"}) {
    LoggerBuilder b("AsyncMessenger::Worker", 0, 2);
    b.labels({{"id", id}});
    b.add_u64_counter(0, "msgr_connection_ready_timeouts", "Number of not yet ready connections declared as dead",
                      {}, kUseful);
    b.add_u64_counter(1, "msgr_connection_idle_timeouts", "Number of connections closed due to idleness", {},
                      kUseful);
    auto l = b.create();
    l->inc(0, id[0] == '1' ? 11 : 10);
    c.add(l);
  }
  c.add(make_logger("osd"));
  EXPECT_EQ(ojson::parse(c.perf_dump()).size(), 1u) << "labeled loggers stay out of `perf dump`";
  const auto d = ojson::parse(c.counter_dump());
  const auto s = ojson::parse(c.counter_schema());
  const auto& w = d.at("AsyncMessenger::Worker");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].at("labels").at("id"), "0");
  EXPECT_EQ(w[0].at("counters").at("msgr_connection_ready_timeouts"), 10);
  EXPECT_EQ(w[1].at("labels").at("id"), "1");
  EXPECT_EQ(w[1].at("counters").at("msgr_connection_ready_timeouts"), 11);
  EXPECT_EQ(s.at("AsyncMessenger::Worker")[1].at("labels").at("id"), "1");
  EXPECT_EQ(s.at("AsyncMessenger::Worker")[1].at("counters").at("msgr_connection_idle_timeouts").at("priority"), 5);
  EXPECT_EQ(d.at("osd")[0].at("labels"), ojson::object());
  EXPECT_FALSE(d.at("osd")[0].at("counters").contains("op_latency_in_bytes_histogram"));
}

TEST(PerfHistogram, BucketsAndRangesAsCeph) {
  Collection c;
  auto l = make_logger("osd");
  c.add(l);
  l->hinc(l_hist, -5, 0);            // below min: bucket 0 on x; size 0: bucket 1
  l->hinc(l_hist, 850000, 4096);     // 800000..1599999 → bucket 5; 4096..8191 → bucket 5
  l->hinc(l_hist, INT64_MAX, 1);     // the open last bucket
  const auto d = ojson::parse(c.histogram_dump()).at("osd").at("op_latency_in_bytes_histogram");
  const auto& x = d.at("axes")[0];
  EXPECT_EQ(x.at("scale_type"), "log2");
  const auto& r = x.at("ranges");
  ASSERT_EQ(r.size(), 32u);
  EXPECT_EQ(r[0], ojson::parse(R"({"max":-1})"));
  EXPECT_EQ(r[1], ojson::parse(R"({"min":0,"max":99999})"));
  EXPECT_EQ(r[2], ojson::parse(R"({"min":100000,"max":199999})"));
  EXPECT_EQ(r[3], ojson::parse(R"({"min":200000,"max":399999})"));
  EXPECT_EQ(r[31], ojson::parse(R"({"min":53687091200000})"));
  const auto& v = d.at("values");
  ASSERT_EQ(v.size(), 32u);
  EXPECT_EQ(v[0][1], 1);
  EXPECT_EQ(v[5][5], 1);
  EXPECT_EQ(v[31][1], 1);
  // Loggers without histograms still appear, empty.
  c.add(make_logger("cct"));
  EXPECT_EQ(ojson::parse(c.histogram_dump()).at("osd").size(), 1u);
}

TEST(PerfConcurrency, AverageIsReadAsAConsistentPair) {
  auto l = make_logger("w");
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load(std::memory_order_relaxed)) l->inc(l_keys, 3);
  });
  std::uint64_t reads = 0;
  while (reads < 200000) {
    const Value v = l->get(l_keys);
    ASSERT_EQ(v.u64, 3 * v.count) << "after " << reads << " reads";
    ++reads;
  }
  stop = true;
  writer.join();
}

TEST(PerfConcurrency, SharedLoggerCountsEveryWriter) {
  auto l = make_logger("shared", /*shared=*/true);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) {
        l->inc(l_msgs);
        l->tinc(l_lat, std::chrono::nanoseconds(2));
        l->inc(l_conns);
        l->dec(l_conns);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(l->get(l_msgs).u64, 200000u);
  EXPECT_EQ(l->get(l_lat).count, 200000u);
  EXPECT_EQ(l->get(l_lat).u64, 400000u);
  EXPECT_EQ(l->get(l_conns).u64, 0u);
}

TEST(PerfSwitch, DisabledCountersDoNotMove) {
  auto l = make_logger("w");
  set_enabled(false);
  l->inc(l_msgs);
  l->hinc(l_hist, 1, 1);
  set_enabled(true);
  EXPECT_EQ(l->get(l_msgs).u64, 0u);
  l->inc(l_msgs);
  EXPECT_EQ(l->get(l_msgs).u64, 1u);
}

TEST(PerfBuilder, ProgrammingErrorsThrowAndNicksAreCut) {
  LoggerBuilder gap("gap", 0, 3);
  gap.add_u64(0, "a", "a");
  gap.add_u64(2, "c", "c");
  EXPECT_THROW(gap.create(), std::logic_error);
  LoggerBuilder b("b", 0, 1);
  EXPECT_THROW(b.add_u64(1, "out", "of range"), std::logic_error);
  b.add_u64(0, "x", "x", "toolong");
  EXPECT_THROW(b.add_u64(0, "again", "twice"), std::logic_error);
  EXPECT_EQ(b.create()->info(0).nick, "tool");
  auto l = make_logger("w");
  l->inc(l_last + 5);  // outside the range: ignored, never a crash
  EXPECT_THROW(l->info(l_last), std::out_of_range);
}

TEST(PerfVisit, ExportersSeeEveryCounterAboveTheThreshold) {
  Collection c;
  auto l = make_logger("w");
  c.add(l);
  l->inc(l_bytes, 9);
  std::vector<std::string> seen;
  DumpFilter f;
  f.min_priority = kUseful;
  c.visit(f, [&](const Logger& lg, const CounterInfo& ci, const Value& v) {
    EXPECT_EQ(lg.name(), "w");
    if (ci.name == "msgr_recv_bytes") {
      EXPECT_EQ(v.u64, 9u);
    }
    seen.push_back(ci.name);
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"msgr_recv_bytes", "msgr_send_messages_queue_lat"}));
}

}  // namespace
}  // namespace siphon::perf
