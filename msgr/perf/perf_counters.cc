// Perf counters: storage, consistent reads, reset by baseline, and the
// loggers' registry. The JSON forms are in perf_json.cc.
#include "msgr/perf/perf_counters.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "msgr/perf/perf_internal.h"

namespace siphon::perf {
namespace {

constexpr auto relaxed = std::memory_order_relaxed;

// Adds n: a relaxed load and store for a one-writer logger (no locked
// read-modify-write on the hot path), fetch_add for a shared one.
inline void bump(std::atomic<std::uint64_t>& a, std::uint64_t n, bool shared) noexcept {
  if (shared) {
    a.fetch_add(n, relaxed);
  } else {
    a.store(a.load(relaxed) + n, relaxed);
  }
}

std::uint64_t sub_floor(std::uint64_t a, std::uint64_t b) noexcept { return a > b ? a - b : 0; }

}  // namespace

namespace detail {

// Buckets of one histogram axis (Ceph's PerfHistogramCommon): bucket 0 takes
// values below min, bucket 1 [min, min + quant), then linear steps or
// doubling ranges; the last bucket is open above.
std::int32_t bucket_of(const HistogramAxis& a, std::int64_t v) noexcept {
  if (a.buckets <= 1) return 0;
  if (v < a.min) return 0;
  // Modular arithmetic: exact because v >= min, and never signed overflow.
  const std::uint64_t q = (static_cast<std::uint64_t>(v) - static_cast<std::uint64_t>(a.min)) /
                          static_cast<std::uint64_t>(std::max<std::int64_t>(a.quant_size, 1));
  std::uint64_t b;
  if (a.scale == HistogramAxis::Scale::linear) {
    b = q + 1;
  } else {
    b = q == 0 ? 1 : 2 + static_cast<std::uint64_t>(std::bit_width(q) - 1);
  }
  return static_cast<std::int32_t>(std::min<std::uint64_t>(b, static_cast<std::uint64_t>(a.buckets - 1)));
}

}  // namespace detail

std::string_view CounterInfo::metric_type() const noexcept { return (type & kCounter) ? "counter" : "gauge"; }

std::string_view CounterInfo::value_type() const noexcept {
  if (type & kHistogram) return "integer-2d-histogram";
  if (type & kLongRunAvg) return (type & kTime) ? "real-integer-pair" : "integer-integer-pair";
  if (type & kTime) return "real";
  return "integer";
}

// ---------------------------------------------------------------- builder

LoggerBuilder::LoggerBuilder(std::string name, int first, int last)
    : name_(std::move(name)), first_(first), last_(last) {
  if (last_ <= first_) throw std::logic_error(fmt::format("perf logger {}: empty index range", name_));
  infos_.resize(static_cast<std::size_t>(last_ - first_));
}

LoggerBuilder& LoggerBuilder::labels(std::vector<std::pair<std::string, std::string>> l) {
  labels_ = std::move(l);
  return *this;
}

LoggerBuilder& LoggerBuilder::shared() {
  shared_ = true;
  return *this;
}

namespace {
void add_impl(std::vector<std::optional<CounterInfo>>& infos, const std::string& logger, int first, int last,
              int idx, CounterInfo ci) {
  if (idx < first || idx >= last) {
    throw std::logic_error(fmt::format("perf logger {}: counter {} index {} outside [{}, {})", logger, ci.name,
                                       idx, first, last));
  }
  auto& slot = infos[static_cast<std::size_t>(idx - first)];
  if (slot) throw std::logic_error(fmt::format("perf logger {}: index {} added twice", logger, idx));
  if (ci.nick.size() > 4) ci.nick.resize(4);
  ci.priority = std::clamp(ci.priority, 0, 10);
  slot = std::move(ci);
}
}  // namespace

void LoggerBuilder::add_u64_counter(int idx, std::string name, std::string desc, std::string nick, int prio,
                                    Unit unit) {
  add_impl(infos_, name_, first_, last_, idx,
           {std::move(name), kU64 | kCounter, std::move(desc), std::move(nick), prio, unit, {}, {}});
}
void LoggerBuilder::add_u64(int idx, std::string name, std::string desc, std::string nick, int prio, Unit unit) {
  add_impl(infos_, name_, first_, last_, idx,
           {std::move(name), kU64, std::move(desc), std::move(nick), prio, unit, {}, {}});
}
void LoggerBuilder::add_time(int idx, std::string name, std::string desc, std::string nick, int prio) {
  add_impl(infos_, name_, first_, last_, idx,
           {std::move(name), kTime, std::move(desc), std::move(nick), prio, Unit::none, {}, {}});
}
void LoggerBuilder::add_time_avg(int idx, std::string name, std::string desc, std::string nick, int prio) {
  add_impl(infos_, name_, first_, last_, idx,
           {std::move(name), kTime | kLongRunAvg, std::move(desc), std::move(nick), prio, Unit::none, {}, {}});
}
void LoggerBuilder::add_u64_avg(int idx, std::string name, std::string desc, std::string nick, int prio,
                                Unit unit) {
  add_impl(infos_, name_, first_, last_, idx,
           {std::move(name), kU64 | kLongRunAvg, std::move(desc), std::move(nick), prio, unit, {}, {}});
}
void LoggerBuilder::add_u64_counter_histogram(int idx, std::string name, HistogramAxis x, HistogramAxis y,
                                              std::string desc, std::string nick, int prio, Unit unit) {
  if (x.buckets < 1 || y.buckets < 1 || x.buckets > 1024 || y.buckets > 1024) {
    throw std::logic_error(fmt::format("perf logger {}: histogram {} needs 1..1024 buckets per axis", name_, name));
  }
  add_impl(infos_, name_, first_, last_, idx,
           {std::move(name), kU64 | kCounter | kHistogram, std::move(desc), std::move(nick), prio, unit,
            std::move(x), std::move(y)});
}

std::shared_ptr<Logger> LoggerBuilder::create() {
  auto impl = std::make_unique<Logger::Impl>();
  impl->name = name_;
  impl->labels = labels_;
  impl->first = first_;
  impl->last = last_;
  impl->shared = shared_;
  const std::size_t n = infos_.size();
  impl->infos.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!infos_[i]) {
      throw std::logic_error(
          fmt::format("perf logger {}: index {} was never added", name_, first_ + static_cast<int>(i)));
    }
    impl->infos.push_back(*infos_[i]);
  }
  impl->storage = detail::make_slots(n + 2 * detail::kPadSlots);
  for (std::size_t i = 0; i < n; ++i) {
    detail::Slot& slot = impl->storage[detail::kPadSlots + i];
    slot.average = (impl->infos[i].type & kLongRunAvg) != 0;
    slot.shared = impl->shared;
  }
  impl->base = std::make_unique<detail::Baseline[]>(n);
  impl->hist.resize(n);
  impl->hist_base.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& ci = impl->infos[i];
    if (!(ci.type & kHistogram)) continue;
    const auto cells = static_cast<std::size_t>(ci.x.buckets) * static_cast<std::size_t>(ci.y.buckets);
    // Padded like the slots: a worker's histogram never shares a line with
    // another logger's memory.
    impl->hist[i] = std::make_unique<std::atomic<std::uint64_t>[]>(cells + 2 * detail::kPadCells);
    impl->hist_base[i] = std::make_unique<std::atomic<std::uint64_t>[]>(cells);
  }
  return std::shared_ptr<Logger>(new Logger(std::move(impl)));
}

