#include "tools/bench/perf_delta.h"

#include "msgr/perf/perf_counters.h"

namespace siphon::bench {

PerfSnapshot PerfSnapshot::take() {
  PerfSnapshot s;
  perf::process_collection().visit({}, [&s](const perf::Logger& l, const perf::CounterInfo& info,
                                            const perf::Value& v) {
    if ((info.type & perf::kHistogram) != 0) return;
    s.index_[{l.name(), info.name}] = s.values_.size();
    s.values_.push_back({l.name(), info.name, info.type, v.u64, v.count});
  });
  return s;
}

std::vector<PerfDeltaEntry> PerfSnapshot::delta_since(const PerfSnapshot& before) const {
  std::vector<PerfDeltaEntry> out;
  for (const PerfDeltaEntry& now : values_) {
    const auto it = before.index_.find({now.logger, now.counter});
    const PerfDeltaEntry* was = it != before.index_.end() ? &before.values_[it->second] : nullptr;
    PerfDeltaEntry d = now;
    if (now.type == perf::kU64) {  // a gauge: its level, if it changed
      if (was != nullptr ? was->value == now.value : now.value == 0) continue;
    } else {
      // A `perf reset` during the run: count from the reset.
      if (was != nullptr && now.value >= was->value && now.count >= was->count) {
        d.value -= was->value;
        d.count -= was->count;
      }
      if (d.value == 0 && d.count == 0) continue;
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace siphon::bench
