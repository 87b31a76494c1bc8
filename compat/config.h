// The configuration of one entity (e.g. osd.3): every option's typed value
// and where it came from. Precedence, lowest first (as in Ceph):
//
//   built-in default < ceph.conf < CEPH_ARGS < command line
//
// and within ceph.conf: [global] < [<type>] < [<type>.<id>] (plus any extra
// sections, searched first, as `ceph-conf -s`). A messenger factory reads it
// with typed getters and never sees text:
//
//   Config cfg = Config::load_or_throw(ConfigRequest::from_args(argv));
//   const std::uint64_t threads = cfg.get<Opt::ms_async_op_threads>();
//   const MsTypes stacks = cfg.ms_types();
//   cfg.source(Opt::ms_type).to_string();   // "prod.conf:3 [global]"
//
// A Config is immutable once loaded and may be read from any thread.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compat/args.h"
#include "compat/conf_file.h"
#include "compat/diagnostics.h"
#include "compat/expand.h"
#include "compat/ms_type.h"
#include "compat/options.h"
#include "msgr/base/log.h"

namespace siphon::compat {

/// Where an option's value came from.
struct ValueSource {
  enum class Kind : unsigned char { default_value, file, env, argv };
  Kind kind = Kind::default_value;
  Location where;       // the key's position in the file, or "CEPH_ARGS" / "command line"
  std::string section;  // for Kind::file
  unsigned value_column = 0;  // for Kind::file: where the value starts

  /// Where the value is: the file line and value column, else `where`.
  Location value_where() const {
    return kind == Kind::file ? Location{where.file, where.line, value_column} : where;
  }

  /// "default", "prod.conf:12 [osd]", "CEPH_ARGS", "command line".
  std::string to_string() const;
};

/// Which option chose a messenger's stack, and where it was set: Ceph's
/// rule gives ms_public_type (ms_cluster_type) when it is not empty, else
/// ms_type. Tools say this, not just where ms_type came from.
struct MsTypeChoice {
  MsType type;
  std::string_view option;  // "ms_public_type", "ms_cluster_type" or "ms_type"
  ValueSource source;
  /// "ms_public_type from p.conf:3 [global]", "ms_type from default".
  std::string origin() const;
};

/// What to load: normally built by from_args() the way a Ceph program reads
/// its command line and environment.
struct ConfigRequest {
  EntityName name;                          // default client.admin
  std::string cluster;                      // "" = from the file name (prod.conf -> prod), else "ceph"
  std::vector<std::string> conf_search;     // the first file that opens is read
  bool conf_required = false;               // true when the user named the file(s)
  std::vector<OptionOverride> env_overrides;
  std::vector<OptionOverride> cli_overrides;
  std::vector<std::string> extra_sections;  // searched before [name] [type] [global]
  bool check_all_sections = false;          // also validate sections this entity does not read
  std::optional<std::string> pid;           // $pid (default: this process)
  std::optional<std::string> hostname;      // $host when `host` is unset (default: short host name)
  std::optional<std::string> home;          // $home (default: $HOME)

  /// Ceph's search list when no file is named: /etc/ceph/$cluster.conf,
  /// ~/.ceph/$cluster.conf, ./$cluster.conf.
  static std::vector<std::string> default_search_list();

