#include "compat/values.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

namespace siphon::compat {
namespace {

// strtoll over the whole of `text`, base 10 (Ceph's strict_strtoll).
std::optional<long long> strict_ll(std::string_view text, std::string& error) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end == s.c_str() || end != s.c_str() + s.size()) {
    error = fmt::format("'{}' is not an integer", text);
    return std::nullopt;
  }
  if (errno == ERANGE) {
    error = fmt::format("'{}' is out of range", text);
    return std::nullopt;
  }
  return v;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// SI multiplier exponent (power of 1000) for Ceph's integer suffixes.
int si_exponent(char c) noexcept {
  switch (c) {
    case 'K': return 1;
    case 'M': return 2;
    case 'G': return 3;
    case 'T': return 4;
    case 'P': return 5;
    case 'E': return 6;
    default: return 0;
  }
}

// Ceph's strict_si_cast: an integer with an optional SI suffix. Returns the
// number before the suffix and the multiplier (1000^n).
struct SiValue {
  long long digits;
  long long coef;
};
std::optional<SiValue> parse_si(std::string_view text, std::string& error) {
  if (text.empty()) {
    error = "no value given";
    return std::nullopt;
  }
  std::string_view digits = text;
  int exp = 0;
  if (text.find_first_not_of("0123456789+-") != std::string_view::npos) {
    const char u = text.back();
    exp = si_exponent(u);
    if (exp == 0) {
      if (u == 'B' || u == 'k' || u == 'm' || u == 'g' || u == 'i') {
        error = fmt::format("'{}' has a unit Ceph does not accept for integers: integer "
                            "suffixes are K M G T P E (powers of 1000), uppercase, without B or i",
                            text);
      } else {
        error = fmt::format("'{}' is not an integer (digits with an optional suffix K M G T P E)", text);
      }
      return std::nullopt;
    }
    digits = text.substr(0, text.size() - 1);
  }
  const auto v = strict_ll(digits, error);
  if (!v) {
    error = fmt::format("'{}' is not an integer (digits with an optional suffix K M G T P E)", text);
    return std::nullopt;
  }
  long long coef = 1;
  for (int i = 0; i < exp; ++i) coef *= 1000;
  return SiValue{*v, coef};
}

int iec_shift(char c) noexcept { return si_exponent(c) * 10; }

}  // namespace

std::optional<bool> parse_bool(std::string_view text, std::string& error) {
  if (iequals(text, "true")) return true;
  if (iequals(text, "false")) return false;
  std::string ignored;
  if (const auto v = strict_ll(text, ignored); v && *v >= std::numeric_limits<int>::min() &&
                                               *v <= std::numeric_limits<int>::max())
    return *v != 0;
  if (iequals(text, "yes") || iequals(text, "no") || iequals(text, "on") || iequals(text, "off")) {
    error = fmt::format("'{}' is not a boolean for Ceph, which would ignore it and keep the default; "
                        "write true or false (or 1 or 0)", text);
  } else {
    error = fmt::format("'{}' is not a boolean: write true or false (any case) or an integer "
                        "(0 = false)", text);
  }
  return std::nullopt;
}

std::optional<std::int64_t> parse_int(std::string_view text, std::string& error) {
  const auto v = parse_si(text, error);
  if (!v) return std::nullopt;
  constexpr auto kMin = std::numeric_limits<long long>::min();
  constexpr auto kMax = std::numeric_limits<long long>::max();
  if (v->digits < kMin / v->coef || v->digits > kMax / v->coef) {
    error = fmt::format("'{}' is out of range for a 64-bit integer", text);
    return std::nullopt;
  }
  return static_cast<std::int64_t>(v->digits * v->coef);
}

std::optional<std::uint64_t> parse_uint(std::string_view text, std::string& error) {
  const auto v = parse_si(text, error);
  if (!v) return std::nullopt;
  if (v->digits < 0) {
    error = fmt::format("'{}' is negative; this option takes an unsigned integer", text);
    return std::nullopt;
  }
  const auto digits = static_cast<std::uint64_t>(v->digits);
  const auto coef = static_cast<std::uint64_t>(v->coef);
  if (digits > std::numeric_limits<std::uint64_t>::max() / coef) {
    error = fmt::format("'{}' is out of range for a 64-bit unsigned integer", text);
    return std::nullopt;
  }
  return digits * coef;
}

