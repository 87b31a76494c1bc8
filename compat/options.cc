#include "compat/options.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

#include "compat/conf_file.h"
#include "compat/ms_type.h"
#include "msgr/metrics/http_server.h"
#include "rdma/transport/options.h"

namespace siphon::compat {
namespace {

constexpr OptionSchema kSchema[] = {
#define SIPHON_OPTION(name, type, level, origin, def, min, max, enm, check, limits, desc, note) \
  {#name, OptionType::type, OptionLevel::level, OptionOrigin::origin, def, min, max, enm,      \
   OptionCheck::check, std::string_view(#limits) == "siphon", desc, note},
#include "compat/options.def"
#undef SIPHON_OPTION
};
static_assert(std::size(kSchema) == kOptionCount);

// --- The schema's limits are the RDMA stack's ranges (rdma/transport/options.h),
// checked at compile time: `siphon-conf --check` refuses exactly the values
// the stack refuses at start (tests/unit/compat/bounds_test.cc runs both).

// A min/max text of options.def as a number: digits with an optional suffix
// (K M G T, x1024 for sizes, x1000 otherwise); "" is `none`.
constexpr std::uint64_t limit_value(std::string_view t, OptionType type, std::uint64_t none) {
  if (t.empty()) return none;
  std::uint64_t v = 0;
  std::size_t i = 0;
  for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) v = v * 10 + static_cast<std::uint64_t>(t[i] - '0');
  const std::uint64_t k = type == OptionType::size ? 1024 : 1000;
  if (i + 1 == t.size()) {
    switch (t[i]) {
      case 'K': return v * k;
      case 'M': return v * k * k;
      case 'G': return v * k * k * k;
      case 'T': return v * k * k * k * k;
      default: throw "unsupported suffix in an options.def limit";  // not a constant expression: a build error
    }
  }
  if (i != t.size()) throw "not a number in an options.def limit";
  return v;
}
constexpr bool same_range(Opt o, rdma::Range r) {
  const OptionSchema& s = kSchema[index(o)];
  return limit_value(s.min_text, s.type, 0) == r.min && limit_value(s.max_text, s.type, rdma::kNoMax) == r.max;
}
static_assert(same_range(Opt::ms_async_rdma_port_num, rdma::ranges::port_num));
static_assert(same_range(Opt::ms_async_rdma_roce_ver, rdma::ranges::roce_ver));
static_assert(same_range(Opt::ms_async_rdma_sl, rdma::ranges::sl));
static_assert(same_range(Opt::ms_async_rdma_dscp, rdma::ranges::dscp));
static_assert(same_range(Opt::ms_async_rdma_buffer_size, rdma::ranges::buffer_size));
static_assert(same_range(Opt::ms_async_rdma_send_buffers, rdma::ranges::send_buffers));
static_assert(same_range(Opt::ms_async_rdma_receive_buffers, rdma::ranges::receive_buffers));
static_assert(same_range(Opt::ms_async_rdma_receive_queue_len, rdma::ranges::receive_queue_len));
static_assert(same_range(Opt::ms_async_rdma_credits, rdma::ranges::credits));
static_assert(same_range(Opt::ms_async_rdma_send_queue_depth, rdma::ranges::send_queue_depth));
static_assert(same_range(Opt::ms_async_rdma_cq_depth, rdma::ranges::cq_depth));
static_assert(same_range(Opt::ms_async_rdma_rnr_retry, rdma::ranges::rnr_retry));
static_assert(same_range(Opt::ms_async_rdma_retry_count, rdma::ranges::retry_count));
static_assert(same_range(Opt::ms_async_rdma_timeout, rdma::ranges::ack_timeout));
static_assert(same_range(Opt::ms_async_rdma_cm_timeout, rdma::ranges::cm_timeout_ms));
static_assert(same_range(Opt::ms_async_rdma_max_connections, rdma::ranges::max_connections));

// Parses text as the option's type only (no limits, no checks).
std::optional<OptionValue> parse_typed(OptionType t, std::string_view text, std::string& error) {
  switch (t) {
    case OptionType::boolean:
      if (auto v = parse_bool(text, error)) return OptionValue(*v);
      return std::nullopt;
    case OptionType::int64:
      if (auto v = parse_int(text, error)) return OptionValue(*v);
      return std::nullopt;
    case OptionType::uint64:
      if (auto v = parse_uint(text, error)) return OptionValue(*v);
      return std::nullopt;
    case OptionType::size:
      if (auto v = parse_size(text, error)) return OptionValue(*v);
      return std::nullopt;
    case OptionType::float64:
      if (auto v = parse_float(text, error)) return OptionValue(*v);
      return std::nullopt;
    case OptionType::secs:
      if (auto v = parse_secs(text, error)) return OptionValue(*v);
      return std::nullopt;
    case OptionType::str:
      return OptionValue(std::string(text));
    case OptionType::addr:
      if (auto v = parse_addr(text, error)) return OptionValue(*v);
      return std::nullopt;
    case OptionType::addrvec:
      if (auto v = parse_addrvec(text, error)) return OptionValue(*v);
      return std::nullopt;
    case OptionType::uuid:
      if (auto v = parse_uuid(text, error)) return OptionValue(*v);
      return std::nullopt;
  }
  error = "unknown option type";
  return std::nullopt;
}

OptionValue zero_value(OptionType t) {
  switch (t) {
    case OptionType::boolean: return false;
    case OptionType::int64: return std::int64_t{0};
    case OptionType::uint64:
    case OptionType::size: return std::uint64_t{0};
    case OptionType::float64: return 0.0;
    case OptionType::secs: return std::chrono::seconds{0};
    case OptionType::str: return std::string();
    case OptionType::addr: return EntityAddr{};
    case OptionType::addrvec: return EntityAddrVec{};
    case OptionType::uuid: return Uuid{};
  }
  return std::string();
}

// -1, 0, 1 for a < b, a == b, a > b, for numeric values of the same type.
int compare(const OptionValue& a, const OptionValue& b) {
  return std::visit(
      [&](const auto& x) -> int {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t> ||
                      std::is_same_v<T, double> || std::is_same_v<T, std::chrono::seconds>) {
          const T& y = std::get<T>(b);
          return x < y ? -1 : (y < x ? 1 : 0);
        } else {
          return 0;
        }
      },
      a);
}

bool valid_cidr(std::string_view item) {
  const auto slash = item.find('/');
  if (slash == std::string_view::npos) return false;
  const std::string ip(item.substr(0, slash));
  const std::string_view len = item.substr(slash + 1);
  if (len.empty() || len.size() > 3 ||
      !std::all_of(len.begin(), len.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return false;
  const int bits = std::stoi(std::string(len));
  std::array<unsigned char, 16> buf{};
  if (::inet_pton(AF_INET, ip.c_str(), buf.data()) == 1) return bits <= 32;
  if (::inet_pton(AF_INET6, ip.c_str(), buf.data()) == 1) return bits <= 128;
  return false;
}

// A list whose items must each be one of `allowed`.
bool check_words(std::string_view text, std::initializer_list<std::string_view> allowed,
                 std::string_view what, std::string& error) {
  for (const auto& w : split_list(text)) {
    if (std::find(allowed.begin(), allowed.end(), w) == allowed.end()) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      error = fmt::format("'{}' is not {} (accepted, separated by commas or spaces: {})", w, what, list);
      return false;
    }
  }
  return true;
}

bool run_check(OptionCheck check, std::string_view text, std::string& error) {
  switch (check) {
    case OptionCheck::none:
    case OptionCheck::never_dies:
    case OptionCheck::no_effect:
    case OptionCheck::rdma_cm:
      return true;
    case OptionCheck::ms_type_or_empty:
      if (text.empty()) return true;
      [[fallthrough]];
    case OptionCheck::ms_type:
      return parse_ms_type(text, error).has_value();
    case OptionCheck::auth_methods:
      return check_words(text, {"cephx", "none"}, "an authentication method", error);
    case OptionCheck::ms_modes:
      if (split_list(text).empty()) {
        error = "no connection mode given (accepted: crc, secure)";
        return false;
      }
      return check_words(text, {"crc", "secure"}, "a connection mode", error);
    case OptionCheck::entity_types:
      return check_words(text, {"mon", "osd", "mds", "mgr", "client"}, "an entity type", error);
    case OptionCheck::networks:
      for (const auto& item : split_list(text)) {
        if (!valid_cidr(item)) {
          error = fmt::format("'{}' is not a subnet: write ADDRESS/PREFIX, e.g. 10.0.0.0/24 or fd00::/64",
                              item);
          return false;
        }
      }
      return true;
    case OptionCheck::debug_level_or_empty:
      if (text.empty()) return true;
      [[fallthrough]];
    case OptionCheck::debug_level:
      return parse_debug_level(text, error).has_value();
    case OptionCheck::gid:
      return text.empty() || parse_gid(text, error).has_value();
    case OptionCheck::rdma_type:
      if (text == "ib" || text == "iwarp") return true;
      error = rdma_type_error(text);
      return false;
    case OptionCheck::metrics_endpoint:
      return text.empty() || metrics::parse_endpoint(text, error).has_value();
  }
  return true;
}

// A limit as written in options.def, with its value in bytes for sizes
// ("4K (4096)").
std::string number_text(Opt o, std::string_view text) {
  if (schema(o).type != OptionType::size) return std::string(text);
  std::string err;
  const auto v = parse_typed(OptionType::size, text, err);
  const std::string printed = v ? value_to_string(o, *v) : std::string(text);
  return printed == text ? printed : fmt::format("{} ({})", text, printed);
}

}  // namespace

std::string_view to_string(OptionType t) noexcept {
  switch (t) {
    case OptionType::boolean: return "bool";
    case OptionType::int64: return "int";
    case OptionType::uint64: return "uint";
    case OptionType::size: return "size";
    case OptionType::float64: return "float";
    case OptionType::secs: return "secs";
    case OptionType::str: return "str";
    case OptionType::addr: return "addr";
    case OptionType::addrvec: return "addrvec";
    case OptionType::uuid: return "uuid";
  }
  return "?";
}

std::string_view to_string(OptionLevel l) noexcept {
  switch (l) {
    case OptionLevel::basic: return "basic";
    case OptionLevel::advanced: return "advanced";
    case OptionLevel::dev: return "dev";
  }
  return "?";
}

std::string_view to_string(OptionOrigin o) noexcept {
  return o == OptionOrigin::ceph ? "ceph" : "siphon";
}

const OptionSchema& schema(Opt o) noexcept { return kSchema[index(o)]; }

std::span<const OptionSchema> all_options() noexcept { return kSchema; }

std::optional<Opt> find_option(std::string_view name) {
  const std::string key = ConfFile::normalize_key(name);
  for (std::size_t i = 0; i < kOptionCount; ++i)
    if (kSchema[i].name == key) return static_cast<Opt>(i);
  return std::nullopt;
}

const OptionValue& default_value(Opt o) {
  static const std::array<OptionValue, kOptionCount> defaults = [] {
    std::array<OptionValue, kOptionCount> d;
    for (std::size_t i = 0; i < kOptionCount; ++i) {
      std::string err;
      auto v = parse_typed(kSchema[i].type, kSchema[i].default_text, err);
      // A bad default is a bug in options.def; the schema unit test catches
      // it. Fall back to the type's zero value rather than crash.
      d[i] = v ? std::move(*v) : zero_value(kSchema[i].type);
    }
    return d;
  }();
  return defaults[index(o)];
}

std::optional<OptionValue> parse_option_value(Opt o, std::string_view text, std::string& error) {
  const OptionSchema& s = schema(o);
  auto v = parse_typed(s.type, text, error);
  if (!v) {
    if (s.type == OptionType::str) return std::nullopt;
    if (text.find('$') != std::string_view::npos)
      error += " ($ expansion applies only to string options, as in Ceph)";
    return std::nullopt;
  }
  if (!s.min_text.empty()) {
    std::string ignored;
    const auto min = parse_typed(s.type, s.min_text, ignored);
    if (min && compare(*v, *min) < 0) {
      error = fmt::format("'{}' is below the minimum {}", text, number_text(o, s.min_text));
      return std::nullopt;
    }
  }
  if (!s.max_text.empty()) {
    std::string ignored;
    const auto max = parse_typed(s.type, s.max_text, ignored);
    if (max && compare(*v, *max) > 0) {
      error = fmt::format("'{}' is above the maximum {}", text, number_text(o, s.max_text));
      return std::nullopt;
    }
  }
  if (!s.enum_values.empty() && s.check != OptionCheck::rdma_type) {
    const auto& str = std::get<std::string>(*v);
    bool found = false;
    for (const auto& e : split_list(s.enum_values, "|")) found = found || e == str;
    if (!found) {
      error = fmt::format("'{}' is not one of: {}", str, fmt::join(split_list(s.enum_values, "|"), ", "));
      return std::nullopt;
    }
  }
  if (s.type == OptionType::str && !run_check(s.check, std::get<std::string>(*v), error))
    return std::nullopt;
  if (s.check == OptionCheck::debug_level ||
      (s.check == OptionCheck::debug_level_or_empty && !std::get<std::string>(*v).empty())) {
    // Ceph normalises "5" to "5/5".
    std::string ignored;
    v = OptionValue(parse_debug_level(std::get<std::string>(*v), ignored)->to_string());
  }
  return v;
}

std::string option_value_warning(Opt o, const OptionValue& v) {
  const OptionSchema& s = schema(o);
  if (s.check == OptionCheck::never_dies && std::get<bool>(v))
    return fmt::format("{} = true has no effect: Siphon never aborts the process on peer input; it "
                       "faults the connection instead", s.name);
  if (s.check == OptionCheck::no_effect && value_to_string(o, v) != value_to_string(o, default_value(o)))
    return fmt::format("{} = {} has no effect. {}", s.name, value_to_string(o, v), s.note);
  if (s.check == OptionCheck::rdma_cm && !std::get<bool>(v))
    return fmt::format("{} = false has no effect: Siphon always sets up RDMA connections through the "
                       "connection manager (librdmacm on verbs) and has no TCP side channel", s.name);
  if (o == Opt::ms_inject_delay_type && !std::get<std::string>(v).empty())
    return fmt::format("{} = {}: Siphon does not filter by entity type; when ms_inject_delay_probability is "
                       "set, incoming messages are delayed on every TCP connection whatever the peer's type",
                       s.name, std::get<std::string>(v));
  return "";
}

std::string value_to_string(Opt o, const OptionValue& v) {
  (void)o;
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t>)
          return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>) return format_float(x);
        else if constexpr (std::is_same_v<T, std::chrono::seconds>) return std::to_string(x.count());
        else if constexpr (std::is_same_v<T, std::string>) return x;
        else return x.to_string();
      },
      v);
}

