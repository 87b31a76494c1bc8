// rados bench's loop and output (rados-client.md §5.1, §5.2) over ObjectIO.
#include "tools/bench/rados_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <ostream>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "tools/bench/rados_print.h"

namespace siphon::bench::rados {
namespace {

using detail::Printer;
using Clock = std::chrono::steady_clock;
constexpr double kMiB = 1024.0 * 1024.0;
// A write slot's own bytes; the rest of its payload is shared (run_bench).
constexpr std::size_t kSlotHeadBytes = 4096;

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Running mean and sample standard deviation (n - 1), as rados bench keeps
// its per-second samples.
struct Stat {
  std::uint64_t n = 0;
  double mean = 0, m2 = 0, max = 0, min = 0;
  void add(double x) {
    max = n == 0 ? x : std::max(max, x);
    min = n == 0 ? x : std::min(min, x);
    ++n;
    const double d = x - mean;
    mean += d / static_cast<double>(n);
    m2 += d * (x - mean);
  }
  double stddev() const { return n > 1 ? std::sqrt(m2 / static_cast<double>(n - 1)) : 0; }
};

// Whether `piece` is all 'z' filler: memcmp against a block of 'z' (glibc's
// is vectorised; a byte loop made verification half a 4 MiB seq run's CPU).
bool all_filler(std::string_view piece) {
  static const std::string zeds(64 * 1024, 'z');
  while (!piece.empty()) {
    const std::size_t n = std::min(piece.size(), zeds.size());
    if (std::memcmp(piece.data(), zeds.data(), n) != 0) return false;
    piece.remove_prefix(n);
  }
  return true;
}

// Whether the pieces of `data` are what op_data(index, size) holds, without
// building it or joining them.
bool op_matches(std::uint64_t index, std::uint64_t size, std::span<const std::string_view> data) {
  std::uint64_t total = 0;
  for (const std::string_view piece : data) total += piece.size();
  if (total != size) return false;
  std::string head(std::min<std::uint64_t>(size, 64), 'z');
  stamp_op(index, head);
  std::size_t at = 0;  // offset of `piece` in the op
  for (std::string_view piece : data) {
    if (at < head.size()) {
      const std::size_t n = std::min(head.size() - at, piece.size());
      if (piece.substr(0, n) != std::string_view(head).substr(at, n)) return false;
      at += n;
      piece.remove_prefix(n);
    }
    if (!all_filler(piece)) return false;
    at += piece.size();
  }
  return true;
}

std::string metadata_name(const Options& o) { return o.run_name.empty() ? "benchmark_last_metadata" : o.run_name; }

std::string host_name(const Options& o) {
  if (!o.hostname.empty()) return o.hostname;
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// The ops in flight and what finished, shared with the completions.
struct Tracker {
  std::mutex mu;
  std::condition_variable cv;
  unsigned in_flight = 0;
  std::uint64_t started = 0, finished = 0;
  std::uint64_t finished_at_last_line = 0;
  double last_latency = -1;  // of the latest completion since the last line; <0: none
  double latency_sum = 0, latency_sq = 0;
  Histogram latency_ns;
  int error = 0;
  std::string error_message;
  std::uint64_t verify_failures = 0;
  std::vector<std::string> incorrect;  // objects whose data did not verify (the first 100)
  std::vector<unsigned> free_slots;
  // Set by drive() for its run. take: under `mu`, claims the next op (index
  // and a free slot) if one is due; issue: outside `mu`, sends it.
  std::function<bool(std::uint64_t&, unsigned&)> take;
  std::function<void(std::uint64_t, unsigned)> issue;

  // A completion: records it, then issues what is due from this thread
  // (the client's), so that a steady run does not wake the driving thread
  // once per op (drive()).
  void done(Clock::time_point t0, unsigned slot, int r, const char* verb, const std::string& oid) {
    const double lat = secs(Clock::now() - t0);
    std::unique_lock lk(mu);
    --in_flight;
    free_slots.push_back(slot);
    if (r < 0 && error == 0) {
      error = r;
      error_message = fmt::format("{} {}: {}", verb, oid, std::strerror(-r));
    }
    if (r >= 0) {
      ++finished;
      last_latency = lat;
      latency_sum += lat;
      latency_sq += lat * lat;
      latency_ns.record(static_cast<std::uint64_t>(lat * 1e9));
    }
    // A completion inside an issue() of this thread (a client that
    // finished the op at once, e.g. refused it) leaves the next op to that
    // issue's pump further up the stack: no recursion.
    if (issuing_ > 0) return;
    ++pumps;  // in the same locked section: drive() never sees a gap
    pump_locked(lk);
  }

  // Issues ops while one is due and a slot is free. Called without `mu`.
  void pump() {
    std::unique_lock lk(mu);
    ++pumps;
    pump_locked(lk);
  }

  // When the pump ends with nothing in flight and no other pump running
  // (the end, or the end after an error) it wakes the driving thread, which
  // otherwise wakes only for its status lines. Counted in `pumps`, so that
  // drive() returns (and the caller's issue function and this tracker go)
  // only once no thread is inside one.
  void pump_locked(std::unique_lock<std::mutex>& lk) {
    for (;;) {
      std::uint64_t index = 0;
      unsigned s = 0;
      if (!take || !take(index, s)) break;
      lk.unlock();
      ++issuing_;
      issue(index, s);
      --issuing_;
      lk.lock();
    }
    --pumps;
    if (in_flight == 0 && pumps == 0) cv.notify_all();
  }

  unsigned pumps = 0;  // threads inside pump(), under `mu`

 private:
  static thread_local int issuing_;  // > 0 inside issue() on this thread
};

thread_local int Tracker::issuing_ = 0;

// One status line a second, as rados bench prints them.
class Progress {
 public:
  Progress(Printer& out, std::uint64_t op_size, Clock::time_point start)
      : out_(out), op_size_(op_size), start_(start), last_(start) {
    out_.table_start();
    out_.sample({});
  }
  // Called with the tracker locked.
  void tick(Tracker& t, Clock::time_point now) {
    ++sec_;
    const double interval = secs(now - last_);
    const std::uint64_t ops = t.finished - t.finished_at_last_line;
    const double cur_bw = interval > 0 ? static_cast<double>(ops * op_size_) / kMiB / interval : 0;
    const double elapsed = secs(now - start_);
    const double avg_bw = elapsed > 0 ? static_cast<double>(t.finished * op_size_) / kMiB / elapsed : 0;
    bandwidth.add(cur_bw);
    iops.add(static_cast<double>(ops));
    samples.push_back(static_cast<double>(ops));
    const double avg_lat = t.finished ? t.latency_sum / static_cast<double>(t.finished) : 0;
    if (sec_ % 20 == 0)
      out_.table_repeat(static_cast<double>(t.latency_ns.min()) / 1e9, static_cast<double>(t.latency_ns.max()) / 1e9,
                        avg_lat);
    out_.sample({sec_, t.in_flight, t.started, t.finished, avg_bw, cur_bw, ops ? t.last_latency : -1, avg_lat});
    t.finished_at_last_line = t.finished;
    t.last_latency = -1;
    last_ = now;
  }
  Clock::time_point next() const { return start_ + std::chrono::seconds(sec_ + 1); }
  Stat bandwidth, iops;
  std::vector<double> samples;  // ops finished per status line (--plot)

 private:
  Printer& out_;
  std::uint64_t op_size_;
  Clock::time_point start_, last_;
  std::uint64_t sec_ = 0;
};

// Fills `concurrency` slots with `issue(index, slot)` until `more(index)` is
// false, printing a line a second; waits for the ops in flight. This thread
// issues the first `concurrency` ops; after that each completion issues the
// next op itself (Tracker::done), as an asynchronous client would, so this
// thread wakes once a second for the status line and once at the end.
// (rados bench wakes its driving thread on every completion, which is CPU
// per op of the tool's own; docs/performance.md.) `issue` may therefore run
// on several threads at once, each call with its own slot.
template <class Issue, class More>
void drive(Tracker& t, Progress& p, unsigned concurrency, Issue issue, More more) {
  {
    std::lock_guard lk(t.mu);
    for (unsigned s = concurrency; s > 0; --s) t.free_slots.push_back(s - 1);
    t.take = [&t, &more](std::uint64_t& index, unsigned& slot) {
      if (t.error != 0 || t.free_slots.empty() || !more(t.started)) return false;
      index = t.started++;
      slot = t.free_slots.back();
      t.free_slots.pop_back();
      ++t.in_flight;
      return true;
    };
    t.issue = issue;
  }
  t.pump();
  std::unique_lock lk(t.mu);
  for (;;) {
    const bool idle = t.in_flight == 0 && t.pumps == 0;
    if (idle && (t.error != 0 || !more(t.started))) break;
    if (idle) {
      // Nothing in flight but more is due (every op so far completed at
      // once): issue it from here.
      lk.unlock();
      t.pump();
      lk.lock();
      continue;
    }
    if (t.cv.wait_until(lk, p.next()) == std::cv_status::timeout) p.tick(t, Clock::now());
  }
  t.take = nullptr;
  t.issue = nullptr;
}

void fill_result(Result& r, Tracker& t, Progress& p, double elapsed, const Options& o) {
  r.error = t.error;
  r.error_message = t.error_message;
  r.seconds = elapsed;
  r.ops = t.finished;
  r.op_size = o.op_size;
  r.bandwidth_mib = elapsed > 0 ? static_cast<double>(t.finished * o.op_size) / kMiB / elapsed : 0;
  // A run shorter than a status line has one sample: the whole run.
  if (p.iops.n == 0) {
    p.bandwidth.add(r.bandwidth_mib);
    p.iops.add(static_cast<double>(t.finished));
  }
  r.bandwidth_stddev = p.bandwidth.stddev();
  r.bandwidth_max = p.bandwidth.max;
  r.bandwidth_min = p.bandwidth.min;
  r.iops_average = elapsed > 0 ? static_cast<std::uint64_t>(static_cast<double>(t.finished) / elapsed) : 0;
  r.iops_stddev = p.iops.stddev();
  r.ops_per_second = p.samples;
  r.iops_max = static_cast<std::uint64_t>(p.iops.max);
  r.iops_min = static_cast<std::uint64_t>(p.iops.min);
  r.latency_ns = t.latency_ns;
  const double n = static_cast<double>(t.finished);
  if (t.finished > 1) {
    const double var = (t.latency_sq - t.latency_sum * t.latency_sum / n) / (n - 1);
    r.latency_stddev_s = var > 0 ? std::sqrt(var) : 0;
  }
  r.verify_failures = t.verify_failures;
}

std::string g(double v) { return fmt::format("{:g}", v); }

// Deletes objects [0, count) of `prefix` with `concurrency` in flight, then
// the metadata object; -ENOENT is not an error (rados bench's cleanup).
Result cleanup(ObjectIO& io, const Options& o, const std::string& prefix, std::uint64_t count, Printer& out) {
  Result r;
  r.mode = Mode::cleanup;
  const auto start = Clock::now();
  Tracker t;
  std::uint64_t removed = 0;
  {
    std::unique_lock lk(t.mu);
    std::uint64_t next = 0;
    for (;;) {
      while (t.error == 0 && t.in_flight < std::max(o.concurrency, 1u) && next < count) {
        const std::string oid = object_name(prefix, next++);
        ++t.in_flight;
        lk.unlock();
        io.remove(oid, [&t, &removed, oid](int rc) {
          std::lock_guard l2(t.mu);
          --t.in_flight;
          if (rc == 0) ++removed;
          if (rc < 0 && rc != -ENOENT && t.error == 0) {
            t.error = rc;
            t.error_message = fmt::format("removing {}: {}", oid, std::strerror(-rc));
          }
          t.cv.notify_all();
        });
        lk.lock();
      }
      if (t.in_flight == 0 && (t.error != 0 || next >= count)) break;
      t.cv.wait(lk);
    }
  }
  if (t.error == 0) {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<int> rc;
    io.remove(metadata_name(o), [&](int x) {
      std::lock_guard lk(mu);
      rc = x;
      cv.notify_all();
    });
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return rc.has_value(); });
    if (*rc < 0 && *rc != -ENOENT) {
      t.error = *rc;
      t.error_message = fmt::format("removing {}: {}", metadata_name(o), std::strerror(-*rc));
    }
  }
  r.error = t.error;
  r.error_message = t.error_message;
  r.removed = removed;
  r.seconds = secs(Clock::now() - start);
  if (r.error == 0) {
    out.aside(fmt::format("Removed {} objects\n", removed));
    out.aside(fmt::format("Clean up completed and total clean up time :{}\n", g(r.seconds)));
  }
  return r;
}

// Reads and decodes the metadata object; nullopt with r.error set otherwise.
std::optional<Metadata> read_metadata(ObjectIO& io, const Options& o, Result& r) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<std::pair<int, std::string>> got;
  io.read(metadata_name(o), 0, kMetadataSize, [&](int rc, std::span<const std::string_view> data) {
    std::string bytes;
    for (const std::string_view piece : data) bytes.append(piece);
    std::lock_guard lk(mu);
    got.emplace(rc, std::move(bytes));
    cv.notify_all();
  });
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return got.has_value(); });
  if (got->first == -ENOENT) {
    r.error = -ENOENT;
    r.error_message = "Must write data before running a read benchmark!";
    return std::nullopt;
  }
  if (got->first < 0) {
    r.error = got->first;
    r.error_message = fmt::format("reading {}: {}", metadata_name(o), std::strerror(-got->first));
    return std::nullopt;
  }
  auto m = decode_metadata(got->second);
  if (!m || m->op_size == 0 || m->object_size == 0 || m->ops < 0) {
    r.error = -EINVAL;
    r.error_message = fmt::format("{} holds no valid bench metadata ({} bytes)", metadata_name(o), got->second.size());
    return std::nullopt;
  }
  return m;
}

}  // namespace

