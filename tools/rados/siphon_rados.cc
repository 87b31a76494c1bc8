// siphon-rados: object I/O against a Ceph cluster with the `rados` CLI's
// argument order (`rados -p POOL put OBJ FILE` -> `siphon-rados -p POOL put
// OBJ FILE`), over Siphon's messenger, mon client and OSD client
// (rados/client). Messages and exit status follow rados's, so scripts swap
// one word.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "msgr/base/buffer.h"
#include "msgr/base/log.h"
#include "rados/client/objecter.h"
#include "tools/rados/cluster.h"

namespace {

using namespace siphon;

constexpr std::string_view kUsage = R"(siphon-rados: object I/O on a Ceph cluster over Siphon's messenger (rados's argument order)

USAGE
  siphon-rados [OPTIONS] -p POOL put OBJECT FILE [--offset N]   write FILE ('-': stdin) to OBJECT
  siphon-rados [OPTIONS] -p POOL get OBJECT FILE                read OBJECT into FILE ('-': stdout)
  siphon-rados [OPTIONS] -p POOL stat OBJECT                    size and mtime
  siphon-rados [OPTIONS] -p POOL rm OBJECT...                   remove objects
  siphon-rados [OPTIONS] -p POOL create OBJECT                  create (fails if it exists)

OPTIONS
  -p, --pool POOL          the pool
  -N, --namespace NS       the object namespace
  -c, --conf FILE          ceph.conf to read (mon host, ms_* options)
  -m ADDR                  monitor address(es), overrides mon host
  -k, --keyring FILE / -n, --name TYPE.ID / --id ID / --<option> VALUE    as for rados
  --osd-op-timeout SEC     fail an op the OSD has not answered after SEC seconds
                           (rados_osd_op_timeout; default 30 here, 0 = wait forever)
  --connect-timeout SEC    give up reaching the monitors after SEC seconds (default 30)
  -h, --help               this text

Exit status: 0, or 1 with rados's message (e.g. "error getting POOL/OBJ: (2) No such file
or directory"); 13 when authentication fails.
)";

constexpr std::uint64_t kOpSize = 4 << 20;  // rados's default op size: 4 MiB per write/read

[[noreturn]] void usage_error(const std::string& why) {
  std::fprintf(stderr, "siphon-rados: %s\n", why.c_str());
  std::exit(22);
}

struct Cli {
  rados_tool::ConfigFlags config;
  std::vector<std::string> words;
  std::string pool, nspace;
  std::uint64_t offset = 0;
  bool has_offset = false;
  double op_timeout = 30;
  double connect_timeout = 30;
};

double seconds_flag(const std::string& text, std::string_view flag, bool zero_ok) {
  const auto v = rados_tool::parse_seconds(text, zero_ok);
  if (!v)
    usage_error(fmt::format("{}: '{}' is not a {} number of seconds", flag, text,
                            zero_ok ? "non-negative" : "positive"));
  return *v;
}

Cli parse_cli(const std::vector<std::string>& a) {
  Cli c;
  std::string error;
  auto take = [&](std::size_t& i, std::initializer_list<std::string_view> flags, std::string& out) {
    const bool got = rados_tool::take_value(a, i, flags, out, error);
    if (!error.empty()) usage_error(error);
    return got;
  };
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string& w = a[i];
    std::string v;
    if (w == "-h" || w == "--help") {
      std::fputs(kUsage.data(), stdout);
      std::exit(0);
    } else if (take(i, {"-p", "--pool"}, v)) {
      c.pool = v;
    } else if (take(i, {"-N", "--namespace"}, v)) {
      c.nspace = v;
    } else if (take(i, {"--offset"}, v)) {
      char* end = nullptr;
      c.offset = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || v[0] == '-') usage_error(fmt::format("--offset: '{}' is not a byte offset", v));
      c.has_offset = true;
    } else if (take(i, {"--osd-op-timeout", "--rados-osd-op-timeout"}, v)) {
      c.op_timeout = seconds_flag(v, "--osd-op-timeout", true);
    } else if (take(i, {"--connect-timeout"}, v)) {
      c.connect_timeout = seconds_flag(v, "--connect-timeout", false);
    } else if (c.config.take(a, i, error)) {
      continue;
    } else if (!error.empty()) {
      usage_error(error);
    } else if (w.size() > 2 && w.rfind("--", 0) == 0) {
      usage_error(fmt::format("unknown option {}", w));
    } else {
      c.words.push_back(w);
    }
  }
  return c;
}

