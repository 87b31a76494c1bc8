// siphon-bench: the messenger's traffic generator (docs/benchmarking.md).
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "compat/config.h"
#include "compat/factory.h"
#include "compat/metrics.h"
#include "msgr/base/log.h"
#include "tools/bench/cli.h"
#include "tools/bench/engine.h"
#include "tools/bench/objd_run.h"
#include "tools/bench/rados_run.h"
#include "tools/bench/report.h"
#include "tools/bench/stack.h"

namespace {

using namespace siphon;
using namespace siphon::bench;

constexpr int kExitUsage = 2;

int usage_error(std::string msg) {
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  fmt::print(stderr, "siphon-bench: {}\n(siphon-bench --help lists modes and flags)\n", msg);
  return kExitUsage;
}

extern "C" void on_signal(int sig) {
  request_stop();
  // A second Ctrl-C ends the process the default way.
  std::signal(sig, SIG_DFL);
}

bool write_file(const std::string& path, const std::function<void(std::ostream&)>& fill, std::string& error) {
  if (path == "-") {
    fill(std::cout);
    std::cout.flush();
    return true;
  }
  std::ofstream f(path);
  if (!f) {
    error = fmt::format("cannot write {}", path);
    return false;
  }
  fill(f);
  f.close();
  if (!f) {
    error = fmt::format("error writing {}", path);
    return false;
  }
  return true;
}

int finish(const BenchArgs& a, const RunOutcome& out) {
  // The table goes to stdout unless stdout carries the JSON.
  std::ostream& table = a.json == "-" ? std::cerr : std::cout;
  write_table(table, out.result);
  table.flush();
  std::string err;
  if (!a.json.empty() && !write_file(a.json, [&](std::ostream& os) { write_json(os, out.result); }, err)) {
    fmt::print(stderr, "siphon-bench: {}\n", err);
    return 1;
  }
  if (!a.plot.empty() && !write_file(a.plot, [&](std::ostream& os) { write_svg(os, out.result); }, err)) {
    fmt::print(stderr, "siphon-bench: {}\n", err);
    return 1;
  }
  const int code = out.exit_code();
  if (code == 3) {
    const VerifyCounts& v = out.result.verified;
    fmt::print(stderr, "siphon-bench: --verify failed: {} lost, {} duplicated, {} reordered, {} corrupted\n", v.lost,
               v.duplicated, v.reordered, v.corrupted);
  } else if (code == 1) {
    fmt::print(stderr, "siphon-bench: the run had {} error(s)\n", out.result.errors);
  }
  return code;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage_error("which mode? loopback, server, client, compare or objd");
  for (const auto& x : args) {
    if (x == "rados") break;  // its own --help
    if (x == "-h" || x == "--help" || x == "help") {
      std::cout << usage();
      return 0;
    }
  }
  if (args[0] == "--version") {
    fmt::print("siphon-bench {}\n", SIPHON_VERSION);
    return 0;
  }
  // The mode comes first, or after leading configuration flags
  // (siphon-bench -c my.conf loopback ...).
  std::size_t at = 0;
  while (at < args.size()) {
    const std::string& x = args[at];
    static const char* const kWithValue[] = {"-c", "--conf", "-n", "--name", "-i", "--id", "--cluster", "--set",
                                             "-k", "--keyring"};
    if (std::find(std::begin(kWithValue), std::end(kWithValue), x) != std::end(kWithValue)) {
      at += 2;
    } else if (x.rfind("--", 0) == 0 && x.find('=') != std::string::npos) {
      at += 1;
    } else {
      break;
    }
  }
  if (at >= args.size()) return usage_error("which mode? loopback, server, client, compare, objd or rados");
  if (args[at] == "rados") {
    // rados bench's grammar, not the messenger modes' flags (rados_run.h).
    std::vector<std::string> rest(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(at));
    rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(at) + 1, args.end());
    return run_rados(rest);
  }
  const auto mode = parse_mode(args[at]);
  if (!mode) return usage_error(fmt::format("unknown mode '{}' (loopback, server, client, compare or objd)", args[at]));
  std::vector<std::string> flags(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(at));
  flags.insert(flags.end(), args.begin() + static_cast<std::ptrdiff_t>(at) + 1, args.end());

