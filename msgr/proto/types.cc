#include "msgr/proto/types.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

namespace siphon::proto {

// ---------------------------------------------------------------------------
// Entity types and names

std::string_view entity_type_name(std::uint32_t type) noexcept {
  switch (type) {
    case kEntityTypeMon: return "mon";
    case kEntityTypeMds: return "mds";
    case kEntityTypeOsd: return "osd";
    case kEntityTypeClient: return "client";
    case kEntityTypeMgr: return "mgr";
    case kEntityTypeAuth: return "auth";
    case kEntityTypeAny: return "any";
    default: return "unknown";
  }
}

std::optional<std::uint8_t> entity_type_from_name(std::string_view name) noexcept {
  for (std::uint8_t t : {kEntityTypeMon, kEntityTypeMds, kEntityTypeOsd, kEntityTypeClient,
                         kEntityTypeMgr, kEntityTypeAuth, kEntityTypeAny}) {
    if (entity_type_name(t) == name) return t;
  }
  return std::nullopt;
}

std::string EntityName::to_string() const {
  return std::string(entity_type_name(type)) + "." + id;
}

std::optional<EntityName> EntityName::parse(std::string_view text) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto t = entity_type_from_name(text.substr(0, dot));
  if (!t) return std::nullopt;
  return EntityName{*t, std::string(text.substr(dot + 1))};
}

void encode(Encoder& e, const EntityName& n) {
  e.u32(n.type);
  e.string(n.id);
}

void decode(Decoder& d, EntityName& n) {
  n.type = d.u32("EntityName type");
  n.id = d.string("EntityName id");
}

std::string EntityNameT::to_string() const {
  std::string out(entity_type_name(type));
  out += '.';
  out += num < 0 ? std::string("?") : std::to_string(num);
  return out;
}

std::optional<EntityNameT> EntityNameT::parse(std::string_view text) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto t = entity_type_from_name(text.substr(0, dot));
  if (!t) return std::nullopt;
  const std::string_view num = text.substr(dot + 1);
  if (num == "?") return EntityNameT{*t, -1};
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
  if (num.empty() || ec != std::errc() || end != num.data() + num.size() || n < 0)
    return std::nullopt;
  return EntityNameT{*t, n};
}

void encode(Encoder& e, const EntityNameT& n) {
  e.u8(n.type);
  e.s64(n.num);
}

void decode(Decoder& d, EntityNameT& n) {
  n.type = d.u8("entity_name_t type");
  n.num = d.s64("entity_name_t num");
}

// ---------------------------------------------------------------------------
// EntityAddr

namespace {

constexpr std::uint8_t kMarkerLegacy = 0;
constexpr std::uint8_t kMarkerAddr2 = 1;
constexpr std::uint8_t kMarkerAddrVec = 2;
// sizeof(sockaddr_in6): Ceph's sockaddr union, the length written for a
// blank address and the largest sockaddr either encoding carries.
constexpr std::uint32_t kSockaddrUnionLen = 28;
constexpr std::size_t kLegacyStorageLen = 128;  // sizeof(sockaddr_storage)

// The socket address bytes in host memory layout (family in host order).
std::array<std::uint8_t, kSockaddrUnionLen> sockaddr_bytes(const NetAddress& a) {
  std::array<std::uint8_t, kSockaddrUnionLen> out{};
  const std::size_t len = std::min<std::size_t>(a.sockaddr_len(), out.size());
  if (len > 0) std::memcpy(out.data(), a.sockaddr_ptr(), len);
  return out;
}

// Builds a NetAddress from a family and the sockaddr bytes after the family
// field (`rest`, at most 26 bytes). Unknown families give nullopt.
std::optional<NetAddress> make_address(std::uint16_t family, const std::uint8_t* rest,
                                       std::size_t rest_len) {
  if (family == AF_UNSPEC) return NetAddress();
  std::size_t full = 0;
  if (family == AF_INET) full = sizeof(sockaddr_in);
  else if (family == AF_INET6) full = sizeof(sockaddr_in6);
  else return std::nullopt;
  sockaddr_storage ss;
  std::memset(&ss, 0, sizeof(ss));
  ss.ss_family = static_cast<sa_family_t>(family);
  std::memcpy(reinterpret_cast<std::uint8_t*>(&ss) + 2, rest, std::min(rest_len, full - 2));
  return NetAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&ss),
                                   static_cast<socklen_t>(full));
}

