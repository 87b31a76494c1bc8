#include "tools/bench/rados_print.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace siphon::bench::rados::detail {
namespace {

std::string g(double v) { return fmt::format("{:g}", v); }
// rados bench's JSON numbers: printf %f and %d, as strings.
std::string f(double v) { return fmt::format("{:.6f}", v); }
std::string d(std::uint64_t v) { return fmt::format("{}", v); }

std::string escaped(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

constexpr const char* kHeader = "  sec Cur ops   started  finished  avg MB/s  cur MB/s last lat(s)  avg lat(s)\n";

}  // namespace

std::string local_time() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char date[32] = {}, zone[8] = {};
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  std::strftime(zone, sizeof zone, "%z", &tm);
  return fmt::format("{}.{:06}{}", date, us, zone);
}

void Printer::text(std::string_view line) {
  if (json_) return;
  if (show_time_) out_ << local_time() << ' ';
  out_ << line;
}

void Printer::note(std::string_view line) {
  if (show_time_) err_ << local_time() << ' ';
  err_ << line;
}

void Printer::open() {
  if (opened_) return;
  out_ << '{';
  opened_ = true;
}

void Printer::key(std::string_view k, std::string_view v) {
  open();
  if (keys_) out_ << ',';
  fmt::print(out_, "\"{}\":\"{}\"", k, escaped(v));
  keys_ = true;
}

void Printer::write_header(const Options& o, std::uint64_t object_size, std::string_view prefix) {
  if (!json_) {
    text(fmt::format(
        "Maintaining {} concurrent writes of {} bytes to objects of size {} for up to {} seconds or {} objects\n",
        o.concurrency, o.op_size, object_size, g(o.seconds), o.max_objects));
    text(fmt::format("Object prefix: {}\n", prefix));
    return;
  }
  key("concurrent_ios", d(o.concurrency));
  key("object_size", d(object_size));
  key("op_size", d(o.op_size));
  key("seconds_to_run", g(o.seconds));
  key("max_objects", d(o.max_objects));
  key("object_prefix", prefix);
}

void Printer::table_start() {
  if (!json_) return text(kHeader);
  open();
  if (keys_) out_ << ',';
  out_ << "\"datas\":[";
  keys_ = true;
  in_table_ = true;
  first_sample_ = true;
  out_.flush();
}

void Printer::table_repeat(double min_lat, double max_lat, double avg_lat) {
  if (json_) return;
  // rados bench stamps this line whether or not --show-time is given.
  fmt::print(out_, "{} min lat: {} max lat: {} avg lat: {}\n", local_time(), g(min_lat), g(max_lat), g(avg_lat));
  text(kHeader);
}

void Printer::sample(const Sample& s) {
  if (!json_) {
    return text(fmt::format("{:>5} {:>7} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}\n", s.sec, s.cur_ops, s.started,
                            s.finished, g(s.avg_bw), g(s.cur_bw), s.last_lat < 0 ? std::string("-") : g(s.last_lat),
                            g(s.avg_lat)));
  }
  if (!first_sample_) out_ << ',';
  first_sample_ = false;
  fmt::print(out_,
             "{{\"sec\":\"{}\",\"cur_ops\":\"{}\",\"started\":\"{}\",\"finished\":\"{}\",\"avg_bw\":\"{}\","
             "\"cur_bw\":\"{}\",\"last_lat\":\"{}\",\"avg_lat\":\"{}\"}}",
             s.sec, s.cur_ops, s.started, s.finished, f(s.avg_bw), f(s.cur_bw), f(s.last_lat < 0 ? 0 : s.last_lat),
             f(s.avg_lat));
  out_.flush();
}

void Printer::close_table() {
  if (!in_table_) return;
  out_ << ']';
  in_table_ = false;
}

