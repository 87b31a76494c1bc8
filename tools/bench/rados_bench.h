// `siphon-bench rados`: rados bench's workload, objects and output over any
// asynchronous object store client (../shared/reference/rados-client.md §5).
//
// Drop-in: the same object names (benchmark_data_<host>_<pid>_object<N>),
// contents ("I'm the %16dth op!" then 'z'), metadata object
// (benchmark_last_metadata or --run-name: u64 object size, s32 ops, s32 pid,
// u64 op size) and summary lines as `rados bench`, so either tool's `seq`,
// `rand` and `cleanup` work on objects the other wrote. Added: latency
// percentiles, client CPU per op, every byte read checked (--verify, on by
// default as in rados bench) and a machine-readable result.
//
// The runner is independent of the client: it drives an ObjectIO, which the
// RADOS client implements (and tests fake).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "msgr/base/buffer.h"
#include "tools/bench/cpu.h"
#include "tools/bench/histogram.h"

namespace siphon::bench::rados {

// The asynchronous object operations the bench needs. Completions may run on
// any thread, at most once each, never inline with reentry concerns for the
// caller (the runner takes its own lock). `r` is 0 or -errno.
class ObjectIO {
 public:
  using Done = std::function<void(int r)>;
  // The bytes read, in the pieces they arrived in (a reply's segments, so
  // a large read is not copied to be checked), valid during the call only.
  using ReadDone = std::function<void(int r, std::span<const std::string_view> data)>;
  virtual ~ObjectIO() = default;
  // WRITE `data` at `off` of `oid`; with `alloc_hint` preceded by a
  // SETALLOCHINT(object_size, write_size = data.length()) as rados bench
  // sends. The client may keep references to `data` (for a resend, in a
  // queued message) as long as it likes, without copying it: the runner
  // never changes bytes someone else still references. `data` is a slot's
  // own head (its first 4 KiB at most, which the op's stamp is written
  // into) and a body all slots share and nobody writes. The runner reuses
  // a slot's head, as rados bench reuses its slot's buffer, only once the
  // segment's use count says it is the sole holder, and takes a fresh one
  // otherwise.
  virtual void write(const std::string& oid, std::uint64_t off, const BufferList& data, bool alloc_hint,
                     std::uint64_t object_size, Done done) = 0;
  virtual void write_full(const std::string& oid, std::string data, Done done) = 0;
  virtual void read(const std::string& oid, std::uint64_t off, std::uint64_t len, ReadDone done) = 0;
  virtual void remove(const std::string& oid, Done done) = 0;
};

enum class Mode { write, seq, rand, cleanup };

struct Options {
  Mode mode = Mode::write;
  double seconds = 10;
  unsigned concurrency = 16;                  // -t
  std::uint64_t op_size = 4u << 20;           // -b
  std::uint64_t object_size = 0;              // -O (0: the op size)
  std::uint64_t max_objects = 0;              // --max-objects (0: no limit)
  bool cleanup = true;                        // write: false with --no-cleanup
  std::string run_name;                       // metadata object ("" = benchmark_last_metadata)
  bool hints = true;                          // false with --no-hints
  bool verify = true;                         // false with --no-verify
  bool json = false;                          // --format json: rados bench's JSON document
  bool show_time = false;                     // --show-time: local time before each text line
  std::string hostname;                       // "" = gethostname()
  int pid = 0;                                // 0 = getpid()
};

struct Metadata {
  std::uint64_t object_size = 0;
  std::int32_t ops = 0;
  std::int32_t pid = 0;
  std::uint64_t op_size = 0;
};
inline constexpr std::size_t kMetadataSize = 24;
std::string encode_metadata(const Metadata& m);
std::optional<Metadata> decode_metadata(std::string_view bytes);

// benchmark_data_<hostname, at most 29 characters>_<pid>
std::string object_prefix(std::string_view hostname, int pid);
std::string object_name(std::string_view prefix, std::uint64_t index);
// The contents of op `index`: "I'm the %16dth op!", a NUL, then 'z' filler.
std::string op_data(std::uint64_t index, std::uint64_t size);
// Rewrites only the head of a buffer op_data() made (for reuse per slot).
void stamp_op(std::uint64_t index, std::string& buf);
void stamp_op(std::uint64_t index, char* buf, std::size_t size);

struct Result {
  Mode mode = Mode::write;
  int error = 0;                  // 0, or the -errno that stopped the run
  std::string error_message;      // what to print (rados bench's words where it has them)
  double seconds = 0;             // total time run
  std::uint64_t ops = 0;          // writes or reads made
  std::uint64_t op_size = 0, object_size = 0;
  double bandwidth_mib = 0, bandwidth_stddev = 0, bandwidth_max = 0, bandwidth_min = 0;
  std::uint64_t iops_average = 0;
  double iops_stddev = 0;
  std::uint64_t iops_max = 0, iops_min = 0;
  Histogram latency_ns;           // per op, submission to completion
  std::vector<double> ops_per_second;  // the status lines' samples (ops finished in each second)
  double latency_stddev_s = 0;
  std::uint64_t verify_failures = 0;
  std::uint64_t removed = 0;      // objects deleted by cleanup
  std::uint64_t fresh_buffers = 0;  // write: slot buffers replaced because the client still held them
  CpuTimes cpu;                   // this process over the run (a write run's write phase)
  // The client's own counters (the OSD client's sends, resends, session
  // resets...), set by the caller; in to_json() as "client".
  std::vector<std::pair<std::string, std::uint64_t>> client_counters;
};

// Runs one bench. Progress, rados bench's summary and Siphon's additions
// (latency percentiles, CPU per op) go to `out`, as text or (opt.json) one
// JSON document; what rados bench writes to standard error ("X is not
// correct!") and, with JSON, the lines outside the document go to `err`.
Result run(ObjectIO& io, const Options& opt, std::ostream& out, std::ostream& err);
inline Result run(ObjectIO& io, const Options& opt, std::ostream& out) { return run(io, opt, out, out); }
// The result as one JSON object (siphon-bench --json).
std::string to_json(const Result& r);

}  // namespace siphon::bench::rados
