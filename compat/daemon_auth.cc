#include "compat/daemon_auth.h"

#include <fmt/format.h>

#include <algorithm>

#include "compat/factory.h"
#include "compat/keyring.h"
#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "msgr/proto/types.h"

namespace siphon::compat {
namespace {

[[noreturn]] void fail(std::string cause, std::string remedy) {
  throw SetupError(make_error_code(errc::config_error), std::move(cause), std::move(remedy));
}

bool has_cephx(const std::vector<std::uint32_t>& v) {
  return std::find(v.begin(), v.end(), proto::kAuthMethodCephx) != v.end();
}

}  // namespace

DaemonAuth::~DaemonAuth() { shutdown(); }

void DaemonAuth::shutdown() {
  if (mon_) mon_->shutdown();
}

std::unique_ptr<DaemonAuth> DaemonAuth::start(const Config& cfg, bool standalone, std::chrono::nanoseconds timeout) {
  std::unique_ptr<DaemonAuth> d(new DaemonAuth());
  d->server_ = compat::server_auth(cfg);
  const std::string me = cfg.name().to_string();
  const std::string mon_host = cfg.get<Opt::mon_host>();
  if (standalone || mon_host.empty()) return d;
  if (!has_cephx(d->server_.service_methods) && !has_cephx(d->server_.cluster_methods)) return d;
  // Our own key: without it we cannot be a member of the cluster, and the
  // keyring is only the list of entities allowed in.
  if (d->server_.keys.find(me) == d->server_.keys.end()) {
    SIPHON_LOG(compat, 1, "{}: mon_host is set but {} holds no key for {}: not joining the cluster's cephx, "
               "authenticating peers from the keyring only", me, d->server_.keyring_source, me);
    return d;
  }
  const auto type = proto::entity_type_from_name(cfg.name().type);
  if (!type || (*type != proto::kEntityTypeOsd && *type != proto::kEntityTypeMgr && *type != proto::kEntityTypeMds))
    fail(fmt::format("{} cannot validate the tickets of a cephx cluster: only osd, mgr and mds entities have "
                     "rotating service keys (cephx.md §8.2)",
                     me),
         "run the daemon as osd.N (-i N or -n osd.N), or pass --standalone to authenticate from the keyring only");
  const auto mons = proto::parse_mon_host(mon_host);
  if (!mons) fail(fmt::format("cannot parse mon_host '{}'", mon_host), "give mon_host as v2:IP:PORT[,...]");
  ClientAuth client = compat::client_auth(cfg);
  if (!has_cephx(client.methods))
    fail(fmt::format("{} joins the cluster's cephx but auth_client_required = {} does not list cephx",
                     me, cfg.get<Opt::auth_client_required>()),
         "add cephx to auth_client_required");
  client.methods = {proto::kAuthMethodCephx};  // the rotating keys need a cephx session
  // Refresh well before the mon rolls its keys (every auth_service_ticket_ttl).
  const double ttl = std::max(4.0, cfg.get<Opt::auth_service_ticket_ttl>());
  auto rotating = std::make_shared<session::RotatingKeys>(
      *type, std::chrono::duration_cast<session::RotatingKeys::Clock::duration>(std::chrono::duration<double>(ttl / 4)));
  d->stack_ = create_tcp_stack(cfg);
  mon::MonClientOptions mo;
  mo.mon_addrs = *mons;
  mo.messenger = messenger_options(cfg);
  mo.auth_name = *proto::EntityName::parse(me);
  mo.auth = client;
  mo.rotating = rotating;
  d->mon_ = std::make_unique<mon::MonClient>(d->stack_, mo);
  d->mon_host_ = mon_host;
  if (const mon::MonError e = d->mon_->connect(timeout)) {
    const std::string why = e.message;
    d->shutdown();
    fail(fmt::format("{} could not authenticate to the monitors at {}: {}", me, mon_host, why),
         fmt::format("check that the monitors run and that `ceph auth get {}` matches {} (or pass --standalone)", me,
                     d->server_.keyring_source));
  }
  if (!d->mon_->wait_for_rotating(timeout)) {
    const std::string why = d->mon_->rotating_error();
    d->shutdown();
    fail(fmt::format("{} got no rotating {} keys from the monitors at {}: {}", me, cfg.name().type, mon_host,
                     why.empty() ? std::string("no answer in time") : why),
         fmt::format("give {} mon caps that allow it (`ceph auth caps {} mon 'allow profile {}' ...`)", me, me,
                     cfg.name().type));
  }
  d->server_.rotating = rotating;
  return d;
}

std::string DaemonAuth::describe() const {
  std::string out = compat::describe(server_);
  if (mon_)
    out += fmt::format("; cephx tickets from the monitors at {} (rotating {} keys, generation {})", mon_host_,
                       proto::entity_type_name(server_.rotating->service_id()), server_.rotating->generation());
  return out;
}

}  // namespace siphon::compat
