// Entity names and Ceph's command-line conventions for options.
//
//   -n/--name TYPE.ID   --id/-i ID   --cluster NAME   -c/--conf FILE[,FILE...]
//   -k/--keyring FILE[,FILE...]
//   --<option> VALUE    --<option>=VALUE      dashes and underscores are the
//   --<bool>  --<bool>=true|false|1|0  --<bool> true|false  --no-<bool>
//
// The same rules apply to the CEPH_ARGS environment variable, split on
// spaces (no quoting, as in Ceph).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compat/diagnostics.h"
#include "compat/options.h"

namespace siphon::compat {

/// TYPE.ID, e.g. osd.3, client.admin, client.rgw.host1 (the id is everything
/// after the first dot and may be empty).
struct EntityName {
  std::string type = "client";
  std::string id = "admin";

  std::string to_string() const { return type + "." + id; }
  /// Ceph's entity types: auth, mon, osd, mds, mgr, client.
  static bool valid_type(std::string_view type) noexcept;
  static std::optional<EntityName> parse(std::string_view text, std::string& error);
  friend bool operator==(const EntityName&, const EntityName&) = default;
};

/// One option set on the command line or in CEPH_ARGS.
struct OptionOverride {
  Opt option;
  std::string value;
  std::string arg;  // as given, for messages
};

/// What a command line (or CEPH_ARGS) says. Later arguments win.
struct ParsedArgs {
  std::optional<std::string> conf;  // -c / --conf (a search list)
  std::optional<std::string> cluster;
  std::optional<EntityName> name;
  std::optional<std::string> id;
  std::vector<OptionOverride> overrides;
  std::vector<std::string> rest;  // arguments that are none of the above, in order
};

/// Parses `args` into `out` (appending). `origin` ("command line",
/// "CEPH_ARGS") names the source in diagnostics. A `--name` that is not an
/// option is left in `rest`; an option with a bad or missing value is an
/// error. Everything after "--" goes to `rest` unparsed.
void parse_args(std::span<const std::string> args, std::string_view origin, ParsedArgs& out,
                Diagnostics& diags);

/// CEPH_ARGS split as Ceph splits it: on spaces, no quoting.
std::vector<std::string> split_ceph_args(std::string_view text);

/// Siphon's tools also take `--set KEY=VALUE` (and `--set=KEY=VALUE`): each
/// becomes `--KEY=VALUE` in `out`, after checking that KEY is an option;
/// every other argument is copied. False, with `error` naming the argument
/// and the fix, on a malformed pair or an unknown key.
bool translate_set_args(const std::vector<std::string>& in, std::vector<std::string>& out, std::string& error);

}  // namespace siphon::compat
