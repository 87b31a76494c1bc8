#include "tools/rados/cluster.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "compat/factory.h"
#include "compat/keyring.h"
#include "compat/options.h"
#include "msgr/base/error.h"
#include "msgr/base/log.h"

namespace siphon::rados_tool {
namespace {

std::chrono::nanoseconds bounded(std::chrono::nanoseconds d) { return d.count() > 0 ? d : std::chrono::seconds(30); }

}  // namespace

bool take_value(const std::vector<std::string>& a, std::size_t& i, std::initializer_list<std::string_view> flags,
                std::string& out, std::string& error) {
  const std::string& w = a[i];
  for (const std::string_view flag : flags) {
    if (w == flag) {
      if (i + 1 >= a.size()) {
        error = fmt::format("{} needs a value", flag);
        return false;
      }
      out = a[++i];
      return true;
    }
    if (w.size() > flag.size() && w.compare(0, flag.size(), flag) == 0 && w[flag.size()] == '=') {
      out = w.substr(flag.size() + 1);
      return true;
    }
  }
  return false;
}

std::optional<double> parse_seconds(const std::string& text, bool zero_ok) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v >= 0) || (v == 0 && !zero_ok)) return std::nullopt;
  return v;
}

bool ConfigFlags::take(const std::vector<std::string>& a, std::size_t& i, std::string& error) {
  const std::string& w = a[i];
  std::string v;
  if (take_value(a, i, {"-m", "--mon-host"}, v, error)) {
    compat_args.insert(compat_args.end(), {"--mon_host", v});
  } else if (take_value(a, i, {"-c", "--conf"}, v, error)) {
    compat_args.insert(compat_args.end(), {"--conf", v});
  } else if (take_value(a, i, {"-k", "--keyring"}, v, error)) {
    compat_args.insert(compat_args.end(), {"--keyring", v});
  } else if (take_value(a, i, {"-n", "--name", "--id", "-i", "--cluster"}, v, error)) {
    compat_args.push_back(w.substr(0, w.find('=')));
    compat_args.push_back(v);
  } else if (error.empty() && w.size() > 2 && w.rfind("--", 0) == 0) {
    // A configuration option (--debug-ms 5, --ms_async_op_threads=1).
    std::string name = w.substr(2, w.find('=') - 2);
    std::replace(name.begin(), name.end(), '-', '_');
    if (!compat::find_option(name)) return false;  // not ours: the caller's flag, or unknown
    compat_args.push_back(w);
    if (w.find('=') == std::string::npos) {
      if (i + 1 >= a.size()) {
        error = fmt::format("{} needs a value", w);
        return false;
      }
      compat_args.push_back(a[++i]);
    }
  } else {
    return false;
  }
  return error.empty();
}

Cluster::~Cluster() { shutdown(); }

void Cluster::shutdown() {
  if (objecter_) objecter_->shutdown();
  if (mc_) mc_->shutdown();
}

ConnectError Cluster::connect(const ConfigFlags& flags, const ClusterOptions& opts, std::vector<std::string>* notes) {
  connect_timeout_ = bounded(opts.connect_timeout);
  compat::Diagnostics diags;
  std::vector<std::string> rest;
  const compat::ConfigRequest req = compat::ConfigRequest::from_args(flags.compat_args, diags, &rest);
  cfg_.emplace(compat::Config::load(req, diags));
  if (diags.has_errors()) return {1, diags.to_string(compat::Severity::error)};
  const compat::Config& cfg = *cfg_;
  compat::apply_log_levels(cfg);
  const std::string mon_host = cfg.get<compat::Opt::mon_host>();
  const auto mons = proto::parse_mon_host(mon_host);
  if (mon_host.empty() || !mons)
    return {1, mon_host.empty() ? "no monitors: set mon_host in the configuration (-c FILE) or use -m ADDR"
                                : fmt::format("cannot parse mon_host '{}'", mon_host)};
  // Monitors and OSDs listen on TCP: a client uses the public type, and
  // says which option (and line) chose what it ignores.
  const compat::MsTypeChoice choice = cfg.ms_type_choice();
  if (notes && choice.type.stack != compat::MsType::Stack::posix)
    notes->push_back(fmt::format("note: {} ({}) ignored; Ceph's monitors and OSDs are reached over TCP",
                                 choice.type.to_string(), choice.origin()));
  ClientAuth auth;
  try {
    auth = compat::client_auth(cfg);
  } catch (const SetupError& e) {
    return {13, e.what()};
  }
  try {
    stack_ = compat::create_tcp_stack(cfg);
  } catch (const SetupError& e) {
    return {1, e.what()};
  }
  mon::MonClientOptions mo;
  mo.mon_addrs = *mons;
  mo.messenger.ms_connection_ready_timeout = connect_timeout_;
  if (auto name = proto::EntityName::parse(cfg.name().to_string())) mo.auth_name = *name;
  mo.auth = auth;
  mc_ = std::make_unique<mon::MonClient>(stack_, mo);
  if (const mon::MonError e = mc_->connect(connect_timeout_)) {
    const bool auth_error = e.kind == mon::MonError::Kind::cephx_required || e.kind == mon::MonError::Kind::auth_failed;
    return {auth_error ? 13 : 1, "error connecting to the cluster: " + e.message};
  }
  rados::ObjecterOptions oo;
  oo.messenger = mo.messenger;
  oo.auth = auth;
  oo.auth_name = mo.auth_name;
  oo.op_timeout = opts.op_timeout;
  objecter_ = std::make_unique<rados::Objecter>(*mc_, stack_, oo);
  if (std::string err = objecter_->start(connect_timeout_); !err.empty()) return {1, err};
  return {};
}

std::int64_t Cluster::lookup_pool(const std::string& name) { return objecter_->lookup_pool(name, connect_timeout_); }

}  // namespace siphon::rados_tool
