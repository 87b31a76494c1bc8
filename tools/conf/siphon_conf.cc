// siphon-conf: query and check a ceph.conf the way Siphon reads it. Modelled
// on Ceph's ceph-conf: `--lookup KEY` prints what the file says (after $
// expansion) and exits 1 when the file does not set KEY, exactly like
// `ceph-conf --lookup`, which a ctest compares it against.
#include <algorithm>
#include <cstdio>
#include <tuple>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "compat/config.h"
#include "compat/schema_markdown.h"
#include "msgr/base/log.h"

namespace {

using namespace siphon::compat;

constexpr std::string_view kUsage = R"(siphon-conf: query and check a ceph.conf as Siphon reads it

USAGE
  siphon-conf [FLAGS] ACTION

ACTIONS
  --lookup KEY            print KEY's value from the file (after $ expansion);
                          exit 1 if the file does not set it (as ceph-conf)
  KEY                     the same as --lookup KEY
  --show-config           every option Siphon uses: value and where it came from
  --show-config-value KEY one option's value, in Ceph's format
  --check                 report every problem in the file (all sections);
                          exit 1 if there is an error
  -L, --list-all-sections list the file's sections
  --dump-schema-markdown  print docs/configuration.md (the option table)
  --list-options          one line per option: name, type, origin, level
  -h, --help              this text

FLAGS
  -c, --conf FILE         the configuration file (a list: the first that opens)
  -n, --name TYPE.ID      the entity (default client.admin); --id ID sets the id
  --cluster NAME          the cluster name (default: from the file name)
  -s, --section SECTION   search SECTION first (may be repeated)
  --pid PID               the value of $pid
  --<option> VALUE        set an option, as on a daemon's command line
  CEPH_ARGS and CEPH_CONF are read from the environment, as Ceph does.

EXIT STATUS
  0 success; 1 not found, an error in the configuration, or bad arguments.
)";

enum class Action {
  none, lookup, show_config, show_config_value, check, list_sections, dump_schema, list_options, help
};

// Ceph's argument spelling: dashes after the first two characters are
// underscores, up to '='.
std::string normalise(std::string_view arg) {
  std::string out(arg.substr(0, 2));
  for (std::size_t i = 2; i < arg.size() && arg[i] != '='; ++i) out += arg[i] == '-' ? '_' : arg[i];
  return out;
}

// Prints in file order (file, line, column), so a --check reads top down.
void print_diagnostics(const Diagnostics& diags, Severity min) {
  std::vector<const Diagnostic*> list;
  for (const auto& d : diags.all())
    if (d.severity >= min) list.push_back(&d);
  std::stable_sort(list.begin(), list.end(), [](const Diagnostic* a, const Diagnostic* b) {
    return std::tie(a->where.file, a->where.line, a->where.column) <
           std::tie(b->where.file, b->where.line, b->where.column);
  });
  for (const auto* d : list) std::fprintf(stderr, "%s\n", d->to_string().c_str());
}