std::optional<std::uint64_t> parse_size(std::string_view text, std::string& error) {
  if (text.empty()) {
    error = "no value given";
    return std::nullopt;
  }
  const std::size_t u = text.find_first_not_of("0123456789+-");
  const std::string_view digits = text.substr(0, u);
  const std::string_view unit = u == std::string_view::npos ? std::string_view{} : text.substr(u);
  int shift = 0;
  if (!unit.empty()) {
    const std::string_view rest = unit.substr(1);
    const bool prefix_ok = iec_shift(unit.front()) != 0 &&
                           (rest.empty() || rest == "i" || rest == "B" || rest == "iB");
    if (unit == "B") {
      shift = 0;
    } else if (prefix_ok) {
      shift = iec_shift(unit.front());
    } else {
      std::string hint;
      if (unit.front() == '_')
        hint = fmt::format(" (Ceph's C++ source writes 128_K, but a file must say 128K)");
      else if (std::islower(static_cast<unsigned char>(unit.front())))
        hint = " (units are case-sensitive)";
      error = fmt::format("'{}' has an unknown size unit '{}': use B, K, M, G, T, P or E, optionally "
                          "followed by i and/or B (128K = 128Ki = 128KiB = 131072 bytes){}",
                          text, unit, hint);
      return std::nullopt;
    }
  }
  const auto v = strict_ll(digits, error);
  if (!v) {
    error = fmt::format("'{}' is not a size (bytes, with an optional unit K M G T P E)", text);
    return std::nullopt;
  }
  if (*v < 0) {
    error = fmt::format("'{}' is negative; a size cannot be", text);
    return std::nullopt;
  }
  const auto uv = static_cast<std::uint64_t>(*v);
  if (uv > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
    error = fmt::format("'{}' is too large (more than 2^64 - 1 bytes)", text);
    return std::nullopt;
  }
  return uv << shift;
}

std::optional<double> parse_float(std::string_view text, std::string& error) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || end != s.c_str() + s.size()) {
    error = fmt::format("'{}' is not a number", text);
    return std::nullopt;
  }
  if (errno == ERANGE) {
    error = fmt::format("'{}' overflows or underflows a double", text);
    return std::nullopt;
  }
  if (!std::isfinite(v)) {
    error = fmt::format("'{}' is not a finite number", text);
    return std::nullopt;
  }
  return v;
}

std::optional<std::chrono::seconds> parse_secs(std::string_view s, std::string& error) {
  struct Unit {
    std::string_view name;
    long long seconds;
  };
  static constexpr Unit kUnits[] = {
      {"s", 1}, {"sec", 1}, {"second", 1}, {"seconds", 1},
      {"m", 60}, {"min", 60}, {"minute", 60}, {"minutes", 60},
      {"h", 3600}, {"hr", 3600}, {"hour", 3600}, {"hours", 3600},
      {"d", 86400}, {"day", 86400}, {"days", 86400},
      {"w", 604800}, {"wk", 604800}, {"week", 604800}, {"weeks", 604800},
      {"mo", 2592000}, {"month", 2592000}, {"months", 2592000},
      {"y", 31536000}, {"yr", 31536000}, {"year", 31536000}, {"years", 31536000},
  };
  auto isspace = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  long long total = 0;
  std::size_t pos = 0;
  while (pos < s.size()) {
    while (pos < s.size() && isspace(s[pos])) ++pos;
    if (pos >= s.size()) break;
    const std::size_t num_start = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
    if (num_start == pos) {
      error = fmt::format("'{}' is not a duration: expected a digit at '{}'", s, s.substr(pos));
      return std::nullopt;
    }
    const auto n = strict_ll(s.substr(num_start, pos - num_start), error);
    if (!n) return std::nullopt;
    long long val = *n;
    while (pos < s.size() && isspace(s[pos])) ++pos;
    const std::size_t unit_start = pos;
    while (pos < s.size() && std::isalpha(static_cast<unsigned char>(s[pos]))) ++pos;
    if (unit_start != pos) {
      const std::string_view unit = s.substr(unit_start, pos - unit_start);
      long long mult = 0;
      for (const auto& u : kUnits)
        if (u.name == unit) mult = u.seconds;
      if (mult == 0) {
        error = fmt::format("'{}' has an unknown time unit '{}' (s, m, h, d, w, mo, y and their long forms)",
                            s, unit);
        return std::nullopt;
      }
      if (val > std::numeric_limits<long long>::max() / mult) {
        error = fmt::format("'{}' is too long a duration", s);
        return std::nullopt;
      }
      val *= mult;
    } else if (pos < s.size()) {
      error = fmt::format("'{}' is not a duration: unexpected '{}'", s, s.substr(pos));
      return std::nullopt;
    }
    if (total > std::numeric_limits<long long>::max() - val) {
      error = fmt::format("'{}' is too long a duration", s);
      return std::nullopt;
    }
    total += val;
  }
  return std::chrono::seconds(total);
}

