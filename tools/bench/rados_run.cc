#include "tools/bench/rados_run.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <malloc.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string_view>
#include <vector>

#include "rados/client/objecter.h"
#include "tools/bench/rados_bench.h"
#include "tools/bench/report.h"
#include "tools/bench/workload.h"
#include "tools/rados/cluster.h"

namespace siphon::bench {
namespace {

constexpr int kUsage = 2;

constexpr std::string_view kHelp = R"(siphon-bench rados: rados bench over Siphon's OSD client (rados bench's argument order)

USAGE
  siphon-bench rados [OPTIONS] -p POOL SECONDS write|seq|rand [-t N] [-b SIZE] [--no-cleanup]
  siphon-bench rados [OPTIONS] -p POOL cleanup [--run-name NAME]

  -t N                 ops in flight (default 16)
  -b SIZE              op size, bytes or with K/M/G (default 4M)
  -O SIZE              object size (write; default: the op size)
  --max-objects N      write: stop after N ops
  --no-cleanup         write: keep the objects (for seq/rand, or rados bench seq)
  --run-name NAME      the metadata object (default benchmark_last_metadata)
  --no-hints           write: no SETALLOCHINT before each write
  --no-verify          seq/rand: do not check the bytes read back
  --format json        rados bench's JSON on stdout instead of the table (rados bench's keys,
                       then latency_p50..p99.99 and cpu_us_per_op); lines outside it go to stderr
  --show-time          the local time before each line, as rados bench --show-time
  --json FILE          Siphon's result document ('-': stdout, the table then goes to stderr)
  --plot FILE.svg      latency CDF and ops per second over the run (write, seq, rand)
  --osd-op-timeout SEC fail an op an OSD has not answered after SEC s (default 30; 0 = never)
  --connect-timeout SEC  give up reaching the monitors after SEC s (default 30)
  -c CONF, -m ADDR, -k KEYRING, -n TYPE.ID, --id ID, --<ceph option> VALUE    as for rados

Objects, contents, metadata object and summary are rados bench's: either tool's seq, rand and
cleanup work on what the other wrote. Added after the summary: latency percentiles and client
CPU per op. Exit status: 0; 1 on an error; 2 on a usage error; 3 when data read back differed.
)";

int usage_error(const std::string& why) {
  fmt::print(stderr, "siphon-bench rados: {}\n(siphon-bench rados --help lists the flags)\n", why);
  return kUsage;
}

std::chrono::nanoseconds secs(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

// ObjectIO over the OSD client: one MOSDOp per call, the completion's
// result passed on as is (0 or -errno).
class RadosIO final : public rados::ObjectIO {
 public:
  RadosIO(siphon::rados::Objecter& o, std::int64_t pool) : o_(o), pool_(pool) {}

  void write(const std::string& oid, std::uint64_t off, const BufferList& data, bool alloc_hint,
             std::uint64_t object_size, Done done) override {
    std::vector<siphon::rados::OsdOp> ops;
    if (alloc_hint)
      ops.push_back(siphon::rados::OsdOp::setallochint(object_size, data.length(), siphon::rados::kAllocHintBench));
    // The runner's buffers by reference: the op (kept for resends) and the
    // message's data segment share it, as rados bench hands librados its
    // slot's buffer; the runner does not touch it while they hold it.
    ops.push_back(siphon::rados::OsdOp::write(off, data));
    submit(oid, std::move(ops), std::move(done));
  }
  void write_full(const std::string& oid, std::string data, Done done) override {
    submit(oid, {siphon::rados::OsdOp::writefull(BufferList::copy_of(data))}, std::move(done));
  }
  void read(const std::string& oid, std::uint64_t off, std::uint64_t len, ReadDone done) override {
    o_.submit(pool_, oid, {siphon::rados::OsdOp::read(off, len)}, {},
              [done = std::move(done)](const siphon::rados::OpResult& r) {
                if (r.result < 0 || r.ops.empty()) return done(r.result < 0 ? r.result : -EIO, {});
                // The reply's segments as they are: no 4 MiB copy to check them.
                std::vector<std::string_view> pieces;
                for (const BufferPtr& p : r.ops[0].outdata.ptrs())
                  pieces.emplace_back(reinterpret_cast<const char*>(p.data()), p.length());
                done(0, pieces);
              });
  }
  void remove(const std::string& oid, Done done) override {
    submit(oid, {siphon::rados::OsdOp::remove()}, std::move(done));
  }

 private:
  void submit(const std::string& oid, std::vector<siphon::rados::OsdOp> ops, Done done) {
    o_.submit(pool_, oid, std::move(ops), {},
              [done = std::move(done)](const siphon::rados::OpResult& r) { done(r.result < 0 ? r.result : 0); });
  }
  siphon::rados::Objecter& o_;
  std::int64_t pool_;
};

bool parse_count(const std::string& v, std::uint64_t& out) {
  char* end = nullptr;
  out = std::strtoull(v.c_str(), &end, 10);
  return !v.empty() && v[0] != '-' && *end == '\0';
}

}  // namespace

