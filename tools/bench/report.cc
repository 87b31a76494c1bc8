#include "tools/bench/report.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace siphon::bench {
namespace {

constexpr double kPercentiles[] = {50, 90, 99, 99.9, 99.99};

std::string us(std::uint64_t ns) { return fmt::format("{:.1f}", static_cast<double>(ns) / 1000.0); }

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{}", v);
}

void write_map(std::ostream& os, const std::map<std::string, std::string>& m) {
  os << '{';
  bool first = true;
  for (const auto& [k, v] : m) {
    os << (first ? "" : ",") << json_quote(k) << ':' << json_quote(v);
    first = false;
  }
  os << '}';
}

// A perf counter value as `perf dump` prints it: integers as is, times as
// <sec>.<9 digits>, averages as {"avgcount", "sum"[, "avgtime"]}.
std::string perf_seconds(std::uint64_t ns) { return fmt::format("{}.{:09}", ns / 1000000000u, ns % 1000000000u); }

std::string perf_value(const PerfDeltaEntry& e) {
  const bool time = (e.type & 0x1) != 0;
  if ((e.type & 0x4) != 0) {
    if (!time) return fmt::format("{{\"avgcount\":{},\"sum\":{}}}", e.count, e.value);
    return fmt::format("{{\"avgcount\":{},\"sum\":{},\"avgtime\":{}}}", e.count, perf_seconds(e.value),
                       perf_seconds(e.count != 0 ? e.value / e.count : 0));
  }
  return time ? perf_seconds(e.value) : std::to_string(e.value);
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  return out + '"';
}

SessionAuth Result::auth_summary() const {
  if (sessions.empty()) return {};
  SessionAuth s = sessions.front();
  for (const SessionAuth& x : sessions) {
    if (x.method != s.method) s.method = "mixed";
    if (x.con_mode != s.con_mode) s.con_mode = "mixed";
  }
  return s;
}

namespace {
std::string auth_cell(const Result& r) {
  const SessionAuth a = r.auth_summary();
  return a.method.empty() ? std::string("-") : fmt::format("{} / {}", a.method, a.con_mode);
}
}  // namespace