std::chrono::nanoseconds secs(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

// One op, waited for.
rados::OpResult run(rados::Objecter& o, std::int64_t pool, const Cli& cli, const std::string& oid,
                    std::vector<rados::OsdOp> ops) {
  return o.submit(pool, oid, std::move(ops), cli.nspace)->wait();
}

int fail(const std::string& what, const rados::OpResult& r) {
  // rados prints the errno text; a timeout also gets our sentence (which PG,
  // which OSD, which epoch).
  std::fprintf(stderr, "%s: %s\n", what.c_str(), rados::errno_text(r.result).c_str());
  if (r.result == -ETIMEDOUT || r.result == -ESHUTDOWN) std::fprintf(stderr, "siphon-rados: %s\n", r.message.c_str());
  return 1;
}

bool read_file(const std::string& path, BufferList& out, std::string& error) {
  const int fd = path == "-" ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = fmt::format("error reading input file {}: {}", path, rados::errno_text(-errno));
    return false;
  }
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = fmt::format("error reading input file {}: {}", path, rados::errno_text(-errno));
      if (fd != STDIN_FILENO) ::close(fd);
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  if (fd != STDIN_FILENO) ::close(fd);
  return true;
}

int put_object(rados::Objecter& o, std::int64_t pool, const Cli& cli, const std::string& oid, const std::string& file) {
  BufferList data;
  std::string error;
  if (!read_file(file, data, error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  const std::string what = fmt::format("error putting {}/{}", cli.pool, oid);
  // As rados: WRITEFULL of the first 4 MiB (WRITE at --offset if given),
  // then WRITEs at increasing offsets; an empty file is an empty WRITEFULL.
  std::uint64_t off = 0;
  do {
    const std::uint64_t len = std::min<std::uint64_t>(kOpSize, data.length() - off);
    BufferList chunk = data.slice(off, len);
    rados::OsdOp op = off == 0 && !cli.has_offset ? rados::OsdOp::writefull(std::move(chunk))
                                                  : rados::OsdOp::write(cli.offset + off, std::move(chunk));
    const rados::OpResult r = run(o, pool, cli, oid, {std::move(op)});
    if (r.result < 0) return fail(what, r);
    off += len;
  } while (off < data.length());
  return 0;
}

int get_object(rados::Objecter& o, std::int64_t pool, const Cli& cli, const std::string& oid, const std::string& file) {
  const std::string what = fmt::format("error getting {}/{}", cli.pool, oid);
  BufferList all;
  for (std::uint64_t off = 0;; off += kOpSize) {
    rados::OpResult r = run(o, pool, cli, oid, {rados::OsdOp::read(off, kOpSize)});
    if (r.result < 0) return fail(what, r);
    BufferList& got = r.ops.at(0).outdata;
    const std::size_t n = got.length();
    all.append(std::move(got));
    if (n < kOpSize) break;
  }
  const int fd = file == "-" ? STDOUT_FILENO : ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "error opening %s: %s\n", file.c_str(), rados::errno_text(-errno).c_str());
    return 1;
  }
  const bool ok = write_all(fd, all);
  if (fd != STDOUT_FILENO) ::close(fd);
  if (!ok) {
    std::fprintf(stderr, "error writing %s\n", file.c_str());
    return 1;
  }
  return 0;
}

