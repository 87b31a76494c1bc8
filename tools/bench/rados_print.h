// Where `siphon-bench rados` puts its lines: rados bench's text table (each
// line stamped with --show-time), or with --format json the one JSON
// document rados bench streams, key for key (rados-client.md §5.1; the keys
// and their string values were read off `rados bench --format json`
// 16.2.15). Internal to rados_bench.cc.
//
// Where rados bench's own JSON output breaks (cleanup's lines and
// --show-time stamps written into the document, a garbage stddev_iops, an
// unset min_bandwidth), this keeps the document valid: lines outside it go
// to the error stream, the stamps are left off, every value is computed.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "tools/bench/rados_bench.h"

namespace siphon::bench::rados::detail {

// "2026-12-02T00:25:40.803574+0000": rados bench's local time.
std::string local_time();

// One status line of the per-second table.
struct Sample {
  std::uint64_t sec = 0;
  unsigned cur_ops = 0;
  std::uint64_t started = 0, finished = 0;
  double avg_bw = 0, cur_bw = 0;
  double last_lat = -1;  // <0: no completion since the previous line ("-")
  double avg_lat = 0;
};

class Printer {
 public:
  Printer(std::ostream& out, std::ostream& err, bool json, bool show_time)
      : out_(out), err_(err), json_(json), show_time_(show_time) {}
  bool json() const { return json_; }

  // A line of rados bench's text (ending in '\n'); nothing with JSON.
  void text(std::string_view line);
  // A line rados bench writes whatever the format ("hints = 1"), unstamped.
  void plain(std::string_view line) { out_ << line; }
  // A line rados bench sends to standard error ("X is not correct!").
  void note(std::string_view line);
  // A line outside the JSON document: the text stream, or the error stream
  // with JSON (cleanup's lines during a write run).
  void aside(std::string_view line) { json_ ? note(line) : text(line); }

  // The write run's parameters (JSON: the document's first keys; text: the
  // "Maintaining" and "Object prefix" lines).
  void write_header(const Options& o, std::uint64_t object_size, std::string_view prefix);
  // The table's header (text), or the start of "datas" (JSON).
  void table_start();
  // Every 20 lines (text only): rados bench's latency line and the header again.
  void table_repeat(double min_lat, double max_lat, double avg_lat);
  void sample(const Sample& s);
  // rados bench's summary; then Siphon's additions and, with JSON, the end of
  // the document (also after an error, which it then names).
  void summary(const Result& r);
  void finish(const Result& r);

 private:
  void key(std::string_view k, std::string_view v);
  void open();
  void close_table();
  std::ostream& out_;
  std::ostream& err_;
  bool json_, show_time_;
  bool opened_ = false, keys_ = false, in_table_ = false, first_sample_ = true, closed_ = false;
};

}  // namespace siphon::bench::rados::detail