void write_table(std::ostream& os, const Result& r) {
  if (r.mode == "server") {
    fmt::print(os, "siphon-bench server ({}), {:.2f} s served\n", r.ms_type, r.seconds);
    fmt::print(os, "  {:<22}{:>14}\n", "requests served", r.messages);
    fmt::print(os, "  {:<22}{:>14.1f}\n", "MiB (in + out)", static_cast<double>(r.bytes) / (1024.0 * 1024.0));
    fmt::print(os, "  {:<22}{:>14.2f}\n", "server CPU s", r.server_cpu.total());
    fmt::print(os, "  {:<22}{:>14.2f}\n", "CPU µs/request", r.cpu_us_per_msg());
    fmt::print(os, "  {:<22}{:>14}\n", "bad requests", r.errors);
    if (!r.sessions.empty()) fmt::print(os, "  {:<22}{:>14}\n", "auth / mode", auth_cell(r));
    return;
  }
  fmt::print(os, "siphon-bench {} ({}, {}), {:.2f} s measured\n", r.mode, r.ms_type, r.pattern, r.seconds);
  fmt::print(os, "  {:<22}{:>14}\n", "messages", r.messages);
  fmt::print(os, "  {:<22}{:>14.0f}\n", "msgs/s", r.msgs_per_s());
  fmt::print(os, "  {:<22}{:>14.1f}\n", "MiB/s", r.mib_per_s());
  fmt::print(os, "  {:<22}{:>14.3f}\n", "Gbit/s", r.gbit_per_s());
  // Latency is always request sent -> reply received at the client (one
  // clock); the pattern says which way the payload travelled.
  const char* what = r.pattern == "put-get" ? "request to reply, every operation"
                     : r.pattern == "echo"   ? "round trip, payload both ways"
                     : r.pattern == "sink" ? "round trip, payload client to server"
                                           : "round trip, payload server to client";
  for (double p : kPercentiles)
    fmt::print(os, "  {:<22}{:>14}\n", fmt::format("latency p{} (µs)", p), us(r.latency.percentile(p)));
  fmt::print(os, "  {:<22}{:>14}   ({})\n", "latency max (µs)", us(r.latency.max()), what);
  fmt::print(os, "  {:<22}{:>14.2f}\n", "client CPU s", r.client_cpu.total());
  if (r.mode != "objd") {  // siphon-objd is another process: its CPU is not measured here
    fmt::print(os, "  {:<22}{:>14.2f}\n", "server CPU s", r.server_cpu.total());
    fmt::print(os, "  {:<22}{:>14.2f}\n", "CPU µs/msg", r.cpu_us_per_msg());
  } else {
    fmt::print(os, "  {:<22}{:>14.2f}\n", "client CPU µs/op", r.cpu_us_per_msg());
  }
  fmt::print(os, "  {:<22}{:>14}\n", "errors", r.errors);
  fmt::print(os, "  {:<22}{:>14}\n", "faults / reconnects", fmt::format("{} / {}", r.faults, r.reconnects));
  if (!r.sessions.empty()) fmt::print(os, "  {:<22}{:>14}\n", "auth / mode", auth_cell(r));
  if (r.fallback_switches != 0 || r.primary_switches != 0)
    fmt::print(os, "  {:<22}{:>14}\n", "failover / back", fmt::format("{} / {}", r.fallback_switches, r.primary_switches));
  if (r.crc_errors != 0) fmt::print(os, "  {:<22}{:>14}\n", "frames with bad CRC", r.crc_errors);
  for (const auto& ph : r.phases) {
    const double rate = ph.seconds > 0 ? static_cast<double>(ph.ops) / ph.seconds : 0;
    const double mib = ph.seconds > 0 ? static_cast<double>(ph.bytes) / ph.seconds / (1024.0 * 1024.0) : 0;
    fmt::print(os, "  {:<22}{:>14}   ({:.0f} ops/s, {:.1f} MiB/s, p50 {} µs, p99 {} µs, {} errors)\n",
               fmt::format("{} ops", ph.name), ph.ops, rate, mib, us(ph.latency.percentile(50)),
               us(ph.latency.percentile(99)), ph.errors);
  }
  if (r.verify) {
    const VerifyCounts& v = r.verified;
    fmt::print(os, "  {:<22}{:>14}\n", "verified", v.checked);
    fmt::print(os, "  {:<22}{:>14}\n", "lost", v.lost);
    fmt::print(os, "  {:<22}{:>14}\n", "duplicated", v.duplicated);
    fmt::print(os, "  {:<22}{:>14}\n", "reordered", v.reordered);
    fmt::print(os, "  {:<22}{:>14}\n", "corrupted", v.corrupted);
  }
  if (r.perf_dump) {
    fmt::print(os, "perf counters this run moved (perf dump delta; gauges: value at the end)\n");
    std::string_view logger;
    for (const PerfDeltaEntry& e : r.perf_delta) {
      if (e.logger != logger) fmt::print(os, "  {}\n", logger = e.logger);
      fmt::print(os, "    {:<34}{}\n", e.counter, perf_value(e));
    }
  }
}

