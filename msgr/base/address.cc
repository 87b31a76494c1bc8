#include "msgr/base/address.h"

#include <arpa/inet.h>
#include <net/if.h>

#include <charconv>
#include <cstring>

namespace siphon {

NetAddress::NetAddress() noexcept {
  std::memset(&storage_, 0, sizeof(storage_));
  storage_.ss_family = AF_UNSPEC;
}

NetAddress NetAddress::from_sockaddr(const sockaddr* sa, socklen_t len) noexcept {
  NetAddress a;
  if (sa != nullptr && len <= static_cast<socklen_t>(sizeof(a.storage_)) &&
      (sa->sa_family == AF_INET || sa->sa_family == AF_INET6))
    std::memcpy(&a.storage_, sa, len);
  return a;
}

NetAddress NetAddress::ipv4(std::uint32_t ip, std::uint16_t port) noexcept {
  NetAddress a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage_);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(ip);
  in->sin_port = htons(port);
  return a;
}

std::optional<NetAddress> NetAddress::parse(std::string_view text) {
  std::string host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port_text = rest.substr(1);
    }
  } else {
    const auto colon = text.rfind(':');
    if (colon != std::string_view::npos && text.find(':') != colon) {
      host = std::string(text);  // bare IPv6 without brackets: no port
    } else if (colon != std::string_view::npos) {
      host = std::string(text.substr(0, colon));
      port_text = text.substr(colon + 1);
    } else {
      host = std::string(text);
    }
  }
  std::uint16_t port = 0;
  if (!port_text.empty()) {
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size()) return std::nullopt;
  }
  NetAddress a;
  auto* in4 = reinterpret_cast<sockaddr_in*>(&a.storage_);
  if (::inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    return a;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
  std::string addr6 = host;
  const auto pct = host.find('%');
  if (pct != std::string::npos) {
    addr6 = host.substr(0, pct);
    const unsigned idx = ::if_nametoindex(host.c_str() + pct + 1);
    if (idx == 0) return std::nullopt;
    in6->sin6_scope_id = idx;
  }
  if (::inet_pton(AF_INET6, addr6.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    return a;
  }
  return std::nullopt;
}

bool NetAddress::is_any() const noexcept {
  if (is_ipv4())
    return reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (is_ipv6())
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
  return false;
}

std::uint16_t NetAddress::port() const noexcept {
  if (is_ipv4()) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (is_ipv6()) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void NetAddress::set_port(std::uint16_t port) noexcept {
  if (is_ipv4()) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (is_ipv6()) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

socklen_t NetAddress::sockaddr_len() const noexcept {
  if (is_ipv4()) return sizeof(sockaddr_in);
  if (is_ipv6()) return sizeof(sockaddr_in6);
  return 0;
}

std::string NetAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = {};
  if (is_ipv4()) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(port());
  }
  if (is_ipv6()) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    std::string host(buf);
    char ifname[IF_NAMESIZE] = {};
    if (in6->sin6_scope_id != 0 && ::if_indextoname(in6->sin6_scope_id, ifname) != nullptr)
      host += std::string("%") + ifname;
    return "[" + host + "]:" + std::to_string(port());
  }
  return "-";
}

bool operator==(const NetAddress& a, const NetAddress& b) noexcept {
  if (a.family() != b.family()) return false;
  if (a.is_unspecified()) return true;
  return std::memcmp(a.sockaddr_ptr(), b.sockaddr_ptr(), a.sockaddr_len()) == 0;
}

}  // namespace siphon