std::string encode_metadata(const Metadata& m) {
  std::string out(kMetadataSize, '\0');
  auto put = [&](std::size_t at, std::uint64_t v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(0, m.object_size, 8);
  put(8, static_cast<std::uint32_t>(m.ops), 4);
  put(12, static_cast<std::uint32_t>(m.pid), 4);
  put(16, m.op_size, 8);
  return out;
}

std::optional<Metadata> decode_metadata(std::string_view b) {
  if (b.size() < kMetadataSize) return std::nullopt;
  auto get = [&](std::size_t at, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{static_cast<unsigned char>(b[at + i])} << (8 * i);
    return v;
  };
  return Metadata{get(0, 8), static_cast<std::int32_t>(static_cast<std::uint32_t>(get(8, 4))),
                  static_cast<std::int32_t>(static_cast<std::uint32_t>(get(12, 4))), get(16, 8)};
}

std::string object_prefix(std::string_view hostname, int pid) {
  return fmt::format("benchmark_data_{}_{}", hostname.substr(0, 29), pid);
}

std::string object_name(std::string_view prefix, std::uint64_t index) {
  return fmt::format("{}_object{}", prefix, index);
}

void stamp_op(std::uint64_t index, char* buf, std::size_t size) {
  // rados bench: snprintf(buf, op_size, "I'm the %16dth op!", index).
  const std::string head = fmt::format("I'm the {:16}th op!", static_cast<int>(index));
  if (size == 0) return;
  const std::size_t n = std::min(head.size(), size - 1);
  std::memcpy(buf, head.data(), n);
  buf[n] = '\0';
}

void stamp_op(std::uint64_t index, std::string& buf) { stamp_op(index, buf.data(), buf.size()); }

std::string op_data(std::uint64_t index, std::uint64_t size) {
  std::string d(size, 'z');
  stamp_op(index, d);
  return d;
}

namespace {
Result run_bench(ObjectIO& io, const Options& o, Printer& out);
}  // namespace

Result run(ObjectIO& io, const Options& o, std::ostream& out, std::ostream& err) {
  // cleanup prints rados's text lines whatever the format, as rados does.
  Printer p(out, err, o.json && o.mode != Mode::cleanup, o.show_time);
  Result r = run_bench(io, o, p);
  p.finish(r);
  return r;
}

namespace {

Result run_bench(ObjectIO& io, const Options& o, Printer& out) {
  Result r;
  r.mode = o.mode;
  const CpuTimes cpu0 = process_cpu();
  const int pid = o.pid ? o.pid : static_cast<int>(::getpid());
  const std::string host = host_name(o);
  if (o.mode == Mode::cleanup) {
    auto m = read_metadata(io, o, r);
    if (!m) return r;
    const std::uint64_t per_object = std::max<std::uint64_t>(m->object_size / m->op_size, 1);
    const std::uint64_t objects = (static_cast<std::uint64_t>(m->ops) + per_object - 1) / per_object;
    r = cleanup(io, o, object_prefix(host, m->pid), objects, out);
    r.cpu = process_cpu() - cpu0;
    return r;
  }

  Tracker t;
  if (o.mode == Mode::write) {
    const std::uint64_t object_size = o.object_size ? o.object_size : o.op_size;
    const std::uint64_t per_object = std::max<std::uint64_t>(object_size / o.op_size, 1);
    r.object_size = object_size;
    const std::string prefix = object_prefix(host, pid);
    if (o.hints) out.plain("hints = 1\n");
    out.write_header(o, object_size, prefix);
    const auto start = Clock::now();
    const auto stop = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    Progress p(out, o.op_size, start);
    const unsigned slots = std::max(o.concurrency, 1u);
    // Each slot's payload is two pieces handed to the client by reference
    // (no copy of the payload): a head of its own (at most 4 KiB; the op's
    // stamp is in its first bytes) and a body that every slot shares and
    // nothing writes after this. So -t 16 -b 4M sets up 8 MiB, not 64 MiB of
    // copies and page faults. A head is rewritten for the slot's next op only
    // when nobody else holds it any more (a client may keep it for a resend
    // or in a queue); otherwise the slot takes a fresh one.
    const std::string pattern = op_data(0, o.op_size);
    const std::size_t head_len = std::min<std::size_t>(pattern.size(), kSlotHeadBytes);
    const BufferPtr body =
        pattern.size() > head_len ? BufferPtr(pattern.data() + head_len, pattern.size() - head_len) : BufferPtr();
    std::vector<BufferPtr> heads;
    for (unsigned i = 0; i < slots; ++i) heads.emplace_back(pattern.data(), head_len);
    std::atomic<std::uint64_t> fresh_buffers{0};
    drive(
        t, p, slots,
        [&](std::uint64_t i, unsigned slot) {
          const std::string oid = object_name(prefix, i / per_object);
          BufferPtr& head = heads[slot];  // this call's own slot: no other thread touches it
          if (head.segment()->use_count() > 1) {
            head = BufferPtr(pattern.data(), head_len);
            fresh_buffers.fetch_add(1, std::memory_order_relaxed);  // issue() runs on several threads
          }
          stamp_op(i, reinterpret_cast<char*>(head.mutable_data()), head.length());
          BufferList data;
          data.append(head);
          if (body.length() != 0) data.append(body);
          const auto t0 = Clock::now();
          io.write(oid, o.op_size * (i % per_object), data, o.hints, object_size,
                   [&t, t0, slot, oid](int rc) { t.done(t0, slot, rc, "writing", oid); });
        },
        [&](std::uint64_t i) {
          return Clock::now() < stop && (o.max_objects == 0 || i / per_object < o.max_objects);
        });
    fill_result(r, t, p, secs(Clock::now() - start), o);
    r.fresh_buffers = fresh_buffers.load();
    r.object_size = object_size;
    // CPU per op is the write phase's: not the metadata write or cleanup.
    r.cpu = process_cpu() - cpu0;
    if (r.error != 0) return r;
    // The metadata, so seq/rand/cleanup (ours or rados bench's) find the run.
    std::mutex mu;
    std::condition_variable cv;
    std::optional<int> rc;
    io.write_full(metadata_name(o),
                  encode_metadata({object_size, static_cast<std::int32_t>(r.ops), pid, o.op_size}), [&](int x) {
                    std::lock_guard lk(mu);
                    rc = x;
                    cv.notify_all();
                  });
    {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return rc.has_value(); });
    }
    out.summary(r);
    if (*rc < 0) {
      r.error = *rc;
      r.error_message = fmt::format("writing {}: {}", metadata_name(o), std::strerror(-*rc));
    } else if (o.cleanup) {
      out.aside("Cleaning up (deleting benchmark objects)\n");
      const Result c = cleanup(io, o, prefix, (r.ops + per_object - 1) / per_object, out);
      r.removed = c.removed;
      if (c.error != 0) {
        r.error = c.error;
        r.error_message = c.error_message;
      }
    }
    return r;
  }

  // seq / rand: what the metadata says was written.
  auto m = read_metadata(io, o, r);
  if (!m) return r;
  const std::uint64_t per_object = std::max<std::uint64_t>(m->object_size / m->op_size, 1);
  const auto ops = static_cast<std::uint64_t>(m->ops);
  const std::string prefix = object_prefix(host, m->pid);
  r.object_size = m->object_size;
  if (o.hints) out.plain("hints = 1\n");
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  Progress p(out, m->op_size, start);
  std::mt19937_64 rng(static_cast<std::uint64_t>(pid));
  std::mutex rng_mu;
  drive(
      t, p, std::max(o.concurrency, 1u),
      [&](std::uint64_t i, unsigned slot) {
        std::uint64_t op = i;
        if (o.mode == Mode::rand) {
          std::lock_guard lk(rng_mu);
          op = ops ? rng() % ops : 0;
        }
        const std::string oid = object_name(prefix, op / per_object);
        const auto t0 = Clock::now();
        io.read(oid, m->op_size * (op % per_object), m->op_size,
                [&t, &o, t0, slot, oid, op, size = m->op_size](int rc, std::span<const std::string_view> data) {
                  if (rc >= 0 && o.verify && !op_matches(op, size, data)) {
                    std::lock_guard lk(t.mu);
                    ++t.verify_failures;
                    if (t.incorrect.size() < 100) t.incorrect.push_back(oid);
                  }
                  t.done(t0, slot, rc, "reading", oid);
                });
      },
      [&](std::uint64_t i) { return Clock::now() < stop && (o.mode == Mode::rand || i < ops); });
  for (const auto& oid : t.incorrect) out.note(fmt::format("{} is not correct!\n", oid));
  Options ro = o;
  ro.op_size = m->op_size;
  fill_result(r, t, p, secs(Clock::now() - start), ro);
  r.cpu = process_cpu() - cpu0;
  r.object_size = m->object_size;
  if (r.error == 0) out.summary(r);
  return r;
}

}  // namespace