  /// Reads `args` (without argv[0]) and the environment as Ceph does:
  /// CEPH_ARGS first, then the command line (later wins); -c/--conf, else
  /// $CEPH_CONF, else the default list. Arguments that are not configuration
  /// are returned in `rest`; problems go to `diags`.
  static ConfigRequest from_args(std::span<const std::string> args, const char* ceph_args_env,
                                 const char* ceph_conf_env, Diagnostics& diags,
                                 std::vector<std::string>* rest = nullptr);
  /// The same, reading CEPH_ARGS and CEPH_CONF from the process environment.
  static ConfigRequest from_args(std::span<const std::string> args, Diagnostics& diags,
                                 std::vector<std::string>* rest = nullptr);
};

class Config {
 public:
  /// Loads the configuration. Never throws on bad input: problems go to
  /// `diags` (errors name file:line:column, the option and the accepted
  /// values); an invalid value leaves the option at its previous level's
  /// value, as Ceph does. Unknown names in the file are warnings.
  static Config load(const ConfigRequest& req, Diagnostics& diags);
  /// The same from text instead of a file (tests, embedded configs).
  static Config load_text(std::string_view text, std::string path, const ConfigRequest& req,
                          Diagnostics& diags);
  /// Loads, logs warnings (subsystem compat, level 1) and throws SetupError
  /// (errc::config_error) listing every error if there is any.
  static Config load_or_throw(const ConfigRequest& req);

  /// The typed value of option O: cfg.get<Opt::ms_async_op_threads>().
  template <Opt O>
  const option_type_t<O>& get() const {
    // Always holds this type: values are only stored after parsing as the
    // option's type (options.def's static table fixes the pairing).
    return std::get<option_type_t<O>>(values_[index(O)]);
  }
  const OptionValue& value(Opt o) const noexcept { return values_[index(o)]; }
  /// Ceph's text for the value (what `ceph-conf --show-config-value` prints).
  std::string value_string(Opt o) const { return value_to_string(o, values_[index(o)]); }
  const ValueSource& source(Opt o) const noexcept { return sources_[index(o)]; }

  /// ms_type with ms_public_type / ms_cluster_type applied.
  MsTypes ms_types() const;
  /// The stack of the public (clients use it) or the cluster messenger,
  /// with the option that chose it.
  MsTypeChoice ms_type_choice(bool cluster = false) const;
  /// debug_ms as numbers.
  DebugLevel debug_ms() const;

  const EntityName& name() const noexcept { return name_; }
  const std::string& cluster() const noexcept { return vars_.cluster; }
  /// The file that was read, if any.
  const ConfFile* file() const noexcept { return file_ ? &*file_ : nullptr; }
  /// Sections searched, highest priority first.
  const std::vector<std::string>& sections() const noexcept { return sections_; }

  /// `ceph-conf --lookup KEY`: the value the file gives KEY for this entity
  /// (any key, option or not), with $ expansion; nullopt if not set.
  std::optional<std::string> lookup(std::string_view key) const;
  /// Expands $variables in `text` against this configuration.
  std::string expand(std::string_view text, std::vector<std::string>* warnings = nullptr) const;

 private:
  Config() = default;
  void load_file(const ConfigRequest& req, Diagnostics& diags, std::optional<std::string_view> text,
                 std::string_view text_path);
  void resolve(const ConfigRequest& req, Diagnostics& diags);
  void check_sections(const ConfigRequest& req, Diagnostics& diags) const;
  void check_cross(Diagnostics& diags) const;
  void check_unimplemented(Diagnostics& diags) const;
  OptionResolver resolver() const;

  EntityName name_;
  std::optional<ConfFile> file_;
  std::vector<std::string> sections_;
  MetaVariables vars_;
  std::array<OptionValue, kOptionCount> values_{};
  std::array<std::string, kOptionCount> raw_{};  // string options: before $ expansion
  std::array<ValueSource, kOptionCount> sources_{};
};

/// The log subsystems Ceph's debug_ms governs: the messenger and its stacks.
inline constexpr log::Subsys kMessengerSubsystems[] = {log::Subsys::ms, log::Subsys::proto, log::Subsys::session,
                                                       log::Subsys::transport, log::Subsys::rdma};

/// Sets the log level of every messenger subsystem (kMessengerSubsystems)
/// from debug_ms.
void apply_log_levels(const Config& cfg);

/// Ceph's `perf` option: siphon::perf::set_enabled(perf) (process-wide).
void apply_perf_option(const Config& cfg);

}  // namespace siphon::compat