int run(const std::vector<std::string>& args) {
  Action action = Action::none;
  std::string key;
  std::vector<std::string> sections;
  std::optional<std::string> pid;
  std::vector<std::string> config_args;
  Diagnostics diags;

  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string flag = normalise(a);
    const auto eq = a.find('=');
    const bool has_inline = flag.size() > 1 && flag[0] == '-' && eq != std::string::npos;
    auto value = [&](std::string& out) -> bool {
      if (has_inline) {
        out = a.substr(eq + 1);
        return true;
      }
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "siphon-conf: %s needs a value\n", a.c_str());
        return false;
      }
      out = args[++i];
      return true;
    };
    if (a == "--") {
      config_args.insert(config_args.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (flag == "--lookup") {
      if (!value(key)) return 1;
      action = Action::lookup;
    } else if (flag == "--show_config_value") {
      if (!value(key)) return 1;
      action = Action::show_config_value;
    } else if (flag == "--show_config") {
      action = Action::show_config;
    } else if (flag == "--check") {
      action = Action::check;
    } else if (flag == "-L" || flag == "--list_all_sections") {
      action = Action::list_sections;
    } else if (flag == "--dump_schema_markdown") {
      action = Action::dump_schema;
    } else if (flag == "--list_options") {
      action = Action::list_options;
    } else if (flag == "-h" || flag == "--help") {
      action = Action::help;
    } else if (flag == "-s" || flag == "--section") {
      std::string s;
      if (!value(s)) return 1;
      sections.push_back(s);
    } else if (flag == "--pid") {
      std::string p;
      if (!value(p)) return 1;
      pid = p;
    } else {
      config_args.push_back(a);
    }
  }
  if (action == Action::help) {
    std::fputs(kUsage.data(), stdout);
    return 0;
  }
  if (action == Action::dump_schema) {
    std::fputs(schema_markdown().c_str(), stdout);
    return 0;
  }
  if (action == Action::list_options) {
    for (const auto& s : all_options())
      std::printf("%s\t%s\t%s\t%s\n", std::string(s.name).c_str(), std::string(to_string(s.type)).c_str(),
                  std::string(to_string(s.origin)).c_str(), std::string(to_string(s.level)).c_str());
    return 0;
  }

  std::vector<std::string> rest;
  ConfigRequest req = ConfigRequest::from_args(config_args, diags, &rest);
  if ((action == Action::none || action == Action::lookup) && key.empty() && rest.size() == 1 &&
      !rest.front().empty() && rest.front().front() != '-') {
    action = Action::lookup;
    key = rest.front();
    rest.clear();
  }
  for (const auto& r : rest) diags.error(Location{"command line", 0, 0}, fmt::format("unknown argument '{}'", r));
  if (action == Action::none) {
    std::fputs("siphon-conf: give an action, such as --lookup KEY, --show-config or --check "
               "(--help lists them)\n", stderr);
    return 1;
  }
  if (diags.has_errors()) {
    print_diagnostics(diags, Severity::error);
    return 1;
  }
  req.extra_sections = sections;
  req.pid = pid;
  req.check_all_sections = action == Action::check;
  const Config cfg = Config::load(req, diags);
  const bool file_unusable = cfg.file() == nullptr ? req.conf_required : !cfg.file()->ok();

  switch (action) {
    case Action::lookup: {
      print_diagnostics(diags, Severity::error);
      if (file_unusable) return 1;
      const auto v = cfg.lookup(key);
      if (!v) return 1;
      std::printf("%s\n", v->c_str());
      return 0;
    }
    case Action::show_config_value: {
      print_diagnostics(diags, Severity::error);
      if (file_unusable) return 1;
      const auto o = find_option(key);
      if (!o) {
        std::fprintf(stderr, "siphon-conf: '%s' is not an option Siphon uses\n", key.c_str());
        return 1;
      }
      // The value in force (the default when the file's is invalid, as in
      // Ceph); exit 1 when the configuration has errors.
      std::printf("%s\n", cfg.value_string(*o).c_str());
      return diags.has_errors() ? 1 : 0;
    }
    case Action::show_config: {
      print_diagnostics(diags, Severity::warning);
      std::printf("name = %s\ncluster = %s\nconf = %s\n", cfg.name().to_string().c_str(), cfg.cluster().c_str(),
                  cfg.file() != nullptr ? cfg.file()->path().c_str() : "(none)");
      for (const auto& s : all_options()) {
        const auto o = *find_option(s.name);
        std::printf("%s = %s  # %s\n", std::string(s.name).c_str(), cfg.value_string(o).c_str(),
                    cfg.source(o).to_string().c_str());
      }
      return diags.has_errors() || file_unusable ? 1 : 0;
    }
    case Action::check: {
      print_diagnostics(diags, Severity::note);
      std::fprintf(stderr, "siphon-conf: %s: %zu error%s, %zu warning%s\n",
                   cfg.file() != nullptr ? cfg.file()->path().c_str() : "(no file)", diags.error_count(),
                   diags.error_count() == 1 ? "" : "s", diags.warning_count(),
                   diags.warning_count() == 1 ? "" : "s");
      return diags.has_errors() ? 1 : 0;
    }
    case Action::list_sections: {
      print_diagnostics(diags, Severity::error);
      if (file_unusable) return 1;
      if (cfg.file() != nullptr)
        for (const auto& s : cfg.file()->section_names()) std::printf("%s\n", s.c_str());
      return 0;
    }
    case Action::none:
    case Action::dump_schema:
    case Action::list_options:
    case Action::help:
      break;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Diagnostics are printed by this tool; keep the library's log quiet.
  siphon::log::set_level(siphon::log::Subsys::compat, -1);
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "siphon-conf: %s\n", e.what());
    return 1;
  }
}
