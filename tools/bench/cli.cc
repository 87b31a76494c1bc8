#include "tools/bench/cli.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>

namespace siphon::bench {
namespace {

// Which modes accept a flag.
enum : unsigned {
  kLoopback = 1u << 0,
  kServer = 1u << 1,
  kClient = 1u << 2,
  kCompare = 1u << 3,
  kObjd = 1u << 4,  // siphon-bench objd: a put/stat/get/delete workload against siphon-objd
  kLoad = kLoopback | kClient | kCompare,  // workload flags
  kAll = kLoopback | kServer | kClient | kCompare,
};

unsigned bit(Mode m) noexcept {
  switch (m) {
    case Mode::loopback: return kLoopback;
    case Mode::server: return kServer;
    case Mode::client: return kClient;
    case Mode::compare: return kCompare;
    case Mode::objd: return kObjd;
  }
  return 0;
}

std::optional<std::uint64_t> parse_uint(std::string_view s, std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s, double lo, double hi) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  const std::string copy(s);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(v) || v < lo || v > hi) return std::nullopt;
  return v;
}

struct Flag {
  std::string_view name;
  bool takes_value;
  unsigned modes;
  // Applies the value; returns "" or an error sentence (without the flag name).
  std::function<std::string(BenchArgs&, std::string_view)> apply;
};

std::string uint_flag(unsigned& out, std::string_view v, std::uint64_t lo, std::uint64_t hi) {
  const auto x = parse_uint(v, lo, hi);
  if (!x) return fmt::format("expects a whole number from {} to {}, got '{}'", lo, hi, v);
  out = static_cast<unsigned>(*x);
  return {};
}