void write_compare_table(std::ostream& os, const std::vector<CompareEntry>& runs) {
  constexpr int kW = 16;
  std::string pattern;
  for (const CompareEntry& e : runs)
    if (e.ran) pattern = e.result->pattern;
  fmt::print(os, "siphon-bench compare (loopback, {})\n", pattern.empty() ? "-" : pattern);
  auto row = [&](std::string_view label, const std::function<std::string(const Result&)>& cell) {
    fmt::print(os, "  {:<22}", label);
    for (const CompareEntry& e : runs) fmt::print(os, "{:>{}}", e.ran ? cell(*e.result) : std::string("-"), kW);
    fmt::print(os, "\n");
  };
  fmt::print(os, "  {:<22}", "ms_type");
  for (const CompareEntry& e : runs) fmt::print(os, "{:>{}}", e.ms_type, kW);
  fmt::print(os, "\n");
  if (std::any_of(runs.begin(), runs.end(), [](const CompareEntry& e) { return !e.con_mode.empty(); })) {
    fmt::print(os, "  {:<22}", "mode asked");
    for (const CompareEntry& e : runs) fmt::print(os, "{:>{}}", e.con_mode.empty() ? "-" : e.con_mode, kW);
    fmt::print(os, "\n");
  }
  row("seconds", [](const Result& r) { return fmt::format("{:.2f}", r.seconds); });
  row("messages", [](const Result& r) { return fmt::format("{}", r.messages); });
  row("msgs/s", [](const Result& r) { return fmt::format("{:.0f}", r.msgs_per_s()); });
  row("MiB/s", [](const Result& r) { return fmt::format("{:.1f}", r.mib_per_s()); });
  row("Gbit/s", [](const Result& r) { return fmt::format("{:.3f}", r.gbit_per_s()); });
  for (double p : kPercentiles)
    row(fmt::format("latency p{} (µs)", p), [p](const Result& r) { return us(r.latency.percentile(p)); });
  row("latency max (µs)", [](const Result& r) { return us(r.latency.max()); });
  row("client CPU s", [](const Result& r) { return fmt::format("{:.2f}", r.client_cpu.total()); });
  row("server CPU s", [](const Result& r) { return fmt::format("{:.2f}", r.server_cpu.total()); });
  row("CPU µs/msg", [](const Result& r) { return fmt::format("{:.2f}", r.cpu_us_per_msg()); });
  row("errors", [](const Result& r) { return fmt::format("{}", r.errors); });
  row("faults / reconnects", [](const Result& r) { return fmt::format("{} / {}", r.faults, r.reconnects); });
  row("auth / mode", [](const Result& r) { return auth_cell(r); });
  bool verify = false;
  for (const CompareEntry& e : runs) verify = verify || (e.ran && e.result->verify);
  if (verify) {
    row("verify lost", [](const Result& r) { return fmt::format("{}", r.verified.lost); });
    row("verify duplicated", [](const Result& r) { return fmt::format("{}", r.verified.duplicated); });
    row("verify reordered", [](const Result& r) { return fmt::format("{}", r.verified.reordered); });
    row("verify corrupted", [](const Result& r) { return fmt::format("{}", r.verified.corrupted); });
  }
  for (const CompareEntry& e : runs)
    if (!e.ran)
      fmt::print(os, "  {}{}: not run: {}\n", e.ms_type, e.con_mode.empty() ? "" : " " + e.con_mode, e.error);
}

void write_compare_json(std::ostream& os, const std::vector<CompareEntry>& runs) {
  os << "[\n";
  bool first = true;
  for (const CompareEntry& e : runs) {
    if (!first) os << ",\n";
    first = false;
    if (e.ran) {
      write_json(os, *e.result);
      continue;
    }
    const Result& r = *e.result;
    os << "{\"schema\":\"siphon-bench\",\"schema_version\":" << kJsonSchemaVersion
       << ",\"mode\":" << json_quote(r.mode) << ",\"pattern\":" << json_quote(r.pattern)
       << ",\"ms_type\":" << json_quote(e.ms_type) << ",\"config\":";
    write_map(os, r.config);
    os << ",\"options\":";
    write_map(os, r.options);
    os << ",\"results\":null,\"error\":" << json_quote(e.error) << "}\n";
  }
  os << "]\n";
}

