// The configuration commands of the admin socket and the daemon's socket
// setup (compat/admin.h).
#include "compat/admin.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "msgr/transport/fault_injection.h"

namespace siphon::compat {

namespace {

// The log levels a debug option governs (compat/config.cc's apply_log_levels
// reads the same options at startup).
constexpr std::pair<Opt, log::Subsys> kDebugOverrides[] = {
    {Opt::debug_ms_proto, log::Subsys::proto},       {Opt::debug_ms_session, log::Subsys::session},
    {Opt::debug_ms_transport, log::Subsys::transport}, {Opt::debug_ms_rdma, log::Subsys::rdma},
    {Opt::debug_siphon_compat, log::Subsys::compat}, {Opt::debug_siphon_tools, log::Subsys::tools}};

// A value in `config diff`'s typed form: numbers and booleans as JSON
// values, everything else as Ceph's text.
nlohmann::ordered_json typed(Opt o, const OptionValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return *u;
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* s = std::get_if<std::chrono::seconds>(&v)) return s->count();
  return value_to_string(o, v);
}

std::string_view source_key(ValueSource::Kind k) {
  switch (k) {
    case ValueSource::Kind::file: return "file";
    case ValueSource::Kind::env: return "env";
    case ValueSource::Kind::argv: return "cmdline";
    case ValueSource::Kind::default_value: break;
  }
  return "default";
}

}  // namespace

bool runtime_settable(Opt o) noexcept {
  if (o == Opt::debug_ms) return true;
  for (const auto& [opt, s] : kDebugOverrides)
    if (opt == o) return true;
  return live_injection_option(o);
}

bool live_injection_option(Opt o) noexcept {
  switch (o) {
    case Opt::ms_inject_socket_failures:
    case Opt::ms_inject_delay_type:
    case Opt::ms_inject_delay_max:
    case Opt::ms_inject_delay_probability:
    case Opt::ms_inject_corruption_probability: return true;
    default: return false;
  }
}

std::string_view not_live_reason(Opt o) noexcept {
  switch (o) {
    case Opt::ms_inject_seed:
      return "each connection draws its fault stream from the seed when it starts, so a new seed would "
             "only reach new connections";
    case Opt::ms_inject_internal_delays:
      return "Siphon has no internal race points to delay: the option has no effect, at startup or at run time";
    case Opt::ms_async_rdma_soft_inject_seed:
    case Opt::ms_async_rdma_soft_inject_post_failure_probability:
    case Opt::ms_async_rdma_soft_inject_completion_error_probability:
    case Opt::ms_async_rdma_soft_inject_qp_error_probability:
    case Opt::ms_async_rdma_soft_inject_link_drop_probability:
    case Opt::ms_async_rdma_soft_inject_delay_probability:
    case Opt::ms_async_rdma_soft_inject_delay_max:
    case Opt::ms_async_rdma_soft_inject_corruption_probability:
      return "the software fabric reads its fault plan when the fabric starts (its engine, QPs and links "
             "copy it)";
    default:
      return "it cannot change while the daemon runs";
  }
}

std::string RuntimeConfig::value_string(Opt o) const {
  std::lock_guard lk(mu_);
  if (const auto it = overrides_.find(o); it != overrides_.end()) return value_to_string(o, it->second);
  return cfg_.value_string(o);
}

bool RuntimeConfig::overridden(Opt o) const {
  std::lock_guard lk(mu_);
  return overrides_.count(o) != 0;
}

void RuntimeConfig::apply_log_levels_locked() const {
  const auto text = [&](Opt o) -> std::string {
    if (const auto it = overrides_.find(o); it != overrides_.end()) return std::get<std::string>(it->second);
    return std::get<std::string>(cfg_.value(o));
  };
  std::string error;
  if (const auto l = parse_debug_level(text(Opt::debug_ms), error))
    for (const log::Subsys s : kMessengerSubsystems) log::set_level(s, l->log);
  for (const auto& [o, s] : kDebugOverrides) {
    const std::string t = text(o);
    if (const auto l = parse_debug_level(t, error); !t.empty() && l) log::set_level(s, l->log);
  }
}

namespace {

// `config set` of an ms_inject_* option: every running TCP stack's settings
// (msgr/transport/fault_injection.h). Returns how many stacks took it.
std::size_t apply_live_injection(Opt o, const OptionValue& v) {
  return transport::for_each_live_injection([&](transport::LiveInjection& l) {
    constexpr auto relaxed = std::memory_order_relaxed;
    switch (o) {
      case Opt::ms_inject_socket_failures:
        l.socket_failures.store(static_cast<std::uint32_t>(std::get<std::uint64_t>(v)), relaxed);
        break;
      case Opt::ms_inject_delay_type: l.delay_typed.store(!std::get<std::string>(v).empty(), relaxed); break;
      case Opt::ms_inject_delay_max: l.delay_max.store(std::get<double>(v), relaxed); break;
      case Opt::ms_inject_delay_probability: l.delay_probability.store(std::get<double>(v), relaxed); break;
      case Opt::ms_inject_corruption_probability:
        l.corruption_probability.store(std::get<double>(v), relaxed);
        break;
      default: break;
    }
  });
}

}  // namespace

int RuntimeConfig::set(std::string_view name, std::string_view text, std::string& error) {
  std::string note;
  return set(name, text, error, note);
}