  // Configuration flags to the compat Config, the rest to the bench parser.
  std::vector<std::string> conf_args;
  std::string error;
  if (!compat::translate_set_args(flags, conf_args, error)) return usage_error(error);
  compat::Diagnostics diags;
  std::vector<std::string> rest;
  const compat::ConfigRequest req = compat::ConfigRequest::from_args(conf_args, diags, &rest);
  if (diags.has_errors()) return usage_error(diags.to_string(compat::Severity::error));
  auto parsed = parse_bench_args(*mode, rest, error);
  if (!parsed) return usage_error(error);
  BenchArgs a = std::move(*parsed);
  if (!a.target.empty() && !parse_target(a.target, error)) return usage_error(error);
  if (!a.bind.empty() && !parse_bind(a.bind, error)) return usage_error(error);
  if (a.mode == Mode::compare)
    for (const auto& o : req.cli_overrides) {
      if (o.option == compat::Opt::ms_type)
        return usage_error("compare takes the stacks from --ms-types; drop --ms-type");
      if (!a.con_modes.empty() && (o.option == compat::Opt::ms_client_mode || o.option == compat::Opt::ms_service_mode))
        return usage_error(fmt::format("--modes sets ms_client_mode and ms_service_mode for each run; drop {}", o.arg));
    }

  compat::Diagnostics load_diags;
  const compat::Config cfg = compat::Config::load(req, load_diags);
  for (const auto& d : load_diags.all())
    if (d.severity != compat::Severity::error && !a.quiet) fmt::print(stderr, "siphon-bench: {}\n", d.to_string());
  if (load_diags.has_errors())
    return usage_error("invalid configuration:\n" + load_diags.to_string(compat::Severity::error));
  compat::apply_log_levels(cfg);  // faults are counted in the result at any level
  compat::apply_perf_option(cfg);
  const auto types = cfg.ms_types();

