// $variable expansion in values, as Ceph does it (md_config_t::_expand_meta):
//
//   $cluster $type $id $num $name $host $pid $home   metavariables
//   $<option> or ${<option>}                          another option's value
//
// A variable is '$' followed by [a-z_]+ (or the same in braces). An unknown
// name is left as written. A reference to an option whose value is being
// expanded (a loop) is left unexpanded as "$name" and reported; as in Ceph,
// that replaces the whole value of the option where the loop closes.
// Ceph quirks kept: "${x" (no closing brace) expands to "$" and drops the
// rest of the value; "$$" stays "$$". One deliberate difference: Ceph's
// $home replaces everything before it ("x$home" -> "/root"); Siphon's
// appends ("x/root").
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace siphon::compat {

struct MetaVariables {
  std::string cluster = "ceph";
  std::string type = "client";
  std::string id = "admin";
  std::string name = "client.admin";
  std::string host;  // $host: the host option, or the short host name
  std::string pid;   // $pid
  std::string home;  // $home: $HOME
};

/// A `$option` reference resolved: the option's value and whether it is a
/// string option (whose value is itself expanded) or a typed one (used as
/// is, in Ceph's text form).
struct OptionRef {
  std::string value;
  bool is_string = true;
};
using OptionResolver = std::function<std::optional<OptionRef>(std::string_view name)>;

/// Expands `value`. `self` is the option `value` belongs to ("" for a value
/// that is not an option's, e.g. a `--lookup` of any key). Loops are added
/// to `warnings` when it is not null.
std::string expand_meta(std::string_view value, const MetaVariables& vars, const OptionResolver& resolve,
                        std::string_view self, std::vector<std::string>* warnings);

/// The host name up to its first dot (Ceph's ceph_get_short_hostname).
std::string short_hostname();

}  // namespace siphon::compat
