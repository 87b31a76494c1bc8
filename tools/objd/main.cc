// siphon-objd: the reference object daemon (docs/embedding.md walks through
// this file). It reads ceph.conf like a Ceph daemon, binds a public and a
// cluster messenger on the stacks the configuration selects, and serves
// put/get/stat/delete of objects until SIGINT or SIGTERM.
//
//   siphon-objd -c ceph.conf -i 0 [-k KEYRING] [--standalone] [--addr-file FILE] [--<option> VALUE ...]
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compat/admin.h"
#include "compat/config.h"
#include "compat/daemon_auth.h"
#include "compat/factory.h"
#include "compat/keyring.h"
#include "compat/metrics.h"
#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "tools/objd/proto.h"
#include "tools/objd/server.h"
#include "tools/objd/store.h"

namespace {

using namespace siphon;

constexpr int kExitUsage = 2;

constexpr const char* kUsage = R"(usage: siphon-objd [-c FILE] [-i ID | -n TYPE.ID] [-k KEYRING] [--standalone] [--addr-file FILE]
                   [--OPTION VALUE ...]

The reference object daemon: serves put/get/stat/delete of objects over the
messenger stacks ceph.conf selects (ms_type, ms_public_type, ms_cluster_type).

  -c, --conf FILE     ceph.conf to read (default: $CEPH_CONF, then Ceph's search list)
  -i, --id ID         the daemon's id (its name is osd.ID unless -n says otherwise)
  -n, --name T.ID     the full entity name
  -k, --keyring FILE  the keyring of the entities allowed in (cephx; default: Ceph's
                      keyring search list, /etc/ceph/$cluster.$name.keyring, ...)
  --standalone        never contact the monitors, even with mon_host set: admit the
                      keyring's entities only
  --addr-file FILE    write the bound public address there once listening
  --OPTION VALUE      any option (docs/configuration.md), e.g. --ms_type async+rdma
  -h, --help          this text;  --version  the version

Options it reads beyond the messenger's: public_addr, cluster_addr (unset:
127.0.0.1 with a free port), objd_data_dir (empty: objects in memory),
objd_max_object_size, objd_memory_limit, admin_socket (the socket the stock
`ceph daemon` CLI talks to; empty: none). Stops cleanly on SIGINT or SIGTERM.

Authentication (docs/security.md 5b): auth_service_required (clients) and
auth_cluster_required (daemons), Ceph's default cephx; cephx admits the
entities of the keyring with their keys, in the modes ms_service_mode /
ms_cluster_mode allow. With no keyring found and the lists at their default,
peers are let in without authentication (a warning says so). Named mon.ID
(-n), objd binds with nonce 0 and applies ms_mon_service_mode, as a monitor
does, so the stock `ceph -m ADDR -k KEYRING` authenticates against it (and
then times out: objd serves no maps).

In a cephx Ceph cluster (docs/security.md 5d): with mon_host set and the
daemon's own key in the keyring (e.g. -n osd.9 -k osd.9.keyring), the daemon
first authenticates to the monitors as itself, fetches the rotating osd keys
(waiting up to 30 s; exit 1 naming the cause otherwise) and keeps them fresh;
then it also admits clients holding a ticket from those monitors.
)";

int usage_error(const std::string& msg) {
  fmt::print(stderr, "siphon-objd: {}\n(siphon-objd --help shows the usage)\n", msg);
  return kExitUsage;
}

// The address to bind for `opt` (public_addr / cluster_addr): the option's
// IP and port, or 127.0.0.1 with a free port when unset.
std::optional<EntityAddrVec> bind_address(const compat::EntityAddr& a, std::string_view opt, std::string& error) {
  if (!a.is_set()) return EntityAddrVec(EntityAddr(AddrType::msgr2, *NetAddress::parse("127.0.0.1:0")));
  if (a.type == compat::EntityAddr::Type::legacy) {
    error = fmt::format("{} = {}: siphon-objd speaks msgr2 only (use a v2: address or none)", opt, a.to_string());
    return std::nullopt;
  }
  return EntityAddrVec(EntityAddr(AddrType::msgr2, a.ip));
}

