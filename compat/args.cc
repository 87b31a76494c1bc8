#include "compat/args.h"

#include <fmt/format.h>

namespace siphon::compat {
namespace {

// Ceph's dashes_to_underscores: the first two characters stay, then '-'
// becomes '_' up to an '='.
std::string dashes_to_underscores(std::string_view arg) {
  std::string out(arg.substr(0, 2));
  for (std::size_t i = 2; i < arg.size(); ++i) {
    if (arg[i] == '=') {
      out += arg.substr(i);
      break;
    }
    out += arg[i] == '-' ? '_' : arg[i];
  }
  return out;
}

bool bool_word(std::string_view v) { return v == "true" || v == "false" || v == "1" || v == "0"; }

}  // namespace

bool EntityName::valid_type(std::string_view type) noexcept {
  return type == "auth" || type == "mon" || type == "osd" || type == "mds" || type == "mgr" ||
         type == "client";
}

std::optional<EntityName> EntityName::parse(std::string_view text, std::string& error) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos || !valid_type(text.substr(0, dot))) {
    error = fmt::format("'{}' is not an entity name: expected TYPE.ID with TYPE one of auth, mon, osd, "
                        "mds, mgr, client", text);
    return std::nullopt;
  }
  return EntityName{std::string(text.substr(0, dot)), std::string(text.substr(dot + 1))};
}

void parse_args(std::span<const std::string> args, std::string_view origin, ParsedArgs& out,
                Diagnostics& diags) {
  const Location where{std::string(origin), 0, 0};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& raw = args[i];
    if (raw == "--") {
      out.rest.insert(out.rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      return;
    }
    const std::string arg = dashes_to_underscores(raw);
    const auto eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const bool inline_value = eq != std::string::npos;
    // The value of a flag that takes one: after '=' or the next argument.
    auto take_value = [&](std::string& value) -> bool {
      if (inline_value) {
        value = arg.substr(eq + 1);
        return true;
      }
      if (i + 1 >= args.size()) {
        diags.error(where, fmt::format("{} needs a value", raw));
        return false;
      }
      value = args[++i];
      return true;
    };
    std::string value;
    if (flag == "-c" || flag == "--conf") {
      if (take_value(value)) out.conf = value;
      continue;
    }
    if (flag == "--cluster") {
      if (take_value(value)) out.cluster = value;
      continue;
    }
    if (flag == "-n" || flag == "--name") {
      if (!take_value(value)) continue;
      std::string error;
      if (auto n = EntityName::parse(value, error)) {
        out.name = *n;
        out.id.reset();  // a later --name replaces an earlier --id
      } else {
        diags.error(where, error);
      }
      continue;
    }
    if (flag == "-k") {  // Ceph's short form of --keyring
      if (take_value(value)) out.overrides.push_back({Opt::keyring, value, raw});
      continue;
    }
    if (flag == "-i" || flag == "--id" || flag == "--user") {
      if (take_value(value)) out.id = value;
      continue;
    }
    if (flag.size() > 2 && flag.substr(0, 2) == "--") {
      std::string name = flag.substr(2);
      bool negated = false;
      auto opt = find_option(name);
      if (!opt && name.substr(0, 3) == "no_") {
        opt = find_option(name.substr(3));
        negated = opt && schema(*opt).type == OptionType::boolean;
        if (!negated) opt.reset();
      }
      if (opt) {
        if (negated) {
          if (inline_value) diags.error(where, fmt::format("{} takes no value", raw));
          else out.overrides.push_back({*opt, "false", raw});
          continue;
        }
        if (schema(*opt).type == OptionType::boolean) {
          if (inline_value) {
            value = arg.substr(eq + 1);
            if (!bool_word(value)) {
              diags.error(where, fmt::format("{}: expected true, false, 1 or 0 after '=', got '{}'", raw,
                                             value));
              continue;
            }
          } else if (i + 1 < args.size() && bool_word(args[i + 1])) {
            value = args[++i];
          } else {
            value = "true";
          }
          out.overrides.push_back({*opt, value, raw});
          continue;
        }
        if (take_value(value)) out.overrides.push_back({*opt, value, raw});
        continue;
      }
    }
    out.rest.push_back(raw);
  }
}

std::vector<std::string> split_ceph_args(std::string_view text) {
  std::vector<std::string> out;
  for (auto& s : split_list(text, " ")) out.push_back(std::move(s));
  return out;
}

bool translate_set_args(const std::vector<std::string>& in, std::vector<std::string>& out, std::string& error) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    std::string kv;
    if (in[i] == "--set") {
      if (i + 1 >= in.size()) {
        error = "--set needs KEY=VALUE";
        return false;
      }
      kv = in[++i];
    } else if (in[i].rfind("--set=", 0) == 0) {
      kv = in[i].substr(6);
    } else {
      out.push_back(in[i]);
      continue;
    }
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      error = fmt::format("--set '{}': expected KEY=VALUE, e.g. --set ms_async_op_threads=2", kv);
      return false;
    }
    const std::string key = kv.substr(0, eq);
    if (!find_option(key)) {
      error = fmt::format("--set: '{}' is not an option Siphon knows (docs/configuration.md lists them)", key);
      return false;
    }
    out.push_back("--" + key + "=" + kv.substr(eq + 1));
  }
  return true;
}

}  // namespace siphon::compat