int RuntimeConfig::set(std::string_view name, std::string_view text, std::string& error, std::string& note) {
  const auto o = find_option(name);
  if (!o) {
    error = fmt::format("error setting '{}' to '{}': (2) No such file or directory", name, text);
    return -ENOENT;
  }
  std::string why;
  auto v = parse_option_value(*o, text, why);
  if (!v) {
    error = fmt::format("error setting '{}' to '{}': (22) Invalid argument: {}", name, text, why);
    return -EINVAL;
  }
  if (!runtime_settable(*o)) {
    error = fmt::format(
        "error setting '{}' to '{}': (1) Operation not permitted: {} cannot change while the daemon runs ({}); set "
        "it in ceph.conf (or --{} on the command line) and restart the daemon (options that change live: debug_ms, "
        "debug_ms_*, debug_siphon_*, ms_inject_socket_failures, ms_inject_delay_type, ms_inject_delay_max, "
        "ms_inject_delay_probability, ms_inject_corruption_probability)",
        name, text, schema(*o).name, not_live_reason(*o), schema(*o).name);
    return -EPERM;
  }
  if (*o == Opt::ms_inject_socket_failures && std::get<std::uint64_t>(*v) > UINT32_MAX) {
    error = fmt::format("error setting '{}' to '{}': (22) Invalid argument: one failure in more than {} socket "
                        "operations is not supported; use 0 (off) to {}",
                        name, text, UINT32_MAX, UINT32_MAX);
    return -EINVAL;
  }
  std::lock_guard lk(mu_);
  overrides_[*o] = *v;
  if (live_injection_option(*o)) {
    // The TCP stacks inject; the RDMA stack does not (the software fabric
    // has ms_async_rdma_soft_inject_*, fixed at startup).
    if (apply_live_injection(*o, *v) == 0)
      note = fmt::format("{} = '{}' (no TCP stack is running in this process: nothing injects)", schema(*o).name,
                         text);
    return 0;
  }
  apply_log_levels_locked();
  return 0;
}

void register_config_commands(admin::AdminSocket& sock, std::shared_ptr<RuntimeConfig> rc) {
  using admin::Reply;
  using admin::Request;
  using Json = nlohmann::ordered_json;
  sock.register_command("config show", "dump current config settings", [rc](const Request&) {
    const Config& c = rc->loaded();
    Json j = {{"name", c.name().to_string()}, {"cluster", c.cluster()}};
    for (const OptionSchema& s : all_options()) j[std::string(s.name)] = rc->value_string(*find_option(s.name));
    return Reply::json(std::move(j));
  });
  sock.register_command("config get name=var,type=CephString", "config get <field>: get the config value",
                        [rc](const Request& r) {
                          const std::string var = r.str("var");
                          const auto o = find_option(var);
                          if (!o)
                            return Reply::error(-ENOENT, fmt::format("error getting '{}': (2) No such file or directory",
                                                                     var));
                          return Reply::json({{std::string(schema(*o).name), rc->value_string(*o)}});
                        });
  sock.register_command("config set name=var,type=CephString name=val,type=CephString,n=N",
                        "config set <field> <val> [<val> ...]: set a config variable", [rc](const Request& r) {
                          std::string error, note;
                          if (const int err = rc->set(r.str("var"), r.str("val"), error, note); err != 0)
                            return Reply::error(err, error);
                          return Reply::json({{"success", note}});
                        });
  sock.register_command("config diff", "dump diff of current config and default config", [rc](const Request&) {
    const Config& c = rc->loaded();
    Json diff = Json::object();
    for (std::size_t i = 0; i < kOptionCount; ++i) {
      const auto o = static_cast<Opt>(i);
      const ValueSource& src = c.source(o);
      const bool set_at_run_time = rc->overridden(o);
      if (src.kind == ValueSource::Kind::default_value && !set_at_run_time) continue;
      Json e = {{"default", typed(o, default_value(o))}};
      if (src.kind != ValueSource::Kind::default_value) e[std::string(source_key(src.kind))] = typed(o, c.value(o));
      std::string err;
      const std::string now = rc->value_string(o);
      const auto v = parse_option_value(o, now, err);
      if (set_at_run_time) e["override"] = v ? typed(o, *v) : Json(now);
      e["final"] = v ? typed(o, *v) : Json(now);
      diff[std::string(schema(o).name)] = std::move(e);
    }
    return Reply::json({{"diff", std::move(diff)}});
  });
}

std::unique_ptr<DaemonAdmin> DaemonAdmin::open(const Config& cfg, std::string& error) {
  const std::string& path = cfg.get<Opt::admin_socket>();
  if (path.empty()) return nullptr;
  auto d = std::make_unique<DaemonAdmin>();
  d->socket = std::make_unique<admin::AdminSocket>();
  d->messengers = std::make_shared<admin::MessengerSet>();
  d->config = std::make_shared<RuntimeConfig>(cfg);
  admin::register_standard_commands(*d->socket, {cfg.name().to_string(), d->messengers});
  admin::register_perf_commands(*d->socket);
  register_config_commands(*d->socket, d->config);
  if (!d->socket->start(path, error)) return nullptr;
  return d;
}

DaemonAdmin::~DaemonAdmin() {
  if (socket) socket->stop();
}

}  // namespace siphon::compat
