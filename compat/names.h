// Option names: Ceph's full list (so a Ceph option Siphon does not use is not
// mistaken for a typo) and suggestions for unknown names.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace siphon::compat {

/// True for the name of any Ceph option (Ceph 16.2's list, including every
/// debug_<subsystem>), whether or not Siphon uses it.
bool is_ceph_option(std::string_view name);

/// Optimal-string-alignment distance (insertions, deletions, substitutions
/// and transpositions of neighbours each cost 1).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The known option (Siphon's first, then Ceph's) closest to `name`, when it
/// is close enough to be a likely typo.
std::optional<std::string> suggest_option(std::string_view name);

/// "unknown option 'ms_tpye'; did you mean 'ms_type'?", with a specific hint
/// for dashes, case and stray spaces. `name` is normalised.
std::string unknown_option_message(std::string_view name);

}  // namespace siphon::compat