bool write_addr_file(const std::string& path, const std::string& text, std::string& error) {
  // Written to a temporary name and renamed, so a reader never sees half.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << text << "\n";
    if (!f.flush()) {
      error = fmt::format("--addr-file {}: cannot write {}", path, tmp);
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    error = fmt::format("--addr-file {}: {}", path, ec.message());
    return false;
  }
  return true;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  bool named = false;
  bool standalone = false;
  std::string addr_file;
  std::vector<std::string> conf_args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--version") {
      fmt::print("siphon-objd {}\n", SIPHON_VERSION);
      return 0;
    }
    if (a == "--addr-file" || a.rfind("--addr-file=", 0) == 0) {
      if (a == "--addr-file") {
        if (i + 1 >= args.size()) return usage_error("--addr-file needs a file name");
        addr_file = args[++i];
      } else {
        addr_file = a.substr(12);
      }
      continue;
    }
    if (a == "--standalone") {
      standalone = true;
      continue;
    }
    if (a == "-n" || a == "--name" || a.rfind("--name=", 0) == 0) named = true;
    conf_args.push_back(a);
  }

  compat::Diagnostics diags;
  std::vector<std::string> rest;
  compat::ConfigRequest req = compat::ConfigRequest::from_args(conf_args, diags, &rest);
  if (diags.has_errors()) return usage_error(diags.to_string(compat::Severity::error));
  if (!rest.empty()) return usage_error(fmt::format("unknown argument '{}'", rest.front()));
  if (!named) req.name.type = "osd";  // a daemon: -i 3 means osd.3
  compat::Diagnostics load_diags;
  const compat::Config cfg = compat::Config::load(req, load_diags);
  for (const auto& d : load_diags.all())
    if (d.severity != compat::Severity::error) fmt::print(stderr, "siphon-objd: {}\n", d.to_string());
  if (load_diags.has_errors())
    return usage_error("invalid configuration:\n" + load_diags.to_string(compat::Severity::error));
  compat::apply_log_levels(cfg);
  compat::apply_perf_option(cfg);
  const std::string me = cfg.name().to_string();

  // The store.
  std::unique_ptr<objd::ObjectStore> store;
  if (const std::string& dir = cfg.get<compat::Opt::objd_data_dir>(); !dir.empty()) {
    std::string why;
    store = objd::make_directory_store(dir, why);
    if (!store) {
      fmt::print(stderr, "siphon-objd: {}\n", why);
      return 1;
    }
  } else {
    store = objd::make_memory_store(cfg.get<compat::Opt::objd_memory_limit>());
  }
  // A reply carries the object in one data segment.
  const std::uint64_t max_object = std::min<std::uint64_t>(cfg.get<compat::Opt::objd_max_object_size>(),
                                                           cfg.get<compat::Opt::ms_max_segment_size>());
  objd::ObjectServer server(*store, max_object);

  std::string error;
  const auto public_bind = bind_address(cfg.get<compat::Opt::public_addr>(), "public_addr", error);
  if (!public_bind) return usage_error(error);
  const auto cluster_bind = bind_address(cfg.get<compat::Opt::cluster_addr>(), "cluster_addr", error);
  if (!cluster_bind) return usage_error(error);

  // Signals: blocked here, before any thread exists, so every messenger and
  // stack thread inherits the mask and only sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // The messengers: the stacks come from ms_public_type / ms_cluster_type
  // (or ms_type); the typed options from the same Config. Who is let in
  // comes from auth_*_required, ms_*_mode and the keyring (one ServerAuth
  // for both: the peer's type picks the service or the cluster lists).
  auto registry = std::make_shared<MessageRegistry>();
  registry->add<objd::MObjdOp>();
  std::unique_ptr<Messenger> public_msgr, cluster_msgr;
  std::unique_ptr<compat::DaemonAuth> daemon_auth;
  ServerAuth server_auth;
  try {
    daemon_auth = compat::DaemonAuth::start(cfg, standalone, std::chrono::seconds(30));
    server_auth = daemon_auth->server_auth();
    public_msgr = compat::create_messenger(cfg, compat::Purpose::public_network);
    cluster_msgr = compat::create_messenger(cfg, compat::Purpose::cluster_network);
  } catch (const SetupError& e) {
    fmt::print(stderr, "siphon-objd: {}\n", e.what());
    return 1;
  }
  if (auto name = proto::EntityName::parse(me)) {
    public_msgr->set_auth_name(*name);
    cluster_msgr->set_auth_name(*name);
  }
  public_msgr->set_server_auth(server_auth);
  cluster_msgr->set_server_auth(server_auth);
  // Clients are served statelessly (a lost reply is the client's to retry);
  // other daemons on the cluster network are lossless peers.
  public_msgr->set_default_policy(Policy::stateless_server());
  cluster_msgr->set_default_policy(Policy::stateless_server());
  cluster_msgr->set_policy(entity_type::osd, Policy::lossless_peer());
  for (Messenger* m : {public_msgr.get(), cluster_msgr.get()}) {
    m->set_message_registry(registry);
    m->add_dispatcher_tail(&server);
  }
  if (auto ec = public_msgr->bind(*public_bind)) {
    fmt::print(stderr, "siphon-objd: cannot bind the public messenger to {}: {}\n", public_bind->to_string(),
               ec.message());
    return 1;
  }
  if (auto ec = cluster_msgr->bind(*cluster_bind)) {
    fmt::print(stderr, "siphon-objd: cannot bind the cluster messenger to {}: {}\n", cluster_bind->to_string(),
               ec.message());
    return 1;
  }
  try {
    public_msgr->start();
    cluster_msgr->start();
  } catch (const SetupError& e) {
    fmt::print(stderr, "siphon-objd: {}\n", e.what());
    return 1;
  }
  // The admin socket (admin_socket; empty: none). A socket that cannot be
  // opened is reported and the daemon serves on without it.
  std::string admin_error;
  std::unique_ptr<compat::DaemonAdmin> admin = compat::DaemonAdmin::open(cfg, admin_error);
  if (admin) {
    admin->messengers->add("public", public_msgr.get());
    admin->messengers->add("cluster", cluster_msgr.get());
    fmt::print(stderr, "siphon-objd {}: admin socket {}\n", me, admin->socket->path());
  } else if (!admin_error.empty()) {
    fmt::print(stderr, "siphon-objd {}: {} (continuing without an admin socket)\n", me, admin_error);
  }
  const auto types = cfg.ms_types();
  fmt::print("siphon-objd {}: {}\n", me, daemon_auth->describe());
  const std::string public_addr = public_msgr->get_myaddrs().to_string();
  fmt::print("siphon-objd {}: public {} ({}, {}), cluster {} ({}, {}), store: {}\n", me, public_addr,
             types.public_type.to_string(), cfg.ms_type_choice().origin(), cluster_msgr->get_myaddrs().to_string(),
             types.cluster_type.to_string(), cfg.ms_type_choice(true).origin(), store->describe());
  // The Prometheus endpoint (siphon_metrics_endpoint): a failure to listen
  // is reported and the daemon keeps serving.
  std::string metrics_message;
  const auto metrics_endpoint = compat::start_metrics_endpoint(cfg, metrics_message);
  if (!metrics_message.empty())
    fmt::print(metrics_endpoint ? stdout : stderr, "siphon-objd {}: {}\n", me, metrics_message);
  std::fflush(stdout);
  int code = 0;
  if (!addr_file.empty() && !write_addr_file(addr_file, public_addr, error)) {
    fmt::print(stderr, "siphon-objd: {}\n", error);
    code = 1;
  } else {
    int sig = 0;
    while (sigwait(&stop_signals, &sig) != 0) {
    }
    fmt::print(stderr, "siphon-objd {}: {} received, shutting down\n", me, sig == SIGINT ? "SIGINT" : "SIGTERM");
  }
  admin.reset();  // no admin command runs past this point
  public_msgr->shutdown();
  cluster_msgr->shutdown();
  public_msgr->wait();
  cluster_msgr->wait();
  daemon_auth->shutdown();
  const auto& c = server.counters();
  fmt::print("siphon-objd {}: served {} put, {} get, {} stat, {} delete; {} error replies, {} messages dropped\n", me,
             c.puts.load(), c.gets.load(), c.stats.load(), c.deletes.load(), c.errors.load(), c.dropped.load());
  // Each refusal was logged when it happened (subsystem session, level 1).
  fmt::print("siphon-objd {}: refused {} authentication attempt(s)\n", me,
             public_msgr->stats().auth_refused + cluster_msgr->stats().auth_refused);
  fmt::print("siphon-objd {}: authenticated {} peer(s) with cephx\n", me,
             public_msgr->stats().auth_accepted + cluster_msgr->stats().auth_accepted);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "siphon-objd: {}\n", e.what());
    return 1;
  }
}
