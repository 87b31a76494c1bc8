// siphon-doctor: the RDMA troubleshooting checklist as one command
// (docs/doctor.md). Reads the configuration as the daemon does (-c, -n,
// --<option> VALUE, CEPH_ARGS), the device facts from /sys, /proc and /dev
// (or captured trees), and reports each check with its evidence and fix.
#include <dlfcn.h>
#include <link.h>
#include <sys/resource.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compat/args.h"
#include "compat/config.h"
#include "compat/factory.h"
#include "msgr/base/log.h"
#include "tools/doctor/checks.h"
#include "tools/doctor/facts.h"
#include "tools/doctor/peer.h"
#include "tools/doctor/report.h"

namespace {

using namespace siphon;

constexpr std::string_view kUsage = R"(siphon-doctor: check a host and a configuration for RDMA problems

USAGE
  siphon-doctor [FLAGS] [CONFIG FLAGS]

FLAGS
  --json                  one JSON document instead of text
  -v, --verbose           evidence under OK checks too
  --sysfs-root DIR        read device facts from DIR instead of /sys
  --proc-root DIR         read process and module facts from DIR instead of /proc
  --dev-root DIR          look for DIR/infiniband instead of /dev/infiniband
  --peer IP:PORT          also connect over the configured stack to a siphon-doctor
                          --listen (or siphon-bench server) there: round trips and
                          a bulk transfer, RTT percentiles, errors, the path used
  --round-trips N         round trips for --peer (default 200)
  --connect-timeout SEC   how long --peer waits for the connection (default 30)
  --listen IP:PORT        serve --peer runs of other hosts until interrupted
  -h, --help              this text

CONFIG FLAGS (as a daemon reads them)
  -c, --conf FILE         the configuration file
  -n, --name TYPE.ID      the entity whose sections apply (default client.admin)
  --<option> VALUE        set an option, as on a daemon's command line
  --set KEY=VALUE         the same, as siphon-bench takes it
  CEPH_ARGS and CEPH_CONF are read from the environment.

Run it the way the daemon is started (same user, same limits, same CPU
affinity): the memlock and NUMA checks look at this process.

EXIT STATUS
  0 nothing to fix (OK and "cannot tell" only); 1 warnings; 2 errors;
  3 bad arguments.
)";

// The libibverbs this binary loaded: "libibverbs.so.1.14.44.0 (rdma-core 44)".
std::string rdma_core_version() {
  std::string found;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        if (name.find("libibverbs.so") == std::string::npos) return 0;
        char real[PATH_MAX];
        *static_cast<std::string*>(out) = ::realpath(name.c_str(), real) != nullptr ? real : name;
        return 1;
      },
      &found);
  if (found.empty()) return {};
  const std::string file = found.substr(found.rfind('/') + 1);
  // libibverbs.so.1.<abi>.<rdma-core release>.0
  const auto so = file.find(".so.");
  std::vector<std::string> parts;
  std::size_t at = so == std::string::npos ? std::string::npos : so + 4;
  while (at != std::string::npos && at <= file.size()) {
    const auto dot = file.find('.', at);
    parts.push_back(file.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    at = dot == std::string::npos ? std::string::npos : dot + 1;
  }
  return parts.size() >= 3 ? fmt::format("{} (rdma-core {})", file, parts[2]) : file;
}

// `ethtool -S <if>` lines with "pause" in them, joined; "" without ethtool.
std::string pause_counters(const std::string& netdev) {
  for (const char ch : netdev)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.' && ch != '@') return {};
  const std::string cmd = fmt::format("ethtool -S '{}' 2>/dev/null", netdev);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {};
  std::string out;
  char line[512];
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    std::string l(line);
    if (l.find("pause") == std::string::npos) continue;
    while (!l.empty() && (l.back() == '\n' || l.back() == ' ')) l.pop_back();
    l.erase(0, l.find_first_not_of(' '));
    out += (out.empty() ? "" : ", ") + l;
  }
  ::pclose(p);
  return out;
}

