// siphon-ceph: a small monitor client with the ceph CLI's conventions, built
// on Siphon's messenger (msgr2, auth none). It reads mon_host and the ms_*
// options from a ceph.conf, sends one mon command (matched against the mon's
// own command table, as `ceph` does) or one version query, prints the mon's
// output and exits with the command's return code.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command_sig.h"
#include "map_object.h"
#include "compat/config.h"
#include "compat/factory.h"
#include "compat/keyring.h"
#include "msgr/base/buffer.h"
#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "msgr/mon/mon_client.h"
#include "tools/rados/cluster.h"

namespace {

using namespace siphon;
using namespace std::chrono_literals;

constexpr std::string_view kUsage = R"(siphon-ceph: talk to Ceph monitors over Siphon's msgr2 messenger (cephx or auth none)

USAGE
  siphon-ceph [OPTIONS] COMMAND WORDS...       any mon command, e.g. status, mon dump,
                                               osd dump, osd pool ls detail, version
  siphon-ceph [OPTIONS] get-version MAP        newest and oldest epoch of monmap,
                                               osdmap, mgrmap, fsmap or mdsmap
  siphon-ceph [OPTIONS] map-object POOL OBJECT... [-N NAMESPACE]
                                               where objects go (what `ceph osd map
                                               -f json` prints, one line each),
                                               computed from the OSDMap; '-' reads
                                               names from stdin; -f plain for text

OPTIONS
  -c, --conf FILE          ceph.conf to read (mon host, ms_* options)
  -m ADDR                  monitor address(es), overrides mon host
  -f, --format FMT         json, json-pretty or plain (default: the mon's)
  --connect-timeout SEC    give up connecting after SEC seconds (default 30)
  --timeout SEC            give up waiting for the reply after SEC seconds (default 300)
  -s, --status             the same as the command 'status'
  --msgr2-rev0             speak msgr2.0 frames instead of msgr2.1 (tests)
  -k, --keyring FILE       keyring with the entity's key (default: Ceph's search list)
  -n, --name TYPE.ID / --id ID / --<option> VALUE    as for ceph
  -h, --help               this text

Named command arguments may be given as --name VALUE (e.g. osd pool create p --pg_num 8).
Exit status: the command's error number (e.g. 22 for EINVAL), 0 on success; 1 when no
monitor could be reached, 13 when authentication fails (no key, or a wrong key).
)";

struct Cli {
  std::vector<std::string> compat_args;
  std::vector<std::string> words;
  std::string format;
  double connect_timeout = 30;
  double timeout = 300;
  bool rev0 = false;
};

// The RADOS tools' flag helpers (tools/rados/cluster.h), exiting with
// status 22 on a bad value as ceph does.
bool take_value(const std::vector<std::string>& a, std::size_t& i, std::string_view flag, std::string& out) {
  std::string error;
  const bool got = rados_tool::take_value(a, i, {flag}, out, error);
  if (!error.empty()) {
    std::fprintf(stderr, "siphon-ceph: %s\n", error.c_str());
    std::exit(22);
  }
  return got;
}

double parse_seconds(const std::string& text, std::string_view flag) {
  const auto v = rados_tool::parse_seconds(text, false);
  if (!v) {
    std::fprintf(stderr, "siphon-ceph: %.*s: '%s' is not a positive number of seconds\n",
                 static_cast<int>(flag.size()), flag.data(), text.c_str());
    std::exit(22);
  }
  return *v;
}

bool is_option(std::string name) {
  if (name.rfind("no-", 0) == 0 || name.rfind("no_", 0) == 0) name = name.substr(3);
  std::replace(name.begin(), name.end(), '-', '_');
  return compat::find_option(name).has_value();
}

