#include "compat/config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>

#include <fmt/format.h>

#include "compat/names.h"
#include "msgr/perf/perf_counters.h"
#include "rdma/transport/credits.h"
#include "msgr/base/error.h"
#include "msgr/base/log.h"

namespace siphon::compat {
namespace {

const Location kEnvLocation{"CEPH_ARGS", 0, 0};
const Location kArgvLocation{"command line", 0, 0};

// Ceph's rule (md_config_t::get_cluster_name): "prod.conf" -> "prod"; a file
// whose extension is not ".conf" means the cluster "ceph".
std::string cluster_from_path(const std::string& path) {
  const std::filesystem::path p(path);
  if (p.extension() == ".conf") return p.stem().string();
  return "ceph";
}

// Appends the accepted range to a limit violation; type and check errors
// already say what is accepted.
std::string with_accepted(Opt o, const std::string& error) {
  const OptionSchema& s = schema(o);
  if (s.min_text.empty() && s.max_text.empty()) return error;
  return fmt::format("{} (accepted: {})", error, accepted_values(o));
}

bool old_style_section(std::string_view name) {
  return (name.substr(0, 3) == "mon" || name.substr(0, 3) == "osd" || name.substr(0, 3) == "mds") &&
         name.size() > 3 && name[3] != '.';
}

bool entity_section(std::string_view name) {
  if (name == "global" || EntityName::valid_type(name)) return true;
  const auto dot = name.find('.');
  return dot != std::string_view::npos && EntityName::valid_type(name.substr(0, dot));
}

}  // namespace

std::string ValueSource::to_string() const {
  switch (kind) {
    case Kind::default_value: return "default";
    case Kind::file: return fmt::format("{}:{} [{}]", where.file, where.line, section);
    case Kind::env: return "CEPH_ARGS";
    case Kind::argv: return "command line";
  }
  return "?";
}

std::vector<std::string> ConfigRequest::default_search_list() {
  return {"/etc/ceph/$cluster.conf", "$home/.ceph/$cluster.conf", "$cluster.conf"};
}

ConfigRequest ConfigRequest::from_args(std::span<const std::string> args, const char* ceph_args_env,
                                       const char* ceph_conf_env, Diagnostics& diags,
                                       std::vector<std::string>* rest) {
  ConfigRequest req;
  ParsedArgs env;
  ParsedArgs cli;
  if (ceph_args_env != nullptr) {
    const auto env_args = split_ceph_args(ceph_args_env);
    parse_args(env_args, "CEPH_ARGS", env, diags);
  }
  parse_args(args, "command line", cli, diags);
  std::optional<std::string> conf;
  for (const ParsedArgs* p : {&env, &cli}) {
    if (p->conf) conf = p->conf;
    if (p->cluster) req.cluster = *p->cluster;
    if (p->name) req.name = *p->name;
    if (p->id) req.name.id = *p->id;
  }
  req.env_overrides = env.overrides;
  req.cli_overrides = cli.overrides;
  if (conf) {
    req.conf_search = split_list(*conf, ", ;\t");
    req.conf_required = true;
  } else if (ceph_conf_env != nullptr && *ceph_conf_env != '\0') {
    req.conf_search = split_list(ceph_conf_env, ", ;\t");
    req.conf_required = true;
  } else {
    req.conf_search = default_search_list();
  }
  if (rest != nullptr) {
    *rest = env.rest;
    rest->insert(rest->end(), cli.rest.begin(), cli.rest.end());
  }
  return req;
}

ConfigRequest ConfigRequest::from_args(std::span<const std::string> args, Diagnostics& diags,
                                       std::vector<std::string>* rest) {
  return from_args(args, std::getenv("CEPH_ARGS"), std::getenv("CEPH_CONF"), diags, rest);
}

Config Config::load(const ConfigRequest& req, Diagnostics& diags) {
  Config cfg;
  cfg.load_file(req, diags, std::nullopt, {});
  cfg.resolve(req, diags);
  return cfg;
}

Config Config::load_text(std::string_view text, std::string path, const ConfigRequest& req,
                         Diagnostics& diags) {
  Config cfg;
  cfg.load_file(req, diags, text, path);
  cfg.resolve(req, diags);
  return cfg;
}

Config Config::load_or_throw(const ConfigRequest& req) {
  Diagnostics diags;
  Config cfg = load(req, diags);
  for (const auto& d : diags.all())
    if (d.severity == Severity::warning) SIPHON_LOG(compat, 1, "{}", d.to_string());
  if (diags.has_errors()) {
    std::string cause = fmt::format("invalid configuration for {} ({} error{})", cfg.name_.to_string(),
                                    diags.error_count(), diags.error_count() == 1 ? "" : "s");
    for (const auto& d : diags.all())
      if (d.severity == Severity::error) cause += "; " + d.to_string();
    throw SetupError(make_error_code(errc::config_error), std::move(cause),
                     "fix the lines named above; `siphon-conf --check` lists every problem");
  }
  return cfg;
}

void Config::load_file(const ConfigRequest& req, Diagnostics& diags, std::optional<std::string_view> text,
                       std::string_view text_path) {
  name_ = req.name;
  vars_.type = name_.type;
  vars_.id = name_.id;
  vars_.name = name_.to_string();
  vars_.pid = req.pid ? *req.pid : std::to_string(::getpid());
  if (req.home) {
    vars_.home = *req.home;
  } else if (const char* h = std::getenv("HOME")) {
    vars_.home = h;
  }
  vars_.cluster = req.cluster.empty() ? "ceph" : req.cluster;
  if (text) {
    file_ = ConfFile::parse(*text, std::string(text_path), diags);
  } else {
    std::vector<std::string> tried;
    for (const auto& candidate : req.conf_search) {
      const std::string path = expand_meta(candidate, vars_, [](std::string_view) {
        return std::optional<OptionRef>();
      }, "", nullptr);
      tried.push_back(path);
      int err = 0;
      file_ = ConfFile::read(path, diags, &err);
      if (file_) break;
      if (err == 0) return;  // it opened but could not be used: already reported
      if (err != ENOENT) {
        diags.error(Location{path, 0, 0}, fmt::format("cannot open: {}", std::strerror(err)));
        return;
      }
    }
    if (!file_) {
      const std::string list = fmt::format("{}", fmt::join(tried, ", "));
      if (req.conf_required)
        diags.error(Location{}, fmt::format("unable to open a configuration file from the search list: {}",
                                            list));
      else
        diags.warning(Location{}, fmt::format("no configuration file found ({}); using the built-in "
                                              "defaults", list));
    }
  }
  if (req.cluster.empty() && file_) vars_.cluster = cluster_from_path(file_->path());
}

OptionResolver Config::resolver() const {
  return [this](std::string_view name) -> std::optional<OptionRef> {
    const auto o = find_option(name);
    if (!o || name != schema(*o).name) return std::nullopt;
    if (schema(*o).type == OptionType::str) return OptionRef{raw_[index(*o)], true};
    return OptionRef{value_string(*o), false};
  };
}

void Config::resolve(const ConfigRequest& req, Diagnostics& diags) {
  sections_ = req.extra_sections;
  for (const auto& s : {name_.to_string(), name_.type, std::string("global")})
    if (std::find(sections_.begin(), sections_.end(), s) == sections_.end()) sections_.push_back(s);

  for (std::size_t i = 0; i < kOptionCount; ++i) {
    const auto o = static_cast<Opt>(i);
    values_[i] = default_value(o);
    raw_[i] = std::string(schema(o).default_text);
    sources_[i] = ValueSource{};
  }

  // Sets option o from text at level `src`; an invalid value is reported and
  // leaves the option as it was. String options are validated after $
  // expansion, below.
  const auto apply = [&](Opt o, const std::string& text, const ValueSource& src, const Location& where,
                         std::string_view what) {
    const OptionSchema& s = schema(o);
    if (s.type != OptionType::str) {
      std::string error;
      auto v = parse_option_value(o, text, error);
      if (!v) {
        diags.error(where, fmt::format("{}: {}", what, with_accepted(o, error)));
        return;
      }
      values_[index(o)] = std::move(*v);
    }
    raw_[index(o)] = text;
    if (s.check == OptionCheck::debug_level || s.check == OptionCheck::debug_level_or_empty) {
      // Ceph stores "5" as "5/5", and $debug_ms references see that.
      std::string ignored;
      if (const auto level = parse_debug_level(text, ignored)) raw_[index(o)] = level->to_string();
    }
    sources_[index(o)] = src;
  };

  if (file_) {
    check_sections(req, diags);
    for (const auto& e : file_->entries()) {
      const auto o = find_option(e.key);
      if (!o) {
        if (is_ceph_option(e.key))
          SIPHON_LOG(compat, 5, "{}: {} is a Ceph option that Siphon does not use", e.where.to_string(), e.key);
        else
          diags.warning(e.where, unknown_option_message(e.key));
      }
    }
    for (std::size_t i = 0; i < kOptionCount; ++i) {
      const auto o = static_cast<Opt>(i);
      const ConfEntry* e = file_->lookup(sections_, schema(o).name);
      if (e == nullptr) continue;
      const Location value_loc{e->where.file, e->where.line, e->value_column};
      apply(o, e->value, ValueSource{ValueSource::Kind::file, e->where, e->section, e->value_column}, value_loc,
            fmt::format("{} = {}", e->key, e->value));
    }
  }
  for (const auto& ov : req.env_overrides)
    apply(ov.option, ov.value, ValueSource{ValueSource::Kind::env, kEnvLocation, {}}, kEnvLocation, ov.arg);
  for (const auto& ov : req.cli_overrides)
    apply(ov.option, ov.value, ValueSource{ValueSource::Kind::argv, kArgvLocation, {}}, kArgvLocation, ov.arg);

  // $host needs the host option; then every string option is expanded
  // (references see the final raw values, so the order does not matter).
  vars_.host = !raw_[index(Opt::host)].empty() ? raw_[index(Opt::host)]
               : req.hostname                 ? *req.hostname
                                              : short_hostname();
  const OptionResolver res = resolver();
  for (std::size_t i = 0; i < kOptionCount; ++i) {
    const auto o = static_cast<Opt>(i);
    const OptionSchema& s = schema(o);
    if (s.type != OptionType::str) continue;
    const Location where = sources_[i].value_where();
    std::vector<std::string> loops;
    std::string expanded = expand_meta(raw_[i], vars_, res, s.name, &loops);
    for (const auto& w : loops) diags.warning(sources_[i].where, fmt::format("{}: {}", s.name, w));
    std::string error;
    if (auto v = parse_option_value(o, expanded, error)) {
      values_[i] = std::move(*v);
      continue;
    }
    const std::string shown = expanded == raw_[i] ? raw_[i] : fmt::format("{} (expanded to '{}')", raw_[i], expanded);
    diags.error(where, fmt::format("{} = {}: {}", s.name, shown, with_accepted(o, error)));
    // The typed value falls back to the default; raw_ keeps the text, which
    // $references still see (Ceph has no such check and would use it).
    values_[i] = default_value(o);
    sources_[i] = ValueSource{};
  }

  // Sections this entity does not read (siphon-conf --check): same checks.
  if (file_ && req.check_all_sections) {
    for (const auto& e : file_->entries()) {
      const auto o = find_option(e.key);
      if (!o || file_->find(e.section, e.key) != &e) continue;
      if (std::find(sections_.begin(), sections_.end(), e.section) != sections_.end()) continue;
      const std::string text = schema(*o).type == OptionType::str ? expand(e.value) : e.value;
      std::string error;
      if (!parse_option_value(*o, text, error))
        diags.error(Location{e.where.file, e.where.line, e.value_column},
                    fmt::format("{} = {} (in [{}]): {}", e.key, e.value, e.section, with_accepted(*o, error)));
    }
  }

  for (std::size_t i = 0; i < kOptionCount; ++i) {
    if (sources_[i].kind == ValueSource::Kind::default_value) continue;
    const std::string w = option_value_warning(static_cast<Opt>(i), values_[i]);
    if (!w.empty()) diags.warning(sources_[i].where, w);
  }
  check_cross(diags);
  for (std::size_t i = 0; i < kOptionCount; ++i)
    SIPHON_LOG(compat, 10, "{} = {} ({})", schema(static_cast<Opt>(i)).name,
               value_string(static_cast<Opt>(i)), sources_[i].to_string());
}

void Config::check_sections(const ConfigRequest& req, Diagnostics& diags) const {
  std::vector<std::string> seen;
  for (const auto& h : file_->headers()) {
    if (std::find(seen.begin(), seen.end(), h.name) != seen.end()) continue;
    seen.push_back(h.name);
    if (entity_section(h.name)) continue;
    if (std::find(req.extra_sections.begin(), req.extra_sections.end(), h.name) != req.extra_sections.end())
      continue;
    std::size_t settings = 0;
    for (const auto& e : file_->entries()) settings += e.section == h.name ? 1 : 0;
    std::string trimmed = h.name;
    trimmed.erase(0, trimmed.find_first_not_of(" \t"));
    trimmed.erase(trimmed.find_last_not_of(" \t") + 1);
    if (trimmed != h.name && entity_section(trimmed)) {
      diags.warning(h.where, fmt::format("section [{}] matches nothing: Ceph does not trim spaces in "
                                         "section names; write [{}]", h.name, trimmed));
    } else if (old_style_section(h.name)) {
      diags.warning(h.where, fmt::format("old-style section name [{}] is not read (Ceph reports it as an "
                                         "error); write [{}.{}]", h.name, h.name.substr(0, 3),
                                         h.name.substr(3)));
    } else {
      diags.warning(h.where, fmt::format("section [{}] is read by no Ceph daemon or client (they read "
                                         "[global], [TYPE] and [TYPE.ID] with TYPE one of mon, osd, mds, "
                                         "mgr, client, auth), so its {} setting{} ignored{}",
                                         h.name, settings, settings == 1 ? " is" : "s are",
                                         h.name == "ms" || h.name == "messenger"
                                             ? "; put messenger options in [global] or a daemon's section"
                                             : ""));
    }
  }
}

void Config::check_cross(Diagnostics& diags) const {
  const auto where = [&](Opt o) { return sources_[index(o)].where; };
  const auto later = [&](Opt a, Opt b) {
    // The one set last: argv over env over file over default; in a file,
    // the later line.
    const auto& sa = sources_[index(a)];
    const auto& sb = sources_[index(b)];
    return std::tie(sa.kind, sa.where.line) >= std::tie(sb.kind, sb.where.line) ? a : b;
  };
  if (get<Opt::ms_bind_port_min>() > get<Opt::ms_bind_port_max>())
    diags.error(where(later(Opt::ms_bind_port_min, Opt::ms_bind_port_max)),
                fmt::format("ms_bind_port_min ({}) is above ms_bind_port_max ({})",
                            get<Opt::ms_bind_port_min>(), get<Opt::ms_bind_port_max>()));
  if (!get<Opt::ms_bind_ipv4>() && !get<Opt::ms_bind_ipv6>())
    diags.error(where(later(Opt::ms_bind_ipv4, Opt::ms_bind_ipv6)),
                "ms_bind_ipv4 and ms_bind_ipv6 are both false: there is nothing to bind");
  // The RDMA stack's rules between options (rdma_stack.cc, check_options):
  // the same conditions, so --check refuses what the stack would.
  const auto rx_bufs = get<Opt::ms_async_rdma_receive_buffers>();
  const auto rx_len = get<Opt::ms_async_rdma_receive_queue_len>();
  const auto credits = get<Opt::ms_async_rdma_credits>();
  const std::uint64_t per_qp = credits + rdma::kUpdateSlots;
  // compat/factory.cc: an SRQ only when ms_async_rdma_support_srq is set explicitly.
  const bool srq = get<Opt::ms_async_rdma_support_srq>() &&
                   sources_[index(Opt::ms_async_rdma_support_srq)].kind != ValueSource::Kind::default_value;
  if (rx_bufs < per_qp)
    diags.error(where(later(Opt::ms_async_rdma_receive_buffers, Opt::ms_async_rdma_credits)),
                fmt::format("ms_async_rdma_receive_buffers ({}) cannot hold one connection's ms_async_rdma_credits "
                            "({}) + {} update slots: use at least {}", rx_bufs, credits, rdma::kUpdateSlots, per_qp));
  if (srq && rx_len < per_qp)
    diags.error(where(later(Opt::ms_async_rdma_credits, Opt::ms_async_rdma_receive_queue_len)),
                fmt::format("ms_async_rdma_credits ({}) + {} update slots is above ms_async_rdma_receive_queue_len "
                            "({}) with ms_async_rdma_support_srq: a peer would be granted receives that are not "
                            "posted", credits, rdma::kUpdateSlots, rx_len));
  if (const auto nw = get<Opt::ms_async_op_threads>(); srq && rx_len * nw >= rx_bufs)
    diags.error(where(later(Opt::ms_async_rdma_receive_buffers, Opt::ms_async_rdma_receive_queue_len)),
                fmt::format("ms_async_rdma_receive_buffers ({}) must be above ms_async_rdma_receive_queue_len ({}) "
                            "x ms_async_op_threads ({}) with ms_async_rdma_support_srq: the shared receive queues "
                            "could never be filled with room left for RDMA READ targets", rx_bufs, rx_len, nw));
  if (const auto mtu = get<Opt::ms_async_rdma_path_mtu>();
      mtu != 0 && mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096)
    diags.error(where(Opt::ms_async_rdma_path_mtu),
                fmt::format("ms_async_rdma_path_mtu = {} is invalid: use 256, 512, 1024, 2048, "
                            "4096, or 0 for the port's active MTU", mtu));
  if (get<Opt::ms_initial_backoff>() > get<Opt::ms_max_backoff>())
    diags.warning(where(later(Opt::ms_initial_backoff, Opt::ms_max_backoff)),
                  fmt::format("ms_initial_backoff ({}) is above ms_max_backoff ({}): every retry waits "
                              "ms_max_backoff", value_string(Opt::ms_initial_backoff),
                              value_string(Opt::ms_max_backoff)));
  if (get<Opt::ms_max_segment_size>() > get<Opt::ms_max_frame_size>())
    diags.warning(where(later(Opt::ms_max_segment_size, Opt::ms_max_frame_size)),
                  "ms_max_segment_size is above ms_max_frame_size, which is then the real segment limit");
  if (get<Opt::ms_send_queue_low_water>() > get<Opt::ms_send_queue_high_water>())
    diags.error(where(later(Opt::ms_send_queue_low_water, Opt::ms_send_queue_high_water)),
                fmt::format("ms_send_queue_low_water ({}) is above ms_send_queue_high_water ({}): sending "
                            "would never resume", get<Opt::ms_send_queue_low_water>(),
                            get<Opt::ms_send_queue_high_water>()));
  check_unimplemented(diags);
  // Options of the TCP stack that the RDMA stack does not implement.
  const MsTypes types = ms_types();
  if (types.public_type.stack == MsType::Stack::rdma || types.cluster_type.stack == MsType::Stack::rdma) {
    for (const Opt o : {Opt::ms_inject_socket_failures, Opt::ms_inject_delay_probability,
                        Opt::ms_inject_corruption_probability, Opt::ms_bind_before_connect,
                        Opt::ms_max_accept_failures}) {
      const bool injection = o == Opt::ms_inject_socket_failures || o == Opt::ms_inject_delay_probability ||
                             o == Opt::ms_inject_corruption_probability;
      if (sources_[index(o)].kind == ValueSource::Kind::default_value) continue;
      if (value_string(o) == value_to_string(o, default_value(o))) continue;
      diags.warning(where(o), fmt::format("{} = {} has no effect on the RDMA stack (ms_type {}): it applies to "
                                          "async+posix only{}", schema(o).name, value_string(o),
                                          get<Opt::ms_type>(),
                                          injection ? "; the software fabric injects faults with "
                                                      "ms_async_rdma_soft_inject_*"
                                                    : ""));
    }
  }
  if (get<Opt::ms_async_rdma_inline_threshold>() > get<Opt::ms_async_rdma_buffer_size>())
    diags.warning(where(later(Opt::ms_async_rdma_inline_threshold, Opt::ms_async_rdma_buffer_size)),
                  "ms_async_rdma_inline_threshold is above ms_async_rdma_buffer_size; the buffer size "
                  "is then the limit");
}

// Ceph options whose meaning depends on the entity and that Siphon does not
// implement. (auth_service_required / auth_cluster_required are a daemon's
// accepting side, built by compat::server_auth: nothing to refuse here.)
void Config::check_unimplemented(Diagnostics& diags) const {
  const auto get_string = [&](Opt o) -> const std::string& { return std::get<std::string>(values_[index(o)]); };
  const bool daemon = name_.type == "mon" || name_.type == "osd" || name_.type == "mds" || name_.type == "mgr";
  // Ceph daemons pick their address from these subnets; Siphon's daemon
  // (siphon-objd) binds public_addr / cluster_addr as given.
  if (daemon) {
    for (const auto& [net, addr] : {std::pair{Opt::public_network, Opt::public_addr},
                                    std::pair{Opt::cluster_network, Opt::cluster_addr}}) {
      if (sources_[index(net)].kind == ValueSource::Kind::default_value || get_string(net).empty()) continue;
      diags.warning(sources_[index(net)].where,
                    fmt::format("{} = {}: Siphon does not pick an address from it; set {} (unset, "
                                "siphon-objd binds 127.0.0.1)", schema(net).name, get_string(net),
                                schema(addr).name));
    }
  }
}

MsTypes Config::ms_types() const {
  std::string error;
  if (auto t = resolve_ms_types(get<Opt::ms_type>(), get<Opt::ms_public_type>(), get<Opt::ms_cluster_type>(),
                                error))
    return *t;
  // Unreachable: the three values were validated when loaded.
  const MsType posix{MsType::Stack::posix, "posix"};
  return MsTypes{posix, posix};
}

MsTypeChoice Config::ms_type_choice(bool cluster) const {
  const MsTypes types = ms_types();
  MsTypeChoice c;
  c.type = cluster ? types.cluster_type : types.public_type;
  const Opt specific = cluster ? Opt::ms_cluster_type : Opt::ms_public_type;
  const bool overridden = !(cluster ? get<Opt::ms_cluster_type>() : get<Opt::ms_public_type>()).empty();
  c.option = overridden ? (cluster ? "ms_cluster_type" : "ms_public_type") : "ms_type";
  c.source = source(overridden ? specific : Opt::ms_type);
  return c;
}

std::string MsTypeChoice::origin() const { return std::string(option) + " from " + source.to_string(); }

DebugLevel Config::debug_ms() const {
  std::string error;
  return parse_debug_level(get<Opt::debug_ms>(), error).value_or(DebugLevel{});
}

std::optional<std::string> Config::lookup(std::string_view key) const {
  if (!file_) return std::nullopt;
  const ConfEntry* e = file_->lookup(sections_, key);
  if (e == nullptr) return std::nullopt;
  return expand(e->value);
}

std::string Config::expand(std::string_view text, std::vector<std::string>* warnings) const {
  return expand_meta(text, vars_, resolver(), "", warnings);
}

// Ceph's debug_ms governs the whole messenger, its network stacks included:
// every Siphon subsystem below the API is part of it (compat and tools are not).
// The Siphon extensions debug_ms_<subsystem> and debug_siphon_<subsystem>,
// when set, override it for their subsystem.
void apply_log_levels(const Config& cfg) {
  const int level = cfg.debug_ms().log;
  for (const log::Subsys s : kMessengerSubsystems) log::set_level(s, level);
  static constexpr std::pair<Opt, log::Subsys> kOverrides[] = {
      {Opt::debug_ms_proto, log::Subsys::proto},          {Opt::debug_ms_session, log::Subsys::session},
      {Opt::debug_ms_transport, log::Subsys::transport},  {Opt::debug_ms_rdma, log::Subsys::rdma},
      {Opt::debug_siphon_compat, log::Subsys::compat},    {Opt::debug_siphon_tools, log::Subsys::tools}};
  for (const auto& [o, s] : kOverrides) {
    const std::string& text = std::get<std::string>(cfg.value(o));
    std::string error;
    if (const auto l = parse_debug_level(text, error); !text.empty() && l) log::set_level(s, l->log);
  }
}

void apply_perf_option(const Config& cfg) { perf::set_enabled(std::get<bool>(cfg.value(Opt::perf))); }

}  // namespace siphon::compat