void write_json(std::ostream& os, const Result& r) {
  os << "{\"schema\":\"siphon-bench\",\"schema_version\":" << kJsonSchemaVersion;
  os << ",\"mode\":" << json_quote(r.mode) << ",\"pattern\":" << json_quote(r.pattern)
     << ",\"ms_type\":" << json_quote(r.ms_type);
  os << ",\"config\":";
  write_map(os, r.config);
  os << ",\"options\":";
  write_map(os, r.options);
  os << ",\"results\":{\"seconds\":" << json_number(r.seconds) << ",\"messages\":" << r.messages
     << ",\"bytes\":" << r.bytes << ",\"errors\":" << r.errors
     << ",\"msgs_per_s\":" << json_number(r.msgs_per_s()) << ",\"mib_per_s\":" << json_number(r.mib_per_s())
     << ",\"gbit_per_s\":" << json_number(r.gbit_per_s())
     << ",\"messenger\":{\"faults\":" << r.faults << ",\"reconnects\":" << r.reconnects
     << ",\"crc_errors\":" << r.crc_errors << ",\"fallback_switches\":" << r.fallback_switches
     << ",\"primary_switches\":" << r.primary_switches << '}'
     << ",\"cpu\":{\"client_user_s\":" << json_number(r.client_cpu.user_s)
     << ",\"client_system_s\":" << json_number(r.client_cpu.system_s)
     << ",\"server_user_s\":" << json_number(r.server_cpu.user_s)
     << ",\"server_system_s\":" << json_number(r.server_cpu.system_s)
     << ",\"us_per_msg\":" << json_number(r.cpu_us_per_msg()) << '}';
  os << ",\"latency_ns\":{\"count\":" << r.latency.count() << ",\"min\":" << r.latency.min()
     << ",\"mean\":" << json_number(r.latency.mean()) << ",\"max\":" << r.latency.max()
     << ",\"relative_error\":" << json_number(Histogram::kRelativeError) << ",\"percentiles\":{";
  bool first = true;
  for (double p : {50.0, 90.0, 99.0, 99.9, 99.99}) {
    os << (first ? "" : ",") << json_quote(fmt::format("p{}", p)) << ':' << r.latency.percentile(p);
    first = false;
  }
  os << "},\"buckets\":[";
  first = true;
  for (const auto& b : r.latency.buckets()) {
    os << (first ? "" : ",") << '[' << b.low << ',' << b.high << ',' << b.count << ']';
    first = false;
  }
  os << "]},\"msgs_per_second\":[";
  first = true;
  for (double v : r.msgs_per_second) {
    os << (first ? "" : ",") << json_number(v);
    first = false;
  }
  os << ']';
  if (!r.phases.empty()) {
    os << ",\"phases\":[";
    first = true;
    for (const auto& ph : r.phases) {
      os << (first ? "" : ",") << "{\"name\":" << json_quote(ph.name) << ",\"ops\":" << ph.ops
         << ",\"bytes\":" << ph.bytes << ",\"errors\":" << ph.errors << ",\"seconds\":" << json_number(ph.seconds)
         << ",\"p50_ns\":" << ph.latency.percentile(50) << ",\"p99_ns\":" << ph.latency.percentile(99)
         << ",\"max_ns\":" << ph.latency.max() << '}';
      first = false;
    }
    os << ']';
  }
  if (!r.sessions.empty()) {
    const SessionAuth sum = r.auth_summary();
    os << ",\"auth\":{\"method\":" << json_quote(sum.method) << ",\"con_mode\":" << json_quote(sum.con_mode)
       << ",\"connections\":[";
    first = true;
    for (const SessionAuth& x : r.sessions) {
      os << (first ? "" : ",") << "{\"method\":" << json_quote(x.method) << ",\"con_mode\":" << json_quote(x.con_mode)
         << '}';
      first = false;
    }
    os << "]}";
  }
  if (r.verify) {
    const VerifyCounts& v = r.verified;
    os << ",\"verify\":{\"checked\":" << v.checked << ",\"lost\":" << v.lost
       << ",\"duplicated\":" << v.duplicated << ",\"reordered\":" << v.reordered
       << ",\"corrupted\":" << v.corrupted << '}';
  } else {
    os << ",\"verify\":null";
  }
  if (r.resources.present) {
    auto sample = [&os](const ResourceSample& x) {
      os << "{\"t\":" << json_number(x.t) << ",\"fds\":" << x.fds << ",\"rss_kib\":" << x.rss_kib
         << ",\"stack\":{";
      bool first_counter = true;
      for (const auto& [k, v] : x.stack) {
        os << (first_counter ? "" : ",") << json_quote(k) << ':' << v;
        first_counter = false;
      }
      os << "}}";
    };
    os << ",\"resources\":{\"per_second\":[";
    first = true;
    for (const ResourceSample& x : r.resources.per_second) {
      if (!first) os << ',';
      sample(x);
      first = false;
    }
    os << ']';
    if (r.resources.have_before) {
      os << ",\"before\":";
      sample(r.resources.before);
    }
    if (r.resources.have_after) {
      os << ",\"after\":";
      sample(r.resources.after);
    }
    os << '}';
  }
  if (!r.stack_counters.empty()) {
    os << ",\"stack_counters\":{";
    bool first_counter = true;
    for (const auto& [name, value] : r.stack_counters) {
      os << (first_counter ? "" : ",") << json_quote(name) << ':' << value;
      first_counter = false;
    }
    os << '}';
  }
  if (r.perf_dump) {
    // Grouped by logger as `perf dump` groups them.
    os << ",\"perf_dump_delta\":{";
    std::string_view logger;
    for (const PerfDeltaEntry& e : r.perf_delta) {
      if (e.logger != logger) {
        os << (logger.empty() ? "" : "},") << json_quote(e.logger) << ":{";
        logger = e.logger;
      } else {
        os << ',';
      }
      os << json_quote(e.counter) << ':' << perf_value(e);
    }
    os << (logger.empty() ? "}" : "}}");
  }
  os << "}}\n";
}