int run_rados(const std::vector<std::string>& a) {
  // A 4 MiB read reply arrives in a receive buffer of its own, freed when
  // the op completes: at glibc's defaults each is mmapped and unmapped, so
  // every op pays page faults and zeroing for 4 MiB (a third of a 4 MiB seq
  // run's CPU; docs/performance.md). Keep such blocks in the heap instead,
  // as rados does through tcmalloc. The library's own fix would be a pool
  // of receive segments in the transport.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
  rados::Options opt;
  rados_tool::ConfigFlags config;
  std::string pool, json, plot;
  double op_timeout = 30, connect_timeout = 30;
  std::vector<std::string> words;
  std::string error;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string& w = a[i];
    std::string v;
    auto take = [&](std::initializer_list<std::string_view> flags) {
      return rados_tool::take_value(a, i, flags, v, error);
    };
    if (w == "-h" || w == "--help") {
      std::cout << kHelp;
      return 0;
    } else if (take({"-p", "--pool"})) {
      pool = v;
    } else if (take({"-t", "--concurrent-ios"})) {
      std::uint64_t n = 0;
      if (!parse_count(v, n) || n == 0 || n > 65536) return usage_error(fmt::format("-t: '{}' is not a count of 1 to 65536", v));
      opt.concurrency = static_cast<unsigned>(n);
    } else if (take({"-b", "--block-size"})) {
      const auto n = parse_size(v);
      if (!n || *n == 0) return usage_error(fmt::format("-b: '{}' is not a size (4096, 4K, 4M)", v));
      opt.op_size = *n;
    } else if (take({"-O", "--object-size"})) {
      const auto n = parse_size(v);
      if (!n || *n == 0) return usage_error(fmt::format("-O: '{}' is not a size (4096, 4K, 4M)", v));
      opt.object_size = *n;
    } else if (take({"--max-objects"})) {
      if (!parse_count(v, opt.max_objects)) return usage_error(fmt::format("--max-objects: '{}' is not a count", v));
    } else if (take({"--run-name"})) {
      opt.run_name = v;
    } else if (take({"--json"})) {
      json = v;
    } else if (take({"--plot"})) {
      plot = v;
    } else if (take({"--format", "-f"})) {
      if (v != "json" && v != "plain")
        return usage_error(fmt::format("--format: '{}' is not supported (json, or plain for the table)", v));
      opt.json = v == "json";
    } else if (take({"--osd-op-timeout", "--rados-osd-op-timeout"})) {
      const auto s = rados_tool::parse_seconds(v, true);
      if (!s) return usage_error(fmt::format("--osd-op-timeout: '{}' is not a non-negative number of seconds", v));
      op_timeout = *s;
    } else if (take({"--connect-timeout"})) {
      const auto s = rados_tool::parse_seconds(v, false);
      if (!s) return usage_error(fmt::format("--connect-timeout: '{}' is not a positive number of seconds", v));
      connect_timeout = *s;
    } else if (!error.empty()) {
      return usage_error(error);
    } else if (w == "--no-cleanup") {
      opt.cleanup = false;
    } else if (w == "--no-hints") {
      opt.hints = false;
    } else if (w == "--no-verify") {
      opt.verify = false;
    } else if (w == "--verify") {
      opt.verify = true;
    } else if (w == "--show-time") {
      opt.show_time = true;
    } else if (config.take(a, i, error)) {
      continue;
    } else if (!error.empty()) {
      return usage_error(error);
    } else if (w.size() > 1 && w[0] == '-') {
      return usage_error(fmt::format("unknown flag {}", w));
    } else {
      words.push_back(w);
    }
  }
  if (pool.empty()) return usage_error("no pool given: -p POOL");
  if (words.size() == 1 && words[0] == "cleanup") {
    opt.mode = rados::Mode::cleanup;
  } else if (words.size() == 2) {
    const auto s = rados_tool::parse_seconds(words[0], false);
    if (!s) return usage_error(fmt::format("'{}' is not a positive number of seconds (SECONDS write|seq|rand)", words[0]));
    opt.seconds = *s;
    if (words[1] == "write") opt.mode = rados::Mode::write;
    else if (words[1] == "seq") opt.mode = rados::Mode::seq;
    else if (words[1] == "rand") opt.mode = rados::Mode::rand;
    else return usage_error(fmt::format("unknown bench mode '{}' (write, seq, rand)", words[1]));
  } else {
    return usage_error("expected SECONDS write|seq|rand, or cleanup");
  }
  if (opt.json && json == "-")
    return usage_error("--format json and --json - both write to stdout: give --json a file");
  if (opt.object_size && opt.object_size < opt.op_size)
    return usage_error("-O: the object size must be at least the op size (-b)");

  rados_tool::ClusterOptions co;
  co.connect_timeout = secs(connect_timeout);
  co.op_timeout = secs(op_timeout);
  rados_tool::Cluster cluster;
  std::vector<std::string> notes;
  const rados_tool::ConnectError err = cluster.connect(config, co, &notes);
  for (const std::string& n : notes) fmt::print(stderr, "siphon-bench rados: {}\n", n);
  if (err) {
    fmt::print(stderr, "siphon-bench rados: {}\n", err.message);
    return err.code;
  }
  const std::int64_t pool_id = cluster.lookup_pool(pool);
  if (pool_id < 0) {
    fmt::print(stderr, "error opening pool {}: {}\n", pool, siphon::rados::errno_text(-ENOENT));
    return 1;
  }
  RadosIO io(cluster.objecter(), pool_id);
  std::ostream& out = json == "-" ? std::cerr : std::cout;
  rados::Result r = rados::run(io, opt, out, std::cerr);
  out.flush();
  // What the OSD client did underneath: resends and session resets show
  // that ops survived an OSD going away (stderr, so the table stays rados bench's).
  const siphon::rados::ObjecterStats st = cluster.objecter().stats();
  r.client_counters = {{"ops_sent", st.ops_sent},         {"resends", st.resends},
                       {"session_resets", st.session_resets}, {"map_epochs", st.map_epochs},
                       {"backoffs", st.backoffs},         {"timeouts", st.timeouts},
                       {"decode_errors", st.decode_errors}};
  if (st.resends || st.session_resets || st.backoffs || st.timeouts || st.decode_errors)
    fmt::print(stderr,
               "siphon-bench rados: osd client: {} ops sent, {} resent, {} OSD session resets, {} backoffs, "
               "{} timed out, {} map epochs\n",
               st.ops_sent, st.resends, st.session_resets, st.backoffs, st.timeouts, st.map_epochs);
  cluster.shutdown();
  if (!json.empty()) {
    const std::string doc = rados::to_json(r) + "\n";
    if (json == "-") {
      std::cout << doc;
    } else {
      std::ofstream f(json);
      f << doc;
      if (!(f.flush())) {
        fmt::print(stderr, "siphon-bench rados: cannot write {}\n", json);
        return 1;
      }
    }
  }
  if (!plot.empty() && opt.mode != rados::Mode::cleanup) {
    // The plot of the other modes: latency CDF and a rate per second.
    Result pr;
    static constexpr const char* kModes[] = {"write", "seq", "rand", "cleanup"};
    pr.mode = "rados";
    pr.ms_type = "rados bench";
    pr.pattern = kModes[static_cast<int>(opt.mode)];
    pr.latency = r.latency_ns;
    pr.msgs_per_second = r.ops_per_second;
    std::ofstream f(plot);
    write_svg(f, pr);
    if (!(f.flush())) {
      fmt::print(stderr, "siphon-bench rados: cannot write {}\n", plot);
      return 1;
    }
  }
  if (r.error != 0) {
    fmt::print(stderr, "siphon-bench rados: {}\n", r.error_message);
    return 1;
  }
  return r.verify_failures ? 3 : 0;
}

}  // namespace siphon::bench