Cli parse_cli(const std::vector<std::string>& a) {
  Cli c;
  bool words_only = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string& w = a[i];
    std::string v;
    if (words_only) {
      c.words.push_back(w);
    } else if (w == "-h" || w == "--help") {
      std::fputs(kUsage.data(), stdout);
      std::exit(0);
    } else if (take_value(a, i, "-m", v) || take_value(a, i, "--mon-host", v)) {
      c.compat_args.push_back("--mon_host");
      c.compat_args.push_back(v);
    } else if (take_value(a, i, "-f", v) || take_value(a, i, "--format", v)) {
      if (v != "json" && v != "json-pretty" && v != "plain" && v != "xml" && v != "xml-pretty") {
        std::fprintf(stderr, "siphon-ceph: --format: '%s' is not json, json-pretty or plain\n", v.c_str());
        std::exit(22);
      }
      c.format = v;
    } else if (take_value(a, i, "--connect-timeout", v)) {
      c.connect_timeout = parse_seconds(v, "--connect-timeout");
    } else if (take_value(a, i, "--timeout", v)) {
      c.timeout = parse_seconds(v, "--timeout");
    } else if (w == "-s" || w == "--status") {
      c.words.push_back("status");
    } else if (w == "--msgr2-rev0") {
      c.rev0 = true;
    } else if (w == "--") {
      words_only = true;
    } else if (take_value(a, i, "-c", v) || take_value(a, i, "--conf", v)) {
      c.compat_args.push_back("--conf");
      c.compat_args.push_back(v);
    } else if (take_value(a, i, "-k", v) || take_value(a, i, "--keyring", v)) {
      c.compat_args.push_back("--keyring");
      c.compat_args.push_back(v);
    } else if (take_value(a, i, "-n", v) || take_value(a, i, "--name", v) ||
               take_value(a, i, "--id", v) || take_value(a, i, "-i", v) ||
               take_value(a, i, "--cluster", v)) {
      c.compat_args.push_back(w.substr(0, w.find('=')));
      c.compat_args.push_back(v);
    } else if (w.rfind("--", 0) == 0 && is_option(w.substr(2, w.find('=') - 2))) {
      // A configuration option (--ms_async_op_threads 1, --debug-ms=5).
      c.compat_args.push_back(w);
      if (w.find('=') == std::string::npos && i + 1 < a.size()) c.compat_args.push_back(a[++i]);
    } else {
      c.words.push_back(w);  // command words and the command's own --named arguments
    }
  }
  return c;
}

// The messenger options this tool applies to its mon session (the
// transport's come with the stack, compat::create_tcp_stack).
MessengerOptions mon_messenger_options(const compat::Config& cfg) {
  using compat::Opt;
  MessengerOptions o;
  o.ms_connection_ready_timeout = std::chrono::seconds(cfg.get<Opt::ms_connection_ready_timeout>());
  o.ms_connection_idle_timeout = std::chrono::seconds(cfg.get<Opt::ms_connection_idle_timeout>());
  o.ms_initial_backoff = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(cfg.get<Opt::ms_initial_backoff>()));
  o.ms_max_backoff = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(cfg.get<Opt::ms_max_backoff>()));
  o.ms_dispatch_throttle_bytes = cfg.get<Opt::ms_dispatch_throttle_bytes>();
  return o;
}

