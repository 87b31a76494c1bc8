// Command-word matching against the mon's command table (see command_sig.h).
#include "command_sig.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

namespace siphon::tools {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string normalize_name(std::string s) {
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// A JSON value that may be a string "false"/"False" or a bool.
bool truthy(const json& v, bool dflt) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) {
    const std::string s = lower(v.get<std::string>());
    return !(s == "false" || s == "0" || s == "no");
  }
  return dflt;
}

// Converts `word` for `p`; nullopt (with `why`) when it is not valid.
std::optional<ordered_json> convert(const CommandSignature::Param& p, const std::string& word,
                                    std::string& why) {
  if (p.type == "CephInt") {
    long long v = 0;
    const char* b = word.data();
    const char* e = b + word.size();
    const auto [ptr, ec] = std::from_chars(b, e, v);
    if (ec != std::errc{} || ptr != e) {
      why = fmt::format("'{}' is not an integer (argument <{}>)", word, p.name);
      return std::nullopt;
    }
    return ordered_json(v);
  }
  if (p.type == "CephFloat") {
    char* end = nullptr;
    const double v = std::strtod(word.c_str(), &end);
    if (word.empty() || end != word.c_str() + word.size()) {
      why = fmt::format("'{}' is not a number (argument <{}>)", word, p.name);
      return std::nullopt;
    }
    return ordered_json(v);
  }
  if (p.type == "CephBool") {
    const std::string w = lower(word);
    if (w == "true" || w == "yes" || w == "1") return ordered_json(true);
    if (w == "false" || w == "no" || w == "0") return ordered_json(false);
    why = fmt::format("'{}' is not a boolean (argument <{}>)", word, p.name);
    return std::nullopt;
  }
  if (p.type == "CephChoices") {
    if (std::find(p.choices.begin(), p.choices.end(), word) == p.choices.end()) {
      std::string all;
      for (const auto& c : p.choices) all += (all.empty() ? "" : "|") + c;
      why = fmt::format("'{}' is not one of {} (argument <{}>)", word, all, p.name);
      return std::nullopt;
    }
    return ordered_json(word);
  }
  return ordered_json(word);
}

struct Attempt {
  std::optional<MatchedCommand> ok;
  std::string error;
};

Attempt try_sig(const CommandSignature& sig, const std::vector<std::string>& words) {
  Attempt a;
  ordered_json args = ordered_json::object();
  std::string prefix;
  for (const auto& w : sig.words) prefix += (prefix.empty() ? "" : " ") + w;
  args["prefix"] = prefix;
  // Named parameters (--name value, --name=value, --flag) first.
  std::vector<std::string> positional;
  std::vector<bool> named(sig.params.size(), false);
  std::vector<std::optional<ordered_json>> vals(sig.params.size());  // emitted in signature order
  for (std::size_t i = sig.words.size(); i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.size() > 2 && w.rfind("--", 0) == 0) {
      std::string name = w.substr(2), value;
      bool has_value = false;
      if (const auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      name = normalize_name(name);
      const auto it = std::find_if(sig.params.begin(), sig.params.end(),
                                   [&](const auto& p) { return normalize_name(p.name) == name; });
      if (it == sig.params.end()) {
        a.error = fmt::format("unknown option '{}' for '{}'", w, prefix);
        return a;
      }
      if (!has_value) {
        if (it->type == "CephBool") {
          value = "true";
        } else if (i + 1 < words.size()) {
          value = words[++i];
        } else {
          a.error = fmt::format("option '{}' needs a value", w);
          return a;
        }
      }
      const auto v = convert(*it, value, a.error);
      if (!v) return a;
      const auto idx = static_cast<std::size_t>(it - sig.params.begin());
      vals[idx] = *v;
      named[idx] = true;
    } else {
      positional.push_back(w);
    }
  }
  std::size_t next = 0;
  for (std::size_t pi = 0; pi < sig.params.size(); ++pi) {
    const auto& p = sig.params[pi];
    if (named[pi]) continue;
    if (p.many) {
      ordered_json list = ordered_json::array();
      while (next < positional.size()) {
        std::string why;
        const auto v = convert(p, positional[next], why);
        if (!v) break;
        list.push_back(*v);
        ++next;
      }
      if (!list.empty()) {
        vals[pi] = list;
      } else if (p.required) {
        a.error = fmt::format("missing argument <{}>", p.name);
        return a;
      }
      continue;
    }
    if (next < positional.size()) {
      std::string why;
      if (const auto v = convert(p, positional[next], why)) {
        vals[pi] = *v;
        ++next;
        continue;
      }
      if (p.required) {
        a.error = why;
        return a;
      }
      continue;  // an optional parameter this word is not: try the next one
    }
    if (p.required) {
      a.error = fmt::format("missing argument <{}>", p.name);
      return a;
    }
  }
  if (next < positional.size()) {
    a.error = fmt::format("unexpected argument '{}' for '{}'", positional[next], prefix);
    return a;
  }
  for (std::size_t pi = 0; pi < sig.params.size(); ++pi)
    if (vals[pi]) args[sig.params[pi].name] = *vals[pi];
  a.ok = MatchedCommand{&sig, std::move(args)};
  return a;
}

}  // namespace

static void parse_entry(const json& entry, std::vector<CommandSignature>& out);

