// The option schema: every option Siphon reads, with its Ceph name, type,
// default, limits, level, description and origin (Ceph or Siphon extension).
// The table is compat/options.def; this header turns it into
//
//   enum class Opt        one enumerator per option, e.g. Opt::ms_type
//   option_type_t<O>      the C++ type of option O's value, e.g.
//                         option_type_t<Opt::ms_async_op_threads> = uint64_t
//   schema(O), find_option("ms_type"), parse_option_value(...)
//
// and Config (config.h) hands out typed values: cfg.get<Opt::ms_type>().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "compat/values.h"

namespace siphon::compat {

enum class OptionType : unsigned char { boolean, int64, uint64, size, float64, secs, str, addr, addrvec, uuid };
enum class OptionLevel : unsigned char { basic, advanced, dev };
enum class OptionOrigin : unsigned char { ceph, siphon };

/// Extra validation beyond the type (options.cc has the rules).
enum class OptionCheck : unsigned char {
  none,
  ms_type,           // compat/ms_type.h rules
  ms_type_or_empty,  // the same, or empty (= use ms_type)
  auth_methods,      // list of cephx, none
  ms_modes,          // list of crc, secure
  networks,          // list of CIDR subnets
  debug_level,       // N or N/M
  debug_level_or_empty,  // N or N/M, or empty (= not set)
  gid,               // an IPv6-form GID
  rdma_type,         // ib | iwarp, with a hint when a device name is given
  entity_types,      // list of mon, osd, mds, mgr, client
  never_dies,        // a Ceph ms_die_on_* option: true gets a warning
  no_effect,         // not implemented: a value other than the default gets a warning (the note says why)
  rdma_cm,           // ms_async_rdma_cm: false set explicitly gets a warning
  metrics_endpoint,  // empty, or IP:PORT (msgr/metrics parse_endpoint)
};

std::string_view to_string(OptionType t) noexcept;
std::string_view to_string(OptionLevel l) noexcept;
std::string_view to_string(OptionOrigin o) noexcept;

struct OptionSchema {
  std::string_view name;
  OptionType type;
  OptionLevel level;
  OptionOrigin origin;
  std::string_view default_text;  // as a ceph.conf writes it
  std::string_view min_text;      // "" = no minimum
  std::string_view max_text;      // "" = no maximum
  std::string_view enum_values;   // "a|b", "" = any value
  OptionCheck check;
  bool siphon_limits;             // min/max/enum enforced by Siphon only
  std::string_view description;
  std::string_view note;          // where Siphon differs from Ceph
};

enum class Opt : std::uint16_t {
#define SIPHON_OPTION(name, ...) name,
#include "compat/options.def"
#undef SIPHON_OPTION
};

inline constexpr OptionType kOptionTypes[] = {
#define SIPHON_OPTION(name, type, ...) OptionType::type,
#include "compat/options.def"
#undef SIPHON_OPTION
};
inline constexpr std::size_t kOptionCount = std::size(kOptionTypes);

constexpr std::size_t index(Opt o) noexcept { return static_cast<std::size_t>(o); }

/// A parsed value. size and uint64 both hold std::uint64_t (bytes for size).
using OptionValue = std::variant<bool, std::int64_t, std::uint64_t, double, std::chrono::seconds,
                                 std::string, EntityAddr, EntityAddrVec, Uuid>;

template <OptionType T> struct option_cpp_type;
template <> struct option_cpp_type<OptionType::boolean> { using type = bool; };
template <> struct option_cpp_type<OptionType::int64> { using type = std::int64_t; };
template <> struct option_cpp_type<OptionType::uint64> { using type = std::uint64_t; };
template <> struct option_cpp_type<OptionType::size> { using type = std::uint64_t; };
template <> struct option_cpp_type<OptionType::float64> { using type = double; };
template <> struct option_cpp_type<OptionType::secs> { using type = std::chrono::seconds; };
template <> struct option_cpp_type<OptionType::str> { using type = std::string; };
template <> struct option_cpp_type<OptionType::addr> { using type = EntityAddr; };
template <> struct option_cpp_type<OptionType::addrvec> { using type = EntityAddrVec; };
template <> struct option_cpp_type<OptionType::uuid> { using type = Uuid; };

/// The C++ type of option O's value.
template <Opt O>
using option_type_t = typename option_cpp_type<kOptionTypes[index(O)]>::type;

const OptionSchema& schema(Opt o) noexcept;
std::span<const OptionSchema> all_options() noexcept;
/// Looks a name up as written in a file (normalised: "ms type" finds ms_type).
std::optional<Opt> find_option(std::string_view name);
/// The option's built-in default, parsed.
const OptionValue& default_value(Opt o);

/// Parses and validates `text` for option `o`: the type's syntax, then
/// min/max/enum, then the option's check. On failure returns nullopt and sets
/// `error` to a sentence naming the accepted values. Never throws.
std::optional<OptionValue> parse_option_value(Opt o, std::string_view text, std::string& error);

/// A warning about a valid value set explicitly (e.g. ms_die_on_bad_msg =
/// true, or any value of an option Siphon does not implement), or "".
std::string option_value_warning(Opt o, const OptionValue& v);

/// Ceph's text for a value: true/false, integers in decimal, sizes in bytes,
/// floats as 0.200000, seconds as a count, addresses as v2:1.2.3.4:3300/0.
std::string value_to_string(Opt o, const OptionValue& v);

/// One line describing the accepted values ("size: bytes, with K M G ...;
/// 4K or more"), used in error messages and the documentation.
std::string accepted_values(Opt o);

}  // namespace siphon::compat