std::string seconds_flag(double& out, std::string_view v, double lo, double hi, std::string_view what) {
  const auto x = parse_double(v, lo, hi);
  if (!x) return fmt::format("expects {} seconds ({} to {}), got '{}'", what, lo, hi, v);
  out = *x;
  return {};
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"--target", true, kClient | kObjd, [](BenchArgs& a, std::string_view v) -> std::string {
         if (v.empty()) return "expects the server's address, e.g. 192.0.2.1:6800";
         a.target = v;
         return {};
       }},
      {"--bind", true, kServer | kLoopback | kCompare, [](BenchArgs& a, std::string_view v) -> std::string {
         if (v.empty()) return "expects an address to listen on, e.g. 0.0.0.0:6800";
         a.bind = v;
         return {};
       }},
      {"--conns", true, kLoad | kObjd, [](BenchArgs& a, std::string_view v) { return uint_flag(a.conns, v, 1, 1024); }},
      {"--threads", true, kLoad, [](BenchArgs& a, std::string_view v) { return uint_flag(a.threads, v, 1, 256); }},
      {"--inflight", true, kLoad | kObjd, [](BenchArgs& a, std::string_view v) {
         a.inflight_given = true;
         return uint_flag(a.inflight, v, 1, 1000000);
       }},
      {"--size", true, kLoad | kObjd, [](BenchArgs& a, std::string_view v) -> std::string {
         const auto s = parse_size(v);
         if (!s) return fmt::format("expects a byte count such as 4096, 4K, 1M, got '{}'", v);
         a.sizes = SizeDist::fixed(*s);
         a.size_spec = format_size(*s);
         a.size_given = true;
         return {};
       }},
      {"--size-dist", true, kLoad | kObjd, [](BenchArgs& a, std::string_view v) -> std::string {
         std::string why;
         auto d = SizeDist::parse(v, &why);
         if (!d) return fmt::format("'{}': {} (forms: 4K | 1K-64K | 4K:70,64K:20,4M:10)", v, why);
         a.sizes = *d;
         a.size_spec = d->describe();
         a.size_given = true;
         return {};
       }},
      {"--count", true, kLoad | kObjd, [](BenchArgs& a, std::string_view v) -> std::string {
         const auto x = parse_uint(v, 1, std::numeric_limits<std::uint64_t>::max() / 2);
         if (!x) return fmt::format("expects a positive number of requests, got '{}'", v);
         a.count = *x;
         return {};
       }},
      {"--duration", true, kLoad | kServer, [](BenchArgs& a, std::string_view v) -> std::string {
         a.duration_given = true;
         if (a.mode == Mode::server) return seconds_flag(a.duration, v, 0, 1e7, "a lifetime in");
         return seconds_flag(a.duration, v, 0.001, 1e7, "a measured time in");
       }},
      {"--warmup", true, kLoad,
       [](BenchArgs& a, std::string_view v) { return seconds_flag(a.warmup, v, 0, 1e6, "a warm-up time in"); }},
      {"--think-us", true, kLoad, [](BenchArgs& a, std::string_view v) -> std::string {
         unsigned t = 0;
         auto e = uint_flag(t, v, 0, 10000000);
         a.think_us = t;
         return e;
       }},
      {"--pattern", true, kLoad, [](BenchArgs& a, std::string_view v) -> std::string {
         if (v == "echo") a.pattern = Pattern::echo;
         else if (v == "sink") a.pattern = Pattern::sink;
         else if (v == "source") a.pattern = Pattern::source;
         else return fmt::format("expects echo, sink or source, got '{}'", v);
         return {};
       }},
      {"--rate", true, kLoad, [](BenchArgs& a, std::string_view v) -> std::string {
         const auto x = parse_double(v, 0.001, 1e9);
         if (!x) return fmt::format("expects requests per second (a positive number), got '{}'", v);
         a.rate = *x;
         return {};
       }},
      {"--verify", false, kLoad | kObjd, [](BenchArgs& a, std::string_view) -> std::string {
         a.verify = true;
         return {};
       }},
      {"--policy", true, kAll, [](BenchArgs& a, std::string_view v) -> std::string {
         if (v == "lossless") a.lossy = false;
         else if (v == "lossy") a.lossy = true;
         else return fmt::format("expects lossless or lossy, got '{}'", v);
         return {};
       }},
      {"--dispatch", true, kAll, [](BenchArgs& a, std::string_view v) -> std::string {
         if (v == "fast") a.queue_dispatch = false;
         else if (v == "queue") a.queue_dispatch = true;
         else return fmt::format("expects fast or queue, got '{}'", v);
         return {};
       }},
      {"--json", true, kAll | kObjd, [](BenchArgs& a, std::string_view v) -> std::string {
         if (v.empty()) return "expects a file name or '-' for standard output";
         a.json = v;
         return {};
       }},
      {"--plot", true, kLoopback | kClient, [](BenchArgs& a, std::string_view v) -> std::string {
         if (v.empty()) return "expects an SVG file name";
         a.plot = v;
         return {};
       }},
      {"--quiet", false, kAll | kObjd, [](BenchArgs& a, std::string_view) -> std::string {
         a.quiet = true;
         return {};
       }},
      {"--perf-dump", false, kLoopback | kClient | kObjd, [](BenchArgs& a, std::string_view) -> std::string {
         a.perf_dump = true;
         return {};
       }},
      {"--once", false, kServer, [](BenchArgs& a, std::string_view) -> std::string {
         a.once = true;
         return {};
       }},
      {"--ms-types", true, kCompare, [](BenchArgs& a, std::string_view v) -> std::string {
         a.ms_types.clear();
         std::string_view rest = v;
         while (!rest.empty()) {
           const auto comma = rest.find(',');
           const std::string_view item = rest.substr(0, comma);
           if (item.empty()) return fmt::format("has an empty entry in '{}'", v);
           a.ms_types.emplace_back(item);
           rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
           if (comma != std::string_view::npos && rest.empty()) return fmt::format("has an empty entry in '{}'", v);
         }
         if (a.ms_types.empty()) return "expects a comma-separated list, e.g. async+posix,async+rdma";
         return {};
       }},
      {"--modes", true, kCompare, [](BenchArgs& a, std::string_view v) -> std::string {
         a.con_modes.clear();
         std::string_view rest = v;
         for (;;) {
           const auto comma = rest.find(',');
           const std::string_view item = rest.substr(0, comma);
           if (item != "crc" && item != "secure")
             return fmt::format("expects connection modes crc and/or secure, comma-separated (e.g. crc,secure), "
                                "got '{}' in '{}'",
                                item, v);
           for (const auto& m : a.con_modes)
             if (m == item) return fmt::format("lists {} twice in '{}'", item, v);
           a.con_modes.emplace_back(item);
           if (comma == std::string_view::npos) break;
           rest = rest.substr(comma + 1);
         }
         return {};
       }},
      {"--connect-timeout", true, kLoad | kObjd, [](BenchArgs& a, std::string_view v) {
         return seconds_flag(a.connect_timeout, v, 0.1, 3600, "a timeout in");
       }},
      {"--drain-timeout", true, kLoad | kObjd, [](BenchArgs& a, std::string_view v) {
         return seconds_flag(a.drain_timeout, v, 0.1, 3600, "a timeout in");
       }},
      {"--seed", true, kLoad | kObjd, [](BenchArgs& a, std::string_view v) -> std::string {
         const auto x = parse_uint(v, 0, std::numeric_limits<std::uint64_t>::max());
         if (!x) return fmt::format("expects a whole number, got '{}'", v);
         a.seed = *x;
         return {};
       }},
      {"--soft-link-down", true, kLoad, [](BenchArgs& a, std::string_view v) -> std::string {
         const auto colon = v.find(':');
         const auto at = colon == std::string_view::npos ? std::nullopt : parse_double(v.substr(0, colon), 0, 1e6);
         const auto len = colon == std::string_view::npos ? std::nullopt : parse_double(v.substr(colon + 1), 0.001, 1e6);
         if (!at || !len) return fmt::format("expects AT:FOR in seconds (e.g. 2:3), got '{}'", v);
         a.soft_link_down_at = *at;
         a.soft_link_down_for = *len;
         return {};
       }},
      {"--inject-corruption-every", true, kLoad, [](BenchArgs& a, std::string_view v) -> std::string {
         const auto x = parse_uint(v, 1, std::numeric_limits<std::uint64_t>::max());
         if (!x) return fmt::format("expects a positive whole number, got '{}'", v);
         a.inject_corruption_every = *x;
         return {};
       }},
  };
  return table;
}