std::vector<CommandSignature> parse_command_descriptions(const json& table) {
  std::vector<CommandSignature> out;
  if (!table.is_object()) return out;
  for (const auto& [key, entry] : table.items()) {
    try {
      parse_entry(entry, out);
    } catch (const json::exception&) {
      // an entry of an unexpected shape (the table comes from the peer): skipped
    }
  }
  return out;
}

static void parse_entry(const json& entry, std::vector<CommandSignature>& out) {
  {
    if (!entry.is_object() || !entry.contains("sig") || !entry["sig"].is_array()) return;
    CommandSignature sig;
    bool ok = true;
    bool in_params = false;
    for (const auto& d : entry["sig"]) {
      if (d.is_string() && !in_params) {
        sig.words.push_back(d.get<std::string>());
      } else if (d.is_object() && d.contains("name") && d["name"].is_string()) {
        in_params = true;
        CommandSignature::Param p;
        p.name = d["name"].get<std::string>();
        p.type = d.contains("type") && d["type"].is_string() ? d["type"].get<std::string>() : "CephString";
        if (d.contains("strings") && d["strings"].is_string()) p.choices = split(d["strings"].get<std::string>(), '|');
        if (d.contains("req")) p.required = truthy(d["req"], true);
        if (d.contains("n")) p.many = d["n"].is_string() ? d["n"].get<std::string>() == "N" : false;
        sig.params.push_back(std::move(p));
      } else {
        ok = false;  // a literal after a parameter, or an unreadable entry
        break;
      }
    }
    if (!ok || sig.words.empty()) return;
    if (entry.contains("help") && entry["help"].is_string()) sig.help = entry["help"].get<std::string>();
    if (entry.contains("module") && entry["module"].is_string()) sig.module = entry["module"].get<std::string>();
    if (entry.contains("flags") && entry["flags"].is_number_unsigned()) sig.flags = entry["flags"].get<unsigned>();
    out.push_back(std::move(sig));
  }
}

std::optional<MatchedCommand> match_command(const std::vector<CommandSignature>& sigs,
                                            const std::vector<std::string>& words,
                                            std::string& error) {
  // Candidates: every signature whose literal words all match; the longest
  // literal prefix wins (then table order).
  std::size_t best_len = 0;
  std::vector<const CommandSignature*> candidates;
  for (const auto& s : sigs) {
    if (s.words.size() > words.size()) continue;
    if (!std::equal(s.words.begin(), s.words.end(), words.begin())) continue;
    if (s.words.size() > best_len) {
      best_len = s.words.size();
      candidates.clear();
    }
    if (s.words.size() == best_len) candidates.push_back(&s);
  }
  std::string first_error;
  for (const CommandSignature* s : candidates) {
    Attempt a = try_sig(*s, words);
    if (a.ok) return std::move(a.ok);
    if (first_error.empty()) first_error = a.error;
  }
  if (!candidates.empty()) {
    error = first_error + "; usage: ";
    for (std::size_t i = 0; i < candidates.size(); ++i)
      error += (i ? " | " : "") + usage(*candidates[i]);
    return std::nullopt;
  }
  // Nothing matched: suggest the commands sharing the most leading words.
  std::size_t share = 0;
  for (const auto& s : sigs) {
    std::size_t n = 0;
    while (n < s.words.size() && n < words.size() && s.words[n] == words[n]) ++n;
    share = std::max(share, n);
  }
  std::string joined;
  for (const auto& w : words) joined += (joined.empty() ? "" : " ") + w;
  error = fmt::format("no valid command found for '{}'", joined);
  if (share > 0) {
    std::vector<std::string> close;
    for (const auto& s : sigs) {
      std::size_t n = 0;
      while (n < s.words.size() && n < words.size() && s.words[n] == words[n]) ++n;
      if (n == share && close.size() < 10) close.push_back(usage(s));
    }
    error += "; closest matches:";
    for (const auto& c : close) error += "\n  " + c;
  }
  return std::nullopt;
}

ordered_json plain_command(const std::vector<std::string>& words) {
  std::string prefix;
  for (const auto& w : words) prefix += (prefix.empty() ? "" : " ") + w;
  ordered_json j = ordered_json::object();
  j["prefix"] = prefix;
  return j;
}

std::string usage(const CommandSignature& sig) {
  std::string s;
  for (const auto& w : sig.words) s += (s.empty() ? "" : " ") + w;
  for (const auto& p : sig.params) {
    std::string t = p.name;
    if (p.type == "CephInt") t += ":int";
    if (p.type == "CephFloat") t += ":float";
    if (p.type == "CephChoices") {
      t.clear();
      for (const auto& c : p.choices) t += (t.empty() ? "" : "|") + c;
    } else {
      t = "<" + t + ">";
    }
    if (p.many) t += "...";
    s += " " + (p.required ? t : "[" + t + "]");
  }
  return s;
}

std::string to_ceph_json(const ordered_json& j) {
  if (j.is_object()) {
    std::string s = "{";
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      if (!first) s += ", ";
      first = false;
      s += ordered_json(k).dump(-1, ' ', true) + ": " + to_ceph_json(v);
    }
    return s + "}";
  }
  if (j.is_array()) {
    std::string s = "[";
    for (std::size_t i = 0; i < j.size(); ++i) s += (i ? ", " : "") + to_ceph_json(j[i]);
    return s + "]";
  }
  return j.dump(-1, ' ', true);
}

}  // namespace siphon::tools