// ---------------------------------------------------------------- logger

Logger::Logger(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Logger::~Logger() = default;

const std::string& Logger::name() const noexcept { return impl_->name; }
const std::vector<std::pair<std::string, std::string>>& Logger::labels() const noexcept { return impl_->labels; }
int Logger::first() const noexcept { return impl_->first; }
int Logger::last() const noexcept { return impl_->last; }

const CounterInfo& Logger::info(int idx) const {
  if (idx < impl_->first || idx >= impl_->last) {
    throw std::out_of_range(fmt::format("perf logger {}: no counter {}", impl_->name, idx));
  }
  return impl_->infos[static_cast<std::size_t>(idx - impl_->first)];
}

namespace {

// An average's update as a sequence lock: `begun` before the sum, `count`
// (release) after; a reader takes count, sum, then begun, and retries until
// they agree. Shared loggers use sequentially consistent RMWs in the same order.
inline void avg_add(detail::Slot& s, std::uint64_t v, bool shared) noexcept {
  if (shared) {
    s.begun.fetch_add(1);
    s.v.fetch_add(v);
    s.count.fetch_add(1);
    return;
  }
  const std::uint64_t n = s.begun.load(relaxed) + 1;
  s.begun.store(n, relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.v.store(s.v.load(relaxed) + v, relaxed);
  s.count.store(n, std::memory_order_release);
}

}  // namespace

namespace detail {
std::pair<std::uint64_t, std::uint64_t> read_pair(const Slot& s) noexcept {
  // Until consistent: an update is a few instructions, so a reader (a dump,
  // never the data path) waits at most a writer's burst; it yields after a
  // while so a writer on the same CPU can finish.
  for (unsigned tries = 0;; ++tries) {
    const std::uint64_t done = s.count.load(std::memory_order_acquire);
    const std::uint64_t sum = s.v.load(relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.begun.load(relaxed) == done) return {sum, done};
    if (tries >= 64) std::this_thread::yield();
  }
}

void FreeSlots::operator()(Slot* p) const noexcept { std::free(p); }

SlotArray make_slots(std::size_t n) {
  const std::size_t bytes = (n * sizeof(Slot) + 63) / 64 * 64;
  void* mem = std::aligned_alloc(64, bytes);
  if (mem == nullptr) throw std::bad_alloc();
  auto* s = static_cast<Slot*>(mem);
  for (std::size_t i = 0; i < n; ++i) new (&s[i]) Slot();  // trivially destructible: free() suffices
  return SlotArray(s);
}
}  // namespace detail

void Logger::inc(int idx, std::uint64_t v) noexcept {
  if (!enabled()) return;
  detail::Slot* s = impl_->slot(idx);
  if (s == nullptr) return;
  if (s->average) {
    avg_add(*s, v, s->shared);
  } else {
    bump(s->v, v, s->shared);
  }
}

void Logger::dec(int idx, std::uint64_t v) noexcept {
  if (!enabled()) return;
  detail::Slot* s = impl_->slot(idx);
  if (s == nullptr) return;
  // A level never goes below zero (Ceph's msgr_active_connections wraps).
  if (impl_->shared) {
    std::uint64_t cur = s->v.load(relaxed);
    while (!s->v.compare_exchange_weak(cur, sub_floor(cur, v), relaxed)) {
    }
  } else {
    s->v.store(sub_floor(s->v.load(relaxed), v), relaxed);
  }
}

void Logger::set(int idx, std::uint64_t v) noexcept {
  if (!enabled()) return;
  detail::Slot* s = impl_->slot(idx);
  if (s != nullptr) s->v.store(v, relaxed);
}

void Logger::hinc(int idx, std::int64_t x, std::int64_t y) noexcept {
  if (!enabled()) return;
  if (idx < impl_->first || idx >= impl_->last) return;
  const auto i = static_cast<std::size_t>(idx - impl_->first);
  auto& cells = impl_->hist[i];
  if (!cells) return;
  const auto& ci = impl_->infos[i];
  const auto bx = static_cast<std::size_t>(detail::bucket_of(ci.x, x));
  const auto by = static_cast<std::size_t>(detail::bucket_of(ci.y, y));
  bump(cells[detail::kPadCells + bx * static_cast<std::size_t>(ci.y.buckets) + by], 1, impl_->shared);
}

Value Logger::get(int idx) const {
  const CounterInfo& ci = info(idx);
  const auto i = static_cast<std::size_t>(idx - impl_->first);
  const detail::Slot& s = *impl_->slot(idx);
  const detail::Baseline& b = impl_->base[i];
  Value out;
  if (ci.type & kHistogram) {
    const auto nx = static_cast<std::size_t>(ci.x.buckets), ny = static_cast<std::size_t>(ci.y.buckets);
    out.histogram.assign(nx, std::vector<std::uint64_t>(ny, 0));
    for (std::size_t x = 0; x < nx; ++x) {
      for (std::size_t y = 0; y < ny; ++y) {
        out.histogram[x][y] = sub_floor(impl_->hist[i][detail::kPadCells + x * ny + y].load(relaxed),
                                        impl_->hist_base[i][x * ny + y].load(relaxed));
      }
    }
    return out;
  }
  if (ci.type & kLongRunAvg) {
    const auto [sum, count] = detail::read_pair(s);
    out.u64 = sub_floor(sum, b.v.load(relaxed));
    out.count = sub_floor(count, b.count.load(relaxed));
    return out;
  }
  const std::uint64_t raw = s.v.load(relaxed);
  out.u64 = ci.type == kU64 ? raw : sub_floor(raw, b.v.load(relaxed));
  return out;
}

// Reset moves the baseline the readers subtract instead of writing the
// counters: the writer's plain load+store can never lose a reset, nor a reset
// an update.
void Logger::reset() noexcept {
  for (std::size_t i = 0; i < impl_->infos.size(); ++i) {
    const CounterInfo& ci = impl_->infos[i];
    if (ci.type == kU64) continue;  // a pure gauge keeps its value (Ceph's rule)
    const detail::Slot& s = impl_->storage[detail::kPadSlots + i];
    detail::Baseline& b = impl_->base[i];
    if (ci.type & kHistogram) {
      const auto cells = static_cast<std::size_t>(ci.x.buckets) * static_cast<std::size_t>(ci.y.buckets);
      for (std::size_t c = 0; c < cells; ++c) {
        impl_->hist_base[i][c].store(impl_->hist[i][detail::kPadCells + c].load(relaxed), relaxed);
      }
    } else if (ci.type & kLongRunAvg) {
      const auto [sum, count] = detail::read_pair(s);
      b.v.store(sum, relaxed);
      b.count.store(count, relaxed);
    } else {
      b.v.store(s.v.load(relaxed), relaxed);
    }
  }
}

// ---------------------------------------------------------------- collection

void Collection::add(const std::shared_ptr<Logger>& l, std::string_view instance) {
  if (!l) return;
  std::lock_guard lk(mu_);
  if (std::find(loggers_.begin(), loggers_.end(), l) != loggers_.end()) return;
  const auto taken = [&](const std::string& name) {
    return std::any_of(loggers_.begin(), loggers_.end(),
                       [&](const auto& o) { return o->name() == name && o->labels() == l->labels(); });
  };
  if (!taken(l->name())) {
    loggers_.push_back(l);
    return;
  }
  // A second instance of a name. Ceph appends "-0x<address>", which changes
  // at every start and so renames the Prometheus series built from it:
  // Siphon appends the instance's role ("-cluster") when it has one, else
  // the first free number from 2 ("-2"), the same on every start that
  // creates the same loggers in the same order.
  const std::string base = l->name();
  std::string name = instance.empty() ? std::string() : fmt::format("{}-{}", base, instance);
  for (unsigned n = 2; name.empty() || taken(name); ++n) name = fmt::format("{}-{}", base, n);
  l->impl_->name = std::move(name);
  loggers_.push_back(l);
}

void Collection::remove(const Logger* l) {
  std::lock_guard lk(mu_);
  std::erase_if(loggers_, [&](const auto& o) { return o.get() == l; });
}

std::vector<std::shared_ptr<Logger>> Collection::sorted() const {
  std::vector<std::shared_ptr<Logger>> out;
  {
    std::lock_guard lk(mu_);
    out = loggers_;
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a->name() != b->name()) return a->name() < b->name();
    return a->labels() < b->labels();
  });
  return out;
}

bool Collection::reset(const std::optional<std::string>& logger) {
  bool found = false;
  for (const auto& l : sorted()) {
    if (logger && l->name() != *logger) continue;
    l->reset();
    found = true;
  }
  return found || !logger;
}

void Collection::visit(const DumpFilter& f, const Visitor& v) const {
  for (const auto& l : sorted()) {
    if (f.logger && l->name() != *f.logger) continue;
    for (int idx = l->first(); idx < l->last(); ++idx) {
      const CounterInfo& ci = l->info(idx);
      if (f.counter && ci.name != *f.counter) continue;
      if (ci.priority < f.min_priority) continue;
      v(*l, ci, l->get(idx));
    }
  }
}

Collection& process_collection() {
  static Collection c;
  return c;
}

void set_enabled(bool on) noexcept { detail::g_enabled.store(on, relaxed); }

}  // namespace siphon::perf