std::string modes_of(unsigned m) {
  std::string s;
  for (Mode x : {Mode::loopback, Mode::server, Mode::client, Mode::compare, Mode::objd}) {
    if ((m & bit(x)) == 0) continue;
    if (!s.empty()) s += ", ";
    s += to_string(x);
  }
  return s;
}

}  // namespace

std::string_view to_string(Mode m) noexcept {
  switch (m) {
    case Mode::loopback: return "loopback";
    case Mode::server: return "server";
    case Mode::client: return "client";
    case Mode::compare: return "compare";
    case Mode::objd: return "objd";
  }
  return "?";
}

std::string_view to_string(Pattern p) noexcept {
  switch (p) {
    case Pattern::echo: return "echo";
    case Pattern::sink: return "sink";
    case Pattern::source: return "source";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view s) noexcept {
  for (Mode m : {Mode::loopback, Mode::server, Mode::client, Mode::compare, Mode::objd})
    if (s == to_string(m)) return m;
  return std::nullopt;
}

std::optional<BenchArgs> parse_bench_args(Mode mode, std::span<const std::string> args, std::string& error) {
  BenchArgs a;
  a.mode = mode;
  if (mode == Mode::server) a.duration = 0;  // serve until signalled
  bool warmup_given = false;
  bool size_flag = false, size_dist_flag = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& raw = args[i];
    const auto eq = raw.find('=');
    const std::string_view name = std::string_view(raw).substr(0, raw.rfind("--", 0) == 0 ? eq : std::string::npos);
    const Flag* f = nullptr;
    for (const Flag& x : flags())
      if (x.name == name) f = &x;
    if (f == nullptr) {
      if (raw.rfind("-", 0) == 0 && raw.size() > 1)
        error = fmt::format("unknown flag '{}'", raw);
      else
        error = fmt::format("unexpected argument '{}'", raw);
      return std::nullopt;
    }
    if ((f->modes & bit(mode)) == 0) {
      error = fmt::format("{} does not apply to {} mode (it is for: {})", f->name, to_string(mode), modes_of(f->modes));
      if (mode == Mode::server && (f->modes & kClient) != 0)
        error += "; the client sends the workload to the server with each request";
      return std::nullopt;
    }
    std::string value;
    if (f->takes_value) {
      if (eq != std::string::npos) {
        value = raw.substr(eq + 1);
      } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
        value = args[++i];
      } else {
        error = fmt::format("{} needs a value", f->name);
        return std::nullopt;
      }
    } else if (eq != std::string::npos) {
      error = fmt::format("{} takes no value", f->name);
      return std::nullopt;
    }
    if (f->name == "--warmup") warmup_given = true;
    if (f->name == "--size") size_flag = true;
    if (f->name == "--size-dist") size_dist_flag = true;
    if (std::string e = f->apply(a, value); !e.empty()) {
      error = fmt::format("{} {}", f->name, e);
      return std::nullopt;
    }
  }

  // Combinations.
  auto fail = [&](std::string e) -> std::optional<BenchArgs> {
    error = std::move(e);
    return std::nullopt;
  };
  if (size_flag && size_dist_flag) return fail("--size and --size-dist exclude each other");
  if (a.count && a.duration_given) return fail("--count and --duration exclude each other (a run is bounded by one)");
  if (a.count && warmup_given) return fail("--warmup applies to --duration runs, not to --count");
  if (mode == Mode::client && a.target.empty()) return fail("client mode needs --target ADDR (the server's address)");
  if (mode == Mode::objd && a.target.empty())
    return fail("objd mode needs --target ADDR (the public address siphon-objd printed)");
  if (mode == Mode::compare && a.ms_types.empty())
    return fail("compare mode needs --ms-types TYPE,TYPE... (e.g. async+posix,async+rdma)");
  if (mode != Mode::server) {
    if (a.rate > 0 && !a.inflight_given) a.inflight = 1024;
    if (a.threads > a.conns)
      return fail(fmt::format("--threads {} exceeds --conns {}: each load thread drives at least one connection",
                              a.threads, a.conns));
    if (a.sizes.max() > std::numeric_limits<std::uint32_t>::max())
      return fail(fmt::format("message size {} is over the 4G-1 a siphon-bench header can describe",
                              format_size(a.sizes.max())));
    if (a.inject_corruption_every != 0) {
      if (!a.verify) return fail("--inject-corruption-every needs --verify (nothing checks payloads otherwise)");
      if (a.sizes.min() == 0)
        return fail("--inject-corruption-every needs payload bytes to damage: every message size must be >= 1");
    }
  }
  return a;
}