void decode_addr2_body(Decoder& d, EntityAddr& a) {
  d.versioned(1, "entity_addr_t", [&](const Decoder::StructHeader&) {
    a.type = static_cast<AddrType>(d.u32("addr type"));
    a.nonce = d.u32("nonce");
    const std::size_t elen_at = d.position();
    const std::uint32_t elen = d.u32("sockaddr length");
    if (!d.ok()) return;
    if (elen == 0) {
      a.addr = NetAddress();
      return;
    }
    if (elen < 2) {
      d.fail_at(elen_at, "sockaddr length is smaller than its family field", "sockaddr length",
                elen, 2);
      return;
    }
    if (elen > d.remaining()) {
      d.fail_at(elen_at, "sockaddr length exceeds the struct", "sockaddr length", elen,
                d.remaining());
      return;
    }
    const std::size_t family_at = d.position();
    const std::uint16_t family = d.u16("sockaddr family");  // little-endian here (§15.7)
    std::uint32_t max_len = kSockaddrUnionLen;
    if (family == AF_INET) max_len = sizeof(sockaddr_in);
    else if (family != AF_INET6 && family != AF_UNSPEC) {
      d.fail_at(family_at, "unsupported sockaddr family", "sockaddr family", family, AF_INET6);
      return;
    }
    if (elen > max_len) {
      d.fail_at(elen_at, "sockaddr length exceeds the family's sockaddr size", "sockaddr length",
                elen, max_len);
      return;
    }
    std::array<std::uint8_t, kSockaddrUnionLen> rest{};
    d.raw(rest.data(), elen - 2, "sockaddr");
    if (!d.ok()) return;
    a.addr = *make_address(family, rest.data(), elen - 2);
  });
}

void decode_legacy_body(Decoder& d, EntityAddr& a) {
  // The marker was the first byte of a u32 type written as 0.
  d.skip(3, "legacy addr type");
  a.nonce = d.u32("nonce");
  const std::size_t family_at = d.position();
  std::array<std::uint8_t, kLegacyStorageLen> ss{};
  d.raw(ss.data(), ss.size(), "legacy sockaddr_storage");
  if (!d.ok()) return;
  const auto family = static_cast<std::uint16_t>((ss[0] << 8) | ss[1]);  // big-endian here
  const auto addr = make_address(family, ss.data() + 2, kSockaddrUnionLen - 2);
  if (!addr) {
    d.fail_at(family_at, "unsupported sockaddr family in legacy address", "sockaddr family",
              family, AF_INET6);
    return;
  }
  a.addr = *addr;
  a.type = a.addr.is_unspecified() ? AddrType::none : AddrType::legacy;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

template <class T>
std::optional<T> take_number(std::string_view& s) {
  std::size_t n = 0;
  while (n < s.size() && is_digit(s[n])) ++n;
  if (n == 0) return std::nullopt;
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + n, v);
  if (ec != std::errc() || end != s.data() + n) return std::nullopt;
  s.remove_prefix(n);
  return v;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

std::string_view to_string(AddrType t) noexcept {
  switch (t) {
    case AddrType::none: return "none";
    case AddrType::legacy: return "v1";
    case AddrType::msgr2: return "v2";
    case AddrType::any: return "any";
    case AddrType::cidr: return "cidr";
  }
  return "???";
}

std::string EntityAddr::to_string() const {
  if (type == AddrType::none) return "-";
  std::string out;
  if (type != AddrType::any) {
    out += proto::to_string(type);
    out += ':';
  }
  sockaddr_storage ss;
  std::memset(&ss, 0, sizeof(ss));
  std::memcpy(&ss, addr.sockaddr_ptr(), addr.sockaddr_len());
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.is_ipv4()) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
    out += buf;
    out += ':' + std::to_string(addr.port());
  } else if (addr.is_ipv6()) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
    out += '[';
    out += buf;
    out += "]:" + std::to_string(addr.port());
  } else {
    out += "(unrecognized address family " + std::to_string(addr.family()) + ")";
  }
  out += '/' + std::to_string(nonce);
  return out;
}

