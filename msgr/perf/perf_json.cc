// The JSON forms of the collection, as Ceph 16.2.15 prints them
// (../shared/reference/observability.md §2.4, §2.5, §3.2, §3.3, §3.8):
// loggers sorted by name, counters in registration order, times as
// <sec>.<9 digits> unquoted, averages as {"avgcount", "sum"[, "avgtime"]},
// the schema's 7 keys in Ceph's order. Compact: the CLI pretty-prints.
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "msgr/perf/perf_counters.h"
#include "msgr/perf/perf_internal.h"

namespace siphon::perf {
namespace {

using Out = fmt::memory_buffer;

void put(Out& o, std::string_view s) { o.append(s.data(), s.data() + s.size()); }

void put_string(Out& o, std::string_view s) {
  put(o, "\"");
  for (const char c : s) {
    switch (c) {
      case '"': put(o, "\\\""); break;
      case '\\': put(o, "\\\\"); break;
      case '\n': put(o, "\\n"); break;
      case '\r': put(o, "\\r"); break;
      case '\t': put(o, "\\t"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(o), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          o.push_back(c);
        }
    }
  }
  put(o, "\"");
}

void put_key(Out& o, std::string_view k) {
  put_string(o, k);
  put(o, ":");
}

void put_time(Out& o, std::uint64_t ns) {
  fmt::format_to(std::back_inserter(o), "{}.{:09}", ns / 1000000000u, ns % 1000000000u);
}

void put_value(Out& o, const CounterInfo& ci, const Value& v) {
  if (ci.type & kLongRunAvg) {
    fmt::format_to(std::back_inserter(o), "{{\"avgcount\":{},\"sum\":", v.count);
    if (ci.type & kTime) {
      put_time(o, v.u64);
      put(o, ",\"avgtime\":");
      put_time(o, v.count == 0 ? 0 : v.u64 / v.count);
    } else {
      fmt::format_to(std::back_inserter(o), "{}", v.u64);
    }
    put(o, "}");
  } else if (ci.type & kTime) {
    put_time(o, v.u64);
  } else {
    fmt::format_to(std::back_inserter(o), "{}", v.u64);
  }
}

void put_schema(Out& o, const CounterInfo& ci) {
  fmt::format_to(std::back_inserter(o), "{{\"type\":{},\"metric_type\":", static_cast<unsigned>(ci.type));
  put_string(o, ci.metric_type());
  put(o, ",\"value_type\":");
  put_string(o, ci.value_type());
  put(o, ",\"description\":");
  put_string(o, ci.description);
  put(o, ",\"nick\":");
  put_string(o, ci.nick);
  fmt::format_to(std::back_inserter(o), ",\"priority\":{},\"units\":", ci.priority);
  put_string(o, ci.unit == Unit::bytes ? "bytes" : "none");
  put(o, "}");
}

// One axis of a histogram dump: its configuration and every bucket's range.
void put_axis(Out& o, const HistogramAxis& a) {
  put(o, "{\"name\":");
  put_string(o, a.name);
  fmt::format_to(std::back_inserter(o), ",\"min\":{},\"quant_size\":{},\"buckets\":{},\"scale_type\":", a.min,
                 a.quant_size, a.buckets);
  put_string(o, a.scale == HistogramAxis::Scale::log2 ? "log2" : "linear");
  put(o, ",\"ranges\":[");
  const std::int64_t q = std::max<std::int64_t>(a.quant_size, 1);
  for (std::int32_t b = 0; b < a.buckets; ++b) {
    if (b > 0) put(o, ",");
    if (b == 0) {
      fmt::format_to(std::back_inserter(o), "{{\"max\":{}}}", a.min - 1);
      continue;
    }
    // min + q·k, saturated: a silly axis prints large bounds, never overflows.
    const auto at = [&](std::int64_t k) {
      std::int64_t p = 0, r = 0;
      if (__builtin_mul_overflow(q, k, &p) || __builtin_add_overflow(a.min, p, &r)) return INT64_MAX;
      return r;
    };
    const auto pow2 = [](std::int32_t e) { return e >= 62 ? INT64_MAX : std::int64_t{1} << e; };
    std::int64_t lo, hi;
    if (a.scale == HistogramAxis::Scale::linear) {
      lo = at(b - 1);
      hi = at(b) - 1;
    } else {
      lo = b == 1 ? a.min : at(pow2(b - 2));
      hi = at(pow2(b - 1)) - 1;
    }
    if (b == a.buckets - 1) {
      fmt::format_to(std::back_inserter(o), "{{\"min\":{}}}", lo);
    } else {
      fmt::format_to(std::back_inserter(o), "{{\"min\":{},\"max\":{}}}", lo, hi);
    }
  }
  put(o, "]}");
}

void put_histogram(Out& o, const CounterInfo& ci, const Value& v) {
  put(o, "{\"axes\":[");
  put_axis(o, ci.x);
  put(o, ",");
  put_axis(o, ci.y);
  put(o, "],\"values\":[");
  for (std::size_t x = 0; x < v.histogram.size(); ++x) {
    if (x > 0) put(o, ",");
    put(o, "[");
    for (std::size_t y = 0; y < v.histogram[x].size(); ++y) {
      if (y > 0) put(o, ",");
      fmt::format_to(std::back_inserter(o), "{}", v.histogram[x][y]);
    }
    put(o, "]");
  }
  put(o, "]}");
}

enum class Form { dump, schema };

// The loggers `perf dump`/`perf schema` and the histogram commands show:
// unlabeled ones, with the logger/counter filter; `histograms` picks the
// histogram counters (only) or every other counter.
std::string perf_form(const std::vector<std::shared_ptr<Logger>>& loggers, const DumpFilter& f, Form form,
                      bool histograms) {
  Out o;
  put(o, "{");
  bool first_logger = true;
  for (const auto& l : loggers) {
    if (!l->labels().empty()) continue;
    if (f.logger && l->name() != *f.logger) continue;
    if (!first_logger) put(o, ",");
    first_logger = false;
    put_key(o, l->name());
    put(o, "{");
    bool first_counter = true;
    for (int idx = l->first(); idx < l->last(); ++idx) {
      const CounterInfo& ci = l->info(idx);
      if (((ci.type & kHistogram) != 0) != histograms) continue;
      if (f.counter && ci.name != *f.counter) continue;
      if (ci.priority < f.min_priority) continue;
      if (!first_counter) put(o, ",");
      first_counter = false;
      put_key(o, ci.name);
      if (form == Form::schema) {
        put_schema(o, ci);
      } else if (histograms) {
        put_histogram(o, ci, l->get(idx));
      } else {
        put_value(o, ci, l->get(idx));
      }
    }
    put(o, "}");
  }
  put(o, "}");
  return fmt::to_string(o);
}

// Reef's `counter dump`/`counter schema`: every logger, grouped by name, each
// instance with its labels; the two list instances in the same order (the
// exporter walks them in lockstep). Histograms are not part of this form.
std::string counter_form(const std::vector<std::shared_ptr<Logger>>& loggers, Form form) {
  Out o;
  put(o, "{");
  std::size_t i = 0;
  while (i < loggers.size()) {
    const std::string& name = loggers[i]->name();
    if (i > 0) put(o, ",");
    put_key(o, name);
    put(o, "[");
    for (std::size_t j = i; i < loggers.size() && loggers[i]->name() == name; ++i) {
      const Logger& l = *loggers[i];
      if (i != j) put(o, ",");
      put(o, "{\"labels\":{");
      bool first_label = true;
      for (const auto& [k, v] : l.labels()) {
        if (!first_label) put(o, ",");
        first_label = false;
        put_key(o, k);
        put_string(o, v);
      }
      put(o, "},\"counters\":{");
      bool first_counter = true;
      for (int idx = l.first(); idx < l.last(); ++idx) {
        const CounterInfo& ci = l.info(idx);
        if (ci.type & kHistogram) continue;
        if (!first_counter) put(o, ",");
        first_counter = false;
        put_key(o, ci.name);
        if (form == Form::schema) {
          put_schema(o, ci);
        } else {
          put_value(o, ci, l.get(idx));
        }
      }
      put(o, "}}");
    }
    put(o, "]");
  }
  put(o, "}");
  return fmt::to_string(o);
}

}  // namespace

std::string Collection::perf_dump(const DumpFilter& f) const { return perf_form(sorted(), f, Form::dump, false); }

std::string Collection::perf_schema(const DumpFilter& f) const {
  return perf_form(sorted(), f, Form::schema, false);
}

std::string Collection::histogram_dump(const DumpFilter& f) const {
  return perf_form(sorted(), f, Form::dump, true);
}

std::string Collection::histogram_schema(const DumpFilter& f) const {
  return perf_form(sorted(), f, Form::schema, true);
}

std::string Collection::counter_dump() const { return counter_form(sorted(), Form::dump); }
std::string Collection::counter_schema() const { return counter_form(sorted(), Form::schema); }

}  // namespace siphon::perf