void write_svg(std::ostream& os, const Result& r) {
  // Two panels: latency CDF (log-scaled x) and throughput over time.
  constexpr int W = 800, H = 300, M = 50;
  const int pw = W - 2 * M, ph = H - 2 * M;
  fmt::print(os, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n",
             W, 2 * H);
  fmt::print(os, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  // Panel 1: latency CDF.
  fmt::print(os, "<text x=\"{}\" y=\"20\">latency CDF ({}, {}), µs, log scale</text>\n", M, r.ms_type, r.pattern);
  fmt::print(os, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", M, M, pw, ph);
  const auto buckets = r.latency.buckets();
  if (!buckets.empty()) {
    const double lo = std::log10(std::max<double>(1, static_cast<double>(buckets.front().low)));
    const double hi = std::max(lo + 1, std::log10(static_cast<double>(buckets.back().high) + 1));
    std::string path;
    std::uint64_t seen = 0;
    for (const auto& b : buckets) {
      seen += b.count;
      const double x = M + pw * (std::log10(std::max<double>(1, static_cast<double>(b.high))) - lo) / (hi - lo);
      const double y = M + ph - ph * static_cast<double>(seen) / static_cast<double>(r.latency.count());
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", x, y);
    }
    fmt::print(os, "<path d=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n", path);
    for (double d = std::ceil(lo); d <= hi; d += 1) {
      const double x = M + pw * (d - lo) / (hi - lo);
      fmt::print(os, "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x, M + ph + 15,
                 us(static_cast<std::uint64_t>(std::pow(10.0, d))));
    }
    for (double p : kPercentiles) {
      const double y = M + ph - ph * p / 100.0;
      fmt::print(os, "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">p{}</text>\n", M - 4, y + 4, p);
    }
  }
  // Panel 2: throughput per second.
  const int top = H + M;
  fmt::print(os, "<text x=\"{}\" y=\"{}\">{} per second over time</text>\n", M, H + 20,
             r.mode == "rados" ? "ops" : "messages");
  fmt::print(os, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", M, top, pw, ph);
  if (!r.msgs_per_second.empty()) {
    const double peak = std::max(1.0, *std::max_element(r.msgs_per_second.begin(), r.msgs_per_second.end()));
    std::string path;
    const std::size_t n = r.msgs_per_second.size();
    for (std::size_t i = 0; i < n; ++i) {
      const double x = M + pw * (n == 1 ? 0.5 : static_cast<double>(i) / static_cast<double>(n - 1));
      const double y = top + ph - ph * r.msgs_per_second[i] / peak;
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", x, y);
    }
    fmt::print(os, "<path d=\"{}\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>\n", path);
    fmt::print(os, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.0f}</text>\n", M - 4, top + 4, peak);
    fmt::print(os, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>\n", M - 4, top + ph + 4);
    fmt::print(os, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{} s</text>\n", M + pw, top + ph + 15, n);
  }
  os << "</svg>\n";
}

}  // namespace siphon::bench