std::optional<EntityAddr> EntityAddr::parse_prefix(std::string_view& text, AddrType default_type) {
  std::string_view s = text;
  EntityAddr a;
  a.type = default_type;
  if (starts_with(s, "v1:")) {
    a.type = AddrType::legacy;
    s.remove_prefix(3);
  } else if (starts_with(s, "v2:")) {
    a.type = AddrType::msgr2;
    s.remove_prefix(3);
  } else if (starts_with(s, "any:")) {
    a.type = AddrType::any;
    s.remove_prefix(4);
  } else if (starts_with(s, "-")) {
    text.remove_prefix(1);
    return EntityAddr{};
  }
  const bool brackets = starts_with(s, "[");
  if (brackets) s.remove_prefix(1);

  // As Ceph: the longest run of IPv4 characters, else of IPv6 characters.
  std::size_t n4 = 0;
  while (n4 < s.size() && (is_digit(s[n4]) || s[n4] == '.')) ++n4;
  std::size_t n6 = 0;
  while (n6 < s.size() && (is_hex(s[n6]) || s[n6] == ':' || s[n6] == '.')) ++n6;
  sockaddr_storage ss;
  std::memset(&ss, 0, sizeof(ss));
  socklen_t sslen = 0;
  const std::string host4(s.substr(0, n4));
  const std::string host6(s.substr(0, n6));
  if (n4 > 0 && ::inet_pton(AF_INET, host4.c_str(), &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr) == 1) {
    ss.ss_family = AF_INET;
    sslen = sizeof(sockaddr_in);
    s.remove_prefix(n4);
  } else if (n6 > 0 &&
             ::inet_pton(AF_INET6, host6.c_str(), &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr) == 1) {
    ss.ss_family = AF_INET6;
    sslen = sizeof(sockaddr_in6);
    s.remove_prefix(n6);
  } else {
    return std::nullopt;
  }
  if (brackets) {
    if (!starts_with(s, "]")) return std::nullopt;
    s.remove_prefix(1);
  }
  a.addr = NetAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&ss), sslen);
  if (starts_with(s, ":")) {
    s.remove_prefix(1);
    const auto port = take_number<std::uint16_t>(s);
    if (!port) return std::nullopt;
    a.addr.set_port(*port);
  }
  if (starts_with(s, "/")) {
    s.remove_prefix(1);
    const auto nonce = take_number<std::uint32_t>(s);
    if (!nonce) return std::nullopt;
    a.nonce = *nonce;
  }
  text = s;
  return a;
}

std::optional<EntityAddr> EntityAddr::parse(std::string_view text, AddrType default_type) {
  auto a = parse_prefix(text, default_type);
  if (!a || !text.empty()) return std::nullopt;
  return a;
}

std::strong_ordering operator<=>(const EntityAddr& a, const EntityAddr& b) noexcept {
  auto image = [](const EntityAddr& x) {
    std::array<std::uint8_t, 8 + kSockaddrUnionLen> img{};
    const auto t = static_cast<std::uint32_t>(x.type);
    std::memcpy(img.data(), &t, 4);  // host order, as Ceph's memcmp sees it
    std::memcpy(img.data() + 4, &x.nonce, 4);
    const auto sa = sockaddr_bytes(x.addr);
    std::memcpy(img.data() + 8, sa.data(), sa.size());
    return img;
  };
  const auto ia = image(a);
  const auto ib = image(b);
  const int c = std::memcmp(ia.data(), ib.data(), ia.size());
  return c < 0 ? std::strong_ordering::less
               : c > 0 ? std::strong_ordering::greater : std::strong_ordering::equal;
}

