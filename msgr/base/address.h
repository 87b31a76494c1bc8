// A network endpoint (IPv4 or IPv6 address and port), the part of Ceph's
// entity_addr_t that sockets and rdma-cm understand.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace siphon {

class NetAddress {
 public:
  NetAddress() noexcept;  // unspecified (AF_UNSPEC)
  static NetAddress from_sockaddr(const sockaddr* sa, socklen_t len) noexcept;
  // "127.0.0.1:3300", "[::1]:3300", "127.0.0.1" (port 0), "[fe80::1%eth0]:6800"
  static std::optional<NetAddress> parse(std::string_view text);
  static NetAddress ipv4(std::uint32_t host_order_ip, std::uint16_t port) noexcept;

  int family() const noexcept { return storage_.ss_family; }
  bool is_unspecified() const noexcept { return family() == AF_UNSPEC; }
  bool is_ipv4() const noexcept { return family() == AF_INET; }
  bool is_ipv6() const noexcept { return family() == AF_INET6; }
  bool is_any() const noexcept;  // 0.0.0.0 or ::
  std::uint16_t port() const noexcept;
  void set_port(std::uint16_t port) noexcept;

  const sockaddr* sockaddr_ptr() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t sockaddr_len() const noexcept;

  std::string to_string() const;  // the parse() format
  friend bool operator==(const NetAddress& a, const NetAddress& b) noexcept;

 private:
  sockaddr_storage storage_;
};

}  // namespace siphon
