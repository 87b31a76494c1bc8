// ms_type, ms_public_type and ms_cluster_type, parsed with Ceph's meaning
// (src/msg/Messenger.cc, AsyncMessenger.cc; docs/configuration.md):
//
//   async+posix   the TCP stack              async   = async+posix
//   async+rdma    the RDMA stack             async+<name> = a stack plugin
//   ms_public_type / ms_cluster_type, when not empty, replace ms_type for
//   the public / cluster messenger.
//
// Ceph matches substrings ("xasync+rdmaz" is RDMA, "async+posix+rdma" too);
// Siphon accepts only the forms above and says what was probably meant. The
// stack registry (which plugins exist) comes later: this only parses.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace siphon::compat {

struct MsType {
  enum class Stack : unsigned char { posix, rdma, plugin };
  Stack stack = Stack::posix;
  std::string name;  // the registry key: "posix", "rdma" or the plugin's name

  /// Canonical text: "async+posix", "async+rdma", "async+<name>".
  std::string to_string() const { return "async+" + name; }
  friend bool operator==(const MsType&, const MsType&) = default;
};

/// Parses one ms_type value. On failure returns nullopt and sets `error` to a
/// sentence that lists the accepted values (and a guess when one is likely).
std::optional<MsType> parse_ms_type(std::string_view text, std::string& error);

/// The stacks of a daemon's two messengers.
struct MsTypes {
  MsType public_type;
  MsType cluster_type;
};

/// Applies Ceph's override rule: an empty ms_public_type / ms_cluster_type
/// means ms_type. Returns nullopt (with `error`) if any value is invalid.
std::optional<MsTypes> resolve_ms_types(std::string_view ms_type, std::string_view ms_public_type,
                                        std::string_view ms_cluster_type, std::string& error);

/// The message for ms_async_rdma_type values that are not ib or iwarp, with
/// the hint for a device name (mlx5_0 -> "use ms_async_rdma_device_name").
std::string rdma_type_error(std::string_view value);

}  // namespace siphon::compat
