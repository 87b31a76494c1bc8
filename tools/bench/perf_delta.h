// --perf-dump: what this process's perf counters (msgr/perf) did during a
// run -- a `perf dump` taken before and after, and their difference.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tools/bench/report.h"

namespace siphon::bench {

class PerfSnapshot {
 public:
  // Every counter of siphon::perf::process_collection() now.
  static PerfSnapshot take();
  // The counters that moved since `before` (a logger created since counts
  // from 0), in `perf dump` order: counters, times and averages as
  // differences, pure gauges (type 2) with their value now when it changed.
  // Histograms are left out.
  std::vector<PerfDeltaEntry> delta_since(const PerfSnapshot& before) const;

 private:
  std::vector<PerfDeltaEntry> values_;  // value/count as read
  std::map<std::pair<std::string, std::string>, std::size_t> index_;
};

}  // namespace siphon::bench
