// The admin socket's request and reply text: Ceph's command descriptors,
// argument validation and the reply formats (no I/O here).
#include <cstring>

#include <fmt/format.h>

#include "msgr/admin/admin_socket.h"
#include "msgr/admin/protocol.h"

namespace siphon::admin {

namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const auto p = s.find(sep);
    const auto tok = s.substr(0, p);
    if (!tok.empty()) out.push_back(tok);
    if (p == std::string_view::npos) break;
    s.remove_prefix(p + 1);
  }
  return out;
}

}  // namespace

bool Signature::parse(std::string_view text, Signature& out, std::string& error) {
  out = Signature{};
  for (const auto tok : split(text, ' ')) {
    if (tok.find('=') == std::string_view::npos) {
      if (!out.args.empty()) {
        error = fmt::format("'{}': a literal word after an argument", tok);
        return false;
      }
      out.words.emplace_back(tok);
      continue;
    }
    ArgDesc a;
    for (const auto kv : split(tok, ',')) {
      const auto eq = kv.find('=');
      if (eq == std::string_view::npos) {
        error = fmt::format("'{}': expected key=value", kv);
        return false;
      }
      const auto k = kv.substr(0, eq), v = kv.substr(eq + 1);
      if (k == "name") a.name = v;
      else if (k == "type") a.type = v;
      else if (k == "req") a.required = v != "false";
      else if (k == "n") a.many = v == "N";
      else if (k == "strings") a.strings = v;
      else {
        error = fmt::format("'{}': unknown descriptor key '{}'", tok, k);
        return false;
      }
    }
    if (a.name.empty() || a.type.empty()) {
      error = fmt::format("'{}': an argument needs name= and type=", tok);
      return false;
    }
    out.args.push_back(std::move(a));
  }
  if (out.words.empty()) {
    error = "a command needs at least one literal word";
    return false;
  }
  for (const auto& w : out.words) out.prefix += (out.prefix.empty() ? "" : " ") + w;
  return true;
}

nlohmann::json signature_json(const Signature& s) {
  auto sig = nlohmann::json::array();
  for (const auto& w : s.words) sig.push_back(w);
  for (const auto& a : s.args) {
    // Every value a string, keys sorted (nlohmann::json is a sorted map), as
    // Ceph's get_command_descriptions prints them.
    nlohmann::json d = {{"name", a.name}, {"type", a.type}};
    if (!a.required) d["req"] = "false";
    if (a.many) d["n"] = "N";
    if (!a.strings.empty()) d["strings"] = a.strings;
    sig.push_back(std::move(d));
  }
  return sig;
}

namespace {

bool valid_one(const ArgDesc& a, const nlohmann::json& v) {
  if (a.type == "CephInt") return v.is_number_integer() || (v.is_string() && !v.get<std::string>().empty());
  if (a.type == "CephFloat") return v.is_number() || v.is_string();
  if (a.type == "CephBool") return v.is_boolean() || (v.is_string() && (v == "true" || v == "false"));
  if (a.type == "CephChoices") {
    if (!v.is_string()) return false;
    for (const auto c : split(a.strings, '|'))
      if (c == v.get<std::string>()) return true;
    return false;
  }
  return v.is_string();
}

}  // namespace

bool validate(const Signature& s, const nlohmann::json& cmd) {
  for (const auto& a : s.args) {
    const auto it = cmd.find(a.name);
    if (it == cmd.end()) {
      if (a.required) return false;
      continue;
    }
    if (a.many && it->is_array()) {
      if (it->empty() && a.required) return false;
      for (const auto& e : *it)
        if (!valid_one(a, e)) return false;
    } else if (!valid_one(a, *it)) {
      return false;
    }
  }
  return true;
}

std::string Request::str(std::string_view name) const {
  const auto it = cmd.find(name);
  if (it == cmd.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string out;
    for (const auto& e : *it) out += (out.empty() ? "" : " ") + (e.is_string() ? e.get<std::string>() : e.dump());
    return out;
  }
  return it->dump();
}

bool Request::has(std::string_view name) const { return cmd.contains(name); }

std::string error_payload(int err, std::string_view msg) {
  const int e = err < 0 ? -err : err;
  return fmt::format("ERROR: ({}) {}\n{}\n", e, std::strerror(e), msg);
}

std::string compact_json(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      out += c;
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
    if (c == '"') in_string = true;
    out += c;
  }
  return out;
}

std::string format_reply(const Reply& r, std::string_view format) {
  std::string out;
  if (r.err != 0) out = error_payload(r.err, r.errmsg);
  if (r.is_raw) return out + r.raw;
  const bool compact = format == "json";
  if (!r.text_json.empty()) {
    if (compact) return out + compact_json(r.text_json);
    out += r.text_json;
    if (out.back() != '\n') out += '\n';
    return out;
  }
  if (r.value.is_null()) return out;  // an error without output
  // Invalid UTF-8 (a client's bytes echoed back) is replaced, never thrown.
  constexpr auto kReplace = nlohmann::ordered_json::error_handler_t::replace;
  return out + (compact ? r.value.dump(-1, ' ', false, kReplace) : r.value.dump(4, ' ', false, kReplace) + "\n");
}

}  // namespace siphon::admin