std::chrono::nanoseconds secs(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

int connect_error_exit(const mon::MonError& e) {
  std::fprintf(stderr, "siphon-ceph: error connecting to the cluster: %s\n", e.message.c_str());
  return e.kind == mon::MonError::Kind::cephx_required || e.kind == mon::MonError::Kind::auth_failed ? 13 : 1;
}

std::string errno_name(int e) {
  switch (e) {
    case 1: return "EPERM";
    case 2: return "ENOENT";
    case 5: return "EIO";
    case 11: return "EAGAIN";
    case 13: return "EACCES";
    case 16: return "EBUSY";
    case 17: return "EEXIST";
    case 22: return "EINVAL";
    case 34: return "ERANGE";
    case 95: return "EOPNOTSUPP";
    case 110: return "ETIMEDOUT";
    default: return fmt::format("errno {}", e);
  }
}

// get-version MAP: MMonGetVersion; the mon has no version query for the
// mgrmap, so that one comes from a one-time subscription (the epoch is the
// first field of the MgrMap encoding).
int get_version(mon::MonClient& mc, const Cli& cli) {
  if (cli.words.size() != 2) {
    std::fputs("siphon-ceph: usage: get-version monmap|osdmap|mgrmap|fsmap|mdsmap\n", stderr);
    return 22;
  }
  const std::string& what = cli.words[1];
  std::uint64_t version = 0, oldest = 0;
  if (what == "mgrmap") {
    struct Shared {
      std::mutex m;
      std::condition_variable cv;
      std::optional<std::uint32_t> epoch;
    };
    auto shared = std::make_shared<Shared>();  // the handler may outlive this frame
    mc.set_other_message_handler([shared](const Message& msg) {
      if (msg.get_type() != mon::kMsgMgrMap) return;
      proto::Decoder d(msg.front());
      const auto h = d.begin_struct(255, "MgrMap");
      const std::uint32_t e = d.u32("epoch");
      d.end_struct(h);
      if (!d.ok()) return;
      std::lock_guard l(shared->m);
      shared->epoch = e;
      shared->cv.notify_all();
    });
    mc.subscribe("mgrmap", 0, mon::MMonSubscribe::kOneTime);
    std::unique_lock l(shared->m);
    if (!shared->cv.wait_for(l, secs(cli.timeout), [&] { return shared->epoch.has_value(); })) {
      std::fputs("siphon-ceph: no mgrmap from the monitor\n", stderr);
      return 110;
    }
    version = *shared->epoch;
  } else {
    const mon::VersionResult r = mc.get_version(what, secs(cli.timeout));
    if (r.error) {
      std::fprintf(stderr, "siphon-ceph: get-version %s: %s\n", what.c_str(), r.error.message.c_str());
      return 110;
    }
    version = r.version;
    oldest = r.oldest_version;
  }
  if (cli.format == "json" || cli.format == "json-pretty") {
    nlohmann::ordered_json j;
    j["what"] = what;
    j["version"] = version;
    if (what != "mgrmap") j["oldest_version"] = oldest;
    std::printf("%s\n", j.dump(cli.format == "json" ? -1 : 4).c_str());
  } else if (what == "mgrmap") {
    std::printf("%s version %llu\n", what.c_str(), static_cast<unsigned long long>(version));
  } else {
    std::printf("%s version %llu (oldest %llu)\n", what.c_str(), static_cast<unsigned long long>(version),
                static_cast<unsigned long long>(oldest));
  }
  return 0;
}

int run_command(mon::MonClient& mc, const Cli& cli) {
  const auto timeout = secs(cli.timeout);
  const mon::CommandResult desc =
      mc.command({R"({"prefix": "get_command_descriptions"})"}, {}, timeout);
  if (desc.error) {
    std::fprintf(stderr, "siphon-ceph: %s\n", desc.error.message.c_str());
    return 110;
  }
  nlohmann::ordered_json args;
  std::vector<tools::CommandSignature> sigs;
  if (desc.r == 0) {
    const nlohmann::json table = nlohmann::json::parse(desc.outbl.to_string(), nullptr, false);
    sigs = tools::parse_command_descriptions(table);
  }
  if (sigs.empty()) {
    args = tools::plain_command(cli.words);  // no table: let the mon validate
  } else {
    std::string error;
    const auto matched = tools::match_command(sigs, cli.words, error);
    if (!matched) {
      std::fprintf(stderr, "siphon-ceph: %s\n", error.c_str());
      return 22;
    }
    if (matched->sig->is_mgr()) {
      std::fprintf(stderr,
                   "siphon-ceph: '%s' is served by the ceph-mgr; siphon-ceph talks to monitors only\n",
                   matched->args["prefix"].get<std::string>().c_str());
      return 95;
    }
    args = matched->args;
  }
  if (!cli.format.empty()) args["format"] = cli.format;
  const mon::CommandResult r = mc.command({tools::to_ceph_json(args)}, {}, timeout);
  if (r.error) {
    std::fprintf(stderr, "siphon-ceph: %s\n", r.error.message.c_str());
    return 110;
  }
  write_all(STDOUT_FILENO, r.outbl);
  if (r.r < 0) {
    const int e = -r.r;
    std::fprintf(stderr, "Error %s: %s\n", errno_name(e).c_str(), r.rs.c_str());
    return std::clamp(e, 1, 255);
  }
  if (!r.rs.empty()) std::fprintf(stderr, "%s\n", r.rs.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> raw(argv + 1, argv + argc);
  Cli cli = parse_cli(raw);
  compat::Diagnostics diags;
  std::vector<std::string> rest;
  const compat::ConfigRequest req = compat::ConfigRequest::from_args(cli.compat_args, diags, &rest);
  cli.words.insert(cli.words.end(), rest.begin(), rest.end());
  const compat::Config cfg = compat::Config::load(req, diags);
  if (diags.has_errors()) {
    std::fprintf(stderr, "%s", diags.to_string(compat::Severity::error).c_str());
    return 1;
  }
  compat::apply_log_levels(cfg);
  compat::apply_perf_option(cfg);
  if (cli.words.empty()) {
    std::fputs(kUsage.data(), stderr);
    return 22;
  }
  const std::string mon_host = cfg.get<compat::Opt::mon_host>();
  const auto mons = proto::parse_mon_host(mon_host);
  if (mon_host.empty() || !mons) {
    std::fprintf(stderr, "siphon-ceph: %s\n",
                 mon_host.empty() ? "no monitors: set mon_host in the configuration (-c FILE) or use -m ADDR"
                                  : fmt::format("cannot parse mon_host '{}'", mon_host).c_str());
    return 1;
  }
  if (const compat::MsTypeChoice t = cfg.ms_type_choice(); t.type.stack != compat::MsType::Stack::posix)
    std::fprintf(stderr, "siphon-ceph: note: %s (%s) ignored; monitors are reached over TCP\n",
                 t.type.to_string().c_str(), t.origin().c_str());

  mon::MonClientOptions o;
  o.mon_addrs = *mons;
  o.messenger = mon_messenger_options(cfg);
  o.messenger.ms_msgr2_rev1 = !cli.rev0;
  o.messenger.ms_connection_ready_timeout =
      std::min(o.messenger.ms_connection_ready_timeout, secs(cli.connect_timeout));
  if (auto name = proto::EntityName::parse(cfg.name().to_string())) o.auth_name = *name;
  try {
    o.auth = compat::client_auth(cfg);
  } catch (const SetupError& e) {
    std::fprintf(stderr, "siphon-ceph: %s\n", e.what());
    return 13;
  }
  // Monitors listen on TCP whatever ms_type says (noted above): the TCP stack
  // with the configuration's transport options, from the composition root.
  std::shared_ptr<transport::Stack> stack;
  try {
    stack = compat::create_tcp_stack(cfg);
  } catch (const SetupError& e) {
    std::fprintf(stderr, "siphon-ceph: %s\n", e.what());
    return 1;
  }
  mon::MonClient mc(std::move(stack), o);
  if (const mon::MonError e = mc.connect(secs(cli.connect_timeout))) return connect_error_exit(e);
  const std::string& sub = cli.words.front();
  const int rc = sub == "get-version"  ? get_version(mc, cli)
                 : sub == "map-object" ? tools::map_object_command(mc, cli.words, cli.format,
                                                                   secs(cli.timeout))
                                       : run_command(mc, cli);
  mc.shutdown();
  return rc;
}