void Printer::summary(const Result& r) {
  const double avg_lat = r.latency_ns.count() ? r.latency_ns.mean() / 1e9 : 0;
  const double max_lat = static_cast<double>(r.latency_ns.max()) / 1e9;
  const double min_lat = static_cast<double>(r.latency_ns.min()) / 1e9;
  if (!json_) {
    // One block, stamped once, as rados bench writes it.
    if (r.mode == Mode::write) {
      text(fmt::format(
          "Total time run:         {}\nTotal writes made:      {}\nWrite size:             {}\n"
          "Object size:            {}\nBandwidth (MB/sec):     {}\nStddev Bandwidth:       {}\n"
          "Max bandwidth (MB/sec): {}\nMin bandwidth (MB/sec): {}\nAverage IOPS:           {}\n"
          "Stddev IOPS:            {}\nMax IOPS:               {}\nMin IOPS:               {}\n"
          "Average Latency(s):     {}\nStddev Latency(s):      {}\nMax latency(s):         {}\n"
          "Min latency(s):         {}\n",
          g(r.seconds), r.ops, r.op_size, r.object_size, g(r.bandwidth_mib), g(r.bandwidth_stddev),
          g(r.bandwidth_max), g(r.bandwidth_min), r.iops_average, g(r.iops_stddev), r.iops_max, r.iops_min,
          g(avg_lat), g(r.latency_stddev_s), g(max_lat), g(min_lat)));
    } else {
      text(fmt::format(
          "Total time run:       {}\nTotal reads made:     {}\nRead size:            {}\n"
          "Object size:          {}\nBandwidth (MB/sec):   {}\nAverage IOPS:         {}\n"
          "Stddev IOPS:          {}\nMax IOPS:             {}\nMin IOPS:             {}\n"
          "Average Latency(s):   {}\nMax latency(s):       {}\nMin latency(s):       {}\n",
          g(r.seconds), r.ops, r.op_size, r.object_size, g(r.bandwidth_mib), r.iops_average, g(r.iops_stddev),
          r.iops_max, r.iops_min, g(avg_lat), g(max_lat), g(min_lat)));
    }
    return;
  }
  close_table();
  const bool w = r.mode == Mode::write;
  key("total_time_run", f(r.seconds));
  key(w ? "total_writes_made" : "total_reads_made", d(r.ops));
  key(w ? "write_size" : "read_size", d(r.op_size));
  key("object_size", d(r.object_size));
  key("bandwidth", f(r.bandwidth_mib));
  if (w) {
    key("stddev_bandwidth", f(r.bandwidth_stddev));
    key("max_bandwidth", f(r.bandwidth_max));
    key("min_bandwidth", f(r.bandwidth_min));
  }
  key("average_iops", d(r.iops_average));
  key("stddev_iops", f(r.iops_stddev));
  key("max_iops", d(r.iops_max));
  key("min_iops", d(r.iops_min));
  key("average_latency", f(avg_lat));
  if (w) key("stddev_latency", f(r.latency_stddev_s));
  key("max_latency", f(max_lat));
  key("min_latency", f(min_lat));
  out_.flush();
}

void Printer::finish(const Result& r) {
  const auto& h = r.latency_ns;
  const double ops = static_cast<double>(r.ops);
  const auto per_op = [&](std::uint64_t ns) { return static_cast<double>(ns) / 1e3 / ops; };
  if (!json_) {
    if (r.ops == 0) return;
    text(fmt::format("Latency p50/p90/p99/p99.9/p99.99(s): {} {} {} {} {}\n", g(h.percentile(50) / 1e9),
                     g(h.percentile(90) / 1e9), g(h.percentile(99) / 1e9), g(h.percentile(99.9) / 1e9),
                     g(h.percentile(99.99) / 1e9)));
    text(fmt::format("Client CPU per op (us):  {} (user {}, system {})\n", g(per_op(r.cpu.total_ns())),
                     g(per_op(r.cpu.user_ns)), g(per_op(r.cpu.system_ns))));
    if (r.verify_failures) text(fmt::format("Verify failures:        {}\n", r.verify_failures));
    return;
  }
  if (closed_) return;
  close_table();
  if (r.error != 0) {
    key("error", fmt::format("{}", r.error));
    key("error_message", r.error_message);
  }
  // Siphon's additions, after rados bench's keys.
  if (r.ops > 0) {
    key("latency_p50", f(static_cast<double>(h.percentile(50)) / 1e9));
    key("latency_p90", f(static_cast<double>(h.percentile(90)) / 1e9));
    key("latency_p99", f(static_cast<double>(h.percentile(99)) / 1e9));
    key("latency_p99.9", f(static_cast<double>(h.percentile(99.9)) / 1e9));
    key("latency_p99.99", f(static_cast<double>(h.percentile(99.99)) / 1e9));
    key("cpu_us_per_op", fmt::format("{:.3f}", per_op(r.cpu.total_ns())));
    key("cpu_user_us_per_op", fmt::format("{:.3f}", per_op(r.cpu.user_ns)));
    key("cpu_system_us_per_op", fmt::format("{:.3f}", per_op(r.cpu.system_ns)));
  }
  if (r.mode != Mode::write) key("verify_failures", d(r.verify_failures));
  open();
  out_ << "}\n";
  out_.flush();
  closed_ = true;
}

}  // namespace siphon::bench::rados::detail