std::string EntityAddr::to_string() const {
  if (type == Type::none) return "-";
  std::string out;
  if (type == Type::legacy) out = "v1:";
  if (type == Type::msgr2) out = "v2:";
  out += ip.to_string();
  out += fmt::format("/{}", nonce);
  return out;
}

std::optional<EntityAddr> parse_addr(std::string_view text, std::string& error) {
  EntityAddr a;
  if (text.empty() || text == "-") return a;
  std::string_view rest = text;
  a.type = EntityAddr::Type::msgr2;
  if (rest.substr(0, 3) == "v1:") {
    a.type = EntityAddr::Type::legacy;
    rest.remove_prefix(3);
  } else if (rest.substr(0, 3) == "v2:") {
    rest.remove_prefix(3);
  } else if (rest.substr(0, 4) == "any:") {
    a.type = EntityAddr::Type::any;
    rest.remove_prefix(4);
  }
  const auto bad = [&](std::string_view why) -> std::optional<EntityAddr> {
    error = fmt::format("'{}' is not an address: {} (expected [v1:|v2:|any:]IP[:port][/nonce], "
                        "IPv6 in brackets)", text, why);
    return std::nullopt;
  };
  std::string host;
  bool v6 = false;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    v6 = true;
  } else {
    const std::size_t n4 = std::min(rest.find_first_not_of("0123456789."), rest.size());
    in_addr probe4{};
    if (n4 > 0 && ::inet_pton(AF_INET, std::string(rest.substr(0, n4)).c_str(), &probe4) == 1) {
      host = std::string(rest.substr(0, n4));
      rest.remove_prefix(n4);
    } else {
      // A bare IPv6 address (no port) has at least two colons.
      const std::size_t n6 = std::min(rest.find_first_of("/[]"), rest.size());
      const std::string_view cand = rest.substr(0, n6);
      if (std::count(cand.begin(), cand.end(), ':') < 2) {
        return bad(n4 == 0 && !rest.empty() && std::isalpha(static_cast<unsigned char>(rest.front()))
                       ? "host names are not resolved here; give an IP address"
                       : "not an IPv4 or IPv6 address");
      }
      host = std::string(rest.substr(0, n6));  // bare IPv6: no port
      rest.remove_prefix(n6);
      v6 = true;
    }
  }
  unsigned port = 0;
  if (!rest.empty() && rest.front() == ':') {
    rest.remove_prefix(1);
    const std::size_t n = std::min(rest.find_first_not_of("0123456789"), rest.size());
    if (n > 0) {
      std::string ignored;
      const auto p = strict_ll(rest.substr(0, n), ignored);
      if (!p || *p > 65535) return bad("port out of range (0..65535)");
      port = static_cast<unsigned>(*p);
    }
    rest.remove_prefix(n);
  }
  if (!rest.empty() && rest.front() == '/') {
    rest.remove_prefix(1);
    const std::size_t n = std::min(rest.find_first_not_of("0123456789"), rest.size());
    std::string ignored;
    const auto nonce = n > 0 ? strict_ll(rest.substr(0, n), ignored) : std::nullopt;
    if (!nonce || *nonce > 0xFFFFFFFFLL) return bad("nonce is not a 32-bit number");
    a.nonce = static_cast<std::uint32_t>(*nonce);
    rest.remove_prefix(n);
  }
  if (!rest.empty()) return bad(fmt::format("unexpected '{}' after it", rest));
  const auto ip = NetAddress::parse(v6 ? "[" + host + "]:" + std::to_string(port)
                                       : host + ":" + std::to_string(port));
  if (!ip) return bad(v6 ? "not a valid IPv6 address" : "not a valid IPv4 address");
  a.ip = *ip;
  return a;
}