void EntityAddr::encode(Encoder& e, std::uint64_t feats) const {
  if (!features::has_feature(feats, features::kMaskMsgAddr2)) {
    encode_legacy(e);
    return;
  }
  e.u8(kMarkerAddr2);
  Encoder::Struct s = e.start_struct(1, 1);
  AddrType t = type;
  if (t == AddrType::any && !features::has_feature(feats, features::kMaskServerNautilus))
    t = AddrType::legacy;
  e.u32(static_cast<std::uint32_t>(t));
  e.u32(nonce);
  if (addr.is_unspecified()) {
    e.u32(kSockaddrUnionLen);
    e.zeros(kSockaddrUnionLen);
    return;
  }
  const auto bytes = sockaddr_bytes(addr);
  const std::uint32_t len = addr.sockaddr_len();
  e.u32(len);
  e.u16(static_cast<std::uint16_t>(addr.family()));  // little-endian in ADDR2
  e.raw(bytes.data() + 2, len - 2);
}

void EntityAddr::encode_legacy(Encoder& e) const {
  e.u32(0);  // type (its first byte is marker 0)
  e.u32(nonce);
  const auto bytes = sockaddr_bytes(addr);
  const std::size_t len = addr.sockaddr_len();
  e.be16(static_cast<std::uint16_t>(addr.family()));  // big-endian in the legacy form
  if (len > 2) e.raw(bytes.data() + 2, len - 2);
  e.zeros(kLegacyStorageLen - std::max<std::size_t>(len, 2));
}

void encode(Encoder& e, const EntityAddr& a) { a.encode(e); }

void decode(Decoder& d, EntityAddr& a) {
  a = EntityAddr{};
  const std::size_t marker_at = d.position();
  const std::uint8_t marker = d.u8("entity_addr_t marker");
  if (!d.ok()) return;
  if (marker == kMarkerAddr2) {
    decode_addr2_body(d, a);
  } else if (marker == kMarkerLegacy) {
    decode_legacy_body(d, a);
  } else {
    d.fail_at(marker_at, "bad marker (expected 1, or 0 for the legacy form)",
              "entity_addr_t marker", marker, kMarkerAddr2);
  }
}

// ---------------------------------------------------------------------------
// EntityAddrVec

const EntityAddr* EntityAddrVec::find(AddrType t) const noexcept {
  for (const EntityAddr& a : addrs)
    if (a.type == t) return &a;
  return nullptr;
}

bool EntityAddrVec::contains(const EntityAddr& a) const noexcept {
  return std::find(addrs.begin(), addrs.end(), a) != addrs.end();
}

EntityAddr EntityAddrVec::legacy_addr() const {
  const EntityAddr* a = find(AddrType::legacy);
  return a != nullptr ? *a : EntityAddr{};
}

std::string EntityAddrVec::to_string() const {
  if (addrs.empty()) return {};
  if (addrs.size() == 1) return addrs.front().to_string();
  std::string out = "[";
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    if (i > 0) out += ',';
    out += addrs[i].to_string();
  }
  out += ']';
  return out;
}

namespace {

// An addrvec at the front of `s`: "[a,b,...]" or a single address. A leading
// '[' that opens a bracketed IPv6 address is a single address (as in Ceph).
std::optional<EntityAddrVec> parse_vec_prefix(std::string_view& s, AddrType default_type) {
  if (starts_with(s, "[")) {
    std::string_view probe = s;
    const auto single = EntityAddr::parse_prefix(probe, default_type);
    if (!single || !single->addr.is_ipv6()) {
      std::string_view t = s.substr(1);
      EntityAddrVec v;
      for (;;) {
        auto a = EntityAddr::parse_prefix(t, default_type);
        if (!a) return std::nullopt;
        v.addrs.push_back(*a);
        if (!starts_with(t, ",")) break;
        t.remove_prefix(1);
      }
      if (!starts_with(t, "]")) return std::nullopt;
      t.remove_prefix(1);
      s = t;
      return v;
    }
  }
  auto a = EntityAddr::parse_prefix(s, default_type);
  if (!a) return std::nullopt;
  return EntityAddrVec(*a);
}

}  // namespace

