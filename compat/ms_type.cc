#include "compat/ms_type.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace siphon::compat {
namespace {

constexpr std::string_view kAccepted =
    "accepted: async+posix (TCP), async+rdma, async (= async+posix), async+<plugin>";

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool valid_plugin_name(std::string_view n) noexcept {
  if (n.empty() || n.size() > 64) return false;
  if (!std::islower(static_cast<unsigned char>(n.front())) && !std::isdigit(static_cast<unsigned char>(n.front())))
    return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
           c == '_' || c == '-';
  });
}

// The form the user most likely meant, or "".
std::string guess(std::string_view text) {
  std::string squeezed;
  for (char c : lower(text))
    if (!std::isspace(static_cast<unsigned char>(c))) squeezed += c;
  if (squeezed == "async" || squeezed == "async+posix" || squeezed == "posix" || squeezed == "tcp" ||
      squeezed == "async+tcp")
    return "async+posix";
  if (squeezed.find("rdma") != std::string::npos || squeezed == "rocev2" || squeezed == "roce" ||
      squeezed == "ib" || squeezed == "infiniband")
    return "async+rdma";
  return "";
}

}  // namespace

std::optional<MsType> parse_ms_type(std::string_view text, std::string& error) {
  if (text == "async" || text == "async+posix") return MsType{MsType::Stack::posix, "posix"};
  if (text == "async+rdma") return MsType{MsType::Stack::rdma, "rdma"};
  if (text.empty()) {
    error = fmt::format("ms_type is empty; {}", kAccepted);
    return std::nullopt;
  }
  if (text == "async+dpdk") {
    error = fmt::format("'async+dpdk': Siphon has no DPDK stack; {}", kAccepted);
    return std::nullopt;
  }
  if (text == "simple" || text == "xio") {
    error = fmt::format("'{}': this messenger was removed from Ceph; {}", text, kAccepted);
    return std::nullopt;
  }
  if (text == "random") {
    error = fmt::format("'random' (Ceph's test-only random choice) is not supported; {}", kAccepted);
    return std::nullopt;
  }
  if (text.substr(0, 6) == "async+" && valid_plugin_name(text.substr(6)) &&
      guess(text) != "async+rdma" && guess(text) != "async+posix")
    return MsType{MsType::Stack::plugin, std::string(text.substr(6))};

  std::string hint;
  if (const std::string g = guess(text); !g.empty()) {
    hint = fmt::format("; did you mean '{}'?", g);
    if (lower(text) == g) hint += " (ms_type is case-sensitive)";
    else if (text.find("rdma") != std::string_view::npos && text.find("async") != std::string_view::npos)
      hint += " (Ceph would pick RDMA because the value contains 'rdma')";
  }
  error = fmt::format("'{}' is not a messenger type ({}){}", text, kAccepted, hint);
  return std::nullopt;
}

std::optional<MsTypes> resolve_ms_types(std::string_view ms_type, std::string_view ms_public_type,
                                        std::string_view ms_cluster_type, std::string& error) {
  const auto base = parse_ms_type(ms_type, error);
  if (!base) {
    error = "ms_type: " + error;
    return std::nullopt;
  }
  MsTypes out{*base, *base};
  if (!ms_public_type.empty()) {
    const auto t = parse_ms_type(ms_public_type, error);
    if (!t) {
      error = "ms_public_type: " + error;
      return std::nullopt;
    }
    out.public_type = *t;
  }
  if (!ms_cluster_type.empty()) {
    const auto t = parse_ms_type(ms_cluster_type, error);
    if (!t) {
      error = "ms_cluster_type: " + error;
      return std::nullopt;
    }
    out.cluster_type = *t;
  }
  return out;
}

std::string rdma_type_error(std::string_view value) {
  const std::string l = lower(value);
  if (l == "ib" || l == "iwarp")
    return fmt::format("'{}': link types are lowercase (ib or iwarp)", value);
  if (l == "roce" || l == "rocev1" || l == "rocev2" || l == "infiniband")
    return fmt::format("'{}' is not a link type: RoCE and InfiniBand are both 'ib' here (the RoCE "
                       "version follows ms_async_rdma_gid_idx); accepted: ib, iwarp", value);
  // Device names: a driver prefix and an instance number (mlx5_0, rxe0,
  // siw0, irdma1, bnxt_re0, soft0, ...).
  const bool has_digit = std::any_of(value.begin(), value.end(),
                                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (has_digit)
    return fmt::format("'{0}' looks like a device name, not a link type: use "
                       "ms_async_rdma_device_name = {0} (ms_async_rdma_type takes ib or iwarp; "
                       "Ceph would silently treat '{0}' as ib)", value);
  return fmt::format("'{}' is not an RDMA link type; accepted: ib (InfiniBand and RoCE), iwarp", value);
}

}  // namespace siphon::compat