std::string accepted_values(Opt o) {
  const OptionSchema& s = schema(o);
  std::string out;
  switch (s.type) {
    case OptionType::boolean: out = "true or false (any case), or an integer (0 = false)"; break;
    case OptionType::int64: out = "an integer, optionally with K M G T P E (x1000)"; break;
    case OptionType::uint64: out = "a non-negative integer, optionally with K M G T P E (x1000)"; break;
    case OptionType::size: out = "bytes, optionally with K M G T P E (x1024), e.g. 128K"; break;
    case OptionType::float64: out = "a number, e.g. 0.5"; break;
    case OptionType::secs: out = "seconds, or a duration like 1m 30s"; break;
    case OptionType::str: out = "text"; break;
    case OptionType::addr: out = "an address [v1:|v2:|any:]IP[:port][/nonce]"; break;
    case OptionType::addrvec: out = "an address or [addr,addr,...]"; break;
    case OptionType::uuid: out = "a UUID"; break;
  }
  switch (s.check) {
    case OptionCheck::ms_type: out = "async+posix, async+rdma, async, async+<plugin>"; break;
    case OptionCheck::ms_type_or_empty: out = "empty (= ms_type), async+posix, async+rdma, async, async+<plugin>"; break;
    case OptionCheck::auth_methods: out = "a list of cephx, none"; break;
    case OptionCheck::ms_modes: out = "a list of crc, secure"; break;
    case OptionCheck::networks: out = "a list of subnets ADDRESS/PREFIX"; break;
    case OptionCheck::debug_level: out = "N or N/M, 0..99"; break;
    case OptionCheck::debug_level_or_empty: out = "empty, or N or N/M, 0..99"; break;
    case OptionCheck::gid: out = "empty, or a GID as an IPv6 address"; break;
    case OptionCheck::entity_types: out = "a list of mon, osd, mds, mgr, client"; break;
    case OptionCheck::metrics_endpoint: out = "empty (off), or IP:PORT, e.g. 0.0.0.0:9926 or [::1]:9926"; break;
    case OptionCheck::rdma_type:
    case OptionCheck::none:
    case OptionCheck::never_dies:
    case OptionCheck::no_effect:
    case OptionCheck::rdma_cm: break;
  }
  if (!s.enum_values.empty()) out = fmt::format("{}", fmt::join(split_list(s.enum_values, "|"), " or "));
  if (!s.min_text.empty() && !s.max_text.empty())
    out += fmt::format("; {}..{}", number_text(o, s.min_text), number_text(o, s.max_text));
  else if (!s.min_text.empty())
    out += fmt::format("; at least {}", number_text(o, s.min_text));
  else if (!s.max_text.empty())
    out += fmt::format("; at most {}", number_text(o, s.max_text));
  return out;
}

}  // namespace siphon::compat