  RunSetup setup;
  setup.cfg = &cfg;
  setup.ms_type = types.public_type;
  setup.ms_type_origin = cfg.ms_type_choice().origin();
  // The embedded default (docs/benchmarking.md): with ms_type set nowhere
  // (no file, CEPH_ARGS or --ms-type/--set), Siphon's headline stack runs:
  // async+rdma, on the software fabric when the host has no RDMA device.
  // objd mode talks to a daemon that reads the same configuration, so it
  // keeps Ceph's default (async+posix) like the daemon does.
  if (a.mode != Mode::objd && cfg.source(compat::Opt::ms_type).kind == compat::ValueSource::Kind::default_value &&
      cfg.source(compat::Opt::ms_public_type).kind == compat::ValueSource::Kind::default_value) {
    std::string why;
    setup.ms_type = *compat::parse_ms_type("async+rdma", why);
    setup.ms_type_origin = "embedded default: no ms_type configured";
    if (!a.quiet)
      std::fprintf(stderr, "siphon-bench: no ms_type configured: using the embedded default, async+rdma "
                           "(software fabric soft0 when no RDMA device exists)\n");
  }
  setup.options = bench::messenger_options(cfg);
  const std::uint64_t max_segment = compat::transport_options(cfg).frame_limits.max_segment;
  if (a.mode != Mode::server && a.sizes.max() > max_segment)
    return usage_error(fmt::format("message size {} exceeds ms_max_segment_size ({}); raise it with --set",
                                   format_size(a.sizes.max()), format_size(max_segment)));
  setup.args = a;
  if (!a.quiet) setup.info = [](const std::string& line) { fmt::print(stderr, "siphon-bench: {}\n", line); };
  if (!a.quiet && ::isatty(STDERR_FILENO) != 0)
    setup.progress = [](const std::string& line) {
      fmt::print(stderr, "\r{}\033[K", line);
      if (line.empty()) fmt::print(stderr, "\r");
      std::fflush(stderr);
    };

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);

  if (a.mode == Mode::compare) {
    std::vector<compat::MsType> stacks;
    for (const auto& t : a.ms_types) {
      std::string why;
      auto parsed_type = compat::parse_ms_type(t, why);
      if (!parsed_type) return usage_error(fmt::format("--ms-types: {}", why));
      stacks.push_back(*parsed_type);
    }
    // --modes: one configuration per connection mode, both ends set to it
    // (as --set ms_client_mode=M --set ms_service_mode=M would).
    std::vector<std::string> modes = a.con_modes.empty() ? std::vector<std::string>{""} : a.con_modes;
    std::list<compat::Config> mode_cfgs;
    for (const std::string& m : modes) {
      if (m.empty()) {
        mode_cfgs.push_back(cfg);
        continue;
      }
      compat::ConfigRequest r = req;
      r.cli_overrides.push_back({compat::Opt::ms_client_mode, m, "--modes " + m});
      r.cli_overrides.push_back({compat::Opt::ms_service_mode, m, "--modes " + m});
      compat::Diagnostics d;
      mode_cfgs.push_back(compat::Config::load(r, d));
      if (d.has_errors()) return usage_error("invalid configuration:\n" + d.to_string(compat::Severity::error));
    }
    struct Planned {
      compat::MsType type;
      std::string con_mode;
    };
    std::vector<Planned> plan;
    std::vector<RunOutcome> outcomes;
    for (const auto& t : stacks) {
      auto mode_cfg = mode_cfgs.begin();
      for (const std::string& m : modes) {
        RunSetup s = setup;
        s.cfg = &*mode_cfg++;
        s.options = bench::messenger_options(*s.cfg);
        s.ms_type = t;
        s.ms_type_origin = "--ms-types";
        s.require_con_mode = m;
        plan.push_back({t, m});
        outcomes.push_back(run_loopback(s));
        if (!outcomes.back().ran && setup.info)
          setup.info(fmt::format("{}{}: {}", t.to_string(), m.empty() ? "" : " " + m, outcomes.back().error));
        if (stop_requested()) break;
      }
      if (stop_requested()) break;
    }
    std::vector<CompareEntry> entries;
    int code = 0;
    bool any = false;
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
      const RunOutcome& o = outcomes[i];
      entries.push_back({plan[i].type.to_string(), plan[i].con_mode, o.ran, &o.result, o.error});
      if (o.ran) {
        any = true;
        code = std::max(code, o.exit_code());
      } else if (!o.unavailable) {
        code = std::max(code, 1);
      }
    }
    std::ostream& table = a.json == "-" ? std::cerr : std::cout;
    write_compare_table(table, entries);
    table.flush();
    if (!a.json.empty() && !write_file(a.json, [&](std::ostream& os) { write_compare_json(os, entries); }, error)) {
      fmt::print(stderr, "siphon-bench: {}\n", error);
      return 1;
    }
    return any ? code : 1;
  }

  // `siphon-bench server` serves /metrics when siphon_metrics_endpoint is
  // set (the NIC counters of the stack it really runs); a failure to listen
  // is reported and the server runs without it.
  std::unique_ptr<metrics::MetricsServer> metrics_endpoint;
  if (a.mode == Mode::server) {
    std::string message;
    metrics_endpoint = compat::start_metrics_endpoint(cfg, message, &setup.ms_type);
    if (!message.empty() && (!a.quiet || !metrics_endpoint)) fmt::print(stderr, "siphon-bench: {}\n", message);
  }
  RunOutcome out;
  switch (a.mode) {
    case Mode::loopback: out = run_loopback(setup); break;
    case Mode::client: out = run_client(setup); break;
    case Mode::server: out = run_server(setup); break;
    case Mode::compare: break;
    case Mode::objd: out = run_objd(setup); break;
  }
  if (!out.ran) {
    fmt::print(stderr, "siphon-bench: {}\n", out.error);
    return 1;
  }
  return finish(a, out);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const SetupError& e) {
    fmt::print(stderr, "siphon-bench: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "siphon-bench: {}\n", e.what());
    return 1;
  }
}