std::string to_json(const Result& r) {
  static constexpr const char* kModes[] = {"write", "seq", "rand", "cleanup"};
  const auto& h = r.latency_ns;
  std::string counters;
  for (const auto& [name, value] : r.client_counters)
    counters += fmt::format("{}\"{}\":{}", counters.empty() ? "" : ",", name, value);
  const double per_op = r.ops ? static_cast<double>(r.cpu.total_ns()) / 1e3 / static_cast<double>(r.ops) : 0;
  return fmt::format(
      "{{\"mode\":\"{}\",\"error\":{},\"seconds\":{},\"ops\":{},\"op_size\":{},\"object_size\":{},"
      "\"bandwidth_mib_s\":{},\"bandwidth_stddev\":{},\"bandwidth_max\":{},\"bandwidth_min\":{},"
      "\"iops\":{},\"iops_stddev\":{},\"iops_max\":{},\"iops_min\":{},"
      "\"latency_s\":{{\"avg\":{},\"stddev\":{},\"min\":{},\"max\":{},\"p50\":{},\"p90\":{},\"p99\":{},"
      "\"p99.9\":{},\"p99.99\":{}}},"
      "\"cpu\":{{\"user_s\":{},\"system_s\":{},\"us_per_op\":{}}},\"verify_failures\":{},\"removed\":{},"
      "\"fresh_buffers\":{},\"client\":{{{}}}}}",
      kModes[static_cast<int>(r.mode)], r.error, r.seconds, r.ops, r.op_size, r.object_size, r.bandwidth_mib,
      r.bandwidth_stddev, r.bandwidth_max, r.bandwidth_min, r.iops_average, r.iops_stddev, r.iops_max, r.iops_min,
      h.count() ? h.mean() / 1e9 : 0.0, r.latency_stddev_s, static_cast<double>(h.min()) / 1e9,
      static_cast<double>(h.max()) / 1e9, static_cast<double>(h.percentile(50)) / 1e9,
      static_cast<double>(h.percentile(90)) / 1e9, static_cast<double>(h.percentile(99)) / 1e9,
      static_cast<double>(h.percentile(99.9)) / 1e9, static_cast<double>(h.percentile(99.99)) / 1e9,
      static_cast<double>(r.cpu.user_ns) / 1e9, static_cast<double>(r.cpu.system_ns) / 1e9, per_op,
      r.verify_failures, r.removed, r.fresh_buffers, counters);
}

}  // namespace siphon::bench::rados