std::string usage() {
  return R"(siphon-bench: traffic generator for the Siphon messenger (msgr2)

usage:
  siphon-bench loopback [flags]           client and server messengers in this process
  siphon-bench server --bind ADDR [flags] answer clients until signalled (or --duration, --once)
  siphon-bench client --target ADDR [flags]
  siphon-bench compare --ms-types T1,T2[,...] [--modes crc,secure] [flags]
                                          the loopback run on each stack (and connection
                                          mode), one table
  siphon-bench objd --target ADDR [flags] put, stat, get and delete --count objects (default
                                          1000) on a siphon-objd; --verify checks every get
  siphon-bench rados -p POOL SECONDS write|seq|rand [-t N] [-b SIZE] [--no-cleanup]
                                          rados bench against a Ceph cluster (its flags:
                                          siphon-bench rados --help)
  siphon-bench --help | --version
Configuration flags may also come before the mode: siphon-bench -c my.conf loopback

configuration (the compat Config, as Ceph programs read it):
  -c, --conf FILE        ceph.conf to read (default: $CEPH_CONF, else Ceph's search list)
  -n, --name TYPE.ID     entity whose sections are read and who authenticates
                         (default client.admin)
  -k, --keyring FILE     keyring holding that entity's key (default Ceph's keyring
                         list); the server side (loopback, server) admits the
                         keyring's entities. cephx runs when a key is found and
                         auth_client_required / auth_service_required list it;
                         --set ms_client_mode=secure --set ms_service_mode=secure
                         asks for secure mode (AES-128-GCM)
  --ms-type TYPE         async+posix (TCP) | async+rdma | async+<plugin>
  --set KEY=VALUE        any option of docs/configuration.md (also: --KEY VALUE)

workload (loopback, client, compare):
  --conns N              connections (default 1)
  --threads N            load threads; connections are divided among them (default 1)
  --inflight N           requests outstanding per connection (default 16; with
                         --rate a cap, default 1024)
  --size BYTES           message payload (default 4K; K, M, G suffixes)
  --size-dist SPEC       4K | 1K-64K | 4K:70,64K:20,4M:10 (weighted)
  --count N              send N requests in all, or:
  --duration SEC         measure for SEC seconds (default 4) after
  --warmup SEC           an unmeasured warm-up (default 1)
  --think-us N           the server busies itself N us per request before replying
  --pattern P            echo (payload both ways) | sink (client to server) |
                         source (server to client); default echo
  --rate N               open loop: N requests/s over all connections
                         (latency counts from the scheduled send time)
  --verify               sequence number + CRC per message: lost, duplicated,
                         reordered and corrupted counts
  --policy P             lossless (default) | lossy (also on the server)
  --dispatch D           fast (default, on the worker) | queue (dispatch thread)
  --connect-timeout SEC  (default 10)    --drain-timeout SEC (default 10)
  --seed N               seed of the size sampling (default 1)
  --modes M1[,M2]        compare: run each stack in each connection mode, crc and/or
                         secure (sets ms_client_mode and ms_service_mode; secure
                         needs cephx, i.e. -k KEYRING)

endpoints:
  --target ADDR          client: the server, IP:PORT (v2: prefix and /NONCE optional)
  --bind ADDR            server (and loopback's server): IP[:PORT] to listen on

output:
  --json FILE|-          the result as JSON (docs/benchmarking.md; '-' = stdout)
  --plot FILE.svg        latency CDF and throughput over time
  --quiet                no progress line (it is shown once a second on a terminal)
  --perf-dump            also print the perf counters this run moved (a `perf dump`
                         delta of this process, whole run; in --json as perf_dump_delta)
  --once                 server: exit after the first client's run

Exit status: 0 done, 1 run failed (setup, connection, errors), 2 bad usage or
configuration, 3 --verify found lost, duplicated, reordered or corrupted messages.
)";
}

}  // namespace siphon::bench