std::string EntityAddrVec::to_string() const {
  if (addrs.empty()) return "";
  if (addrs.size() == 1) return addrs.front().to_string();
  std::string out = "[";
  for (std::size_t i = 0; i < addrs.size(); ++i) {
    if (i > 0) out += ',';
    out += addrs[i].to_string();
  }
  return out + "]";
}

std::optional<EntityAddrVec> parse_addrvec(std::string_view text, std::string& error) {
  EntityAddrVec v;
  if (text.empty()) return v;
  if (text.front() != '[') {
    auto a = parse_addr(text, error);
    if (!a) return std::nullopt;
    if (a->is_set()) v.addrs.push_back(*a);
    return v;
  }
  if (text.back() != ']') {
    error = fmt::format("'{}' is not an address vector: missing ']' (expected [addr,addr,...])", text);
    return std::nullopt;
  }
  for (const auto& item : split_list(text.substr(1, text.size() - 2), ",")) {
    auto a = parse_addr(item, error);
    if (!a) return std::nullopt;
    v.addrs.push_back(*a);
  }
  return v;
}

bool Uuid::is_zero() const noexcept {
  for (auto b : bytes)
    if (b != 0) return false;
  return true;
}

std::string Uuid::to_string() const {
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += fmt::format("{:02x}", bytes[i]);
  }
  return out;
}

std::optional<Uuid> parse_uuid(std::string_view text, std::string& error) {
  std::string_view s = text;
  const auto bad = [&]() -> std::optional<Uuid> {
    error = fmt::format("'{}' is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", text);
    return std::nullopt;
  };
  if (!s.empty() && s.front() == '{') {
    if (s.back() != '}') return bad();
    s = s.substr(1, s.size() - 2);
  }
  const bool dashes = s.size() == 36;
  if (!dashes && s.size() != 32) return bad();
  Uuid u;
  std::size_t pos = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    if (dashes && (i == 4 || i == 6 || i == 8 || i == 10)) {
      if (s[pos] != '-') return bad();
      ++pos;
    }
    unsigned byte = 0;
    for (int k = 0; k < 2; ++k, ++pos) {
      const char c = s[pos];
      unsigned d = 0;
      if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<unsigned>(c - 'A' + 10);
      else return bad();
      byte = byte * 16 + d;
    }
    u.bytes[i] = static_cast<std::uint8_t>(byte);
  }
  return u;
}

std::string format_float(double v) { return fmt::format("{:.6f}", v); }

std::string DebugLevel::to_string() const { return fmt::format("{}/{}", log, gather); }

std::optional<DebugLevel> parse_debug_level(std::string_view text, std::string& error) {
  const auto slash = text.find('/');
  const auto part = [&](std::string_view p) -> std::optional<int> {
    std::string ignored;
    const auto v = strict_ll(p, ignored);
    if (!v || *v < 0 || *v > 99 || p.empty() || !std::isdigit(static_cast<unsigned char>(p.front())))
      return std::nullopt;
    return static_cast<int>(*v);
  };
  const auto log = part(text.substr(0, slash));
  const auto gather = slash == std::string_view::npos ? log : part(text.substr(slash + 1));
  if (!log || !gather) {
    error = fmt::format("'{}' is not a debug level: write N or N/M with N and M in 0..99", text);
    return std::nullopt;
  }
  return DebugLevel{*log, *gather};
}

std::optional<std::array<std::uint8_t, 16>> parse_gid(std::string_view text, std::string& error) {
  in6_addr a{};
  if (::inet_pton(AF_INET6, std::string(text).c_str(), &a) != 1) {
    error = fmt::format("'{}' is not a GID: write it as an IPv6 address, e.g. fe80::5054:ff:fe12:3456",
                        text);
    return std::nullopt;
  }
  std::array<std::uint8_t, 16> gid{};
  for (std::size_t i = 0; i < 16; ++i) gid[i] = a.s6_addr[i];
  return gid;
}

std::vector<std::string> split_list(std::string_view text, std::string_view separators) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t b = text.find_first_not_of(separators, pos);
    if (b == std::string_view::npos) break;
    const std::size_t e = std::min(text.find_first_of(separators, b), text.size());
    out.emplace_back(text.substr(b, e - b));
    pos = e;
  }
  return out;
}

}  // namespace siphon::compat