std::optional<EntityAddrVec> EntityAddrVec::parse(std::string_view text, AddrType default_type) {
  auto v = parse_vec_prefix(text, default_type);
  if (!v || !text.empty()) return std::nullopt;
  return v;
}

void EntityAddrVec::encode(Encoder& e, std::uint64_t feats) const {
  if (!features::has_feature(feats, features::kMaskMsgAddr2)) {
    legacy_addr().encode_legacy(e);
    return;
  }
  e.u8(kMarkerAddrVec);
  e.u32(static_cast<std::uint32_t>(addrs.size()));
  for (const EntityAddr& a : addrs) a.encode(e, feats);
}

void encode(Encoder& e, const EntityAddrVec& v) { v.encode(e); }

void decode(Decoder& d, EntityAddrVec& v) {
  v.addrs.clear();
  Decoder::Scope scope(d, "entity_addrvec_t");
  const std::size_t marker_at = d.position();
  const std::uint8_t marker = d.u8("entity_addrvec_t marker");
  if (!d.ok()) return;
  if (marker == kMarkerLegacy || marker == kMarkerAddr2) {
    EntityAddr a;
    if (marker == kMarkerLegacy) decode_legacy_body(d, a);
    else decode_addr2_body(d, a);
    if (d.ok()) v.addrs.push_back(std::move(a));
    return;
  }
  if (marker != kMarkerAddrVec) {
    d.fail_at(marker_at, "bad marker (expected 2, or 0/1 for a single address)",
              "entity_addrvec_t marker", marker, kMarkerAddrVec);
    return;
  }
  const std::uint32_t n = d.count(MinEncodedSize<EntityAddr>::value, "entity_addrvec_t count");
  v.addrs.reserve(n);
  for (std::uint32_t i = 0; i < n && d.ok(); ++i) {
    EntityAddr a;
    decode(d, a);
    v.addrs.push_back(std::move(a));
  }
  if (!d.ok()) v.addrs.clear();
}

// ---------------------------------------------------------------------------
// Monitor addresses

EntityAddrVec resolve_mon_addr(const EntityAddr& parsed) {
  EntityAddr a = parsed;
  EntityAddrVec out;
  if (a.type == AddrType::none) return out;
  if (a.type != AddrType::any) {
    if (a.port() == 0)
      a.addr.set_port(a.type == AddrType::legacy ? kMonPortLegacy : kMonPortIana);
    out.addrs.push_back(a);
    return out;
  }
  const std::uint16_t port = a.port();
  if (port == kMonPortLegacy) {
    a.type = AddrType::legacy;
    out.addrs.push_back(a);
  } else if (port == kMonPortIana) {
    a.type = AddrType::msgr2;
    out.addrs.push_back(a);
  } else if (port == 0) {
    a.type = AddrType::msgr2;
    a.addr.set_port(kMonPortIana);
    out.addrs.push_back(a);
    a.type = AddrType::legacy;
    a.addr.set_port(kMonPortLegacy);
    out.addrs.push_back(a);
  } else {
    a.type = AddrType::msgr2;
    out.addrs.push_back(a);
    a.type = AddrType::legacy;
    out.addrs.push_back(a);
  }
  return out;
}

std::optional<std::vector<EntityAddrVec>> parse_mon_host(std::string_view text) {
  std::vector<EntityAddrVec> out;
  auto is_sep = [](char c) { return c == ' ' || c == ';' || c == ',' || c == '\t'; };
  std::string_view s = text;
  for (;;) {
    while (!s.empty() && is_sep(s.front())) s.remove_prefix(1);
    if (s.empty()) break;
    auto v = parse_vec_prefix(s, AddrType::any);
    if (!v) return std::nullopt;
    if (!s.empty() && !is_sep(s.front())) return std::nullopt;
    out.push_back(v->size() == 1 ? resolve_mon_addr(v->front()) : std::move(*v));
    if (out.back().empty()) return std::nullopt;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

}  // namespace siphon::proto
