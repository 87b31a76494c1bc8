// Perf counters with Ceph's model (docs/observability.md; the facts are in
// ../shared/reference/observability.md §3): a process holds one Collection of
// named Loggers; a Logger holds counters registered through a
// LoggerBuilder, each with a type bitmask, description, nick, priority and
// unit, dumped by `perf dump` / `perf schema` exactly as Ceph 16.2.15 dumps
// them, and by `counter dump` / `counter schema` (Reef's labeled form) and
// the Prometheus endpoint.
//
// THIS HEADER IS THE CONTRACT between the counter library, the admin socket
// and the Prometheus exporter: change it only together with its users.
//
// Threading: a Logger has one writer per counter at a time in the hot path
// (a worker's own logger, written only by that worker's thread: a relaxed
// load and store, no locked read-modify-write, the logger's memory padded so
// no two loggers share a cache line) or many writers (shared loggers built
// with LoggerBuilder::shared(): fetch_add). Readers (dump, snapshot) run on
// any thread with relaxed loads; an average's (sum, count) pair is read
// consistently (retry while it changes). Levels are gauges (add_u64 + inc/dec
// or set), never counters, so a reset cannot underflow them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace siphon::perf {

// Ceph's perfcounter_type_d bits.
enum TypeBits : std::uint8_t {
  kTime = 0x1,
  kU64 = 0x2,
  kLongRunAvg = 0x4,
  kCounter = 0x8,
  kHistogram = 0x10,
};

enum class Unit : std::uint8_t { none, bytes };

// Ceph's named priority levels (0..10).
enum Priority : int {
  kDebugOnly = 0,
  kUninteresting = 2,
  kUseful = 5,
  kInteresting = 8,
  kCritical = 10,
};

// One axis of a 2-D histogram (Ceph's PerfHistogramCommon::axis_config_d).
struct HistogramAxis {
  enum class Scale : std::uint8_t { linear, log2 };
  std::string name;
  Scale scale = Scale::log2;
  std::int64_t min = 0;
  std::int64_t quant_size = 1;
  std::int32_t buckets = 32;
};

// What the schema says about one counter.
struct CounterInfo {
  std::string name;
  std::uint8_t type = 0;  // TypeBits
  std::string description;
  std::string nick;       // at most 4 characters (Ceph asserts it; the builder truncates)
  int priority = kDebugOnly;
  Unit unit = Unit::none;
  HistogramAxis x, y;     // only when type has kHistogram

  // Ceph's schema strings: "counter"/"gauge"; "integer", "real",
  // "real-integer-pair", "integer-integer-pair", "integer-2d-histogram".
  std::string_view metric_type() const noexcept;
  std::string_view value_type() const noexcept;
};

// A consistent read of one counter.
struct Value {
  std::uint64_t u64 = 0;    // kU64 value, or kTime value in ns, or an average's sum (ns for time)
  std::uint64_t count = 0;  // averages only
  std::vector<std::vector<std::uint64_t>> histogram;  // [x][y], histograms only
};

class Logger;

// Registers counters with dense indices [first, last) chosen by the caller
// (an enum). Unlike Ceph's PerfCountersBuilder, where `first` is a
// placeholder and counters are (first, last), every index of [first, last)
// must be added: an enum `l_x_first = N, l_a, l_b, l_x_last` is built with
// LoggerBuilder(name, l_x_first + 1, l_x_last).
class LoggerBuilder {
 public:
  LoggerBuilder(std::string name, int first, int last);
  // Reef-style labels (e.g. {"id","0"}): `counter dump`/`counter schema` group
  // loggers by name and list each label set; `perf dump`/`perf schema` show
  // only unlabeled loggers, as Reef does.
  LoggerBuilder& labels(std::vector<std::pair<std::string, std::string>> l);
  // Many threads update this logger (fetch_add); default: one writer.
  LoggerBuilder& shared();

  void add_u64_counter(int idx, std::string name, std::string desc, std::string nick = {},
                       int prio = kDebugOnly, Unit unit = Unit::none);
  void add_u64(int idx, std::string name, std::string desc, std::string nick = {},
               int prio = kDebugOnly, Unit unit = Unit::none);  // a gauge
  void add_time(int idx, std::string name, std::string desc, std::string nick = {},
                int prio = kDebugOnly);
  void add_time_avg(int idx, std::string name, std::string desc, std::string nick = {},
                    int prio = kDebugOnly);
  void add_u64_avg(int idx, std::string name, std::string desc, std::string nick = {},
                   int prio = kDebugOnly, Unit unit = Unit::none);
  void add_u64_counter_histogram(int idx, std::string name, HistogramAxis x, HistogramAxis y,
                                 std::string desc, std::string nick = {}, int prio = kDebugOnly,
                                 Unit unit = Unit::none);

