#include "msgr/auth/keyring.h"

#include <fmt/format.h>

namespace siphon::auth {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Drops a comment that starts outside quotes.
std::string_view strip_comment(std::string_view s) {
  bool quoted = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '"') quoted = !quoted;
    if (!quoted && (s[i] == '#' || s[i] == ';')) return s.substr(0, i);
  }
  return s;
}

bool valid_entity(std::string_view name) {
  const auto dot = name.find('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view type = name.substr(0, dot);
  return type == "auth" || type == "mon" || type == "osd" || type == "mds" || type == "mgr" || type == "client";
}

}  // namespace

std::optional<Keyring> Keyring::parse(std::string_view text, std::string_view path, std::string& why) {
  Keyring kr;
  std::string section;
  bool skip = false;
  KeyringEntry* cur = nullptr;
  std::size_t line_no = 0;
  auto fail = [&](std::string msg) {
    why = fmt::format("{}:{}: {}", path, line_no, msg);
    return std::nullopt;
  };
  while (!text.empty()) {
    ++line_no;
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    line = trim(strip_comment(line));
    if (line.empty()) continue;
    if (line.front() == '[') {
      if (line.back() != ']') return fail(fmt::format("section header '{}' lacks its ']'", line));
      section = std::string(trim(line.substr(1, line.size() - 2)));
      skip = section == "global";
      if (skip) continue;
      if (!valid_entity(section))
        return fail(fmt::format("'[{}]' is not an entity name (TYPE.ID, TYPE one of auth, mon, osd, mds, mgr, "
                                "client)", section));
      cur = &kr.entries_[section];
      continue;
    }
    if (skip) continue;
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) return fail(fmt::format("'{}' is not 'name = value'", line));
    std::string name(trim(line.substr(0, eq)));
    for (char& c : name)
      if (c == '_') c = ' ';
    std::string_view value = trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (cur == nullptr) return fail(fmt::format("'{}' outside an entity section", name));
    if (name == "key") {
      std::string e;
      auto k = CryptoKey::from_base64(value, e);
      if (!k) return fail(fmt::format("bad key for {}: {}", section, e));
      cur->key = std::move(*k);
    } else if (name.rfind("caps ", 0) == 0) {
      cur->caps[std::string(trim(std::string_view(name).substr(5)))] = std::string(value);
    } else if (name == "auid") {
      // Legacy, accepted and ignored as Ceph does.
    } else {
      return fail(fmt::format("unknown keyring setting '{}' (expected key, caps <service> or auid)", name));
    }
  }
  for (const auto& [name, e] : kr.entries_)
    if (e.key.empty()) {
      why = fmt::format("{}: [{}] has no key", path, name);
      return std::nullopt;
    }
  return kr;
}

const KeyringEntry* Keyring::find(std::string_view entity) const {
  const auto it = entries_.find(entity);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace siphon::auth
