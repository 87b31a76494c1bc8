#include "tools/doctor/peer.h"

#include <csignal>
#include <cstdio>
#include <mutex>

#include <fmt/format.h>

#include "msgr/base/log.h"
#include "tools/bench/engine.h"
#include "tools/bench/stack.h"

namespace siphon::doctor {
namespace {

// The verbs provider logs the path it applies to each rdma_cm connection's
// QP at rdma level 1 ("rdma_cm connections use ..."): kept as evidence of
// the path actually used. A fault is logged at level 1 by the transport
// ("RDMA connection ... faulted: REASON") and by the session ("... faulted
// in state S: REASON"): the first few are kept too, so a warning for faults
// names them. Every other line is dropped (the report says what matters).
std::mutex g_mu;
std::vector<std::string> g_paths;
std::vector<std::string> g_faults;
constexpr std::size_t kKeep = 8;

// A log line without its time, thread and level: from the subsystem's name on.
std::string chomp(std::string_view line, log::Subsys s) {
  if (const auto at = line.find(fmt::format(" {}: ", log::name(s))); at != std::string_view::npos)
    line.remove_prefix(at + 1);
  std::string out(line);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void capture(log::Subsys s, int, std::string_view line) noexcept {
  try {
    if (s == log::Subsys::rdma) {
      if (const auto at = line.find("rdma_cm connections use "); at != std::string_view::npos) {
        std::lock_guard lk(g_mu);
        if (g_paths.size() < kKeep) g_paths.push_back(chomp(line.substr(at + 24), s));
        return;
      }
    }
    if ((s == log::Subsys::rdma && line.find(" faulted: ") != std::string_view::npos) ||
        (s == log::Subsys::session && line.find(" faulted in state ") != std::string_view::npos)) {
      std::lock_guard lk(g_mu);
      if (g_faults.size() < kKeep) g_faults.push_back(chomp(line, s));
    }
  } catch (...) {
  }
}

bench::RunSetup setup_for(const compat::Config& cfg) {
  bench::RunSetup s;
  s.cfg = &cfg;
  s.ms_type = cfg.ms_types().public_type;
  s.ms_type_origin = cfg.ms_type_choice().origin();
  s.options = bench::messenger_options(cfg);
  s.args.quiet = true;
  return s;
}

std::uint64_t counter(const bench::Result& r, const char* name) {
  const auto it = r.stack_counters.find(name);
  return it == r.stack_counters.end() ? 0 : it->second;
}

void on_signal(int) { bench::request_stop(); }

}  // namespace

std::vector<Check> run_peer(const compat::Config& cfg, const PeerOptions& o) {
  std::vector<Check> out;
  bench::RunSetup s = setup_for(cfg);
  s.args.mode = bench::Mode::client;
  s.args.target = o.address;
  s.args.connect_timeout = o.connect_timeout;
  s.args.drain_timeout = o.connect_timeout;
  std::string error;
  if (!bench::parse_target(o.address, error)) {
    Check c;
    c.name = "peer";
    c.status = Status::error;
    c.summary = fmt::format("--peer {}: {}", o.address, error);
    c.fix = "give --peer IP:PORT of a siphon-bench server or siphon-doctor --listen";
    out.push_back(std::move(c));
    return out;
  }
  log::set_level(log::Subsys::rdma, 1);
  log::set_sink(capture);

  bench::RunSetup rtt = s;
  rtt.args.sizes = bench::SizeDist::fixed(64);
  rtt.args.size_spec = "64";
  rtt.args.count = o.round_trips;
  rtt.args.inflight = 1;
  const bench::RunOutcome a = bench::run_client(rtt);
  bench::RunSetup bulk = s;
  bulk.args.sizes = bench::SizeDist::fixed(1u << 20);
  bulk.args.size_spec = "1M";
  bulk.args.count = o.bulk_messages;
  bulk.args.inflight = 4;
  const bench::RunOutcome b = a.ran ? bench::run_client(bulk) : bench::RunOutcome{};

  log::set_sink(nullptr);
  log::set_level(log::Subsys::rdma, -1);

  Check c;
  c.name = "peer";
  const std::string stack = s.ms_type.to_string();
  if (!a.ran || a.result.messages == 0) {
    c.status = Status::error;
    c.summary = fmt::format("no round trip to {} over {}: {}", o.address, stack,
                            a.error.empty() ? std::string("no reply") : a.error);
    c.fix = fmt::format("start siphon-doctor --listen {} (or a siphon-bench server) there with the same ms_type, "
                        "and fix the problems the checks above report on both hosts",
                        o.address);
    out.push_back(std::move(c));
    return out;
  }
  const bench::Result& r = a.result;
  const std::uint64_t errors = r.errors + (b.ran ? b.result.errors : 0);
  const std::uint64_t rnr = counter(r, "rnr_events") + (b.ran ? counter(b.result, "rnr_events") : 0);
  const std::uint64_t wc_errors = counter(r, "wc_errors") + (b.ran ? counter(b.result, "wc_errors") : 0);
  const std::uint64_t faults = r.faults + (b.ran ? b.result.faults : 0);
  auto us = [&](double p) { return static_cast<double>(r.latency.percentile(p)) / 1000.0; };
  c.summary = fmt::format("{} round trips to {} over {}: RTT p50 {:.1f} us, p99 {:.1f} us, p99.9 {:.1f} us", r.messages,
                          o.address, stack, us(50), us(99), us(99.9));
  if (b.ran && b.result.messages != 0)
    c.summary += fmt::format("; bulk {} x 1 MiB echoed at {:.1f} MiB/s", b.result.messages, b.result.mib_per_s());
  else
    c.summary += fmt::format("; the bulk transfer failed: {}", b.error.empty() ? "no reply" : b.error);
  c.summary += fmt::format("; {} errors, {} faults, {} RNR events, {} error completions", errors, faults, rnr,
                           wc_errors);
  const bool bulk_ok = b.ran && b.result.messages != 0;
  c.status = errors != 0 || wc_errors != 0 || !bulk_ok ? Status::error
             : rnr != 0 || faults != 0                  ? Status::warning
                                                        : Status::ok;
  if (c.status == Status::error)
    c.fix = "look at the gid, mtu and lossless checks on both hosts: error completions usually mean a GID, MTU or "
            "lossless-fabric mismatch between the ends";
  else if (c.status == Status::warning)
    c.fix = "RNR or faults without errors: check ms_async_rdma_credits and the peer's load";
  {
    std::lock_guard lk(g_mu);
    for (const auto& p : g_paths) c.evidence.push_back("path used: " + p);
    if (faults != 0)
      for (const auto& f : g_faults) c.evidence.push_back("fault: " + f);
    g_paths.clear();
    g_faults.clear();
  }
  if (c.evidence.empty() && stack == "async+rdma")
    c.evidence.push_back("path used: the software fabric (no verbs connection was made)");
  out.push_back(std::move(c));
  return out;
}

int run_listen(const compat::Config& cfg, const std::string& address) {
  bench::RunSetup s = setup_for(cfg);
  s.args.mode = bench::Mode::server;
  s.args.bind = address;
  s.args.duration = 0;  // until signalled
  s.info = [](const std::string& line) { std::fprintf(stderr, "siphon-doctor: %s\n", line.c_str()); };
  std::string error;
  if (!bench::parse_bind(address, error)) {
    std::fprintf(stderr, "siphon-doctor: --listen %s: %s\n", address.c_str(), error.c_str());
    return 3;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  const bench::RunOutcome o = bench::run_server(s);
  if (!o.ran) {
    std::fprintf(stderr, "siphon-doctor: --listen %s: %s\n", address.c_str(), o.error.c_str());
    return 2;
  }
  return 0;
}

}  // namespace siphon::doctor