  // Every index in [first, last) must have been added (a programming error
  // otherwise: it throws std::logic_error, not a runtime condition).
  std::shared_ptr<Logger> create();

 private:
  friend class Logger;
  std::string name_;
  int first_, last_;
  bool shared_ = false;
  std::vector<std::pair<std::string, std::string>> labels_;
  std::vector<std::optional<CounterInfo>> infos_;
};

class Logger {
 public:
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  const std::string& name() const noexcept;
  const std::vector<std::pair<std::string, std::string>>& labels() const noexcept;
  int first() const noexcept;
  int last() const noexcept;
  const CounterInfo& info(int idx) const;

  // Hot path (noexcept, no allocation, no lock). Each does nothing when
  // perf counters are disabled (set_enabled(false), Ceph's `perf` option).
  void inc(int idx, std::uint64_t v = 1) noexcept;   // counters, gauges, u64 averages
  void dec(int idx, std::uint64_t v = 1) noexcept;   // gauges only
  void set(int idx, std::uint64_t v) noexcept;       // gauges, time
  void tinc(int idx, std::chrono::nanoseconds d) noexcept {  // time, time averages (negative: 0)
    inc(idx, static_cast<std::uint64_t>(d.count() > 0 ? d.count() : 0));
  }
  void hinc(int idx, std::int64_t x, std::int64_t y) noexcept;  // histograms

  Value get(int idx) const;
  // Zeroes every counter except pure gauges (type == kU64), as Ceph does.
  void reset() noexcept;

 private:
  friend class LoggerBuilder;
  friend class Collection;
 public:
  struct Impl;  // perf_internal.h

 private:
  explicit Logger(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Formatting selectors for dumps.
struct DumpFilter {
  std::optional<std::string> logger;   // `perf dump [logger [counter]]`
  std::optional<std::string> counter;
  int min_priority = kDebugOnly;       // Prometheus/exporter use kUseful by default
};

// The process's loggers.
class Collection {
 public:
  // Adds a logger. A name already present (with the same labels) gets a
  // stable suffix, not Ceph's "-0x<address>" (docs/observability.md, "Two
  // loggers of one name"): "-<instance>" when `instance` is given and that
  // name is free ("siphon-messenger-osd.0-cluster"), else "-2", "-3", ...
  // (the first free). A name seen once keeps Ceph's name exactly. Removing
  // happens when the owner calls remove() (a messenger or stack going away);
  // dumps never see a destroyed logger.
  void add(const std::shared_ptr<Logger>& l, std::string_view instance = {});
  void remove(const Logger* l);

  // JSON exactly as Ceph 16.2.15 prints it (loggers sorted by name,
  // counters in registration order, times as <sec>.<9 digits>).
  std::string perf_dump(const DumpFilter& f = {}) const;
  std::string perf_schema(const DumpFilter& f = {}) const;
  std::string histogram_dump(const DumpFilter& f = {}) const;
  std::string histogram_schema(const DumpFilter& f = {}) const;
  std::string counter_dump() const;    // Reef's labeled form
  std::string counter_schema() const;
  // `perf reset all` (nullopt) or one logger; false if no such logger.
  bool reset(const std::optional<std::string>& logger);

  // Visits every counter passing the filter, for exporters (Prometheus).
  using Visitor = std::function<void(const Logger&, const CounterInfo&, const Value&)>;
  void visit(const DumpFilter& f, const Visitor& v) const;

 private:
  std::vector<std::shared_ptr<Logger>> sorted() const;

  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Logger>> loggers_;
};

// The process-wide collection (what a daemon's admin socket and endpoint
// show). Tests may build their own Collection.
Collection& process_collection();

// Ceph's `perf` option: false makes every update a no-op. enabled() is
// inline (one relaxed load): every counter update and timed section asks it.
namespace detail {
inline std::atomic<bool> g_enabled{true};
}
void set_enabled(bool on) noexcept;
inline bool enabled() noexcept { return detail::g_enabled.load(std::memory_order_relaxed); }

}  // namespace siphon::perf