int stat_object(rados::Objecter& o, std::int64_t pool, const Cli& cli, const std::string& oid) {
  const rados::OpResult r = run(o, pool, cli, oid, {rados::OsdOp::stat()});
  if (r.result < 0) return fail(fmt::format("error stat-ing {}/{}", cli.pool, oid), r);
  const BufferList& out = r.ops.at(0).outdata;
  if (out.length() < 16) {
    std::fprintf(stderr, "error stat-ing %s/%s: the OSD's STAT reply has %zu bytes, not 16\n", cli.pool.c_str(),
                 oid.c_str(), out.length());
    return 1;
  }
  proto::Decoder d(out);
  const std::uint64_t size = d.u64("size");
  const std::time_t mtime = d.u32("mtime sec");
  // rados prints utime_t(mtime, 0) in local time: 2026-12-01T09:55:10.000000+0000
  std::tm tm{};
  ::localtime_r(&mtime, &tm);
  char when[64];
  std::strftime(when, sizeof when, "%FT%T.000000%z", &tm);
  std::printf("%s/%s mtime %s, size %llu\n", cli.pool.c_str(), oid.c_str(), when,
              static_cast<unsigned long long>(size));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Cli cli = parse_cli(std::vector<std::string>(argv + 1, argv + argc));
  if (cli.words.empty()) {
    std::fputs(kUsage.data(), stderr);
    return 22;
  }
  const std::string& cmd = cli.words[0];
  const std::size_t nargs = cli.words.size() - 1;
  const bool known = (cmd == "put" && nargs == 2) || (cmd == "get" && nargs == 2) ||
                     (cmd == "stat" && nargs == 1) || (cmd == "rm" && nargs >= 1) ||
                     (cmd == "create" && nargs == 1);
  if (!known) usage_error(fmt::format("unknown command or wrong arguments: {} (see --help)", fmt::join(cli.words, " ")));
  if (cli.pool.empty()) usage_error("no pool given: -p POOL");

  rados_tool::ClusterOptions co;
  co.connect_timeout = secs(cli.connect_timeout);
  co.op_timeout = secs(cli.op_timeout);
  rados_tool::Cluster cluster;
  std::vector<std::string> notes;
  const rados_tool::ConnectError err = cluster.connect(cli.config, co, &notes);
  for (const std::string& n : notes) std::fprintf(stderr, "siphon-rados: %s\n", n.c_str());
  if (err) {
    std::fprintf(stderr, "siphon-rados: %s\n", err.message.c_str());
    return err.code;
  }
  rados::Objecter& objecter = cluster.objecter();
  int rc = 0;
  const std::int64_t pool = cluster.lookup_pool(cli.pool);
  if (pool < 0) {
    std::fprintf(stderr, "error opening pool %s: %s\n", cli.pool.c_str(), rados::errno_text(-ENOENT).c_str());
    rc = 1;
  } else if (cmd == "put") {
    rc = put_object(objecter, pool, cli, cli.words[1], cli.words[2]);
  } else if (cmd == "get") {
    rc = get_object(objecter, pool, cli, cli.words[1], cli.words[2]);
  } else if (cmd == "stat") {
    rc = stat_object(objecter, pool, cli, cli.words[1]);
  } else if (cmd == "create") {
    const rados::OpResult r = run(objecter, pool, cli, cli.words[1], {rados::OsdOp::create(true)});
    if (r.result < 0) rc = fail(fmt::format("error creating {}/{}", cli.pool, cli.words[1]), r);
  } else {
    for (std::size_t i = 1; i < cli.words.size(); ++i) {
      const rados::OpResult r = run(objecter, pool, cli, cli.words[i], {rados::OsdOp::remove()});
      if (r.result < 0) rc = fail(fmt::format("error removing {}>{}", cli.pool, cli.words[i]), r);
    }
  }
  cluster.shutdown();
  return rc;
}