int run(const std::vector<std::string>& args) {
  doctor::Roots roots;
  bool json = false, verbose = false, host_roots = true;
  doctor::PeerOptions peer;
  std::string listen;
  std::vector<std::string> config_args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "siphon-doctor: %s needs a value\n", a.c_str());
        return false;
      }
      out = args[++i];
      return true;
    };
    if (a == "--json") {
      json = true;
    } else if (a == "-v" || a == "--verbose") {
      verbose = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage.data(), stdout);
      return 0;
    } else if (a == "--peer") {
      if (!value(peer.address)) return 3;
    } else if (a == "--listen") {
      if (!value(listen)) return 3;
    } else if (a == "--round-trips") {
      std::string v;
      if (!value(v)) return 3;
      char* end = nullptr;
      const unsigned long n = std::strtoul(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n == 0 || n > 1000000) {
        std::fprintf(stderr, "siphon-doctor: --round-trips takes 1-1000000, not '%s'\n", v.c_str());
        return 3;
      }
      peer.round_trips = static_cast<unsigned>(n);
    } else if (a == "--connect-timeout") {
      std::string v;
      if (!value(v)) return 3;
      char* end = nullptr;
      const double t = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(t > 0 && t <= 3600)) {
        std::fprintf(stderr, "siphon-doctor: --connect-timeout takes seconds in (0, 3600], not '%s'\n", v.c_str());
        return 3;
      }
      peer.connect_timeout = t;
    } else if (a == "--sysfs-root" || a == "--proc-root" || a == "--dev-root") {
      std::string v;
      if (!value(v)) return 3;
      (a == "--sysfs-root" ? roots.sys : a == "--proc-root" ? roots.proc : roots.dev) = v;
      host_roots = false;
    } else {
      config_args.push_back(a);
    }
  }
  {
    // --set KEY=VALUE, as siphon-bench takes it.
    std::vector<std::string> translated;
    std::string error;
    if (!compat::translate_set_args(config_args, translated, error)) {
      std::fprintf(stderr, "siphon-doctor: %s\n", error.c_str());
      return 3;
    }
    config_args = std::move(translated);
  }

  compat::Diagnostics diags;
  std::vector<std::string> rest;
  compat::ConfigRequest req = compat::ConfigRequest::from_args(config_args, diags, &rest);
  for (const auto& r : rest) {
    std::fprintf(stderr, "siphon-doctor: unknown argument '%s' (--help lists the flags)\n", r.c_str());
    return 3;
  }
  // The same load as siphon-conf --check: every section is validated.
  req.check_all_sections = true;
  const compat::Config cfg = compat::Config::load(req, diags);

  if (!listen.empty()) {
    if (diags.has_errors()) {
      std::fprintf(stderr, "siphon-doctor: the configuration has errors:\n%s", diags.to_string(compat::Severity::error).c_str());
      return 2;
    }
    return doctor::run_listen(cfg, listen);
  }

  doctor::Settings settings;
  for (const auto& d : diags.all()) {
    if (d.severity == compat::Severity::note) continue;
    settings.config_problems.push_back({d.severity == compat::Severity::error, d.to_string()});
  }
  const compat::MsTypes types = cfg.ms_types();
  settings.rdma_stack = types.public_type.stack == compat::MsType::Stack::rdma ||
                        types.cluster_type.stack == compat::MsType::Stack::rdma;
  settings.ms_type = types.public_type == types.cluster_type
                         ? types.public_type.to_string()
                         : fmt::format("{} (public), {} (cluster)", types.public_type.to_string(),
                                       types.cluster_type.to_string());
  settings.rdma = compat::rdma_options(cfg);
  settings.path = compat::verbs_path_options(cfg);
  if (const auto addr = cfg.get<compat::Opt::public_addr>(); addr.is_set()) settings.local = addr.ip;

  doctor::Facts facts = doctor::read_facts(roots);
  if (host_roots) {
    facts.host.rdma_core = rdma_core_version();
    for (const auto& d : facts.devices)
      for (const auto& n : d.netdevs)
        if (auto p = pause_counters(n); !p.empty()) facts.host.pause_counters[n] = std::move(p);
  }

  doctor::Limits limits;
  rlimit rl{};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0) limits.memlock_known = false;
  else if (rl.rlim_cur != RLIM_INFINITY) limits.memlock = rl.rlim_cur;

  std::vector<doctor::Check> checks = doctor::run_checks(facts, settings, limits);
  if (!peer.address.empty())
    for (auto& c : doctor::run_peer(cfg, peer)) checks.push_back(std::move(c));
  const std::string out = json ? doctor::render_json(checks) : doctor::render_text(checks, verbose);
  std::fputs(out.c_str(), stdout);
  return doctor::exit_status(checks);
}

}  // namespace

int main(int argc, char** argv) {
  // The report says everything; keep the libraries' logs quiet.
  siphon::log::set_level(siphon::log::Subsys::compat, -1);
  siphon::log::set_level(siphon::log::Subsys::rdma, -1);
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "siphon-doctor: %s\n", e.what());
    return 3;
  }
}
